"""The HUD: the show's figures as text over the swarm, drawn with pyglet into whatever
framebuffer is bound (the window's, or an offscreen one for benchmarks). Main thread only."""

from __future__ import annotations


class Hud:
    def __init__(self, width: int, height: int) -> None:
        import pyglet

        self._batch = pyglet.graphics.Batch()
        self._lines = pyglet.text.Label(
            "", font_size=12, x=12, y=height - 12, anchor_y="top", multiline=True,
            width=max(width - 24, 200), color=(235, 235, 235, 255), batch=self._batch)
        self._notice = pyglet.text.Label(
            "", font_size=18, x=width // 2, y=height // 2, anchor_x="center",
            anchor_y="center", color=(255, 210, 120, 255), batch=self._batch)
        self.visible = True
        self._text = ""

    def resize(self, width: int, height: int) -> None:
        self._lines.y = height - 12
        self._lines.width = max(width - 24, 200)
        self._notice.x, self._notice.y = width // 2, height // 2

    def draw(self, lines: list[str], notice: str = "") -> None:
        """Lay out only what changed (text layout is the costly part), then draw."""
        text = "\n".join(lines) if self.visible else ""
        if text != self._text:
            self._lines.text = self._text = text
        if notice != self._notice.text:
            self._notice.text = notice
        self._batch.draw()


def headless_text_context(size: tuple[int, int]):
    """(ctx, hud or None, note): an offscreen GL context in which pyglet can draw text (a hidden
    headless pyglet window, whose context moderngl takes), else a plain EGL one without text
    (and the note says why). For benchmarks with the HUD and the contact sheet's labels."""
    import moderngl

    try:
        import pyglet

        pyglet.options["headless"] = True
        window = None
        for minor in (3, 1):  # 4.3 core, else 4.1 (the GL 4.1 backend's)
            config = pyglet.gl.Config(major_version=4, minor_version=minor,
                                      forward_compatible=True, depth_size=24)
            try:
                window = pyglet.window.Window(*size, visible=False, config=config)
                break
            except (pyglet.window.NoSuchConfigException, pyglet.gl.ContextException):
                if minor == 1:
                    raise
        ctx = moderngl.create_context(require=410)
        hud = Hud(*size)
        hud.draw(["font check"])  # fonts load here: fail now, not midway
        hud._window = window  # keep the context alive
        return ctx, hud, "text drawn (pyglet, headless)"
    except Exception as exc:  # noqa: BLE001 - no pyglet EGL here: no text, said
        from visual.gpu.context import create_headless_context

        return create_headless_context("4.1"), None, f"no text ({type(exc).__name__}: {exc})"
