"""The song's sections live: causal, told each beat as it ends, never looking ahead.

Main thread only; pure numpy. `FormFollower.beat(start, end, features)` takes a beat that has
just ended (its features from audio/form/beat_features.py, in their fixed units) and answers
a `Change` when the beat two before it began a new section; the change takes effect at the
next bar's downbeat (`at`, one beat after `end`, four beats after the section began). So a
new section is announced one bar after it started, on a downbeat, and a section lasts at
least MIN_BARS.

How a beat is judged as a section's first: the mean features of it and the next beat against
the section's recent past (the last four bars of it, at most), and against the straight line
through the section's bars carried on (a build keeps rising, an outro keeps fading: neither
is new); the smaller distance counts, weighted by where the beat falls on the phrase grid
(counted from the latest section's start; no grid before the first change): a phrase's first
beat whole, a bar's 1/ON_BAR, another beat 1/OFF_GRID. Above NOVELTY, above the beat before
and near the beat after (LEAD), it is a new section.

Labels live can only compare with what was heard, from a section's second and third beats:
the first section is the intro; one after a build, or as loud as the loudest yet and well
above the one before once drums were heard, is a drop; else one without drums is a break;
else a groove; a section whose loudness has
climbed RISE over two bars or more becomes a build (a `Change` with the same start, `relabel`
True; never a drop). The loudest yet leaves builds out (a roll's peak is no measure of a drop).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from swarm_instrument.audio.analysis.beats import BeatTracker
from swarm_instrument.audio.form.beat_features import FRAME, NAMES, FrameStream, beat_features
from swarm_instrument.audio.form.sections import (
    BEATS_PER_BAR,
    MIN_BARS,
    PHRASE_BARS,
    RISE,
    energy_of,
    scaled,
)

NOVELTY = 1.2  # units: a bar this far from what the section led to expect starts a new one
ON_BAR = 1.3
OFF_GRID = 2.0
PAST_BARS = 4  # the past a bar is compared with
LOUDEST_MARGIN = 0.5  # units: "as loud as the loudest yet"
DROP_STEP = 1.0  # units above the section before: a drop
DRUMS_LIVE = 1.0  # dB of punch in a section's first beats: drums (a break's piano reads 0.6)
# A section's first beat scores about as high as the next (both windows hold new sound only),
# the beat before it half as high (a release tail of what went before can hold the first
# one down a little): the earlier of two near-equal scores is the start.
LEAD = 0.65
IN_BUILD = 3.0  # in a build, a change off the phrase grid needs this much more
DROP_DUE = 1.5  # ... and one on it this much less: the drop is due there


@dataclass(frozen=True)
class Change:
    """A new section (or a section found to be a build): it began at `start` (s), the show
    hears of it at `at` (s, a downbeat), `label` says what it is."""

    at: float
    start: float
    label: str
    relabel: bool = False


class FormFollower:
    """Follows the sections of a stream beat by beat (see the module's docstring)."""

    def __init__(self) -> None:
        self.starts: list[float] = []  # each beat's start (s)
        self.rows: list[np.ndarray] = []  # each beat's features, in units
        self.section = 0  # the first beat of the current section
        self.origin = 0  # the phrase grid's first beat
        self.label = "intro"
        self.section_start = 0.0
        self.energies: list[float] = []  # each past section's mean energy
        self._bars: list[tuple[int, float]] = []  # (last beat, energy) of each bar heard
        self.drums = False  # a section with drums heard (the first is a groove, not a drop)
        self.found = False  # a section change found: the phrase grid counts from it
        self._scores: list[float] = []  # each beat's score as a section's first (see beat)

    def beat(self, start: float, end: float, features: np.ndarray) -> Change | None:
        """A beat from `start` to `end` (s) has ended, with these features (raw, as
        beat_features gives them). The candidate is the beat two before this one: its
        score (its first two beats against the section's past) must pass NOVELTY, stand above
        the beat before it and reach LEAD of the beat after it (whose two beats end now)."""
        self.starts.append(float(start))
        self.rows.append(scaled(features))
        rows = np.asarray(self.rows)
        last = len(rows) - 1
        self._scores.append(self._score(rows, last - 1))  # the score of beat last - 1
        change = None
        candidate = last - 2
        if candidate >= 1 and len(self._scores) >= 3:
            before, here, after = self._scores[-3], self._scores[-2], self._scores[-1]
            if here > NOVELTY and here > before and here >= LEAD * after:
                change = self._new_section(rows, candidate, end + (end - start))
                self._scores[-1] = 0.0  # scored against the section before: no start
        if change is None and (last + 1 - self.origin) % BEATS_PER_BAR == 0:
            change = self._maybe_build(rows, end)
        if last + 1 >= BEATS_PER_BAR and self.label != "build":
            self._bars.append((last, float(energy_of(rows[-BEATS_PER_BAR:].mean(0)))))
        return change

    def _score(self, rows: np.ndarray, first: int) -> float:
        """Beats `first` and `first + 1` against the section's past, weighted by where
        `first` falls on the phrase grid (no grid before the first section change: the
        first beat heard need not be a downbeat). 0 within MIN_BARS of the section's start:
        the first section's counted in time from the stream's start, as the tracker's first
        beat comes 1.5 s or more into it."""
        if first < 0 or first + 1 >= len(rows) or self._too_soon(first):
            return 0.0
        weight = 1.0
        if self.found:
            place = (first - self.origin) % BEATS_PER_BAR
            weight = (1.0 if (first - self.origin) % (BEATS_PER_BAR * PHRASE_BARS) == 0
                      else 1.0 / ON_BAR if place == 0 else 1.0 / OFF_GRID)
            if self.label == "build":  # a build changes all along, and ends on a phrase
                weight = weight * DROP_DUE if weight == 1.0 else weight / IN_BUILD
        return weight * self._distance(rows, first, rows[first:first + 2].mean(axis=0))

    def _too_soon(self, first: int) -> bool:
        """Beat `first` is within MIN_BARS of the current section's start."""
        beats = MIN_BARS * BEATS_PER_BAR
        if self.found:
            return first - self.section < beats
        period = float(np.median(np.diff(self.starts[-9:])))
        return self.starts[first] < (beats - 0.5) * period

    def _distance(self, rows: np.ndarray, first: int, new: np.ndarray) -> float:
        """`new` (beats first and first + 1) against the same two beats of each bar of the
        section's recent past (a hip-hop bar's halves differ: the pattern is no change),
        flat and along its trend."""
        bars = min(PAST_BARS, (first - self.section) // BEATS_PER_BAR)
        if bars < 1:
            return 0.0
        past = np.array([rows[first - BEATS_PER_BAR * k:first - BEATS_PER_BAR * k + 2]
                         .mean(axis=0) for k in range(bars, 0, -1)])
        flat = float(np.sqrt(np.mean((new - past.mean(axis=0)) ** 2)))
        if bars < 3:
            return flat
        x = np.column_stack([np.ones(bars), np.arange(bars)])
        coef = np.linalg.lstsq(x, past, rcond=None)[0]
        expected = coef[0] + coef[1] * bars
        return min(flat, float(np.sqrt(np.mean((new - expected) ** 2))))

    def _new_section(self, rows: np.ndarray, first: int, at: float) -> Change:
        # its second and third beats: the first may still ring with what went before (or be
        # the last of it, where the start was found a beat early)
        bar = rows[first + 1:first + BEATS_PER_BAR - 1].mean(axis=0)
        energy = float(energy_of(bar))
        self.energies.append(float(energy_of(rows[self.section:first]).mean()))
        punch = bar[NAMES.index("punch")] * 1.0  # punch's unit is 1 dB
        before = self.energies[-1]
        # the loudest bar heard before this section (its own first beats are no yardstick)
        loudest = max((e for end, e in self._bars if end < first), default=-np.inf)
        if self.label == "build" or (self.drums and energy >= loudest - LOUDEST_MARGIN
                                     and energy > before + DROP_STEP):
            label = "drop"
        elif punch < DRUMS_LIVE:
            label = "break"
        else:
            label = "groove"
        self.drums = self.drums or punch >= DRUMS_LIVE
        self.section = self.origin = first
        self.found = True
        self.label = label
        self.section_start = self.starts[first]
        return Change(float(at), self.section_start, label)

    def _maybe_build(self, rows: np.ndarray, end: float) -> Change | None:
        """The section's loudness has climbed RISE over two bars or more: a build."""
        if self.label in ("build", "drop"):  # a drop does not become a build
            return None
        count = len(rows) - self.section
        bars = count // BEATS_PER_BAR
        if bars < 2 or (len(rows) - self.origin) % BEATS_PER_BAR:
            return None
        loud = rows[len(rows) - bars * BEATS_PER_BAR:, NAMES.index("loud")]
        energy = loud.reshape(bars, BEATS_PER_BAR).mean(axis=1)
        slope = np.polyfit(np.arange(bars), energy, 1)[0]
        if slope * (bars - 1) >= RISE and energy[-1] - energy[0] >= RISE:
            self.label = "build"
            return Change(float(end), self.section_start, "build", relabel=True)
        return None


class LiveGrid:
    """A live beat grid from a tracker's beats as they come: a beat closer than STRAY of a
    period to the one before is a stray and left out (an off-beat ghost would halve the
    grid); the period follows intervals within 25 % of it; a gap longer than FILL periods (a
    break without drums) is filled at the period, as the time passes. A filled beat is a
    guess: the tracker's next beat counts however close to it it comes (the grid takes the
    tracker's phase back), else a fill a third of a beat off the music, whose next real beat
    came too soon after it and was left out as a stray, kept the grid there by filling on
    (hip-hop's whole groove was heard 0.35 beat late). `ticks(now, reported)` hands out each
    beat start known by `now`, in order."""

    STRAY = 0.75
    # The tracker places a beat up to 1.5 periods after the last one and reports it a little
    # later (beats.py): a gap is longer than that.
    FILL = 2.0

    def __init__(self) -> None:
        self.last: float | None = None
        self.period: float | None = None
        self.filled = False  # the last beat handed out was filled in, not the tracker's

    def ticks(self, now: float, reported: list[float]) -> list[float]:
        out = []
        for beat in sorted(reported):
            out += self._fill(beat)
            if self.last is not None:
                interval = beat - self.last
                if interval <= 0.0:
                    continue
                if self.period is None:
                    self.period = interval
                elif interval < self.STRAY * self.period and not self.filled:
                    continue
                elif abs(interval / self.period - 1.0) < 0.25:
                    self.period += 0.2 * (interval - self.period)
            self.last, self.filled = beat, False
            out.append(beat)
        out += self._fill(now)
        return out

    def _fill(self, until: float) -> list[float]:
        out = []
        while (self.last is not None and self.period
               and until - self.last > self.FILL * self.period):
            self.last += self.period
            self.filled = True
            out.append(self.last)
        return out


class LiveForm:
    """The form of a stream as it plays: every sample in order (`feed`, a source's sample
    listener: zeros for the samples it lost) through the frames (FrameStream) and a beat
    tracker of its own, the beats made a grid (LiveGrid), each beat handed to the follower
    once it has ended and its frames exist. `update()` once a frame gives the changes found
    since, their times in the stream's seconds (sample 0 at 0); `heard` says how far the
    stream is."""

    KEEP_S = 8.0  # frames kept for beats not yet ended (a beat is never this long)

    def __init__(self, rate: float) -> None:
        self.rate = float(rate)
        self.stream = FrameStream(rate)
        self.tracker = BeatTracker(rate)
        self.grid = LiveGrid()
        self.follower = FormFollower()
        self.heard = 0  # samples so far
        self._counted = 0  # the tracker's beats already handed to the grid
        self._pending: list[float] = []  # beat starts not yet handed on
        self._times = np.zeros(0)
        self._frames = np.zeros((0, len(NAMES)))

    def feed(self, samples: np.ndarray) -> None:
        self.stream.feed(samples)
        self.tracker.feed(samples)
        self.heard += len(samples)

    def update(self) -> list[Change]:
        times, frames = self.stream.take()
        if len(times):
            self._times = np.concatenate([self._times, times])
            self._frames = np.vstack([self._frames, frames])
        reported = []
        tracker = self.tracker
        if tracker.beats != self._counted and tracker.last_beat:
            self._counted = tracker.beats
            reported.append(tracker.last_beat / self.rate)
        if tracker.bpm > 0.0:
            # the tracker's own tempo: the intervals of its first beats (the count rising
            # towards the first) would set a wrong period the grid then followed for bars
            self.grid.period = 60.0 / tracker.bpm
        now = self.heard / self.rate
        self._pending += self.grid.ticks(now, reported)
        changes = []
        newest = self._times[-1] if len(self._times) else -np.inf
        while len(self._pending) >= 2 and newest >= self._pending[1] + FRAME / 2 / self.rate:
            start, end = self._pending.pop(0), self._pending[0]
            row = beat_features(self._times, self._frames, np.array([start, end]))[0]
            change = self.follower.beat(start, end, row)
            if change is not None:
                changes.append(change)
        keep = self._times >= now - self.KEEP_S
        self._times, self._frames = self._times[keep], self._frames[keep]
        return changes
