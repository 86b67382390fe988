"""Musical time: the tempo and where the beat is, from whichever clock leads.

Each clock is a `TempoSource` (Ableton Link, MIDI clock, tap, the audio's beat tracker) that
gives a `TempoReading` for a moment `now` (the loop's time, seconds), or None when it has
nothing to say. `Tempo` picks one a frame by priority (Link, then MIDI clock, then tap, then the
tracker) unless the performer chose one, and holds the last tempo and the beat grid going when
every clock falls silent (a MIDI clock that stops, a Link session that goes, silence), saying
where it comes from. Beats are counted from the source's origin; `phase` is the position in the
beat (0..1) and the bar is 4 beats (4/4), its first beat movable by the performer (`downbeat`).

Pure: no device, no thread; the main thread calls `update(now)` once a frame.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Protocol

PRIORITY = ("link", "midi clock", "tap", "audio")
BEATS_A_BAR = 4
MIN_BPM, MAX_BPM = 20.0, 400.0
TAPS = 4  # taps that set the tempo and the phase
TAP_TIMEOUT_S = 2.0  # a gap longer than this starts a new series of taps
DEFAULT_BPM = 120.0
JUMP_BEATS = 0.5  # a clock this far off the running count jumped: the count is anchored again


@dataclass(frozen=True)
class TempoReading:
    """A clock's view at time `at`: `bpm`, and `beat`, the beats counted since its origin at
    that moment (the phase is beat % 1). `confidence` 0..1; `running` False for a clock that
    is stopped (MIDI stop): its tempo holds, its beats do not move. `bars` True for a clock that
    knows where the bar is: its beat 0 starts a bar (Link's quantum, a DAW's start or song
    position), so the show's bars follow it instead of the performer's downbeat. `bar_start`: a
    beat count of the clock's that the music marks as a bar's first (the audio's kick on one);
    taken when it first comes and whenever it moves, so the performer's downbeat (D) stands
    until the music says otherwise."""

    bpm: float
    beat: float
    at: float
    source: str
    confidence: float = 1.0
    running: bool = True
    bars: bool = False
    bar_start: float | None = None

    def beat_at(self, now: float) -> float:
        """The beat count at `now`, extrapolated at this tempo."""
        if not self.running:
            return self.beat
        return self.beat + (now - self.at) * self.bpm / 60.0


class TempoSource(Protocol):
    name: str

    def reading(self, now: float) -> TempoReading | None: ...


class TapTempo:
    """Tap tempo: the key T, a MIDI note, OSC /swarm/tap. Four taps (at most TAP_TIMEOUT_S
    apart) set the tempo (from their mean interval) and the phase (the last tap is a beat);
    more taps refine it over the last four."""

    name = "tap"

    def __init__(self) -> None:
        self._taps: deque[float] = deque(maxlen=TAPS)
        self._reading: TempoReading | None = None

    def tap(self, now: float) -> None:
        if self._taps and now - self._taps[-1] > TAP_TIMEOUT_S:
            self._taps.clear()
        if self._taps and now <= self._taps[-1]:
            return  # the same moment twice (a key repeat): not a tap
        self._taps.append(now)
        if len(self._taps) == TAPS:
            interval = (self._taps[-1] - self._taps[0]) / (TAPS - 1)
            bpm = 60.0 / interval
            if MIN_BPM <= bpm <= MAX_BPM:
                beat = 0.0 if self._reading is None else round(self._reading.beat_at(now))
                self._reading = TempoReading(bpm, beat, now, self.name)

    def set_tempo(self, bpm: float, now: float) -> None:
        """A tempo from a knob (the `bpm` parameter): taken at once, the beat grid kept where
        it is (a first one starts on a beat now)."""
        if not MIN_BPM <= bpm <= MAX_BPM:
            return
        beat = 0.0 if self._reading is None else self._reading.beat_at(now)
        self._reading = TempoReading(bpm, beat, now, self.name)

    @property
    def taps(self) -> int:
        return len(self._taps)

    def reading(self, now: float) -> TempoReading | None:
        return self._reading


class Tempo:
    """The show's musical time: `update(now)` once a frame picks the leading clock; then `bpm`,
    `beat` (beats since the start of counting), `phase`, `bar_phase`, `source`, `beats` (whole
    beats so far) and `confidence` describe this frame, and `crossed_beat` / `crossed_bar` say
    whether a beat / a bar began since the last frame (quantised actions wait for them)."""

    def __init__(self, sources: list[TempoSource] = (), chosen: str | None = None) -> None:
        self.sources: dict[str, TempoSource] = {s.name: s for s in sources}
        self.chosen = chosen  # the performer's choice of source, else by PRIORITY
        self.bpm = DEFAULT_BPM
        self.source = "none"
        self.confidence = 0.0
        self.held = True  # no clock speaks: the last tempo and grid go on
        self._reading: TempoReading | None = None
        self._offset = 0.0  # beats added to the source's count (downbeat, source changes)
        self._downbeat = 0.0  # the beat count that starts a bar
        self._bar_place: float | None = None  # the clock's bar start (mod 4) last taken
        self.beat = 0.0
        self._last_beat = 0.0
        self.crossed_beat = False
        self.crossed_bar = False
        self._now: float | None = None  # the last update's time

    def add(self, source: TempoSource) -> None:
        self.sources[source.name] = source

    def update(self, now: float) -> None:
        reading, name = None, "none"
        order = ([self.chosen] if self.chosen else []) + [n for n in PRIORITY if n != self.chosen]
        for name in order:
            source = self.sources.get(name)
            reading = source.reading(now) if source is not None else None
            if reading is not None and MIN_BPM <= reading.bpm <= MAX_BPM \
                    and math.isfinite(reading.beat):
                break
            reading = None
        previous = self.beat
        if reading is not None:
            theirs = reading.beat_at(now)
            expected = previous + self._elapsed(now) * self.bpm / 60.0
            if self._reading is None:
                self._offset = -math.floor(theirs)  # the count starts on a beat
            elif reading.source != self._reading.source \
                    or abs(theirs + self._offset - expected) > JUMP_BEATS:
                # a new clock leads, or the clock jumped (a DAW's start, a song position, a
                # Link session joined): counting goes on from where it would be now, on the
                # clock's grid, never back
                self._offset = round(expected - theirs)
                if theirs + self._offset < previous:
                    self._offset += 1
            if reading.bars and reading.running:
                self._downbeat = self._offset  # the clock's beat 0 starts a bar
            elif reading.bar_start is not None:
                place = reading.bar_start % BEATS_A_BAR
                if place != self._bar_place:  # new, or moved: the music's bar is taken
                    self._bar_place = place
                    self._downbeat = reading.bar_start + self._offset
            self._reading = reading
            self.bpm, self.source, self.confidence = reading.bpm, reading.source, \
                reading.confidence
            self.held = False
            self.beat = theirs + self._offset
        else:  # nobody speaks: the last tempo and grid go on from the last frame
            self.held = True
            self.confidence = 0.0
            self.beat = previous + self._elapsed(now) * self.bpm / 60.0
        self._now = now
        self.crossed_beat = math.floor(self.beat) > math.floor(previous)
        self.crossed_bar = math.floor(self.bar) > math.floor(self.bar_at(previous))

    @property
    def read_at(self) -> float | None:
        """The time (perf_counter's) this frame's beat, phases and tempo were read: the frame's
        start; None before the first update."""
        return self._now

    def _elapsed(self, now: float) -> float:
        return 0.0 if self._now is None else max(now - self._now, 0.0)

    def downbeat(self) -> None:
        """The performer marks this beat as the first of the bar (the tracker cannot know; a
        clock that knows the bar, `bars`, sets it again at its next reading)."""
        self._downbeat = math.floor(self.beat + 0.5)

    @property
    def bar_from_clock(self) -> bool:
        """The leading clock says where the bar is (Link, a DAW's start or song position)."""
        return not self.held and self._reading is not None and self._reading.bars

    def bar_at(self, beat: float) -> float:
        return (beat - self._downbeat) / BEATS_A_BAR

    @property
    def bar(self) -> float:
        """Bars since the downbeat (4/4): the fraction is the position in the bar."""
        return self.bar_at(self.beat)

    @property
    def phase(self) -> float:
        """Position in the beat, 0..1."""
        return self.beat % 1.0

    @property
    def bar_phase(self) -> float:
        return self.bar % 1.0

    @property
    def beats(self) -> int:
        return math.floor(self.beat)

    def state(self) -> dict:
        """Telemetry's `tempo` object."""
        return {"bpm": round(self.bpm, 3), "phase": round(self.phase, 4),
                "bar_phase": round(self.bar_phase, 4), "source": self.source,
                "held": self.held, "bar_from_clock": self.bar_from_clock, "beats": self.beats,
                "confidence": round(self.confidence, 3)}
