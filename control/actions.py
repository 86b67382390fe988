"""What a performer can ask of the show, whatever they ask with: a MIDI note or program change,
an OSC message, a key, a recorded control track. Every input turns its gesture into an `Action`
and the show (show/show.py) carries actions out in one place. Plain data, any thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Actions a MIDI mapping may bind to a note or a program change, and a control track records.
MAPPABLE = ("respawn", "separation_burst", "recall_preset", "tap", "downbeat", "tempo_half",
            "tempo_double", "autopilot",  # a note switches the autopilot off and on
            "autopilot_resume")  # ... or hands it the look back now
KINDS = MAPPABLE + (
    "set",          # values: parameters to set at once (a knob already set its own)
    "learned",      # param: MIDI learn just bound a knob to it
    "select",       # value: +1 / -1, the HUD's chosen parameter; or param: that one
    "nudge",        # value: a fraction of the chosen parameter's performance range
    "learn",        # MIDI-learn the chosen parameter (param: that one first), or cancel
    "pause",
    "save_preset",  # value: slot 1-9
    "lure",         # values: {"point": (x, y, z)}
    "outputs",      # value: 1 on air, 0 off, None the other way; values {"output": n}: one
)
# What quantize (a parameter: off, beat, bar) holds back until the next beat or bar.
QUANTIZABLE = ("respawn", "separation_burst", "recall_preset")


@dataclass(frozen=True)
class Action:
    """kind: one of KINDS. value: "separation_burst" a strength in 0..1, "recall_preset" and
    "save_preset" a slot 1-9, "select" a step (or param: the parameter to choose), "nudge" a
    fraction of the range, "tap" when it was tapped (seconds, the loop's clock; None: this frame);
    "downbeat" marks this beat as a bar's first; "outputs" takes the video outputs (values
    {"output": n}: the n-th, from 1) on air (value 1), off (0) or the other way (None). param: for
    "learned", and "select" and "learn" from a control surface. values: for "set" (parameter ->
    value), "lure" and "outputs"."""

    kind: str
    value: float | int | None = None
    param: str | None = None
    values: dict[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown action '{self.kind}' (known: {', '.join(KINDS)})")
