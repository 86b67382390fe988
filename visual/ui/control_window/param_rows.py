"""The control window's parameters: every parameter a row in its group, the groups flowed into
columns (control_layout.py `flow_columns`), drawn with Dear ImGui each frame.

A row: the name, a bar over the performance range (filled to the value, its text on it, a
white mark where a MIDI knob waiting for pickup points), or a switch, or a colour's swatch and
red, green and blue bars; and an L box that MIDI-learns it. The bars are imgui widgets of our
own (an invisible button and the draw list), so they look as before and map the mouse as
plainly as before: a click jumps, a drag follows, the wheel steps. Right-click, Ctrl+click or
Enter (keyboard focus on it) opens a field to type an exact value into.

Gestures become the window's messages (control_window.py lists them); the field is
value_field.py's; `Widgets` keeps where each widget was drawn and which one holds
the keyboard focus, for the window's key routing and for tests. Main thread only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from imgui_bundle import imgui

from swarm_instrument.visual.ui.control_window.control_layout import (
    DIM,
    FILL,
    GHOST,
    HEADER,
    HOVER,
    LEARN,
    ON,
    SELECTED,
    TEXT,
    TRACK,
    Messages,
    fit_text,
    flow_columns,
    rgba,
)
from swarm_instrument.visual.ui.control_window.value_field import ValueField

WHEEL_STEP, WHEEL_STEP_SHIFT = 0.01, 0.1  # of the performance range, a wheel click
NAV = imgui.ButtonFlags_.enable_nav  # an invisible button the keyboard focus can reach
FITTED_MAX = 4096  # value texts cut to fit, remembered


class Widgets:
    """Where the last frame drew each widget (name -> x, y, width, height in window units,
    top-left origin) and which one holds the keyboard focus: (kind, name, channel)."""

    def __init__(self) -> None:
        self.rects: dict[str, tuple[int, int, int, int]] = {}
        self.focus: tuple[str, str, int | None] | None = None
        self._next_focus: tuple[str, str, int | None] | None = None

    def begin(self) -> None:
        self.rects = {}
        self._next_focus = None

    def end(self) -> None:
        self.focus = self._next_focus

    def record(self, name: str, kind: str = "widget", param: str = "",
               channel: int | None = None) -> None:
        """The item just submitted, as `name`; focused, it is (kind, param, channel)."""
        low, high = imgui.get_item_rect_min(), imgui.get_item_rect_max()
        self.rects[name] = (round(low.x), round(low.y), round(high.x - low.x),
                            round(high.y - low.y))
        if imgui.is_item_focused():
            self._next_focus = (kind, param or name, channel)


class ParamColumns:
    """Draws the parameters in columns and turns gestures on them into messages."""

    def __init__(self, groups: list[tuple[str, list[dict[str, Any]]]], messages: Messages,
                 widgets: Widgets, say: Callable[[str], None], fonts: dict[str, Any]) -> None:
        self.groups = groups
        self.specs = {spec["name"]: spec for _, specs in groups for spec in specs}
        self.messages = messages
        self.widgets = widgets
        self.say = say
        self.fonts = fonts
        self.field = ValueField(self.specs, messages, widgets, say)
        self._dragging: tuple[str, float] | None = None  # (name, position) while dragged
        self._fitted: dict[tuple[str, int], str] = {}
        self._names: dict[tuple[str, int, float, int], tuple[float, str]] = {}

    # ---- the columns ------------------------------------------------------------------------

    def draw(self, x: float, y: float, width: float, height: float,
             state: dict[str, Any]) -> float:
        """The groups in columns inside the area (scrolling where they cannot fit); the
        height the columns took."""
        spacing = imgui.get_style().item_spacing.y
        frame = imgui.get_frame_height()
        row_h, header_h, gap = frame + spacing, frame + 2 + spacing, 6 + spacing
        flow = flow_columns([len(specs) for _, specs in self.groups], width, height, row_h,
                            header_h, gap, imgui.get_style().font_scale_dpi)
        taken = min(flow.height, height)
        scroll = not flow.fits  # too small a window: the columns scroll together
        inner = flow.width - 10 - (imgui.get_style().scrollbar_size / len(flow.columns)
                                   if scroll else 0.0)
        if scroll:
            imgui.set_cursor_screen_pos((x, y))
            imgui.begin_child("parameters", (width, height), 0,
                              imgui.WindowFlags_.no_background)
        for index, column in enumerate(flow.columns):
            if scroll:  # in the child's own coordinates, which scroll
                imgui.set_cursor_pos((index * flow.width, 0))
            else:  # in the window's: Tab walks the columns in order, arrows across them
                imgui.set_cursor_screen_pos((x + index * flow.width, y))
            imgui.begin_group()  # each new row starts at the column's left edge
            for number, (group, start, stop) in enumerate(column):
                name, specs = self.groups[group]
                if start == 0:
                    self._header(name, inner)
                for spec in specs[start:stop]:
                    self._row(spec, state, inner)
                if number + 1 < len(column):
                    imgui.dummy((1, 6))
            imgui.end_group()
        if scroll:
            imgui.end_child()
        return taken

    def _header(self, group: str, width: float) -> None:
        imgui.push_font(self.fonts["bold"], 0.0)
        low = imgui.get_cursor_screen_pos()
        imgui.dummy((max(width, 1.0), imgui.get_frame_height() + 2))
        draw = imgui.get_window_draw_list()
        size = imgui.get_font_size()
        draw.add_text((low.x + 2, low.y + 4), rgba(HEADER), group.upper())
        width = imgui.get_item_rect_size().x
        draw.add_rect_filled((low.x, low.y + size + 7), (low.x + width, low.y + size + 8),
                             rgba(TRACK))
        imgui.pop_font()

    def fit_smaller(self, text: str, width: float) -> tuple[float, str]:
        """A name smaller (down to four fifths of the font) until it fits, then cut."""
        key = (text, int(width), imgui.get_font_size(), imgui.get_font().font_id)
        if key not in self._names:
            base = imgui.get_font_size()
            for size in (base, base * 0.9, base * 0.8):
                imgui.push_font(None, size / imgui.get_style().font_scale_dpi)
                fitted = fit_text(text, width, lambda t: imgui.calc_text_size(t).x)
                imgui.pop_font()
                if fitted == text:
                    break
            self._names[key] = (size, fitted)
        return self._names[key]

    def _fit(self, text: str, width: float) -> str:
        key = (text, int(width))
        if key not in self._fitted:
            if len(self._fitted) > FITTED_MAX:  # values change all show long: bounded
                self._fitted.clear()
            self._fitted[key] = fit_text(text, width, lambda t: imgui.calc_text_size(t).x)
        return self._fitted[key]

    # ---- one row ----------------------------------------------------------------------------

    def _row(self, spec: dict[str, Any], state: dict[str, Any], width: float) -> None:
        name, kind = spec["name"], spec["kind"]
        norm, shown, color = state.get("rows", {}).get(name, (None, "", None))
        height = imgui.get_frame_height()
        low = imgui.get_cursor_screen_pos()
        draw = imgui.get_window_draw_list()
        if name == state.get("selected"):
            draw.add_rect_filled((low.x - 2, low.y - 1), (low.x + width, low.y + height + 1),
                                 rgba(SELECTED))
        name_w = round(width * 0.44)
        learn_w = height if kind != "color" else 0.0
        bar_w = width - name_w - (learn_w + 4 if learn_w else 0)
        imgui.dummy((name_w, height))
        size, label = self.fit_smaller(name.replace("_", " "), name_w - 8)
        draw.add_text(imgui.get_font(), size, (low.x + 4, low.y + (height - size) / 2),
                      rgba(TEXT), label)
        imgui.same_line(0, 0)
        if self.field.edit is not None and self.field.edit.name == name:
            self.field.draw(name, bar_w + (learn_w + 4 if learn_w else 0))
            return
        if kind == "color":
            self._color(name, color, bar_w)
        elif kind == "bool":
            self._switch(name, norm, shown, bar_w)
        else:
            self.bar(f"param:{name}", name, kind, norm, shown, bar_w,
                     ghost=state.get("ghost", {}).get(name))
        if learn_w:
            imgui.same_line(0, 4)
            self._learn(name, learn_w, name == state.get("learning"))

    def bar(self, widget: str, name: str, kind: str, norm: float | None, shown: str,
            width: float, ghost: float | None = None, select: bool = True,
            centred: bool = False) -> None:
        """A bar over the performance range: a click jumps, a drag follows, the wheel steps;
        right-click or Ctrl+click opens the field (parameters only)."""
        height = imgui.get_frame_height()
        low = imgui.get_cursor_screen_pos()
        if select:
            self.field.take_focus(name)
        imgui.invisible_button(f"##{widget}", (max(width, 1.0), height), NAV)
        self.widgets.record(widget, kind, name)
        io = imgui.get_io()
        hovered = imgui.is_item_hovered()
        if imgui.is_item_activated():
            if io.key_ctrl and select:
                self._open(name, shown)
            else:
                if select:
                    self.messages.add(("select", name))
                self._dragging = (name, norm or 0.0)
        if select and hovered and imgui.is_mouse_clicked(imgui.MouseButton_.right):
            self._open(name, shown)
        if imgui.is_item_active() and self._dragging and self._dragging[0] == name:
            position = min(max((io.mouse_pos.x - low.x) / max(width, 1.0), 0.0), 1.0)
            if position != self._dragging[1] or imgui.is_item_activated():
                self.messages.add(("norm", name, position))
                self._dragging = (name, position)
            norm = position if kind != "choice" else norm
        elif imgui.is_item_deactivated():
            self._dragging = None
        if hovered:
            self.wheel(name)
        high = (low.x + width, low.y + height)
        filled = (low.x, low.x)  # the filled part, the track drawn beside it only
        if norm is not None and kind == "choice":
            count = max(len(self.specs.get(name, {}).get("choices", ())), 1)
            step = min(int(norm * count), count - 1)
            filled = (low.x + step * width / count, low.x + (step + 1) * width / count)
        elif norm is not None:
            filled = (low.x, low.x + width * min(max(norm, 0.0), 1.0))
        self._track(low, high, filled, FILL, hovered)
        draw = imgui.get_window_draw_list()
        text = self._fit(shown, width - 8)
        text_w = imgui.calc_text_size(text).x
        text_x = low.x + (width - text_w) / 2 if centred else high[0] - 4 - text_w
        draw.add_text((text_x, low.y + (height - imgui.get_font_size()) / 2), rgba(TEXT), text)
        if ghost is not None:
            x = low.x + width * min(max(ghost, 0.0), 1.0)
            draw.add_rect_filled((x - 1, low.y - 1), (x + 1, high[1] + 1), rgba(GHOST, 230))

    def _open(self, name: str, shown: str, color: tuple[float, ...] | None = None) -> None:
        self.field.open(name, shown, color)
        self._dragging = None

    @staticmethod
    def _track(low, high, filled: tuple[float, float], color, hovered: bool) -> None:
        """A bar from `low` to `high`: `filled` (x from, x to) in `color`, the rest track
        (each pixel drawn once: software GL pays for every one)."""
        draw = imgui.get_window_draw_list()
        track = rgba(HOVER if hovered else TRACK)
        start, end = filled
        if start > low[0]:
            draw.add_rect_filled(low, (start, high[1]), track)
        if end > start:
            draw.add_rect_filled((start, low[1]), (end, high[1]), rgba(color))
        if end < high[0]:
            draw.add_rect_filled((max(end, low[0]), low[1]), high, track)

    def wheel(self, name: str) -> None:
        """The wheel over a bar: a hundredth of the range a click (Shift: a tenth), the
        column not scrolled."""
        io = imgui.get_io()
        imgui.set_item_key_owner(imgui.Key.mouse_wheel_y)
        clicks = io.mouse_wheel
        if not clicks or self.specs.get(name, {}).get("kind") == "color":
            return
        step = (WHEEL_STEP_SHIFT if io.key_shift else WHEEL_STEP) * (1 if clicks > 0 else -1)
        whole = round(abs(clicks))
        if whole and abs(abs(clicks) - whole) < 1e-6:  # one message a click, as each is one
            for _ in range(whole):
                self.messages.add(("nudge", name, step))
        else:  # a touchpad's fraction of a click
            self.messages.add(("nudge", name, step * abs(clicks)))

    def _switch(self, name: str, norm: float | None, shown: str, width: float) -> None:
        height = imgui.get_frame_height()
        low = imgui.get_cursor_screen_pos()
        on = norm is not None and norm >= 0.5
        self.field.take_focus(name)
        if imgui.invisible_button(f"##param:{name}", (max(width, 1.0), height), NAV):
            if imgui.get_io().key_ctrl:
                self._open(name, shown)
            else:
                self.messages.add(("select", name))
                self.messages.add(("norm", name, 0.0 if on else 1.0))
        self.widgets.record(f"param:{name}", "bool", name)
        hovered = imgui.is_item_hovered()
        if hovered and imgui.is_mouse_clicked(imgui.MouseButton_.right):
            self._open(name, shown)
        if hovered:
            self.wheel(name)
        self._track(low, (low.x + width, low.y + height),
                    (low.x, low.x + (width if on else 0.0)), ON, hovered)
        draw = imgui.get_window_draw_list()
        text_w = imgui.calc_text_size(shown).x
        draw.add_text((low.x + width - 4 - text_w, low.y + (height - imgui.get_font_size()) / 2),
                      rgba(TEXT), shown)

    def _color(self, name: str, color: tuple[float, ...] | None, width: float) -> None:
        """A swatch and three bars, red, green and blue: each sets the colour."""
        height = imgui.get_frame_height()
        low = imgui.get_cursor_screen_pos()
        color = tuple(color) if color is not None else (0.0, 0.0, 0.0)
        imgui.dummy((height, height))
        self.widgets.record(f"swatch:{name}")
        draw = imgui.get_window_draw_list()
        draw.add_rect_filled(low, (low.x + height, low.y + height),
                             rgba(tuple(round(min(max(c, 0.0), 1.0) * 255) for c in color)))
        part = (width - height - 4 - 4) / 3
        for index in range(3):
            imgui.same_line(0, 4 if index == 0 else 2)
            start = imgui.get_cursor_screen_pos()
            widget = f"channel:{name}:{index}"
            if index == 0:
                self.field.take_focus(name)
            imgui.invisible_button(f"##{widget}", (max(part, 1.0), height), NAV)
            self.widgets.record(widget, "color", name, index)
            io = imgui.get_io()
            hovered = imgui.is_item_hovered()
            if imgui.is_item_activated() and io.key_ctrl:
                self._open(name, "", color)
            elif imgui.is_item_activated():
                self.messages.add(("select", name))
            elif imgui.is_item_active():
                value = min(max((io.mouse_pos.x - start.x) / max(part, 1.0), 0.0), 1.0)
                channels = list(color)
                channels[index] = round(value, 4)
                if channels != list(color):
                    self.messages.add(("set", name, tuple(channels)))
                    color = tuple(channels)
            if hovered and imgui.is_mouse_clicked(imgui.MouseButton_.right):
                self._open(name, "", color)
            if hovered and io.mouse_wheel:
                imgui.set_item_key_owner(imgui.Key.mouse_wheel_y)
                self.step_channel(name, color, index, WHEEL_STEP * io.mouse_wheel)
            tint = tuple(180 if i == index else 60 for i in range(3))
            self._track(start, (start.x + part, start.y + height),
                        (start.x, start.x + part * min(max(color[index], 0.0), 1.0)), tint,
                        hovered)

    def step_channel(self, name: str, color: tuple[float, ...] | None, channel: int,
                     step: float) -> None:
        """One of a colour's channels moved by `step` (the wheel, Left/Right)."""
        channels = list(color or (0.0, 0.0, 0.0))
        channels[channel] = round(min(max(channels[channel] + step, 0.0), 1.0), 4)
        self.messages.add(("set", name, tuple(channels)))

    def _learn(self, name: str, size: float, learning: bool) -> None:
        """The L box: MIDI-learn the parameter (again: cancel). Not a keyboard stop: L on the
        keyboard learns the chosen parameter."""
        low = imgui.get_cursor_screen_pos()
        if imgui.invisible_button(f"##learn:{name}", (size, size)):  # no keyboard stop
            self.messages.add(("learn", name))
        self.widgets.record(f"learn:{name}")
        hovered = imgui.is_item_hovered()
        draw = imgui.get_window_draw_list()
        draw.add_rect_filled((low.x + 2, low.y + 2), (low.x + size - 2, low.y + size - 2),
                             rgba(LEARN if learning else HOVER if hovered else TRACK))
        imgui.push_font(None, imgui.get_font_size() * 0.8)
        text_w = imgui.calc_text_size("L").x
        draw.add_text((low.x + (size - text_w) / 2, low.y + (size - imgui.get_font_size()) / 2),
                      rgba(TEXT if learning else DIM), "L")
        imgui.pop_font()
