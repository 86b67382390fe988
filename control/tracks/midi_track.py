"""Standard MIDI Files as control tracks (--control automation.mid): read with mido, tempo
changes followed, and played through the MIDI mapping at song time as if live. Main thread."""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mido

from swarm_instrument.control.looks.files import FileProblem, read_bytes
from swarm_instrument.control.tracks.track_events import ControlTrackError, Event

MIDI_LIMIT = 64 << 20  # a whole album of automation is a few megabytes
MIDI_SUFFIXES = (".mid", ".midi", ".smf")


def load_midi_file(path: str | os.PathLike) -> list[Event]:
    """The channel messages of a Standard MIDI File as midi events, at their times in seconds
    (mido follows the file's tempo changes). Needs mido."""
    path = Path(path)
    try:  # a regular file under a size cap, read without blocking (a FIFO is refused)
        data = read_bytes(path, MIDI_LIMIT, "MIDI file")
    except FileProblem as exc:
        raise ControlTrackError(str(exc)) from None
    try:
        midi_file = mido.MidiFile(file=io.BytesIO(data))
    except (OSError, EOFError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise ControlTrackError(f"{path}: not a readable Standard MIDI File ({exc}); export "
                                "it again from the DAW as a type 0 or 1 .mid") from None
    if midi_file.type == 2:
        raise ControlTrackError(f"{path}: a type 2 MIDI file (independent patterns) has no "
                                "single timeline; export it as type 0 or 1")
    events = []
    t = 0.0
    for message in midi_file:  # merged tracks, `time` in seconds since the previous message
        t += message.time
        if message.is_meta or message.type == "sysex":
            continue
        events.append(Event(t, "midi", {"data": list(message.bytes())}))
    return events


class MidiFileSource:
    """Plays timed MIDI messages to `control.midi.midi_in.Midi` as if they arrived live: `poll(now)`
    releases the messages up to `now` (song seconds) and `drain()` hands them over. Main
    thread only, like the show that polls it."""

    def __init__(self, messages: Sequence[tuple[float, bytes]], name: str = "MIDI file") -> None:
        self._messages = sorted(messages, key=lambda m: m[0])
        self._next = 0
        self._ready: list[tuple[bytes, float]] = []
        self.name = name

    def poll(self, now: float) -> None:
        while self._next < len(self._messages) and self._messages[self._next][0] <= now:
            t, data = self._messages[self._next]
            self._ready.append((data, t))
            self._next += 1

    def drain(self) -> list[tuple[bytes, float]]:
        ready, self._ready = self._ready, []
        return ready

    def status(self) -> dict[str, Any]:
        return {"api": "file", "ports_open": [self.name],
                "state": f"{self.name}: {self._next}/{len(self._messages)} messages"}

    def close(self) -> None:
        self._ready = []
