"""MIDI clock in: the tempo and the beat of a DAW or a drum machine that sends MIDI clock.

24 pulses (0xF8) a quarter note. Start (0xFA) plays from beat 0 at the next pulse, continue
(0xFB) from where it stopped, stop (0xFC) holds the beat and the tempo, song position (0xF2, in
sixteenths) moves the beat. A clock heard with no start (the show opened mid-song) counts from
its first pulse. `handle(message, when)` takes each message with its arrival time (MidiInput
stamps them in time.perf_counter()'s clock, see control/midi/ports.py); `reading(now)` is the
`TempoSource` that control/musical_time/tempo.py's Tempo asks once a frame.

The tempo is a least-squares line through the times of the last WINDOW pulses (four beats),
refitted without the pulses more than OUTLIER_SIGMAS robust deviations off it: ±2 ms of jitter
costs a few hundredths of a BPM. A tempo change shows as the newest CHANGE_RUN pulses all
leaving the line on the same side; the line then starts again from them (the last tempo holds
until REFIT pulses say the new one). The beat is 1/24 a pulse counted, and between pulses
runs on along the line (so late or bunched pulses do not shake it); it never runs back while
playing: a pulse that comes later than the line said holds it until the count catches up.

A clock that falls silent while running (the cable pulled) gives no reading after VANISH_S, so
Tempo holds the tempo and the grid; when pulses come back with no start, continue or song
position, the count goes on from where the held tempo has taken it. After a stop the reading
stays, with `running` False. Work is a few operations a message, and one fit a frame.

Pure: no device, no thread; the main thread calls it (through control.midi.midi_in.Midi).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Any

from swarm_instrument.control.musical_time.tempo import TempoReading

PULSES_A_BEAT = 24
WINDOW = 96  # pulses in the tempo's line: four beats
FIRST_FIT = 6  # pulses before a first tempo (a quarter of a beat)
REFIT = 12  # pulses after a change or a gap before a new line replaces the held tempo
REFIT_EVERY = 6  # pulses between fits while no reading asks (a flood of pulses stays cheap)
CHANGE_RUN = 6  # newest pulses that must all leave the line, on one side, for a tempo change
CHANGE_FLOOR_S = 0.003  # ... by at least this much, and CHANGE_SIGMAS robust deviations
CHANGE_SIGMAS = 4.0
OUTLIER_FLOOR_S = 0.0015  # a pulse this close to the line is never an outlier
OUTLIER_SIGMAS = 3.5
VANISH_S = 0.5  # no pulse for this long while running: the clock is gone

CLOCK, START, CONTINUE, STOP, SONG_POSITION = 0xF8, 0xFA, 0xFB, 0xFC, 0xF2


def _line(points: Sequence[tuple[int, float]]) -> tuple[float, float, float]:
    """Least squares t = t0 + slope * (n - n0) through (pulse number, time): (n0, t0, slope),
    n0 and t0 the means (centred, so large counts and times lose no precision)."""
    count = len(points)
    n0 = sum(n for n, _ in points) / count
    t0 = sum(t for _, t in points) / count
    spread = sum((n - n0) ** 2 for n, _ in points)
    if spread == 0.0:
        return n0, t0, 0.0
    return n0, t0, sum((n - n0) * (t - t0) for n, t in points) / spread


def fit_pulses(points: Sequence[tuple[int, float]]) -> tuple[float, float, float, float]:
    """A line through pulse times with the outliers left out: (n0, t0, seconds a pulse, robust
    deviation of the times off it). Outliers: further off than OUTLIER_SIGMAS deviations (the
    median absolute residual, scaled to a normal's sigma) and OUTLIER_FLOOR_S."""
    n0, t0, slope = _line(points)
    residuals = [t - t0 - slope * (n - n0) for n, t in points]
    deviation = 1.4826 * _median([abs(r) for r in residuals])
    limit = max(OUTLIER_FLOOR_S, OUTLIER_SIGMAS * deviation)
    kept = [point for point, r in zip(points, residuals) if abs(r) <= limit]
    if len(points) // 2 < len(kept) < len(points):
        n0, t0, slope = _line(kept)
    return n0, t0, slope, deviation


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


class MidiClock:
    """MIDI clock as a tempo source (control/musical_time/tempo.py's `TempoSource`)."""

    name = "midi clock"

    def __init__(self) -> None:
        self.running = True  # a clock heard before any start counts at once
        self.pulses = 0  # every pulse heard: the line's pulse numbers
        self.changes = 0  # tempo changes (and gaps) that restarted the line
        self._window: deque[tuple[int, float]] = deque(maxlen=WINDOW)
        self._fitted_at = 0  # self.pulses when the line was last fitted
        self._interval: float | None = None  # seconds a pulse: the tempo
        self._line: tuple[float, float] | None = None  # (n0, t0) of the line through _window
        self._last_pulse: float | None = None  # arrival of the last pulse
        self._last_heard: float | None = None  # ... or of start / continue, if later
        self._position = -1  # song position (pulses since beat 0) of the last pulse played
        self._next = 0  # the position the next pulse plays
        self._waiting = False  # start / continue / song position came: the next pulse plays
        self._held_beat = 0.0  # the beat while stopped or waiting; playing, the last one given
        self.bars = False  # a start or a song position said where beat 0 (a bar's first) is

    # ----- messages -----

    def handle(self, message: bytes, when: float) -> None:
        """One system message (status byte first) that arrived at `when` (seconds). Not a clock
        message, or a malformed one: ignored."""
        if not message or not math.isfinite(when):
            return
        status = message[0]
        if status == CLOCK:
            self._pulse(when)
        elif status == START:
            self._next, self._held_beat = 0, 0.0
            self.bars = True
            self._play(when)
        elif status == CONTINUE:
            if not self.running:
                self._play(when)
        elif status == STOP:
            if self.running:
                self._held_beat = self._beat(when)
                self.running = False
        elif status == SONG_POSITION and len(message) == 3 and max(message[1:]) < 0x80:
            sixteenths = message[1] | message[2] << 7
            self._next = sixteenths * PULSES_A_BEAT // 4
            self._held_beat = self._next / PULSES_A_BEAT
            self._waiting = True
            self.bars = True

    def _play(self, when: float) -> None:
        self.running, self._waiting = True, True
        self._held_beat = self._next / PULSES_A_BEAT
        self._last_heard = when

    def _pulse(self, when: float) -> None:
        previous = self._last_pulse
        if previous is not None:
            when = max(when, previous)  # stamps never go back
        gap = previous is not None and when - previous > VANISH_S
        if gap:
            if self.running and not self._waiting and self._interval is not None:
                # back after falling silent, no transport said where: on from where the held
                # tempo has taken the count (Tempo held the grid meanwhile)
                self._next = self._position + round((when - previous) / self._interval)
            self._restart()
        self.pulses += 1
        self._window.append((self.pulses, when))
        self._last_pulse = when
        self._last_heard = when if self._last_heard is None else max(self._last_heard, when)
        if self.running:
            self._position, self._next = self._next, self._next + 1
            self._waiting = False
        if self.pulses - self._fitted_at >= REFIT_EVERY:
            self._fit()

    def _restart(self) -> None:
        self._window.clear()
        self._line = None
        self.changes += 1

    # ----- tempo -----

    def _fit(self) -> None:
        """The line through the window; a tempo change first restarts it at the newest pulses."""
        self._fitted_at = self.pulses
        points = list(self._window)
        if len(points) >= REFIT + CHANGE_RUN:
            older, newest = points[:-CHANGE_RUN], points[-CHANGE_RUN:]
            n0, t0, slope, deviation = fit_pulses(older)
            limit = max(CHANGE_FLOOR_S, CHANGE_SIGMAS * deviation)
            off = [t - t0 - slope * (n - n0) for n, t in newest]
            if all(r > limit for r in off) or all(r < -limit for r in off):
                self._restart()
                self._window.extend(newest)
                points = newest
        needed = FIRST_FIT if self._interval is None else REFIT
        if len(points) < needed:
            self._line = None
            return
        n0, t0, slope, _ = fit_pulses(points)
        if slope > 0.0:
            self._interval, self._line = slope, (n0, t0)

    @property
    def bpm(self) -> float | None:
        """The tempo now (held through a stop or a silence), None before a first one."""
        if self._interval is None:
            return None
        return 60.0 / (PULSES_A_BEAT * self._interval)

    def _beat(self, now: float) -> float:
        """The beat at `now` while running: the last pulse's, on at the tempo, never below the
        last one given."""
        if self._waiting or self._position < 0 or self._interval is None:
            return self._held_beat
        at = self._last_pulse
        if self._line is not None:  # the line's time for that pulse: the jitter smoothed
            n0, t0 = self._line
            at = t0 + (self.pulses - n0) * self._interval
        beat = (self._position + max(now - at, 0.0) / self._interval) / PULSES_A_BEAT
        self._held_beat = max(beat, self._held_beat)
        return self._held_beat

    def reading(self, now: float) -> TempoReading | None:
        """The clock's tempo and beat at `now`; None before a first tempo, or while running
        with no pulse (nor start / continue) for VANISH_S."""
        if self._fitted_at != self.pulses:
            self._fit()
        bpm = self.bpm
        if bpm is None:
            return None
        confidence = min(1.0, len(self._window) / PULSES_A_BEAT)
        if not self.running:
            return TempoReading(bpm, self._held_beat, now, self.name, confidence, running=False,
                                bars=self.bars)
        if self._last_heard is None or now - self._last_heard > VANISH_S:
            return None
        return TempoReading(bpm, self._beat(now), now, self.name, confidence, bars=self.bars)

    def state(self) -> dict[str, Any]:
        """Telemetry's `midi.clock` object."""
        bpm = self.bpm
        return {"bpm": round(bpm, 3) if bpm is not None else None, "running": self.running,
                "pulses": self.pulses, "position": max(self._position, 0),
                "changes": self.changes}
