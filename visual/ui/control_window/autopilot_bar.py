"""The control window's autopilot bar, under the title across the whole window: the switch
(ON / OFF), RESUME NOW, who is in control (and when the autopilot takes the look back), the
section heard and where in its phrase, the look, the next planned change.

It draws the state the show hands it (show/autopilot/autopilot_view.py, the same words as the
web page's) and hands back the gestures as messages: ("autopilot", 0 | 1) for the switch,
("action", "resume") for RESUME NOW. A show started without --autopilot has no autopilot to
switch: the switch still sends, and the show answers with the line that says how to have one
(shown here in the notice colour), so a press is never met by nothing. Main thread only.
"""

from __future__ import annotations

from typing import Any

from imgui_bundle import imgui

from swarm_instrument.visual.ui.control_window.control_layout import (
    BACKGROUND,
    DIM,
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
from swarm_instrument.visual.ui.control_window.param_rows import Widgets

WHO_COLOURS = {"autopilot": ON, "performer": LEARN, "off": DIM}


def bar_height(scale: float) -> float:
    """The bar's height: one row of buttons and a margin."""
    return imgui.get_frame_height() + 10 * scale


class AutopilotBar:
    """Draws the bar; `shown` keeps the lines the last frame drew (telemetry reads them)."""

    def __init__(self, messages: Messages, widgets: Widgets, fonts: dict[str, Any]) -> None:
        self.messages = messages
        self.widgets = widgets
        self.fonts = fonts
        self.shown: list[str] = []

    def draw(self, y: float, width: float, scale: float, state: dict[str, Any]) -> float:
        """The bar from `y` across `width`; its height."""
        height = bar_height(scale)
        frame = imgui.get_frame_height()
        draw = imgui.get_window_draw_list()
        draw.add_rect_filled((0, y), (width, y + height), rgba(BACKGROUND))
        draw.add_rect_filled((0, y + height - 1), (width, y + height), rgba(PANEL))
        top = y + (height - frame) / 2
        x = 12 * scale
        imgui.push_font(self.fonts["bold"], 0.0)
        text_y = top + (frame - imgui.get_font_size()) / 2
        draw.add_text((x, text_y), rgba(HEADER), "AUTOPILOT")
        x += imgui.calc_text_size("AUTOPILOT").x + 10 * scale
        on = bool(state.get("on"))
        available = bool(state.get("available"))
        imgui.set_cursor_screen_pos((x, top))
        switch_w = imgui.calc_text_size("OFF").x + 28 * scale
        imgui.push_style_color(imgui.Col_.button, rgba(ON if on else TRACK))
        imgui.push_style_color(imgui.Col_.text, rgba(BACKGROUND if on else TEXT))
        if imgui.button(f"{'ON' if on else 'OFF'}##button:autopilot", (switch_w, frame)):
            self.messages.add(("autopilot", 0 if on else 1))
        imgui.pop_style_color(2)
        self.widgets.record("button:autopilot")
        x += switch_w + 6 * scale
        imgui.set_cursor_screen_pos((x, top))
        resume_w = imgui.calc_text_size("RESUME NOW").x + 20 * scale
        idle = available and state.get("control") == "autopilot"  # it has the look already
        imgui.begin_disabled(idle)
        if imgui.button("RESUME NOW##button:resume", (resume_w, frame)):
            self.messages.add(("action", "resume"))
        imgui.end_disabled()
        imgui.pop_font()
        self.widgets.record("button:resume")
        x += resume_w + 14 * scale
        where, coming, who = (list(state.get("lines") or ()) + ["", "", ""])[:3]
        colour = LEARN if state.get("said") else WHO_COLOURS.get(state.get("control"), DIM)
        right = width - 12 * scale
        self.shown = []
        for text, tint, bold in ((who, colour, True), (where, TEXT, False),
                                 (coming, DIM, False)):
            if not text or x >= right - 20 * scale:
                continue
            if bold:
                imgui.push_font(self.fonts["bold"], 0.0)
            fitted = fit_text(text, right - x, lambda t: imgui.calc_text_size(t).x)
            draw.add_text((x, text_y), rgba(tint), fitted)
            x += imgui.calc_text_size(fitted).x + 22 * scale
            if bold:
                imgui.pop_font()
            self.shown.append(fitted)
        imgui.set_cursor_screen_pos((0, y))
        imgui.dummy((width, height))
        self.widgets.record("autopilot")
        return height
