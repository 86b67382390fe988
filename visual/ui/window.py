"""The live window: pyglet owns the OpenGL 4.3 context and the event loop; a performer (the
show, wired in show/cli/live_show.py) plays its frames.

Full-screen on the chosen screen by default (a borderless window covering it where true
full-screen fails), vsync and a frame-rate cap. The window keeps F (full-screen), H (HUD) and
Esc (quits only when pressed twice within a second) and hands every other key, the mouse and
the wheel to the performer by name. Main thread only (pyglet's event loop).
"""

from __future__ import annotations

import time
from ctypes import byref
from typing import Protocol

import moderngl
import pyglet

from swarm_instrument.visual.gpu.context import is_software
from swarm_instrument.visual.gpu.fence import GpuWait
from swarm_instrument.visual.ui.frame_pacing import FramePacer, schedule_at
from swarm_instrument.visual.ui.hud import Hud
from swarm_instrument.visual.ui.screens import list_screens

QUIT_WINDOW_S = 1.0


class EscapeGuard:
    """Esc must be pressed twice within `window_s` to quit: a stray key must not end a show."""

    def __init__(self, window_s: float = QUIT_WINDOW_S) -> None:
        self.window_s = window_s
        self._armed_at: float | None = None

    def press(self, now: float) -> bool:
        """True when this press quits."""
        if self._armed_at is not None and now - self._armed_at <= self.window_s:
            return True
        self._armed_at = now
        return False

    def armed(self, now: float) -> bool:
        return self._armed_at is not None and now - self._armed_at <= self.window_s


class WindowError(RuntimeError):
    """The window could not be opened; the message says why and what to try."""


def screens_or_error() -> list:
    """The display's screens (visual/ui/screens.py), or WindowError when it cannot be reached."""
    try:
        return list_screens()
    except Exception as exc:
        raise WindowError(f"cannot reach the display ({exc}); use --headless") from None


def open_window(screen_index: int, fullscreen: bool, size: tuple[int, int] | None,
                gl: str = "auto", option: str = "--screen", screens: list | None = None):
    """A pyglet window with an OpenGL 4.3 core context, or 4.1 core where 4.3 cannot be had
    (macOS) and `gl` (--gl) allows it, or WindowError. `screens`: the list already asked of
    the display (asked again, pyglet makes new screen objects)."""
    screens = screens if screens is not None else screens_or_error()
    if not 0 <= screen_index < len(screens):
        names = ", ".join(f"{i}: {s.width}x{s.height}" for i, s in enumerate(screens))
        raise WindowError(f"{option} {screen_index}: no such screen (screens: {names})")
    screen = screens[screen_index]
    versions = {"4.3": [(4, 3)], "4.1": [(4, 1)]}.get(gl, [(4, 3), (4, 1)])
    problem = None
    for major, minor in versions:
        config = pyglet.gl.Config(major_version=major, minor_version=minor,
                                  forward_compatible=True, double_buffer=True, depth_size=24)
        try:
            return _open(pyglet, screen, config, fullscreen, size, placed=screen_index != 0)
        except (pyglet.window.NoSuchConfigException, pyglet.gl.ContextException) as exc:
            problem = exc
    wanted = " or ".join(f"{major}.{minor}" for major, minor in versions)
    raise WindowError(f"no OpenGL {wanted} core context on this display ({problem}); update "
                      "the GPU driver, or use --headless") from None


def _open(pyglet, screen, config, fullscreen: bool, size: tuple[int, int] | None,
          placed: bool = False):
    """The window on `screen` with `config` (pyglet's exceptions pass through); `placed`: a
    window (not full-screen) moved to the screen's corner (X places a new one at 0, 0)."""
    caption = "swarm instrument"
    if fullscreen:
        try:
            return pyglet.window.Window(fullscreen=True, screen=screen, config=config,
                                        vsync=True, caption=caption)
        except pyglet.window.WindowException:
            # Where true full-screen misbehaves: a borderless window covering the screen.
            window = pyglet.window.Window(
                screen.width, screen.height, screen=screen, config=config, vsync=True,
                caption=caption, style=pyglet.window.Window.WINDOW_STYLE_BORDERLESS)
            window.set_location(screen.x, screen.y)
            return window
    width, height = size or (1280, 720)
    window = pyglet.window.Window(width, height, screen=screen, config=config, vsync=True,
                                  caption=caption, resizable=True)
    if placed:
        window.set_location(screen.x, screen.y)
    return window


def display_rate(window, default: float = 60.0) -> float:
    """The screen's refresh rate where pyglet can read it."""
    try:
        rate = window.screen.get_mode().rate
        return float(rate) if rate and rate > 0 else default
    except Exception:
        return default


class Performer(Protocol):
    """What the window hands its events and frames to (show/cli/live_show.py wires the show in)."""

    def frame(self, target: moderngl.Framebuffer, size: tuple[int, int]) -> None:
        """Play one frame into `target`, `size` pixels."""

    def hud_lines(self, size: tuple[int, int]) -> list[str]:
        """The HUD's lines for a window of `size` pixels, asked after a frame only while the
        HUD is shown."""

    def paced(self, start: float, worked: float, shown: float) -> float:
        """The frame that started at `start` had its work done at `worked` and was shown at
        `shown` (time.perf_counter); returns the period wanted until the next one."""
    def key(self, name: str, ctrl: bool, shift: bool) -> None:
        """A key the window does not keep for itself: "1".."9", "UP", "LEFT", "SPACE"..."""
    def pointer(self, x: float, y: float, width: int, height: int) -> None:
        """The mouse moved (or dragged) to (x, y), bottom-left origin, window units."""
    def scroll(self, clicks: float) -> None: ...
    def done(self) -> bool:
        """True to end the show after this frame (--frames, Ctrl+C)."""


class LiveWindow:
    """A pyglet window playing a performer's frames until quit. The window keeps F
    (full-screen), H (the HUD) and Esc (twice to quit) for itself and hands every other key,
    the mouse and the wheel on. pyglet's clock calls `_tick` when the pacer says
    (FramePacer: as late as the frame's work allows before the refresh it is for);
    each frame waits for its swap, so none waits in a queue, and the other windows (the
    control window) draw after it."""

    def __init__(self, window, *, fps: float | None, overlay: bool = True) -> None:
        self.window = window
        # overlay False: the projector's picture with nothing drawn over it (the HUD and its
        # notices are on the control window then, visual/ui/control_window/control_window.py)
        self.overlay = overlay
        # GPU objects are released by their owners (Swarm, Renderer), once, as headless runs
        # do: no moderngl gc_mode. ("context_gc" broke ctx.gc() on preset recall: an object
        # released by hand and later collected leaves an InvalidObject, moderngl issue #695.)
        self.ctx = moderngl.create_context(require=410)  # the show picks the backend
        self.fps = fps or display_rate(window)
        self.escape = EscapeGuard()
        self.last_image: tuple[bytes, tuple[int, int]] | None = None
        self.performer: Performer | None = None
        self._screen: moderngl.Framebuffer | None = None
        self.hud = Hud(window.width, window.height)
        self.pacer = FramePacer(1.0 / display_rate(window))
        self._worked = 0.0  # when the last frame's work was done (before its swap)
        self._toggle_fullscreen = False  # F was pressed: done before the next frame
        software = is_software(self.ctx)
        # the frame's work waited for, asleep (on_draw)
        self._frame_wait = GpuWait(self.ctx, software=software)
        # the swap waited for (with vsync until the refresh): looked at every 0.25 ms, no nap
        self._swap_wait = GpuWait(self.ctx, software=software, learns=False)
        window.push_handlers(self)

    # ---- events -----------------------------------------------------------------------------

    def on_key_press(self, symbol, modifiers):
        from pyglet.window import key  # noqa: PLC0415 - display: pyglet.window connects to the display on import

        if symbol == key.ESCAPE:
            if self.escape.press(time.monotonic()):
                self.quit()
        elif symbol == key.F:  # between frames: a key may come in the middle of one
            self._toggle_fullscreen = True
        elif symbol == key.H:
            self.hud.visible = not self.hud.visible  # nothing to show without the overlay
        elif self.performer is not None:
            name = key.symbol_string(symbol).lstrip("_")  # "_1" -> "1", "LEFT", "SPACE"
            self.performer.key(name, bool(modifiers & key.MOD_CTRL),
                               bool(modifiers & key.MOD_SHIFT))
        return pyglet.event.EVENT_HANDLED  # never the default (Esc would close the window)

    def on_close(self):
        self.quit()
        return pyglet.event.EVENT_HANDLED

    def on_mouse_motion(self, x, y, dx, dy):
        if self.performer is not None:
            width, height = self.window.get_size()  # mouse coordinates are in window units
            self.performer.pointer(x, y, width, height)

    def on_mouse_drag(self, x, y, dx, dy, buttons, modifiers):
        self.on_mouse_motion(x, y, dx, dy)

    def on_mouse_scroll(self, x, y, scroll_x, scroll_y):
        if self.performer is not None:
            self.performer.scroll(scroll_y)

    def on_resize(self, width, height):
        self.hud.resize(width, height)

    def on_draw(self):
        if self.performer is None:
            return
        self.window.switch_to()
        target, size = self.screen()
        self.performer.frame(target, size)
        # A hidden HUD (H, or no overlay: the control window shows it) needs no lines made;
        # asked after the frame, so that an H the frame took at its late latch shows the HUD
        # in this frame.
        shown = self.overlay and self.hud.visible
        lines = self.performer.hud_lines(size) if shown else []
        # The frame may end with another framebuffer bound (a control window's thumbnail
        # rendered offscreen): the HUD and the screenshot are the window's.
        target.use()
        if self.overlay:
            self.hud.draw(lines, "press Esc again to quit"
                          if self.escape.armed(time.monotonic()) else "")
        # The frame's work done, GPU included: the pacer times it. Asleep, the GIL released
        # meanwhile (the web remote's sessions and the beat tracker run); NVIDIA's glFinish
        # spun a core for as long as the GPU drew.
        self._frame_wait.wait()  # and what the frame reads back is done: no GL fence needed
        self._worked = time.perf_counter()
        if self.performer.done():
            self.last_image = self.read_screen()
            self.quit()

    def screen(self) -> tuple[moderngl.Framebuffer, tuple[int, int]]:
        """The window's framebuffer and its current size in pixels (HiDPI: not points).

        moderngl gives a detected default framebuffer the size the context had when it was
        made, whatever the window's size since; so the size is the window's, passed along to
        the renderer, and the viewport is set to it every frame: F into or out of full-screen
        and a dragged edge draw the whole window."""
        size = tuple(self.window.get_framebuffer_size())
        if self._screen is None:
            self._screen = self.ctx.detect_framebuffer(0)
        self._screen.viewport = (0, 0, *size)
        return self._screen, size

    def read_screen(self) -> tuple[bytes, tuple[int, int]]:
        """The back buffer as RGB rows, bottom row first, HUD included. Through pyglet: moderngl
        reads a detected default framebuffer from COLOR_ATTACHMENT0, which it does not have."""
        image = pyglet.image.get_buffer_manager().get_color_buffer().get_image_data()
        return image.get_data("RGB", image.width * 3), (image.width, image.height)

    # ---- running ----------------------------------------------------------------------------

    def run(self, performer: Performer) -> None:
        self.performer = performer
        self.pacer.swap_waits = self.swap_waits()
        # Each frame is waited for on the GPU (on_draw): results read back need no GL fence.
        fences = self._frame_wait.fences  # the context's: serials alone while frames run
        if fences is not None:
            fences.finishing = True
        pyglet.clock.schedule_once(self._tick, 0.0)
        pyglet.app.run(None)  # frames come from _tick, when the pacer says

    def swap_waits(self, swaps: int = 5) -> bool:
        """Whether a swap waits for the display's refresh (vsync that works): a few empty
        frames swapped back to back take a refresh each where it does."""
        self.window.switch_to()
        times = []
        for _ in range(swaps):
            self.window.flip()
            self.ctx.finish()
            times.append(time.perf_counter())
        gaps = sorted(b - a for a, b in zip(times, times[1:]))
        return gaps[len(gaps) // 2] > 0.6 * self.pacer.refresh_s

    def _tick(self, dt: float) -> None:
        """One frame of the output window (its work, the HUD, the swap, waited for), then the
        other windows; the next is scheduled when the pacer says."""
        performer = self.performer
        if performer is None or pyglet.app.event_loop.has_exit:
            return
        self._fullscreen_now()
        start = time.perf_counter()
        self._take_events()
        self.window.draw(dt)  # on_draw (the frame), then the swap
        self._swap_wait.wait()  # the swap done: shown (at the refresh, with vsync)
        shown = time.perf_counter()
        period = performer.paced(start, self._worked, shown)
        self.pacer.frame(start, self._worked, shown)
        for other in list(pyglet.app.windows):  # the control window, after the picture
            if other is not self.window:
                other.draw(dt)
        schedule_at(self._tick, self.pacer.next_start(period, time.perf_counter()))

    def _fullscreen_now(self) -> None:
        if self._toggle_fullscreen:
            self._toggle_fullscreen = False
            self.window.set_fullscreen(not self.window.fullscreen)
            # pyglet makes a new X window for the change; claim the keyboard for it, or the
            # next key (F again) went nowhere and the show stayed stuck in that state.
            self.window.activate()

    def take_keys(self) -> bool:
        """The keys that came while the frame's simulation stepped, taken just before its draw
        (late latching, as the show reads MIDI and OSC again: Show.latch) and handled as any
        key is (F waits for the frame's end); True when any came. X only: elsewhere the
        keys of the frame under way wait for the next, as before."""
        x_display = self._x_display()
        view = getattr(self.window, "_view", None)  # pyglet's keys come to its view
        if x_display is None or view is None:
            return False
        from pyglet.libs.x11 import xlib  # noqa: PLC0415 - X only; imports Xlib

        xlib.XSync(x_display, False)  # what the server holds for us, here (_take_events)
        event, came = xlib.XEvent(), False
        while xlib.XCheckWindowEvent(x_display, view, xlib.KeyPressMask | xlib.KeyReleaseMask,
                                     byref(event)):
            self.window.dispatch_platform_event_view(event)
            came = True
        return came

    def _take_events(self) -> None:
        """Keys and the pointer read just before the frame begins (pyglet reads them between
        frames too). On X, after a round trip: a busy X server may hold a client's events for
        several frames before it writes them out (Xvfb held keys up to 220 ms at 30 fps here,
        XTest's key to pyglet's read); a reply comes only after the events queued before it,
        so once the round trip is back they are all here. Other platforms: unchanged."""
        x_display = self._x_display()
        if x_display is None:
            return
        from pyglet.libs.x11 import xlib  # noqa: PLC0415 - X only; imports Xlib

        xlib.XSync(x_display, False)
        self.window.display.select()  # the events now queued, each to its window's handlers

    def _x_display(self):
        """The window's connection to its X server; None on any other platform."""
        display = self.window.display
        return display._display if type(display).__name__ == "XlibDisplay" else None  # noqa: SLF001 - pyglet keeps it private

    def quit(self) -> None:
        pyglet.app.exit()


CONTROL_CAPTION = "swarm instrument - control"


def open_control_window(screen, *, fullscreen: bool, size: tuple[int, int] | None,
                        version: tuple[int, int] = (4, 3)):
    """The control window's pyglet window on `screen`: covering it (borderless) or a window
    of `size` centred on it; an OpenGL `version` core context like the output's (pyglet
    shares the output context's textures with it). No vsync: the output window's swap paces
    the show."""
    config = pyglet.gl.Config(major_version=version[0], minor_version=version[1],
                              forward_compatible=True, double_buffer=True)
    if fullscreen:
        window = pyglet.window.Window(
            screen.width, screen.height, screen=screen, config=config, vsync=False,
            caption=CONTROL_CAPTION, style=pyglet.window.Window.WINDOW_STYLE_BORDERLESS)
        window.set_location(screen.x, screen.y)
        return window
    width, height = size or (min(1280, screen.width), min(800, screen.height))
    window = pyglet.window.Window(width, height, screen=screen, config=config, vsync=False,
                                  caption=CONTROL_CAPTION, resizable=True)
    window.set_location(screen.x + max((screen.width - width) // 2, 0),
                        screen.y + max((screen.height - height) // 2, 0))
    return window
