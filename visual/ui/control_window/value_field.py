"""A parameter's field, to type an exact value into: it opens in place of the slider
(right-click, Ctrl+click, or Enter with the keyboard focus on it), holding the value as the
slider says it, all selected so typing replaces it; Enter sets it, Esc or a click elsewhere
leaves it. The value is parsed here (control_layout.py `parse_typed`: what is no
value at all is said in the window) and handed on as ("set", name, value), for OSC's checks to
take or refuse (out of range: refused, and said). Main thread only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from imgui_bundle import imgui

from swarm_instrument.visual.ui.control_window.control_layout import (
    Messages,
    parse_typed,
    typed_text,
)

NEVER_TOOK_IT = 30  # frames: a field that never got the keyboard closes


@dataclass
class Edit:
    """An open field: `text` its contents; `active` once imgui gave it the keyboard (until
    then the window holds what is typed: a quick typist loses nothing)."""

    name: str
    text: str
    frames: int = 0
    active: bool = False


class ValueField:
    """The one field open at a time, for the parameters of `specs` (name -> spec)."""

    def __init__(self, specs: dict[str, dict[str, Any]], messages: Messages, widgets,
                 say: Callable[[str], None]) -> None:
        self.specs = specs
        self.messages = messages
        self.widgets = widgets
        self.say = say
        self.edit: Edit | None = None
        self.refocus: str | None = None  # the slider to give the keyboard focus back to

    @property
    def typing(self) -> bool:
        return self.edit is not None

    def open(self, name: str, shown: str = "", color: tuple[float, ...] | None = None) -> None:
        """Open `name`'s field holding its value (`shown`, or a colour's `color`); it becomes
        the chosen parameter."""
        spec = self.specs.get(name)
        if spec is None:
            return
        self.messages.add(("select", name))
        self.edit = Edit(name, typed_text(spec["kind"], shown, color))

    def cancel(self) -> None:
        self.edit = None

    def take_focus(self, name: str) -> None:
        """Before `name`'s slider: once after its value was set, it gets the keyboard focus
        back (Enter, a value, Enter, then Down to the next)."""
        if self.refocus == name:
            imgui.set_keyboard_focus_here()
            self.refocus = None

    def draw(self, name: str, width: float) -> None:
        """The open field, `width` wide, where `name`'s slider would be."""
        edit = self.edit
        if edit.frames == 0:
            imgui.set_keyboard_focus_here()
        edit.frames += 1
        imgui.set_next_item_width(width)
        flags = imgui.InputTextFlags_.enter_returns_true | imgui.InputTextFlags_.auto_select_all
        entered, edit.text = imgui.input_text(f"##edit:{name}", edit.text, flags)
        self.widgets.record(f"edit:{name}", "field", name)
        if imgui.is_item_active():
            edit.active = True
        if entered:
            self.commit()
        elif (edit.active and not imgui.is_item_active()) or (
                not edit.active and edit.frames > NEVER_TOOK_IT):
            self.edit = None  # Esc, a click elsewhere, or it never took the keyboard

    def commit(self, text: str | None = None) -> None:
        """The field's text (or `text`) as the value: a ("set", name, value) message, which
        OSC's checks take or refuse; what is no value at all is said here."""
        edit = self.edit
        if edit is None:
            return
        self.edit = None
        self.refocus = edit.name
        spec = self.specs[edit.name]
        try:
            value = parse_typed(spec["kind"], list(spec.get("choices", ())),
                                edit.text if text is None else text)
        except ValueError as exc:
            self.say(f"{edit.name}: {exc}")
            return
        self.messages.add(("set", edit.name, value))
