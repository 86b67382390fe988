"""The performer's keys, by name as the window hands them on (visual/ui/window.py keeps F, H and
Esc): each becomes an `Action` the show carries out like MIDI's or OSC's. Pure."""

from __future__ import annotations

from swarm_instrument.control.actions import Action
from swarm_instrument.control.parameters.registry import NUDGE_COARSE, NUDGE_FINE

KEYS = {
    "SPACE": Action("pause"),
    "R": Action("respawn"),
    "UP": Action("select", -1),
    "DOWN": Action("select", 1),
    "L": Action("learn"),
    "D": Action("downbeat"),
    "O": Action("outputs"),  # the video outputs off air and back
    "A": Action("autopilot"),  # the autopilot off and on (--autopilot)
}


def key_action(name: str, ctrl: bool = False, shift: bool = False,
               now: float | None = None) -> Action | None:
    """1-9 recall a preset slot (Ctrl: save into it); Space pause, R respawn, Up/Down choose a
    parameter, Left/Right change it by NUDGE_FINE of its performance range (Shift:
    NUDGE_COARSE), L MIDI-learn it, T tap the tempo (at `now`, when the key went down), D
    this beat is the bar's first, O the video outputs off air and back, A the autopilot off
    and on. Other keys do
    nothing (None)."""
    if len(name) == 1 and name in "123456789":
        return Action("save_preset" if ctrl else "recall_preset", int(name))
    if name in ("LEFT", "RIGHT"):
        step = NUDGE_COARSE if shift else NUDGE_FINE
        return Action("nudge", step if name == "RIGHT" else -step)
    if name == "T":
        return Action("tap", now)
    return KEYS.get(name)
