"""Ableton Link in: the tempo and the beat grid of a Link session on the local network.

`LinkClock.open(bpm)` joins the session (quantum 4: a bar of 4/4) and is the `TempoSource`
named "link" that control/musical_time/tempo.py's Tempo asks once a frame. Link's own threads (the
`link` module, LinkPython-extern, wrapping Ableton's C++ library) find the peers, agree the
tempo and keep the clocks in step; this side only reads the session state and commits a
tempo, from the main thread, each call a few microseconds: nothing here waits on the network.

Link counts time in its own clock (microseconds; CLOCK_MONOTONIC_RAW on Linux), the loop in
time.perf_counter()'s (CLOCK_MONOTONIC, which NTP slews). The offset between them is measured
by reading the Link clock between two perf_counter readings, SAMPLES times, keeping the pair
with the narrowest bracket (a microsecond or so); it is measured again every RESYNC_S, so a
slew of up to 500 ppm moves the beat by a fraction of a millisecond between measurements.

Alone in a session, Link gives no reading: Link keeps a tempo of its own then, but it is only
the one this instrument last proposed, and the performer's own clocks (MIDI clock, tap, the
audio's beat tracker) should lead. With at least one peer, the session's tempo and grid lead
(Link is first in Tempo's priority); when the last peer leaves, Tempo holds the session's tempo
and grid. A peer that leaves says so and is gone at once; one that vanishes (crashed, cable
pulled) is dropped by Link after about 6 s, its grid held meanwhile. Tempo changes made here
(`propose`: the bpm knob, four taps) are committed to the session, alone or not: when sessions
meet, the older one (by more than 0.5 s) wins, so a peer that comes later takes the tempo last
proposed here. Transport start/stop is not followed: the grid always runs.
"""

from __future__ import annotations

import math
import time
from typing import Any

from swarm_instrument.control.musical_time.tempo import MAX_BPM, MIN_BPM, TempoReading

QUANTUM = 4.0  # beats a bar: the phase that peers share
SAMPLES = 5  # clock readings an offset measurement takes (the narrowest bracket wins)
RESYNC_S = 2.0  # seconds between offset measurements


class LinkUnavailable(Exception):
    """Link cannot be used here; the message says why in a line."""


class LinkClock:
    """A member of a Link session, as a `TempoSource`. `link` is an object like the `link`
    module's Link (numPeers, clock, captureAppSessionState, commitAppSessionState, enabled);
    `open` makes and enables a real one."""

    name = "link"

    def __init__(self, link: Any, quantum: float = QUANTUM) -> None:
        self._link = link
        self._clock = link.clock()
        self.quantum = quantum
        self._closed = False
        self._offset = 0.0  # Link's clock (s) less perf_counter's
        self._synced = -math.inf  # perf_counter at the last offset measurement
        self._sync()

    @classmethod
    def open(cls, bpm: float = 120.0, quantum: float = QUANTUM) -> LinkClock:
        """Join the session on the local network, proposing `bpm` (a session already there
        keeps its own). LinkUnavailable when the module is missing or Link does not start."""
        try:
            import link as ableton_link  # noqa: PLC0415 - optional: Ableton Link, only with --link
        except ImportError as exc:
            raise LinkUnavailable(f"the link module is not installed (pip install "
                                  f"LinkPython-extern): {exc}") from None
        if not (isinstance(bpm, (int, float)) and math.isfinite(bpm)):
            bpm = 120.0
        try:
            session = ableton_link.Link(min(max(float(bpm), MIN_BPM), MAX_BPM))
            session.enabled = True
            clock = cls(session, quantum)
        except Exception as exc:  # noqa: BLE001 - whatever the binding raises, say it in a line
            raise LinkUnavailable(f"Ableton Link could not start: {exc}") from None
        return clock

    def _sync(self) -> None:
        """Measure the offset between Link's clock and perf_counter's."""
        best = math.inf
        for _ in range(SAMPLES):
            before = time.perf_counter()
            micros = self._clock.micros()
            after = time.perf_counter()
            if after - before < best:
                best = after - before
                self._offset = micros / 1e6 - (before + after) / 2.0
        self._synced = after

    def micros(self, now: float) -> int:
        """Link's time (microseconds) at perf_counter's `now`."""
        if time.perf_counter() - self._synced > RESYNC_S:
            self._sync()
        return round((now + self._offset) * 1e6)

    @property
    def peers(self) -> int:
        return 0 if self._closed else self._link.numPeers()

    def reading(self, now: float) -> TempoReading | None:
        """The session's tempo and beat at `now` (perf_counter's time); None alone in the
        session or closed (see the module's docstring)."""
        if self.peers == 0:
            return None
        micros = self.micros(now)
        state = self._link.captureAppSessionState()
        return TempoReading(state.tempo(), state.beatAtTime(micros, self.quantum), now,
                            self.name, bars=True)  # beat 0 (mod the quantum) starts a bar

    def propose(self, bpm: float) -> None:
        """Ask the session for tempo `bpm` from now (every peer follows); a value that is no
        tempo (not a number, outside MIN_BPM..MAX_BPM) is ignored."""
        if self._closed or isinstance(bpm, bool) or not isinstance(bpm, (int, float)) \
                or not math.isfinite(bpm) or not MIN_BPM <= bpm <= MAX_BPM:
            return
        state = self._link.captureAppSessionState()
        state.setTempo(float(bpm), self._clock.micros())
        self._link.commitAppSessionState(state)

    def close(self) -> None:
        """Leave the session (the peers are told); never raises, and a second close does
        nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            self._link.enabled = False
        except Exception:  # noqa: BLE001 - leaving must not break the show's shutdown
            pass

    def state(self) -> dict:
        """Telemetry's and the HUD's `link` object."""
        if self._closed:
            return {"peers": 0, "bpm": None, "enabled": False}
        return {"peers": self.peers,
                "bpm": round(self._link.captureAppSessionState().tempo(), 3),
                "enabled": bool(self._link.enabled)}
