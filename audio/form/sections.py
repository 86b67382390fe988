"""A whole song's sections, offline (a render may look ahead): where each starts, on the
phrase grid, and what it is (intro, groove, build, drop, break, outro).

Pure numpy; main thread only. The song arrives as a steady beat grid and each beat's features
(audio/form/beat_features.py, in fixed units: 3 dB a unit). How:

1. novelty a beat: the distance between the mean features of the two bars after it and the
   two bars before it (a checkerboard on beat-synchronous features, as Foote's segmentation
   but with a diagonal kernel: every change of texture shows, however long the sections);
2. the bar's first beat is the phase (of four) where novelty's peaks add up most: sections
   start on downbeats; the phrase (four bars) likewise among bar starts;
3. boundaries are picked greedily among novelty's peaks, strongest first, above NOVELTY
   units, a phrase grid start preferred (a bar start needs ON_BAR times more, another beat
   OFF_GRID times), none within CLOSEST_BARS of another;
4. two neighbours that one straight line explains (an outro's fade) or that both rise (a
   build cut where its roll doubles) are one section; then a section shorter than MIN_BARS
   joins the neighbour it makes the straighter whole with;
5. labels by each section's energy against the song's (loudness, flux, punch and the high
   bands) and its rise in loudness: the loudest are drops, a rise that leads into something
   louder a build, a quiet start an intro, a quiet end an outro; in the middle, no drums is
   a break and drums a groove.

No library does this here: librosa's segmentation (agglomerative or Laplacian) was not tried,
being a large dependency for an optional path; this stays numpy alone and is measured by
benchmarks/bench_form.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from swarm_instrument.audio.form.beat_features import NAMES, SCALES

LABELS = ("intro", "groove", "build", "drop", "break", "outro")
BEATS_PER_BAR = 4
PHRASE_BARS = 4
WINDOW_BEATS = 8  # each side of the novelty kernel: two bars
NOVELTY = 1.0  # units (3 dB a unit): a boundary's least novelty on the phrase grid
ON_BAR = 1.3  # a boundary on a bar start off the phrase grid needs this much more
OFF_GRID = 2.0  # ... and one off the bar starts this much
MIN_BARS = 4  # no section shorter (a phrase)
CLOSEST_BARS = 2  # candidates this close are one change (before merging and MIN_BARS)
STRAIGHT = 0.6  # units: two neighbours a line fits this well are one section
RISING_STRAIGHT = 1.5  # ... or this well when both rise (a build whose roll doubles)
JUMP = 2.5  # ... unless fitted apart they leave this many times less: a step between them
RISE = 2.0  # units over a section: a build's rise in loudness (6 dB)
DRUMS_DB = 0.5  # a section whose mean punch is under this has no drums to speak of
ENERGY = {"loud": 0.5, "flux": 1.0, "punch": 0.5, "high": 0.5, "air": 0.5}  # what "energy" weighs


@dataclass(frozen=True)
class Section:
    """One section: its start and end (s), first beat (index in the grid), bars, label,
    energy (0..1 within the song) and rise (units of loudness from its start to its end)."""

    start: float
    end: float
    beat: int
    bars: int
    label: str
    energy: float
    rise: float


def scaled(features: np.ndarray) -> np.ndarray:
    """Features in units (fixed scales, so a song without sections reads flat)."""
    return np.asarray(features, float) / SCALES


def energy_of(units: np.ndarray) -> np.ndarray:
    """One energy number a row of scaled features: the weighted sum of ENERGY's features."""
    weights = np.zeros(len(NAMES))
    for name, weight in ENERGY.items():
        weights[NAMES.index(name)] = weight
    return units @ weights / weights.sum()


def novelty(units: np.ndarray, window: int = WINDOW_BEATS) -> np.ndarray:
    """For each beat, how far the mean of the `window` beats from it lies from the mean of
    the `window` beats before it (RMS over features, units). Near the ends, the windows
    shrink to what there is (at least one bar)."""
    count = len(units)
    sums = np.vstack([np.zeros(units.shape[1]), np.cumsum(units, axis=0)])
    out = np.zeros(count)
    for beat in range(BEATS_PER_BAR, count - BEATS_PER_BAR + 1):
        width = min(window, beat, count - beat)
        before = (sums[beat] - sums[beat - width]) / width
        after = (sums[beat + width] - sums[beat]) / width
        out[beat] = float(np.sqrt(np.mean((after - before) ** 2)))
    return out


def best_phase(values: np.ndarray, period: int) -> int:
    """The phase (0..period-1) where the peaks of `values` (each at least its neighbours)
    add up most: a change's novelty rises and falls over a window either side of it, only
    its peak says where it is."""
    padded = np.concatenate([[-np.inf], values, [-np.inf]])
    peaks = (values >= padded[:-2]) & (values >= padded[2:])
    votes = np.where(peaks, values, 0.0) ** 2  # the clear changes decide
    totals = [votes[phase::period].sum() for phase in range(period)]
    return int(np.argmax(totals))


def boundaries(units: np.ndarray) -> tuple[list[int], int]:
    """The first beat of every section but the first, and the bar's phase (beat 0..3).
    Novelty on the phrase grid counts whole, on a bar start 1/ON_BAR, off the bars
    1/OFF_GRID; the candidates are the peaks of that (within a beat either side)."""
    curve = novelty(units)
    count = len(units)
    bar = best_phase(curve, BEATS_PER_BAR)
    starts = np.arange(bar, count, BEATS_PER_BAR)
    phrase = bar + BEATS_PER_BAR * best_phase(curve[starts], PHRASE_BARS)
    weights = np.full(count, 1.0 / OFF_GRID)
    weights[bar::BEATS_PER_BAR] = 1.0 / ON_BAR
    weights[phrase % (BEATS_PER_BAR * PHRASE_BARS)::BEATS_PER_BAR * PHRASE_BARS] = 1.0
    weighted = curve * weights
    scores = [(weighted[beat], beat) for beat in range(1, count - 1)
              if weighted[beat] >= weighted[beat - 1] and weighted[beat] >= weighted[beat + 1]]
    chosen: list[int] = []
    span = CLOSEST_BARS * BEATS_PER_BAR
    for score, beat in sorted(scores, reverse=True):
        if score < NOVELTY:
            break
        if beat < 2 * BEATS_PER_BAR or count - beat < 2 * BEATS_PER_BAR:
            continue  # a change in the first or last two bars is the song starting or ending
        if all(abs(beat - other) >= span for other in chosen):
            chosen.append(int(beat))
    return sorted(chosen), bar


def at_least_a_phrase(units: np.ndarray, starts: list[int]) -> list[int]:
    """Section starts less those that leave a section shorter than MIN_BARS: a short section
    joins the neighbour with which it makes the straighter whole (a build's quiet first bars
    join the rest of the build, not the groove before it)."""
    starts = list(starts)
    while True:
        edges = [0, *starts, len(units)]
        short = [k for k in range(len(edges) - 1)
                 if edges[k + 1] - edges[k] < MIN_BARS * BEATS_PER_BAR]
        if not short or not starts:
            return starts
        k = short[0]
        options = []  # (residual of the joined block, the start that goes)
        if k > 0:
            options.append((_line_residual(units[edges[k - 1]:edges[k + 1]]), edges[k]))
        if k + 1 < len(edges) - 1:
            options.append((_line_residual(units[edges[k]:edges[k + 2]]), edges[k + 1]))
        starts.remove(min(options)[1])


def merge_straight(units: np.ndarray, starts: list[int]) -> list[int]:
    """Section starts less those between two sections that are one: a straight line explains
    both (each feature linear in time, RMS residual under STRAIGHT units: an outro's fade),
    or both rise and a line fits them less well (under RISING_STRAIGHT: a build cut where its
    roll doubles); never where the two fitted apart leave JUMP times less (a step, however
    small next to a line through both, is a change); the weakest first."""
    starts = list(starts)
    loud = units[:, NAMES.index("loud")]
    while True:
        edges = [0, *starts, len(units)]
        worst, where = math.inf, None
        for k in range(1, len(edges) - 1):
            first, middle, last = edges[k - 1], edges[k], edges[k + 1]
            joined = _line_residual(units[first:last])
            apart = math.sqrt((_line_residual(units[first:middle]) ** 2 * (middle - first)
                               + _line_residual(units[middle:last]) ** 2 * (last - middle))
                              / (last - first))
            rising = (_rise(loud[first:middle]) >= RISE / 2
                      and _rise(loud[middle:last]) >= RISE / 2)
            one = joined < (RISING_STRAIGHT if rising else STRAIGHT) and joined < JUMP * apart
            if one and joined < worst:
                worst, where = joined, k - 1
        if where is None:
            return starts
        del starts[where]


def _line_residual(block: np.ndarray) -> float:
    """RMS (units) of what a straight line in time per feature leaves of `block`, its rows
    averaged a bar at a time first (a groove's beat-to-beat pattern is not a departure)."""
    bars = len(block) // BEATS_PER_BAR
    if bars < 3:
        return np.inf
    rows = block[:bars * BEATS_PER_BAR].reshape(bars, BEATS_PER_BAR, -1).mean(axis=1)
    x = np.column_stack([np.ones(bars), np.arange(bars)])
    fitted = x @ np.linalg.lstsq(x, rows, rcond=None)[0]
    return float(np.sqrt(np.mean((rows - fitted) ** 2)))


def label_sections(energies: list[float], rises: list[float], punches: list[float]
                   ) -> list[str]:
    """Labels from each section's mean energy (units), its rise (loudness, units over it)
    and its punch (dB: drums or not). By energy against the song's range: the loudest are drops, a
    rise into something louder a build, a quiet start an intro, a quiet end an outro; in the
    middle, no drums is a break and drums a groove."""
    count = len(energies)
    if count == 0:
        return []
    low, high = min(energies), max(energies)
    spread = high - low
    relative = [(e - low) / spread if spread > 1.0 else 0.5 for e in energies]
    labels = []
    for k, (level, rise, punch) in enumerate(zip(relative, rises, punches)):
        after = energies[k + 1] if k + 1 < count else -np.inf
        if rise >= RISE and after > energies[k]:
            labels.append("build")
        elif spread > 1.0 and level >= 0.75:
            labels.append("drop")
        elif k == 0 and level < 0.6 and count > 1:
            labels.append("intro")
        elif k == count - 1 and level < 0.6 and count > 1:
            labels.append("outro")
        elif punch < DRUMS_DB:
            labels.append("break")
        else:
            labels.append("groove")
    return labels


def find_sections(beats: np.ndarray, features: np.ndarray, duration: float) -> list[Section]:
    """The song's sections from its steady beat grid (s) and each beat's features."""
    beats = np.asarray(beats, float)
    if len(beats) < 2 * BEATS_PER_BAR:
        return [Section(0.0, duration, 0, len(beats) // BEATS_PER_BAR, "groove", 0.5, 0.0)]
    units = scaled(features)
    starts, _ = boundaries(units)
    starts = merge_straight(units, starts)
    starts = merge_straight(units, at_least_a_phrase(units, starts))  # joined: judge again
    edges = [0, *starts, len(beats)]
    energy = energy_of(units)
    punch = features[:, NAMES.index("punch")]
    energies, rises, punches = [], [], []
    for first, last in zip(edges[:-1], edges[1:]):
        energies.append(float(energy[first:last].mean()))
        rises.append(_rise(units[first:last, NAMES.index("loud")]))
        punches.append(float(punch[first:last].mean()))
    labels = label_sections(energies, rises, punches)
    low, high = min(energies), max(energies)
    sections = []
    for k, (first, last) in enumerate(zip(edges[:-1], edges[1:])):
        start = 0.0 if k == 0 else float(beats[first])
        end = duration if last >= len(beats) else float(beats[last])
        relative = (energies[k] - low) / (high - low) if high > low else 0.5
        sections.append(Section(start, end, first, (last - first) // BEATS_PER_BAR, labels[k],
                                round(relative, 3), round(rises[k], 3)))
    return sections


def _rise(values: np.ndarray) -> float:
    """How much a straight line through `values` climbs from the first to the last."""
    if len(values) < 2:
        return 0.0
    slope = np.polyfit(np.arange(len(values)), values, 1)[0]
    return float(slope * (len(values) - 1))
