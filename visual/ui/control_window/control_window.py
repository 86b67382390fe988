"""The control window: the performer's screen beside the projector's, drawn with Dear ImGui
and moderngl in a pyglet window: a live preview of the output, every parameter as a slider in
its group (a value can be typed in), the nine preset slots as thumbnails, the A/B crossfade,
tap, downbeat, respawn and burst, the meters, the autopilot (its switch, RESUME NOW, the
section, the next change, who is in control) and the HUD's lines.

It knows nothing of the show: show/inputs/control_surface.py hands it a layout once (groups of
parameters as plain data) and a state a few dozen times a second (positions and texts, knobs
waiting for pickup, the slots, the meters, the HUD's lines), and takes back the gestures as
plain messages, which it turns into the show's actions through the same checks as OSC:

    ("norm", name, x)          a slider dragged to x in 0..1 of the performance range
    ("set", name, value)       a value typed in, a switch flipped, a colour's channel moved
    ("nudge", name, steps)     the wheel over a slider, Left/Right on it, an A/B arrow
    ("select", name)           a slider clicked or focused: the chosen parameter (keys, L)
    ("learn", name)            its L box: MIDI-learn it (again: cancel)
    ("preset", slot)  ("save", slot)  ("action", "tap" | "downbeat" | "respawn" | "burst")
    ("autopilot", 0 | 1)       the autopilot's switch   ("action", "resume")  RESUME NOW

Keys: while a field is typed into, every key is the field's. Otherwise Tab and Up/Down move
the keyboard focus (imgui's navigation), Left/Right step the focused parameter, Enter opens its
field (or flips a switch, presses a button or a slot), and every other key goes to the output
window's handler (1-9, Space, T, D, L, Esc twice quits...): `route_key`. Pictures are the
output context's textures (preview.py), borrowed by GL name: pyglet's windows share
textures, and nothing is read back. Main thread only (pyglet's event loop).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import moderngl
import pyglet
from imgui_bundle import imgui
from pyglet.window import key

from swarm_instrument.visual.ui.control_window.control_layout import (
    BACKGROUND,
    KeyQueue,
    Messages,
    rgbf,
    route_key,
    ui_scale,
)
from swarm_instrument.visual.ui.control_window.control_panels import ControlPanels
from swarm_instrument.visual.ui.control_window.control_theme import apply_theme, load_fonts
from swarm_instrument.visual.ui.control_window.imgui_input import PygletInput
from swarm_instrument.visual.ui.control_window.imgui_renderer import ImguiRenderer

DRAW_RATE = 30.0  # the control window's redraws a second, at most
MODIFIER_KEYS = (key.LCTRL, key.RCTRL, key.LSHIFT, key.RSHIFT, key.LALT, key.RALT,
                 key.LCOMMAND, key.RCOMMAND)
PARAMETER_KINDS = ("float", "int", "choice", "bool", "color")


class ControlWindow:
    """The window, its panels and its gestures. `groups`: [(group, [{"name", "kind",
    "choices"}])]; `on_key(symbol, modifiers)`: the output window's key handler."""

    def __init__(self, window, groups: list[tuple[str, list[dict[str, Any]]]], *,
                 on_key: Callable[[int, int], Any]) -> None:
        self.window = window
        self.on_key = on_key
        self.messages = Messages()
        self.state: dict[str, Any] = {}
        self.notice = ""
        self._notice_until = 0.0
        self.escape = None  # the output window's EscapeGuard: "press Esc again" shown here
        self.draws = 0
        self._dirty = True
        self._frames_due = 2  # frames to draw after an input (imgui takes one event a frame)
        self._drawn_at = -1e9
        self._last_frame = time.monotonic()
        self._scale = 0.0
        self._focused: str | None = None
        self.notice_shown = ""  # the line the last frame showed on top
        self.keys = KeyQueue()
        self._closed = False
        self.gui = imgui.create_context()
        io = imgui.get_io()
        io.set_ini_filename(None)  # nothing written into the working folder
        io.config_flags |= imgui.ConfigFlags_.nav_enable_keyboard
        io.config_input_text_cursor_blink = False  # a frame only when something changed
        self.fonts = load_fonts()
        with self._current():
            self.ctx = moderngl.create_context(require=410)
            self.screen = self.ctx.detect_framebuffer(0)
            self.renderer = ImguiRenderer(self.ctx)
        self.input = PygletInput(window)
        self.panels = ControlPanels(groups, self.messages, self.say, self.fonts, self.renderer)
        window.draw = self.draw  # pyglet's loop redraws every window: this one when due
        window.push_handlers(self)

    @contextmanager
    def _current(self):
        """This window's context current for what follows, and the one that was current
        (the output's, which moderngl draws with) current again after it."""
        before = pyglet.gl.current_context
        self.window.switch_to()
        try:
            yield
        finally:
            if before is not None and before is not self.window.context:
                before.set_current()

    # ---- state in, messages out -------------------------------------------------------------

    def update(self, state: dict[str, Any]) -> None:
        """The show's latest state (show/inputs/control_surface.py); drawn at the next redraw."""
        self.state = state
        self._dirty = True

    def say(self, notice: str, seconds: float = 4.0) -> None:
        """A line at the top of the window for a few seconds."""
        self.notice, self._notice_until = notice, time.monotonic() + seconds
        self._dirty = True

    def show_image(self, key: Any, glo: int | None, size: tuple[int, int]) -> None:
        """Show the texture `glo` (the output context's, `size` pixels) as the preview
        (key "preview") or slot `key`'s thumbnail; None shows none."""
        images = self.panels.images
        if images.get(key) == ((glo, tuple(size)) if glo is not None else None):
            return
        old = images.pop(key, None)
        if glo is not None:
            images[key] = (glo, tuple(size))
        if old is not None and all(image[0] != old[0] for image in images.values()):
            with self._current():
                self.renderer.forget(old[0])
        self._dirty = True

    def take_messages(self) -> list[tuple]:
        return self.messages.take()

    @property
    def save_armed(self) -> bool:
        return self.panels.save_armed

    @property
    def widgets(self) -> dict[str, tuple[int, int, int, int]]:
        """Where the last frame drew each widget: name -> (x, y, width, height), window
        units from the top-left corner ("param:max_speed", "slot:3", "button:save"...)."""
        return self.panels.widgets.rects

    @property
    def focus(self) -> tuple[str, str, int | None] | None:
        """(kind, name, channel) of the widget holding the keyboard focus, while imgui shows
        it (after Tab or an arrow); None before, and after a click elsewhere (a slider
        clicked is the chosen parameter, which the show's own keys then move)."""
        if self._closed or not imgui.get_io().nav_visible:
            return None
        return self.panels.widgets.focus

    @property
    def focused(self) -> str | None:
        """The name of the parameter or widget holding the keyboard focus, or None."""
        focus = self.focus
        return focus[1] if focus is not None else None

    @property
    def hud(self) -> list[str]:
        """The HUD's lines as the last frame drew them."""
        return self.panels.hud_shown

    @property
    def autopilot_shown(self) -> list[str]:
        """The autopilot bar's lines as the last frame drew them."""
        return self.panels.autopilot.shown

    @property
    def editing(self) -> str | None:
        edit = self.panels.params.field.edit
        return edit.name if edit is not None else None

    # ---- drawing ----------------------------------------------------------------------------

    def draw(self, dt: float = 0.0) -> None:
        """pyglet's redraw of this window (it calls every window's `draw` each frame): at
        most DRAW_RATE a second, and only when the state or a gesture changed something, so
        the output's frame pays for the control window's drawing only when it shows news.
        A frame left out is not swapped: the screen keeps the last one."""
        now = time.monotonic()
        if now - self._drawn_at < 1.0 / DRAW_RATE or not (
                self._dirty or self._frames_due > 0 or now - self._drawn_at > 0.5):
            return
        self._drawn_at = now
        self._dirty = False
        self._frames_due = max(self._frames_due - 1, 0)
        with self._current():
            self._frame()
            self.window.flip()
        # Events held while the focus settled, handled now with the output's context current
        # again, as pyglet's own events are (the show's key handler may touch the GPU).
        self.keys.frame()
        while not self._closed and (event := self.keys.next(self._busy())) is not None:
            self._handle(*event)
        if self.keys.events or self.keys.settle:
            self._frames_due = max(self._frames_due, 2)

    def _frame(self) -> None:
        """One imgui frame built from the latest state and drawn (this window's context)."""
        imgui.set_current_context(self.gui)
        self.input.resize()
        scale = ui_scale(self.window.get_size(), self.window.get_framebuffer_size(),
                         getattr(self.window, "scale", 1.0))
        if scale != self._scale:
            self._scale = self.panels.scale = scale
            apply_theme(scale)
        io = imgui.get_io()
        now = time.monotonic()
        io.delta_time = min(max(now - self._last_frame, 1e-4), 0.5)
        self._last_frame = now
        imgui.new_frame()
        width, height = self.window.get_size()
        self.notice_shown = self._notice(now)
        self.panels.frame(width, height, self.state, self.notice_shown)
        imgui.render()
        fb_width, fb_height = self.window.get_framebuffer_size()
        self.screen.viewport = (0, 0, fb_width, fb_height)
        self.screen.use()
        self.ctx.clear(*rgbf(BACKGROUND), viewport=(0, 0, fb_width, fb_height))
        self.renderer.render(imgui.get_draw_data(), self.screen)
        self._after_frame()
        self.draws += 1

    def _notice(self, now: float) -> str:
        notice = (self.notice if now < self._notice_until else "") or \
            self.state.get("notice", "")
        if self.escape is not None and self.escape.armed(now):
            return "press Esc again to quit"
        if self.panels.save_armed:
            return "SAVE: click the slot to save the look into (Esc: cancel)"
        if self.editing:
            return f"{self.editing}: type a value, Enter: set, Esc: cancel"
        return notice

    def _after_frame(self) -> None:
        """What the frame settled: a field that took the keyboard gets what was typed before
        it did; a parameter given the keyboard focus becomes the chosen one."""
        edit = self.panels.params.field.edit
        self.keys.hold = edit is not None and not edit.active
        if edit is not None:
            self._frames_due = max(self._frames_due, 2)
        focus = self.focus
        name = focus[1] if focus is not None and focus[0] in PARAMETER_KINDS else None
        if name is not None and name != self._focused:
            self.messages.add(("select", name))
        self._focused = name

    # ---- events -----------------------------------------------------------------------------

    def _wake(self) -> None:
        self._dirty = True
        self._frames_due = 3

    # Key and mouse events go through one queue, in order: held while imgui settles a move
    # of the focus or a click (control_layout.KeyQueue), handled at once otherwise.

    def on_key_press(self, symbol, modifiers):
        self._event("press", symbol, modifiers)
        return pyglet.event.EVENT_HANDLED  # never the default (Esc would close the window)

    def on_key_release(self, symbol, modifiers):
        self._event("release", symbol, modifiers)

    def on_text(self, text):
        self._event("text", text)

    def on_mouse_motion(self, x, y, dx, dy):
        self._event("move", x, y)

    def on_mouse_drag(self, x, y, dx, dy, buttons, modifiers):
        self._event("move", x, y)

    def on_mouse_press(self, x, y, button, modifiers):
        self._event("button", x, y, button, modifiers, True)

    def on_mouse_release(self, x, y, button, modifiers):
        self._event("button", x, y, button, modifiers, False)

    def on_mouse_scroll(self, x, y, scroll_x, scroll_y):
        self._event("wheel", x, y, scroll_x, scroll_y)

    def _event(self, kind: str, *args) -> None:
        self._wake()
        if self.keys.now((kind, *args), self._busy()):
            self._handle(kind, *args)

    def _busy(self) -> bool:
        """imgui has input events it has not taken in yet."""
        return not self._closed and self.gui.input_events_queue.size() > 0

    def _handle(self, kind: str, *args) -> None:
        """One key or mouse event, in the order they came."""
        if kind == "press":
            self._press(*args)
        elif kind == "release":
            self.input.key(args[0], args[1], False)
        elif kind == "text":
            self._text(*args)
        elif kind == "move":
            self.input.mouse_at(*args)
        elif kind == "button":
            self.input.mouse_button(*args)
            self.keys.moved()  # what follows a click waits for it (it may open a field)
        elif kind == "wheel":
            self.input.wheel(*args)

    def _press(self, symbol: int, modifiers: int):
        name = key.symbol_string(symbol).lstrip("_")
        field = self.panels.params.field
        edit = field.edit
        if symbol in MODIFIER_KEYS:
            self.input.key(symbol, modifiers, True)  # Ctrl+click, Shift+Tab, Shift+wheel
            return pyglet.event.EVENT_HANDLED
        focus = self.focus
        typing = edit is not None or imgui.get_io().want_text_input
        route = route_key(name, typing, focus[0] if focus is not None else None)
        if route == "ui":
            self.input.key(symbol, modifiers, True)
            if not typing:
                self.keys.moved()  # the focus moves: what follows waits for it
            return pyglet.event.EVENT_HANDLED
        if route in ("nudge", "edit", "toggle"):
            self._on_focused(route, name, focus, bool(modifiers & key.MOD_SHIFT))
            return pyglet.event.EVENT_HANDLED
        if symbol == key.ESCAPE and self.panels.save_armed:
            self.panels.save_armed = False
            return pyglet.event.EVENT_HANDLED
        return self.on_key(symbol, modifiers)

    def _on_focused(self, route: str, name: str, focus: tuple, shift: bool) -> None:
        """Left/Right, Enter on the parameter holding the keyboard focus."""
        kind, param, channel = focus
        norm, shown, color = self.state.get("rows", {}).get(param, (None, "", None))
        step = (0.1 if shift else 0.01) * (1 if name == "RIGHT" else -1)
        if route == "nudge" and kind == "color":
            self.panels.params.step_channel(param, color, channel or 0, step)
        elif route == "nudge":
            self.messages.add(("nudge", param, step))
        elif route == "toggle":
            self.messages.add(("norm", param, 0.0 if (norm or 0.0) >= 0.5 else 1.0))
        else:
            self.panels.params.field.open(param, shown, color)
            self.keys.hold = True  # what is typed next waits for the field

    def _text(self, text: str) -> None:
        if self.panels.params.field.edit is not None or imgui.get_io().want_text_input:
            self.input.text(text)

    def on_mouse_leave(self, x, y):
        self.input.left()
        self._wake()

    def on_activate(self):
        self.input.focus(True)
        self._wake()

    def on_deactivate(self):
        self.input.focus(False)
        self._wake()

    def on_resize(self, width, height):
        self.input.resize()
        self._wake()

    def on_expose(self):
        self._wake()

    def on_close(self):
        """The window stays: closing it by mistake must not end a show (Esc twice quits)."""
        self.say("the control window stays while the show plays: Esc twice quits")
        return pyglet.event.EVENT_HANDLED

    # ---- the end ----------------------------------------------------------------------------

    def close(self) -> None:
        """The renderer's textures and buffers released, borrowed names let go (never
        deleted here), imgui's context destroyed, then the window closed."""
        before, mine = pyglet.gl.current_context, self.window.context
        with self._current():
            imgui.set_current_context(self.gui)
            self.renderer.release()
        imgui.destroy_context(self.gui)
        self._closed = True
        self.window.close()
        if before is not None and before is not mine:
            before.set_current()  # the output's, for whatever moderngl releases next
