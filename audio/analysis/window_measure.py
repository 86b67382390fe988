"""What a window of the newest samples measures, before any tracking: its RMS and peak, the
bands' energies and the spectral flux over an older window. Pure numpy, no settings of the
performer's but the onsets' compression and lag, which the caller hands in.

This is the analysis's arithmetic (audio/analysis/features.py tracks and judges what it
finds): the frame runs it itself for a file or an offline song, and a live input's block
analysis (audio/input/block_analysis.py) runs it once per block off the frame, so the frame
only tracks a few floats.
"""

from __future__ import annotations

import math
from collections import deque
from typing import NamedTuple

import numpy as np

DB_FLOOR = -120.0  # what silence reads as, in dBFS
BAND_NAMES = ("low", "mid", "high")
BAND_EDGES_HZ = ((20.0, 250.0), (250.0, 2500.0), (2500.0, 16000.0))
BAND_FLOOR = 1e-12  # a band's power never reads below this (silence: -120 dB)
PAST_SPECTRA = 256  # spectra kept at most for the flux's reference (the newest `lag_s` of them)


def to_db(amplitude: float) -> float:
    """Linear amplitude (1.0 = full scale) in dBFS, never below DB_FLOOR."""
    if not amplitude > 10.0 ** (DB_FLOOR / 20.0):  # also catches NaN
        return DB_FLOOR
    return 20.0 * math.log10(amplitude)


def rms(samples: np.ndarray) -> float:
    """Root mean square, accumulated in float64 so long windows stay exact."""
    if samples.size == 0:
        return 0.0
    x = samples.astype(np.float64, copy=False)
    return math.sqrt(float(np.dot(x.ravel(), x.ravel())) / x.size)


def rms_db(samples: np.ndarray) -> float:
    """RMS in dBFS: a full-scale sine reads -3.01 dB, a full-scale square 0 dB."""
    return to_db(rms(samples))


def peak_db(samples: np.ndarray) -> float:
    """Largest absolute sample in dBFS."""
    if samples.size == 0:
        return DB_FLOOR
    return to_db(max(float(samples.max()), -float(samples.min())))


class BandAnalyzer:
    """Energy of the low, mid and high bands from one Hann-windowed FFT.

    Band power is scaled so that a sine inside a band reads the sine's own RMS in dBFS, which
    lets bands share the level chain's settings.
    """

    def __init__(self, rate: float, fft_size: int,
                 edges_hz: tuple[tuple[float, float], ...] = BAND_EDGES_HZ) -> None:
        self.rate = rate
        self.fft_size = fft_size
        self.window = np.hanning(fft_size).astype(np.float64)
        freqs = np.fft.rfftfreq(fft_size, 1.0 / rate)
        self.slices = []
        for lo, hi in edges_hz:
            first = int(np.searchsorted(freqs, lo))
            last = int(np.searchsorted(freqs, min(hi, rate / 2), side="right"))
            self.slices.append(slice(max(first, 1), max(last, first + 1)))
        # one-sided power -> mean square of the windowed signal's band content
        self._power_scale = 2.0 / (fft_size * float(np.sum(self.window ** 2)))
        self._amplitude_scale = 2.0 / float(np.sum(self.window))
        # magnitude^2 -> power: (magnitude / amplitude_scale)^2 x power_scale, as one factor
        self._band_scale = self._power_scale / self._amplitude_scale ** 2
        self._windowed = np.zeros(fft_size)

    def spectrum(self, samples: np.ndarray) -> np.ndarray:
        """Magnitude spectrum scaled so a full-scale sine's peak bin reads about 1."""
        windowed = np.multiply(samples[-self.fft_size:], self.window, out=self._windowed)
        magnitude = np.abs(np.fft.rfft(windowed))
        magnitude *= self._amplitude_scale
        return magnitude

    silent_db = 10.0 * math.log10(BAND_FLOOR)  # what `band_db` reads for every band of silence

    def band_db(self, magnitude: np.ndarray) -> tuple[float, ...]:
        """dBFS of each band, from a magnitude spectrum made by `spectrum`."""
        scale = self._band_scale
        return tuple(10.0 * math.log10(max(float(np.dot(magnitude[s], magnitude[s])) * scale,
                                           BAND_FLOOR)) for s in self.slices)


class Measures(NamedTuple):
    """One window's measures: what the level chain and the onsets' judge are fed."""

    rms: float  # linear RMS of the newest `level_window` samples
    rms_db: float
    peak_db: float
    bands_db: tuple[float, float, float]  # low, mid, high in dBFS
    flux: float  # the spectral flux over the window `lag_s` before; NaN where none was kept


class WindowMeasure:
    """Measures windows of one stream, in order, keeping the compressed spectra of the last
    ones for the flux. `at` is the window's time in seconds on any clock that only rises
    (the frames' summed steps, or a stream's samples over its rate)."""

    def __init__(self, rate: float, fft_size: int = 2048, level_window: int = 1024) -> None:
        self.rate = rate
        self.fft_size = fft_size
        self.level_window = level_window
        self.bands = BandAnalyzer(rate, fft_size)
        self._clean = np.zeros(max(fft_size, level_window), np.float64)
        self._zeros: np.ndarray | None = None  # a silent window's spectrum (never written)
        self.reset()

    @property
    def window_size(self) -> int:
        return len(self._clean)

    def reset(self) -> None:
        self._past: deque[tuple[float, np.ndarray]] = deque(maxlen=PAST_SPECTRA)

    def measure(self, window: np.ndarray, gain: float, compression: float, lag_s: float,
                at: float) -> Measures:
        """Measure the newest samples (oldest first); `gain` is the auto-gain (1 / the tracked
        peak) the spectrum is divided by before its log compression."""
        clean = self._clean
        n = min(len(window), len(clean))
        clean[:] = 0.0
        clean[len(clean) - n:] = window[len(window) - n:]
        # a malformed or broken block must not poison the trackers with NaN
        if not np.isfinite(clean).all():
            np.nan_to_num(clean, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
        clean.clip(-8.0, 8.0, out=clean)
        recent = clean[-self.level_window:]
        level_rms = rms(recent)
        magnitude = self.bands.spectrum(clean)
        low, mid, high = self.bands.band_db(magnitude)
        compressed = np.log1p(magnitude * (compression * gain))
        reference = self._keep(compressed, at, lag_s)
        if reference is None:
            flux = math.nan
        else:
            rise = np.subtract(compressed, reference)
            np.maximum(rise, 0.0, out=rise)
            flux = float(rise.sum()) / rise.size
        return Measures(level_rms, to_db(level_rms), peak_db(recent), (low, mid, high), flux)

    def silent(self, at: float, lag_s: float) -> bool:
        """A window of zeros kept as `measure` would keep it, without the arithmetic; True
        where an older spectrum was there to compare with (the flux is then 0: no bin rises
        above any earlier one)."""
        bins = self.fft_size // 2 + 1
        zeros = self._zeros
        if zeros is None or zeros.size != bins:
            zeros = self._zeros = np.zeros(bins)
            zeros.flags.writeable = False
        return self._keep(zeros, at, lag_s) is not None

    def _keep(self, compressed: np.ndarray, at: float, lag_s: float) -> np.ndarray | None:
        """Keep `compressed`; the newest spectrum kept before it at least `lag_s` older. The
        spectra older than that one go: a block analysis keeps one a block (as little as 32
        samples), a frame one a frame, and either finds its reference."""
        old_enough = at - lag_s + 1e-9
        past = self._past
        while len(past) > 1 and past[1][0] <= old_enough:
            past.popleft()
        reference = None
        if past and past[0][0] <= old_enough and past[0][1].shape == compressed.shape:
            reference = past[0][1]
        past.append((at, compressed))
        return reference
