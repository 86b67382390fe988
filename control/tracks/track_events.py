"""A control track's events as plain data, whichever file they came from (a recorded track,
control/tracks/control_track.py, or a MIDI file, control/tracks/midi_track.py), and the error
either reader raises, naming the file and the line. Any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from swarm_instrument.control.looks.files import FileProblem


class ControlTrackError(FileProblem):
    """A control track (or MIDI file) that cannot be used: names the file, line and key."""


@dataclass(frozen=True)
class Event:
    """One timed event; `data` holds the kind's own fields (name/value, level/low/...)."""

    t: float
    kind: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)
