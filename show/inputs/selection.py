"""The performer's chosen parameter, the one the HUD marks: Up/Down (or a slider clicked in a
control surface) choose it, Left/Right nudge it by a part of its performance range, L learns
it. Colours cannot be chosen: no knob drives one. Main thread only.
"""

from __future__ import annotations

import logging
from typing import Any

from swarm_instrument.control.actions import Action
from swarm_instrument.control.parameters.registry import REGISTRY, Params, param
from swarm_instrument.show.inputs.input_roles import MidiIn

log = logging.getLogger("swarm_instrument.show.show")  # said as the show's, as it always was
LEARNABLE = tuple(p.name for p in REGISTRY if p.kind != "color")  # in registry order


class Selection:
    """Which parameter is chosen (`index` into LEARNABLE)."""

    def __init__(self) -> None:
        self.index = 0

    @property
    def name(self) -> str:
        return LEARNABLE[self.index % len(LEARNABLE)]

    def choose(self, action: Action) -> None:
        """A `select` action: its `param` names one (a slider clicked: a colour is ignored),
        else its value steps through them (Up/Down)."""
        if action.param is not None:
            if action.param in LEARNABLE:
                self.index = LEARNABLE.index(action.param)
            return
        self.index = (self.index + int(action.value or 0)) % len(LEARNABLE)

    def nudged(self, params: Params, steps: float) -> dict[str, Any] | None:
        """The chosen parameter moved by `steps` of its performance range (a switch flips, a
        choice steps), as the values to set; None when it does not move."""
        value = param(self.name).nudge(params[self.name], steps)
        return None if value == params[self.name] else {self.name: value}

    def toggle_learn(self, midi: MidiIn | None, status: dict[str, str],
                     name: str | None = None) -> None:
        """L: learn the chosen parameter (the next knob turned binds), or cancel; `name` (a
        control surface's L on that slider): learn it, or cancel when it is the one learning.
        Without MIDI the HUD's `midi` line says there is no knob to learn."""
        if midi is None:
            status["midi"] = "off: no knob to learn (MIDI was not opened)"
            log.info("midi: MIDI is off (--no-midi, safe mode or no MIDI system); no knob to "
                     "learn: Left/Right change the chosen parameter")
            return
        learn = midi.state()["learn"]
        if learn["active"] and (name is None or learn["param"] == name):
            midi.cancel_learn()
        else:
            midi.start_learn(self.name)
