"""The song's sections live: causal, told each beat as it ends, never looking ahead.

Main thread only; pure numpy. `FormFollower.beat(start, end, features, place)` takes a beat
that has just ended (its features from audio/form/beat_features.py, in their fixed units, and
its place in the bar where the beat tracker's downbeat is followed) and answers a `Change`
when the beat two before it began a new section; the change takes effect at the first
downbeat from four beats after the section began (`at`): where the bar is counted from the
changes, the next beat after `end`. So a new section is announced about a bar after it
started, on a downbeat, and a section lasts at least MIN_BARS (the first one counted in time
from the stream's start, the tracker's first beat coming 1.5 s or more into it).

How a beat is judged as a section's first: the mean features of it and the next beat against
the section's recent past (the last four bars of it, at most), and against the straight line
through the section's bars carried on (a build keeps rising, an outro keeps fading: neither
is new); the smaller distance counts, weighted by where the beat falls on the phrase grid:
a phrase's first beat whole (phrases counted from the section's first downbeat), a bar's
1/ON_BAR, another beat 1/OFF_GRID. The bar is the tracker's where it is followed, else it is
counted from the latest section's start (no grid before the first change). Above NOVELTY,
above the beat before and near the beat after (LEAD), it is a new section.

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
from swarm_instrument.audio.form.live_grid import LiveGrid
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
        self.origin = 0  # the first beat of the bars counted from the latest change
        self.places: list[int | None] = []  # each beat's place in its bar, by the tracker
        self.bar_origin = 0  # the current section's first downbeat: its phrases count from it
        self.label = "intro"
        self.section_start = 0.0
        self.energies: list[float] = []  # each past section's mean energy
        self._bars: list[tuple[int, float]] = []  # (last beat, energy) of each bar heard
        self.drums = False  # a section with drums heard (the first is a groove, not a drop)
        self.found = False  # a section change found: the phrase grid counts from it
        self._scores: list[float] = []  # each beat's score as a section's first (see beat)

    def beat(self, start: float, end: float, features: np.ndarray,
             place: int | None = None) -> Change | None:
        """A beat from `start` to `end` (s) has ended, with these features (raw, as
        beat_features gives them) and its `place` in its bar (0 on the downbeat) from the
        beat tracker's downbeat, or None where the tracker has none (the bar is then counted
        from the latest change). The candidate is the beat two before this one: its score
        (its first two beats against the section's past) must pass NOVELTY, stand above the
        beat before it and reach LEAD of the beat after it (whose two beats end now)."""
        self.starts.append(float(start))
        self.places.append(None if place is None else int(place) % BEATS_PER_BAR)
        self.rows.append(scaled(features))
        rows = np.asarray(self.rows)
        last = len(rows) - 1
        self._scores.append(self._score(rows, last - 1))  # the score of beat last - 1
        change = None
        candidate = last - 2
        if candidate >= 1 and len(self._scores) >= 3:
            before, here, after = self._scores[-3], self._scores[-2], self._scores[-1]
            if here > NOVELTY and here > before and here >= LEAD * after:
                change = self._new_section(rows, candidate, end, end - start)
                self._scores[-1] = 0.0  # scored against the section before: no start
        if change is None and self._place(last) == BEATS_PER_BAR - 1:
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
        if self.found or self.places[first] is not None:
            weight = (1.0 / OFF_GRID if self._place(first)
                      else 1.0 if self._phrase_start(first) else 1.0 / ON_BAR)
            if self.label == "build":  # a build changes all along, and ends on a phrase
                weight = weight * DROP_DUE if weight == 1.0 else weight / IN_BUILD
        return weight * self._distance(rows, first, rows[first:first + 2].mean(axis=0))

    def _place(self, index: int) -> int:
        """Beat `index`'s place in its bar: the tracker's, else counted from the latest
        change (from the first beat heard before any)."""
        place = self.places[index]
        return (index - self.origin) % BEATS_PER_BAR if place is None else place

    def _phrase_start(self, index: int) -> bool:
        """Downbeat `index` begins a phrase: a whole number of phrases after the section's
        first downbeat (before the first change, any downbeat may)."""
        if not self.found:
            return True
        bars = (index - self.bar_origin) // BEATS_PER_BAR
        return bars % PHRASE_BARS == 0

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

    def _new_section(self, rows: np.ndarray, first: int, end: float, period: float
                     ) -> Change:
        """Section `first` begins; the show hears of it at the first downbeat from four beats
        after it (`end`, the latest beat's end, is three after it), by the tracker's bar, or
        four beats after it where the bar is counted from the changes."""
        place = self.places[first]
        wait = 1 if place is None else 1 + (-place) % BEATS_PER_BAR  # beats after `end`
        at = end + wait * period
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
        # the section's bars count from its downbeat: the nearest one by the tracker (the
        # next one from the middle of a bar)
        self.bar_origin = (first if place is None else
                           first - place if place < 2 else first + BEATS_PER_BAR - place)
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
        if bars < 2:
            return None
        loud = rows[len(rows) - bars * BEATS_PER_BAR:, NAMES.index("loud")]
        energy = loud.reshape(bars, BEATS_PER_BAR).mean(axis=1)
        slope = np.polyfit(np.arange(bars), energy, 1)[0]
        if slope * (bars - 1) >= RISE and energy[-1] - energy[0] >= RISE:
            self.label = "build"
            return Change(float(end), self.section_start, "build", relabel=True)
        return None


class LiveForm:
    """The form of a stream as it plays: every sample in order (`feed`, a source's sample
    listener: zeros for the samples it lost) through the frames (FrameStream); the beats of a
    tracker made a grid (LiveGrid); each beat handed to the follower once it has ended and its
    frames exist. `update()` once a frame gives the changes found since, their times in the
    stream's seconds (sample 0 at 0); `heard` says how far the stream is.

    The tracker is the one the show already runs (the audio source's, `tracker`, fed the same
    samples as the listeners: `follow` takes the source's current one each frame), or, given
    none, one of its own fed here (a benchmark, a test). Its beat times are taken into the
    stream's count by the difference of the two counts (the tracker may have begun before the
    form listened, or been replaced since). With `tracker_bar`, each beat's place in its bar
    comes from the tracker's latest downbeat (`bar_start`), else the follower counts bars from
    its latest change (see docs/measured.md for what each gives)."""

    KEEP_S = 8.0  # frames kept for beats not yet ended (a beat is never this long)

    def __init__(self, rate: float, tracker: BeatTracker | None = None,
                 tracker_bar: bool = False) -> None:
        self.rate = float(rate)
        self.stream = FrameStream(rate)
        self.own = tracker is None  # a tracker of its own, fed here
        self.tracker: BeatTracker | None = BeatTracker(rate) if tracker is None else tracker
        self.tracker_bar = tracker_bar
        self.grid = LiveGrid()
        self.follower = FormFollower()
        self.heard = 0  # samples so far
        self._counted = 0  # the tracker's beats already handed to the grid
        self._pending: list[tuple[float, int]] = []  # beats (start, count) not handed on
        self.downbeat: int | None = None  # the tracker's latest bar start (a beat count)
        self._times = np.zeros(0)
        self._frames = np.zeros((0, len(NAMES)))

    def follow(self, tracker: BeatTracker | None) -> None:
        """Read `tracker` from now on (the source's, which a new sample rate or a seek
        replaces, or None where it stopped); the grid carries on."""
        if tracker is not self.tracker and not self.own:
            self.tracker, self._counted, self.downbeat = tracker, 0, None

    def feed(self, samples: np.ndarray) -> None:
        self.stream.feed(samples)
        if self.own and self.tracker is not None:
            self.tracker.feed(samples)
        self.heard += len(samples)

    def update(self) -> list[Change]:
        times, frames = self.stream.take()
        if len(times):
            self._times = np.concatenate([self._times, times])
            self._frames = np.vstack([self._frames, frames])
        now = self.heard / self.rate
        reported, period = [], 0.0
        tracker = self.tracker
        if tracker is not None:
            if tracker.beats != self._counted and tracker.last_beat is not None:
                self._counted = tracker.beats
                at = (tracker.last_beat + self.heard - tracker.position) / self.rate
                reported.append((at, tracker.beats, tracker.salience))
            if tracker.bar_start is not None:
                self.downbeat = tracker.bar_start
            period = 60.0 / tracker.bpm if tracker.bpm > 0.0 else 0.0
        self._pending += self.grid.ticks(now, reported, period)
        changes = []
        newest = self._times[-1] if len(self._times) else -np.inf
        while len(self._pending) >= 2 and newest >= self._pending[1][0] + FRAME / 2 / self.rate:
            (start, count), end = self._pending.pop(0), self._pending[0][0]
            row = beat_features(self._times, self._frames, np.array([start, end]))[0]
            downbeat = self.downbeat if self.tracker_bar else None
            place = None if downbeat is None else (count - downbeat) % BEATS_PER_BAR
            change = self.follower.beat(start, end, row, place)
            if change is not None:
                changes.append(change)
        keep = self._times >= now - self.KEEP_S
        self._times, self._frames = self._times[keep], self._frames[keep]
        return changes
