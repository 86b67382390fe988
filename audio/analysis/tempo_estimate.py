"""The beat period from the last few seconds of onset strength: which tempo, at which level.
Pure numpy; the beat tracker (beats.py) calls it a few times a second on the main thread.

Three steps, each chosen by measurement on the benchmark's songs (benchmarks/music/gm_songs.py):
1. The family: the strongest Fourier component of the onset strength between 40 and 360 BPM
   (a Fourier tempogram), with the components at its half and quarter added. A pattern that
   repeats every beat or bar has components only at whole multiples of the bar's frequency,
   so the peak is the beat, the half-bar or the eighths (or sixteenths), never 2/3 or 3/2 of
   the beat, where an autocorrelation peaks as often (a drum and bass two-step read at 116 for
   174, house at 83 for 124). It is read from every band with the kick weighed up (techno's
   syncopated rim and bass otherwise put it at 8/3 of the beat). In the first seconds, where a
   tempogram's peaks are 40-80 BPM wide, the tracker has it read from the high bands' pulse
   instead (`folded_family`: the autocorrelation's lags of a period and its octaves summed).
2. The level: the family's binary relatives (x 2^k) inside the performer's tempo range. From the
   fastest, the next slower one is taken while its pulses are clearly more accented than the
   faster one's: `accent` (the best-phase mean of the onset strength on a grid, over its mean)
   grows by more than LEVEL_STEP (1.25) from eighths to beats where the beats carry the kick and
   snare and the off-beats only hats (measured 1.34 to 1.50), and by less where the kick and
   snare alternate on the beats (1.03 to 1.17: the beat is not half as fast). Where off-beat
   hats are nearly as strong as the beats in onset strength (a spectral flux compressed in
   log: a soft hat rises as far as a loud snare), that gain misses (1.0-1.25 for a straight
   hip-hop beat at 90 read at 180, as for punk at 180); the pulses' loudness does not:
   every other pulse of the faster level much softer (`alternation`: hats between a kick and
   a snare) also takes the slower level. Measured by the tracker on the suite's synthesised
   hip-hop, ballad and drum loop: 7.7-18 dB; where a kick and a snare alternate: punk 0.3-2.9,
   drum and bass's two-step 2.5-6.8 synthesised, 4.6-7.6 General MIDI (8.5 once in its first
   4 s). LOUD_STEP is 8 dB, LOUD_HYSTERESIS 0.5 around the level in use: a margin of under
   1 dB each side, so a louder two-step could read at half time. Not below 60 BPM, where a
   two-step's empty third beat alternates too.
3. The period to a fraction of a hop: the autocorrelation's comb over four beats, near it.
"""

from __future__ import annotations

import math

import numpy as np

FAMILY_BPM = (40.0, 360.0)
MARGIN = 1.03  # a level this close outside the range counts as inside (180.4 for 180)
GRID_BPM = 1.0  # the tempogram's step; refined by the autocorrelation
LEVEL_STEP = 1.25  # accent gained a level up that makes the slower level the beat
LOUD_STEP = 8.0  # dB between the two halves of a level's pulses that makes the slower the beat
LOUD_HYSTERESIS = 0.5  # ... less (or more) of it to leave the level in use
LOUD_SLOWEST = 60.0  # BPM: no slower level is taken on loudness alone
FOLD_STEPS = 240  # periods tried over the octave (0.3 % apart)
FOLD_SHORTEST_S, FOLD_LONGEST = 0.1, 0.8  # lags read: from 0.1 s to 0.8 of the signal
FOLD_MEMORY = 0.5  # each window's scores weigh this much of the last ones': a crash masking
# the hats for a window (rock's first 2 s read 160 for 120) does not move the tempo
SWITCH = 1.15  # another tempo must stand this much above the one in use
HYSTERESIS = 0.08  # ... less (or more) of it to leave the level in use


def prepare(envelope: np.ndarray) -> np.ndarray:
    """Onset strength above its local mean (16 hops): steady noise and slow swells removed."""
    local = np.convolve(envelope, np.ones(16) / 16.0, "same")
    return np.maximum(envelope - local, 0.0)


class TempoEstimator:
    """Holds the tempogram's basis for one hop rate and window length."""

    def __init__(self, fps: float, window: int) -> None:
        self.fps = fps
        self.window = window  # hops: the longest signal asked about
        self.bpms = np.arange(FAMILY_BPM[0], FAMILY_BPM[1] + GRID_BPM, GRID_BPM)
        angle = 2 * np.pi * np.outer(self.bpms / 60.0, np.arange(window) / fps)
        # cosines and sines, made once: a shorter signal uses their first columns (only the
        # magnitude is read, so where time starts does not matter)
        self._basis = np.ascontiguousarray(
            np.vstack([np.cos(angle), np.sin(angle)]).astype(np.float32))
        self._hann: dict[int, np.ndarray] = {}
        self._folded: np.ndarray | None = None  # the folded scores so far, smoothed

    def _tempogram(self, signal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        size = min(len(signal), self.window)
        signal = signal[-size:]
        if size not in self._hann:  # one kept: the window's length is steady once it is full
            self._hann = {size: np.hanning(size).astype(np.float32)}
        hann = self._hann[size]
        parts = self._basis[:, :size] @ (signal * hann).astype(np.float32)
        count = len(self.bpms)
        return self.bpms, np.hypot(parts[:count], parts[count:])

    def family(self, signal: np.ndarray, current: float | None = None) -> tuple[float, float]:
        """(bpm, strength): the tempogram's peak, with its half and quarter added (the beat
        under eighths or sixteenths is there; a syncopated figure's 8/3 of the beat has
        nothing under it), interpolated between grid points; and its height over the
        tempogram's mean (how clearly anything pulses). `current` (BPM), the tempo in use:
        kept unless the peak is SWITCH times as high as the tempogram there (a tempo change
        wins within about 3 s; a passing figure does not move the tempo)."""
        bpms, magnitude = self._tempogram(signal - signal.mean())
        # two cycles in the window at least: slower ones leak from the window's edges
        magnitude = np.where(bpms >= 120.0 * self.fps / len(signal), magnitude, 0.0)
        summed = magnitude + sum(
            np.interp(bpms / d, bpms, magnitude, left=0.0) for d in (2.0, 4.0))
        peak = int(np.argmax(summed))
        if current is not None:
            relatives = current * 2.0 ** np.arange(-4, 5)
            near = relatives[np.argmin(np.abs(np.log(relatives / bpms[peak])))]
            held = int(np.argmin(np.abs(bpms - near)))
            low, high = max(held - 2, 0), min(held + 3, len(bpms))
            held = low + int(np.argmax(summed[low:high]))  # its peak, within 2 BPM
            if abs(near - bpms[peak]) > 2 * GRID_BPM and summed[peak] < SWITCH * summed[held]:
                peak = held
        mean = float(magnitude.mean())
        if 0 < peak < len(magnitude) - 1:
            shift = peak_shift(*summed[peak - 1:peak + 2])
        else:
            shift = 0.0
        return float(bpms[peak] + shift * GRID_BPM), float(magnitude[peak]) / max(mean, 1e-9)

    def estimate(self, envelope: np.ndarray, accents: np.ndarray, tmin: float, tmax: float,
                 current: float | None = None, loudness: np.ndarray | None = None,
                 silence_db: float = -60.0, pulse: np.ndarray | None = None,
                 fine_from_pulse: bool = False) -> tuple[float, float] | None:
        """(period in hops, strength) of the beat within [tmin, tmax] BPM, or None when nothing
        pulses. `envelope`: the onset strength the family is read from (every band, the kick
        weighed up: four to the floor with a syncopated rim is found at the beat then), or
        `pulse` where given (the high bands: the first seconds, `folded_family`; the period
        refined on it too with `fine_from_pulse`, where the envelope holds too few kicks);
        `accents`: the one the level is judged by (every band alike: a kick on 1 and 3 must
        not make the half-bar the beat); both oldest first. `current` (hops), the period in
        use, is kept at its level unless the accents clearly say otherwise."""
        signal = prepare(envelope)
        if not signal.any():
            return None
        fine = signal  # the line the period is refined on
        if pulse is not None and prepare(pulse).any():
            if fine_from_pulse:  # (in its first second the ballad's kicks took 144 to 150)
                fine = prepare(pulse)
            bpm, strength = self.folded_family(prepare(pulse), None if current is None
                                               else 60.0 * self.fps / current)
        else:
            self._folded = None  # the pulse's scores run again from the next first seconds
            bpm, strength = self.family(signal, None if current is None
                                         else 60.0 * self.fps / current)
        if not (math.isfinite(bpm) and bpm > 0.0):
            return None
        levels = binary_levels(bpm, tmin, tmax)
        periods = [60.0 * self.fps / b for b in levels]  # fastest first
        level = prepare(accents)
        smoothed = np.maximum(level, np.maximum(np.roll(level, 1), np.roll(level, -1)))
        chosen = periods[0]
        for slower in periods[1:]:
            gain = accent(smoothed, slower)[0] / max(accent(smoothed, chosen)[0], 1e-9)
            step, loud_step = LEVEL_STEP, LOUD_STEP
            if current is not None and _near(current, slower):
                step -= HYSTERESIS
                loud_step -= LOUD_HYSTERESIS
            elif current is not None and _near(current, chosen):
                step += HYSTERESIS
                loud_step += LOUD_HYSTERESIS
            loud = loudness is not None and 60.0 * self.fps / slower >= LOUD_SLOWEST \
                and alternation(loudness, smoothed, chosen, silence_db) > loud_step
            if gain <= step and not loud:
                break
            chosen = slower
        return refine(fine, chosen), strength

    def folded_family(self, signal: np.ndarray, current: float | None = None
                      ) -> tuple[float, float]:
        """(bpm, strength) of the period whose octaves (x 2^k) the autocorrelation likes best,
        as one octave's BPM (90-180), and its score over the mean score. For the first seconds:
        a Fourier tempogram of 1.5 s cannot resolve tempi 40 BPM apart, where lags of the
        autocorrelation a hop apart can. `current` (BPM), the tempo in use: its family is kept
        unless another scores SWITCH times as high."""
        centred = signal - signal.mean()
        size = len(centred)
        spectrum = np.fft.rfft(centred, 2 * size)
        acf = np.fft.irfft(np.abs(spectrum) ** 2)[:size]
        if acf[0] <= 0.0:
            return math.nan, 0.0
        fps = self.fps
        periods = 60.0 * fps / np.geomspace(180.0, 90.0, FOLD_STEPS, endpoint=False)
        score = np.zeros(FOLD_STEPS)
        for octave in range(-2, 4):
            lags = periods * 2.0 ** octave
            inside = (lags >= FOLD_SHORTEST_S * fps) & (lags < FOLD_LONGEST * size)
            score += np.where(inside, np.interp(lags, np.arange(size), acf / acf[0]), 0.0)
        if self._folded is not None:  # successive windows agree, or the new one counts half
            score = FOLD_MEMORY * self._folded + (1.0 - FOLD_MEMORY) * score
        self._folded = score
        best = int(np.argmax(score))
        if current is not None:
            held = 60.0 * fps / (current * 2.0 ** -math.floor(math.log2(current / 90.0)))
            near = int(np.argmin(np.abs(np.log(periods / held))))
            low, high = max(near - 3, 0), min(near + 4, FOLD_STEPS)
            near = low + int(np.argmax(score[low:high]))
            if score[best] < SWITCH * score[near]:
                best = near
        shift = peak_shift(*score[best - 1:best + 2]) if 0 < best < FOLD_STEPS - 1 else 0.0
        period = periods[best] * (periods[1] / periods[0]) ** shift
        mean = float(np.mean(np.abs(score)))
        return 60.0 * fps / period, float(score[best]) / max(mean, 1e-9)


def peak_shift(a: float, b: float, c: float) -> float:
    """Where a parabola through three neighbouring bins peaks, in bins from the middle one,
    within half a bin: the middle bin need not be a maximum (a held tempo's bin is chosen
    near a peak, not at it), and there a nearly flat parabola would throw the peak anywhere
    (a tempo below zero was seen)."""
    curve = a - 2.0 * b + c
    if not curve < 0.0:
        return 0.0
    return min(max(0.5 * (a - c) / curve, -0.5), 0.5)


def _near(a: float, b: float) -> bool:
    return abs(a - b) <= 0.06 * b


def binary_levels(bpm: float, tmin: float, tmax: float) -> list[float]:
    """`bpm` times powers of two inside [tmin, tmax], fastest first; where none falls inside
    (a range narrower than an octave), the one nearest the range."""
    levels = [bpm * 2.0 ** k for k in range(-5, 6)]
    inside = [b for b in levels if tmin / MARGIN <= b <= tmax * MARGIN]
    if inside:
        return sorted(inside, reverse=True)
    centre = math.sqrt(tmin * tmax)
    return [min(levels, key=lambda b: abs(math.log(b / centre)))]


def accent(signal: np.ndarray, period: float) -> tuple[float, int]:
    """(best mean of `signal` on a grid of `period` hops over the whole mean, that grid's
    phase in hops from the start of `signal`)."""
    count = int((len(signal) - 1) // period)
    if count < 2:
        return 0.0, 0
    phases = np.arange(int(math.ceil(period)))
    index = np.round(phases[:, None] + period * np.arange(count)[None, :]).astype(int)
    index = np.minimum(index, len(signal) - 1)
    means = signal[index].mean(axis=1)
    best = int(np.argmax(means))
    return float(means[best]) / max(float(signal.mean()), 1e-9), best


def alternation(loudness: np.ndarray, smoothed: np.ndarray, period: float,
                silence_db: float = -60.0) -> float:
    """How much louder (dB) every other pulse of a grid of `period` hops is than the ones
    between, the grid placed where `smoothed` (the onset strength) peaks: each pulse's
    loudness is the loudest hop from one before it to three after; pulses in silence (under
    `silence_db`: the song over, a break) are left out. Hats between a kick and a snare read
    10-13 dB under them (the slower level is the beat); a kick and a snare on alternate
    pulses, 0-7 dB apart (this level is)."""
    _, phase = accent(smoothed, period)
    count = int((len(loudness) - 4 - phase) // period) + 1
    if count < 4:
        return 0.0
    places = np.round(phase + period * np.arange(count)).astype(int)
    windows = np.lib.stride_tricks.sliding_window_view(loudness, 5)
    peaks = windows[np.clip(places - 1, 0, len(windows) - 1)].max(axis=1)
    even, odd = peaks[0::2], peaks[1::2]
    even, odd = even[even > silence_db], odd[odd > silence_db]
    if len(even) < 2 or len(odd) < 2:
        return 0.0
    return float(abs(even.mean() - odd.mean()))


def refine(signal: np.ndarray, period: float) -> float:
    """The period within 4 % of `period` whose multiples (1..4) the autocorrelation likes best,
    to a twentieth of a hop."""
    centred = signal - signal.mean()
    size = len(centred)
    spectrum = np.fft.rfft(centred, 2 * size)
    acf = np.fft.irfft(np.abs(spectrum) ** 2)[:size]
    acf = acf / (size - np.arange(size))  # unbiased: long lags are not penalised
    candidates = period * np.linspace(0.96, 1.04, 81)
    lags = candidates[:, None] * np.arange(1, 5)[None, :]
    valid = lags.max(axis=0) < size - 1
    lags = lags[:, valid]
    if lags.shape[1] == 0:
        return period
    below = np.floor(lags).astype(int)
    frac = lags - below
    values = acf[below] * (1 - frac) + acf[np.minimum(below + 1, size - 1)] * frac
    return float(candidates[int(np.argmax(values.sum(axis=1)))])
