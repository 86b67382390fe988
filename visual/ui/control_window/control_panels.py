"""The control window's panels, drawn with Dear ImGui each frame from the show's latest state:
a bar on top (title, notice, where things play), the autopilot's bar under it
(autopilot_bar.py), on the left the output's preview, the meters,
the nine preset slots as thumbnails, SAVE, TAP, DOWNBEAT, RESPAWN and BURST, and the A/B
crossfade; on the right the parameters in columns (param_rows.py) and under them
the HUD's lines (the show's figures, shader errors, refusals, outputs: what the picture's HUD
says when it has one).

Pictures are the output context's textures, borrowed by GL name through the renderer
(imgui_renderer.py). Main thread only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from imgui_bundle import imgui

from swarm_instrument.visual.ui.control_window.autopilot_bar import AutopilotBar
from swarm_instrument.visual.ui.control_window.control_layout import (
    BACKGROUND,
    DIM,
    ERROR,
    FILL,
    HEADER,
    LEARN,
    ON,
    PANEL,
    TEXT,
    TRACK,
    Messages,
    fit_text,
    rgba,
)
from swarm_instrument.visual.ui.control_window.param_rows import ParamColumns, Widgets

BUTTONS = ("save", "tap", "downbeat", "half", "double", "respawn", "burst")
METERS = ("level", "low", "mid", "high", "onset")
LINES = ("tempo", "beats", "midi", "osc", "frame", "agents")
HINT = ("drag or wheel (Shift: x10)  |  right-click, Ctrl+click or Enter: type a value  |  "
        "Tab, arrows: move")
HUD_FONT_SIZE = 12.0  # the HUD's lines, a little smaller than the rest (at 96 dpi)
WINDOW_FLAGS = (imgui.WindowFlags_.no_decoration | imgui.WindowFlags_.no_move
                | imgui.WindowFlags_.no_saved_settings
                | imgui.WindowFlags_.no_bring_to_front_on_focus
                | imgui.WindowFlags_.no_scroll_with_mouse | imgui.WindowFlags_.no_background)


def is_problem(line: str) -> bool:
    """A HUD line that reports something wrong: a shader error, a preset's, refusals."""
    return "ERROR" in line or "error" in line or " refused" in line


class ControlPanels:
    """One frame of the whole window: call `frame` between imgui's new_frame and render."""

    def __init__(self, groups: list[tuple[str, list[dict[str, Any]]]], messages: Messages,
                 say: Callable[[str], None], fonts: dict[str, Any], renderer) -> None:
        self.messages = messages
        self.fonts = fonts
        self.renderer = renderer
        self.widgets = Widgets()
        self.params = ParamColumns(groups, messages, self.widgets, say, fonts)
        self.autopilot = AutopilotBar(messages, self.widgets, fonts)
        self.save_armed = False
        self.images: dict[Any, tuple[int, tuple[int, int]]] = {}  # key -> (GL name, size)
        self.hud_shown: list[str] = []
        self.scale = 1.0

    def frame(self, width: float, height: float, state: dict[str, Any], notice: str) -> None:
        self.widgets.begin()
        imgui.set_next_window_pos((0, 0))
        imgui.set_next_window_size((width, height))
        imgui.push_style_var(imgui.StyleVar_.window_padding, (0, 0))
        imgui.begin("control", None, WINDOW_FLAGS)
        margin = 10 * self.scale
        top = self._top(width, state, notice)
        top += self.autopilot.draw(top, width, self.scale, state.get("autopilot") or {})
        inner = height - top - 2 * margin
        # the pictures' panel: a third of the window, within its own bounds, and never more than
        # half (a narrow window beside the picture, at a high DPI, keeps a column of parameters)
        left_w = min(max(width * 0.34, 300 * self.scale), 560 * self.scale,
                     (width - 4 * margin) / 2)
        self._left(margin, top + margin, left_w, inner, state)
        area_x = margin + left_w + 2 * margin
        area_w = width - area_x - margin
        hud_min = 4 * (imgui.get_font_size() + 2) + imgui.get_frame_height() + 8 * self.scale
        taken = self.params.draw(area_x, top + margin, area_w, inner - hud_min, state)
        hud_y = top + margin + taken + 8 * self.scale
        self._hud(area_x, hud_y, area_w - 10, top + margin + inner - hud_y, state)
        imgui.end()
        imgui.pop_style_var()
        self.widgets.end()

    # ---- the bar on top ---------------------------------------------------------------------

    def _top(self, width: float, state: dict[str, Any], notice: str) -> float:
        height = imgui.get_font_size() + 17 * self.scale
        imgui.set_cursor_screen_pos((0, 0))
        imgui.dummy((width, height))
        draw = imgui.get_window_draw_list()
        draw.add_rect_filled((0, 0), (width, height), rgba(PANEL))
        imgui.push_font(self.fonts["bold"], 15.0)
        title_y = (height - imgui.get_font_size()) / 2
        draw.add_text((12 * self.scale, title_y), rgba(TEXT), "SWARM  control")
        title_w = imgui.calc_text_size("SWARM  control").x
        imgui.pop_font()
        middle = (height - imgui.get_font_size()) / 2
        status = state.get("status", "")
        status_w = imgui.calc_text_size(status).x
        draw.add_text((width - 12 * self.scale - status_w, middle), rgba(DIM), status)
        if notice:  # in the gap between the title and the status, centred there
            left = 12 * self.scale + title_w + 24 * self.scale
            right = width - 12 * self.scale - status_w - 24 * self.scale
            shown = fit_text(notice, max(right - left, 80.0), lambda t: imgui.calc_text_size(t).x)
            shown_w = imgui.calc_text_size(shown).x
            draw.add_text((max(left, (left + right - shown_w) / 2), middle), rgba(LEARN), shown)
        return height

    # ---- the left panel ---------------------------------------------------------------------

    def _left(self, x: float, y: float, width: float, height: float,
              state: dict[str, Any]) -> None:
        scale, frame = self.scale, imgui.get_frame_height()
        gap = 6 * scale
        bottom = y + height
        fade_y = bottom - frame
        buttons_y = fade_y - 8 * scale - frame
        tile_w = (width - 2 * gap) / 3
        label_h = imgui.get_font_size() + 5 * scale
        tile_h = tile_w * 9 / 16 + label_h
        slots_y = buttons_y - 8 * scale - 3 * tile_h - 2 * gap
        line = imgui.get_font_size() + 6 * scale
        meters_h = 5 * line + 12 * scale
        glo_size = self.images.get("preview")
        aspect = glo_size[1][0] / max(glo_size[1][1], 1) if glo_size else 16 / 9
        room = slots_y - 8 * scale - meters_h - 8 * scale - y
        preview_w = max(min(width, room * aspect), 32.0)
        preview_h = preview_w / aspect
        self._preview(x + (width - preview_w) / 2, y, preview_w, preview_h)
        meters_y = slots_y - 8 * scale - meters_h  # above the slots; a spare gap under the
        self._meters(x, meters_y, width, meters_h, state.get("meters", {}))  # preview
        for slot in range(1, 10):
            row, column = divmod(slot - 1, 3)
            self._slot(slot, x + column * (tile_w + gap), slots_y + row * (tile_h + gap),
                       tile_w, tile_h, label_h, state)
        button_w = (width - gap * (len(BUTTONS) - 1)) / len(BUTTONS)
        for index, name in enumerate(BUTTONS):
            imgui.set_cursor_screen_pos((x + index * (button_w + gap), buttons_y))
            self._button(name, button_w)
        self._crossfade(x, fade_y, width, state)

    def _image(self, key: Any, low: tuple[float, float], high: tuple[float, float]) -> None:
        """A borrowed texture over the box, upright (GL's rows go bottom to top)."""
        image = self.images.get(key)
        if image is None:
            return
        reference = self.renderer.borrow(*image)
        imgui.get_window_draw_list().add_image(reference, low, high, (0, 1), (1, 0))

    def _preview(self, x: float, y: float, width: float, height: float) -> None:
        imgui.set_cursor_screen_pos((x, y))
        imgui.dummy((width, height))
        self.widgets.record("preview")
        draw = imgui.get_window_draw_list()
        draw.add_rect((x - 1, y - 1), (x + width + 1, y + height + 1), rgba(TRACK))
        if "preview" not in self.images:
            draw.add_rect_filled((x, y), (x + width, y + height), rgba((0, 0, 0)))
        self._image("preview", (x, y), (x + width, y + height))
        draw.add_text((x + 6, y + 4), rgba(DIM), "OUTPUT")

    def _meters(self, x: float, y: float, width: float, height: float,
                meters: dict[str, Any]) -> None:
        scale = self.scale
        imgui.set_cursor_screen_pos((x, y))
        imgui.dummy((width, height))
        self.widgets.record("meters")
        draw = imgui.get_window_draw_list()
        draw.add_rect_filled((x, y), (x + width, y + height), rgba(PANEL))
        line = imgui.get_font_size() + 6 * scale
        text_dy = 6 * scale
        bar_x, bar_w = x + 52 * scale, width * 0.45 - 52 * scale
        bar_h = 10 * scale
        for index, key in enumerate(METERS):
            top = y + text_dy + index * line
            draw.add_text((x + 8 * scale, top), rgba(DIM), key)
            middle = top + imgui.get_font_size() / 2
            draw.add_rect_filled((bar_x, middle - bar_h / 2), (bar_x + bar_w, middle + bar_h / 2),
                                 rgba(TRACK))
            level = min(max(float(meters.get(key) or 0.0), 0.0), 1.0)
            draw.add_rect_filled((bar_x, middle - bar_h / 2),
                                 (bar_x + bar_w * level, middle + bar_h / 2),
                                 rgba(LEARN if key == "onset" else FILL))
        right = x + width * 0.5
        line = (height - 2 * text_dy) / len(LINES)
        for index, key in enumerate(LINES):
            top = y + text_dy + index * line
            text = fit_text(meters.get(f"{key}_text", ""), width * 0.5 - 24 * scale,
                            lambda t: imgui.calc_text_size(t).x)
            draw.add_text((right, top), rgba(TEXT), text)
            middle = top + imgui.get_font_size() / 2
            if key == "beats":
                beat = meters.get("beat_in_bar")
                for dot in range(4):
                    lit = beat == dot
                    left = right + 46 * scale + dot * 16 * scale
                    draw.add_rect_filled((left, middle - 5 * scale),
                                         (left + 12 * scale, middle + 5 * scale),
                                         rgba((LEARN if dot == 0 else FILL) if lit else TRACK))
            if key in ("midi", "osc"):
                lit = meters.get(f"{key}_active")
                draw.add_circle_filled((x + width - 12 * scale, middle), 4 * scale,
                                       rgba(ON if lit else TRACK))

    def _slot(self, slot: int, x: float, y: float, width: float, height: float,
              label_h: float, state: dict[str, Any]) -> None:
        imgui.set_cursor_screen_pos((x, y))
        if imgui.invisible_button(f"##slot:{slot}", (width, height),
                                  imgui.ButtonFlags_.enable_nav):
            save = self.save_armed or imgui.get_io().key_ctrl
            self.messages.add(("save" if save else "preset", slot))
            self.save_armed = False
        self.widgets.record(f"slot:{slot}")
        hovered = imgui.is_item_hovered()
        draw = imgui.get_window_draw_list()
        lit = slot == state.get("active")
        frame = FILL if lit else LEARN if self.save_armed else TRACK if hovered else PANEL
        draw.add_rect((x - 1, y - 1), (x + width + 1, y + height + 1), rgba(frame), 0.0, 2.0)
        picture = y + height - label_h
        if slot not in self.images:
            draw.add_rect_filled((x, y), (x + width, picture), rgba((8, 8, 12)))
        self._image(slot, (x, y), (x + width, picture))
        draw.add_rect_filled((x, picture), (x + width, y + height),
                             rgba(FILL if lit else PANEL))
        name = state.get("slots", {}).get(slot)
        label = fit_text(f"{slot}  {name}" if name else f"{slot}  (empty)", width - 8,
                         lambda t: imgui.calc_text_size(t).x)
        draw.add_text((x + 4, picture + (label_h - imgui.get_font_size()) / 2),
                      rgba(TEXT if name else DIM), label)
        morph = state.get("morph")
        if lit and morph is not None:
            draw.add_rect_filled((x, picture - 1), (x + width * float(morph), picture + 1),
                                 rgba(LEARN))

    def _button(self, name: str, width: float) -> None:
        armed = name == "save" and self.save_armed
        if armed:
            imgui.push_style_color(imgui.Col_.button, rgba(LEARN))
            imgui.push_style_color(imgui.Col_.text, rgba(BACKGROUND))
        height = imgui.get_frame_height()
        imgui.push_font(self.fonts["bold"], 0.0)
        size, label = self.params.fit_smaller(name.upper(), width - 8)
        imgui.push_font(None, size / imgui.get_style().font_scale_dpi)
        pressed = imgui.button(f"{label}##button:{name}", (width, height))
        imgui.pop_font()
        imgui.pop_font()
        if armed:
            imgui.pop_style_color(2)
        self.widgets.record(f"button:{name}")
        if pressed and name == "save":
            self.save_armed = not self.save_armed
        elif pressed:
            self.save_armed = False
            self.messages.add(("action", name))

    def _crossfade(self, x: float, y: float, width: float, state: dict[str, Any]) -> None:
        """The A/B crossfade: arrows choose slots A (left) and B (right), the bar fades."""
        a, b, fade = state.get("crossfade", (1, 2, 0.0))
        arrow = imgui.get_frame_height()
        imgui.set_cursor_screen_pos((x, y))
        self._arrow("a-", "crossfade_a", -1, arrow)
        imgui.same_line(0, 2)
        self._arrow("a+", "crossfade_a", 1, arrow)
        imgui.same_line(0, 4)
        bar_w = width - 4 * arrow - 2 * 2 - 2 * 4
        low = imgui.get_cursor_screen_pos()
        self.params.bar("crossfade", "crossfade", "float", float(fade),
                        f"crossfade {float(fade):.2f}", bar_w, select=False, centred=True)
        draw = imgui.get_window_draw_list()
        middle = low.y + (arrow - imgui.get_font_size()) / 2
        draw.add_text((low.x + 6, middle), rgba(TEXT), f"A {a}")
        right = f"{b} B"
        draw.add_text((low.x + bar_w - 6 - imgui.calc_text_size(right).x, middle), rgba(TEXT),
                      right)
        imgui.same_line(0, 4)
        self._arrow("b-", "crossfade_b", -1, arrow)
        imgui.same_line(0, 2)
        self._arrow("b+", "crossfade_b", 1, arrow)

    def _arrow(self, key: str, name: str, sign: int, size: float) -> None:
        """An A/B arrow: the next or previous slot (the wheel over it too)."""
        if imgui.button(f"{'<' if sign < 0 else '>'}##arrow:{key}", (size, size)):
            self.messages.add(("nudge", name, 0.01 * sign))
        self.widgets.record(f"arrow:{key}")
        if imgui.is_item_hovered():
            self.params.wheel(name)

    # ---- the HUD's lines --------------------------------------------------------------------

    def _hud(self, x: float, y: float, width: float, height: float,
             state: dict[str, Any]) -> None:
        """The show's own lines (what the picture's HUD says), wrapped, scrolling when they
        do not fit; those that report a problem first, in red."""
        lines = list(state.get("hud", ()))
        imgui.set_cursor_screen_pos((x, y))
        imgui.push_style_color(imgui.Col_.child_bg, rgba(PANEL))
        imgui.push_style_var(imgui.StyleVar_.window_padding, (8 * self.scale, 4 * self.scale))
        imgui.begin_child("hud", (width, max(height, imgui.get_frame_height() * 2)),
                          imgui.ChildFlags_.always_use_window_padding,
                          imgui.WindowFlags_.no_nav_inputs | imgui.WindowFlags_.no_nav_focus)
        imgui.push_font(self.fonts["bold"], 0.0)
        imgui.text_colored(imgui.ImVec4(*(c / 255 for c in HEADER), 1.0), "SHOW")
        imgui.pop_font()
        imgui.same_line(0, 16 * self.scale)
        hint = fit_text(HINT, imgui.get_content_region_avail().x,
                        lambda t: imgui.calc_text_size(t).x)
        imgui.text_colored(imgui.ImVec4(*(c / 255 for c in DIM), 1.0), hint)
        imgui.push_text_wrap_pos(0.0)
        imgui.push_font(None, HUD_FONT_SIZE)
        problems = [line for line in lines if is_problem(line)]
        lines = problems + [line for line in lines if line not in problems]
        for line in lines:
            imgui.push_style_color(imgui.Col_.text, rgba(ERROR if line in problems else TEXT))
            imgui.text_unformatted(line)
            imgui.pop_style_color()
        imgui.pop_font()
        imgui.pop_text_wrap_pos()
        imgui.end_child()
        imgui.pop_style_var()
        imgui.pop_style_color()
        self.widgets.record("hud")
        self.hud_shown = lines
