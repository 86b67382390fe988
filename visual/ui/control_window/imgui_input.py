"""pyglet's events as Dear ImGui's inputs: keys, typed characters, the mouse and its wheel,
the window's focus, its size and its framebuffer's scale (high-DPI screens).

It feeds what it is given; which keys reach imgui at all is the control window's choice
(control_layout.py `route_key`: the performer's keys go to the show unless a field
is being typed into). Main thread only.
"""

from __future__ import annotations

from imgui_bundle import imgui
from pyglet.window import key, mouse

# pyglet's key symbols -> imgui's keys: what navigation and a text field use (editing keys,
# letters and digits for Ctrl+A/C/V/X/Z and the keypad), and the modifiers.
KEYS = {
    key.TAB: imgui.Key.tab, key.LEFT: imgui.Key.left_arrow, key.RIGHT: imgui.Key.right_arrow,
    key.UP: imgui.Key.up_arrow, key.DOWN: imgui.Key.down_arrow,
    key.PAGEUP: imgui.Key.page_up, key.PAGEDOWN: imgui.Key.page_down,
    key.HOME: imgui.Key.home, key.END: imgui.Key.end, key.INSERT: imgui.Key.insert,
    key.DELETE: imgui.Key.delete, key.BACKSPACE: imgui.Key.backspace,
    key.SPACE: imgui.Key.space, key.RETURN: imgui.Key.enter, key.ENTER: imgui.Key.enter,
    key.NUM_ENTER: imgui.Key.keypad_enter, key.ESCAPE: imgui.Key.escape,
    key.LCTRL: imgui.Key.left_ctrl, key.RCTRL: imgui.Key.right_ctrl,
    key.LSHIFT: imgui.Key.left_shift, key.RSHIFT: imgui.Key.right_shift,
    key.LALT: imgui.Key.left_alt, key.RALT: imgui.Key.right_alt,
    key.LCOMMAND: imgui.Key.left_super, key.RCOMMAND: imgui.Key.right_super,
    key.MINUS: imgui.Key.minus, key.PERIOD: imgui.Key.period, key.COMMA: imgui.Key.comma,
    **{getattr(key, letter): getattr(imgui.Key, letter.lower()) for letter in
       "ABCDEFGHIJKLMNOPQRSTUVWXYZ"},
    **{getattr(key, f"_{digit}"): getattr(imgui.Key, f"_{digit}") for digit in range(10)},
    **{getattr(key, f"NUM_{digit}"): getattr(imgui.Key, f"keypad{digit}") for digit in range(10)},
}
MODIFIERS = ((key.MOD_CTRL, imgui.Key.mod_ctrl), (key.MOD_SHIFT, imgui.Key.mod_shift),
             (key.MOD_ALT, imgui.Key.mod_alt), (key.MOD_COMMAND, imgui.Key.mod_super))
BUTTONS = {mouse.LEFT: 0, mouse.RIGHT: 1, mouse.MIDDLE: 2}


class PygletInput:
    """Feeds imgui's IO from one pyglet window's events (the window calls these)."""

    def __init__(self, window) -> None:
        self.window = window
        self.io = imgui.get_io()
        self.resize()

    def resize(self) -> None:
        """The display in window units and the framebuffer's scale (2 on a Retina screen)."""
        width, height = self.window.get_size()
        fb_width, fb_height = self.window.get_framebuffer_size()
        self.io.display_size = (float(width), float(height))
        self.io.display_framebuffer_scale = (fb_width / max(width, 1), fb_height / max(height, 1))

    def modifiers(self, modifiers: int) -> None:
        for bit, name in MODIFIERS:
            self.io.add_key_event(name, bool(modifiers & bit))

    def key(self, symbol: int, modifiers: int, down: bool) -> None:
        self.modifiers(modifiers)
        name = KEYS.get(symbol)
        if name is not None:
            self.io.add_key_event(name, down)

    def text(self, text: str) -> None:
        for char in text:
            if char.isprintable():
                self.io.add_input_character(ord(char))

    def mouse_at(self, x: float, y: float) -> None:
        """pyglet's (bottom-left origin) -> imgui's (top-left)."""
        self.io.add_mouse_pos_event(float(x), float(self.window.get_size()[1] - y))

    def mouse_button(self, x: float, y: float, button: int, modifiers: int, down: bool) -> None:
        self.modifiers(modifiers)
        self.mouse_at(x, y)
        if button in BUTTONS:
            self.io.add_mouse_button_event(BUTTONS[button], down)

    def wheel(self, x: float, y: float, scroll_x: float, scroll_y: float) -> None:
        self.mouse_at(x, y)
        self.io.add_mouse_wheel_event(float(scroll_x), float(scroll_y))

    def left(self) -> None:
        """The mouse left the window: nothing is hovered."""
        self.io.add_mouse_pos_event(-3.4e38, -3.4e38)

    def focus(self, focused: bool) -> None:
        self.io.add_focus_event(focused)
