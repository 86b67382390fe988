"""When each MIDI message arrived, in time.perf_counter()'s clock (the loop's), though the ports
are read once a frame: rtmidi gives each message the seconds since the previous one on its
port; `PortTimeline` sums them into a timeline of the port's own and places it on perf_counter
with an offset bounded by what a read knows (control/midi/ports.py's opening comment says how).
MIDI clock pulses keep their spacing this way. Pure: any thread.
"""

from __future__ import annotations

import math


class PortTimeline:
    """Arrival times for one MidiIn's messages in time.perf_counter()'s clock (see the top
    comment). Pure: `place` gets rtmidi's deltas and the read's time."""

    def __init__(self) -> None:
        self.elapsed = 0.0  # the port's own timeline: rtmidi's deltas summed, at the last message
        self.offset: float | None = None  # perf_counter time minus the port's own time
        self.read_at: float | None = None  # when the last read left the queue empty

    def place(self, deltas: list[float], now: float, emptied: bool = True) -> list[float]:
        """The arrival times of messages read at `now` (after the queue was seen empty when
        `emptied`) with these deltas (seconds since the message before, on this port). The
        offset only moves to respect a bound: down when the newest message would come after
        `now`, up when the oldest would come before the last read that emptied the queue."""
        stamps = []
        elapsed = self.elapsed
        for delta in deltas:
            if math.isfinite(delta) and delta > 0.0:
                elapsed += delta
            stamps.append(elapsed)
        self.elapsed = elapsed
        if stamps:
            latest = now - stamps[-1]  # the newest message came before now
            if self.offset is None or self.offset > latest:
                self.offset = latest
            if self.read_at is not None:  # ... and the oldest after the last read
                earliest = self.read_at - stamps[0]
                if self.offset < earliest:
                    self.offset = min(earliest, latest)
        self.read_at = now if emptied else None  # a cut-short read bounds nothing
        offset = self.offset or 0.0
        return [stamp + offset for stamp in stamps]
