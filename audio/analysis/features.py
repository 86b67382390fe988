"""Audio analysis in pure numpy: levels, bands and onsets from the newest samples.

Main thread only: a source calls `Analyzer.process` once a frame with a window of the newest
samples. Nothing here touches a device, so tests feed synthetic signals straight in.

The level chain follows keijiro's Lasp: dBFS -> auto-gain (a tracked peak that decays slowly)
-> a dynamic range below that peak mapped to 0..1 -> attack/release smoothing. Bands use the
same chain on FFT band energies; onsets are spectral flux above an adaptive threshold.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

DB_FLOOR = -120.0  # what silence reads as, in dBFS
BAND_NAMES = ("low", "mid", "high")
BAND_EDGES_HZ = ((20.0, 250.0), (250.0, 2500.0), (2500.0, 16000.0))
BAND_FLOOR = 1e-12  # a band's power never reads below this (silence: -120 dB)


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


class Bands(NamedTuple):
    """Low, mid and high band energy, each 0..1 after the level chain."""

    low: float = 0.0
    mid: float = 0.0
    high: float = 0.0


def speed_scale(level: float, audio_speed_boost: float) -> float:
    """The seed's `speed *= 1 + rms * audioSpeedBoost`, fed the normalised level (0..1)."""
    return 1.0 + level * audio_speed_boost


@dataclass
class LevelSettings:
    """How a dB value becomes 0..1. Mutable: changes apply from the next frame."""

    dynamic_range_db: float = 24.0  # the span below the tracked peak that maps onto 0..1
    peak_fall_db_per_s: float = 2.0  # how fast the auto-gain forgets a loud past
    min_peak_db: float = -50.0  # the tracked peak never falls below this: room noise stays low
    # rise time constant; 0 = instant: a hit shows in the frame that reads it, whatever the
    # frame's dt (a late read in the same frame has dt 0), the release alone is smoothed
    attack_s: float = 0.0
    release_s: float = 0.25  # fall time constant; 0 = instant


class LevelTracker:
    """Auto-gain and smoothing for one dB signal (Lasp's AudioLevelTracker, in Python).

    The tracked peak jumps up to any louder input and falls slowly otherwise, so a quiet room
    and a loud club both end up spanning the same 0..1 range.
    """

    def __init__(self, settings: LevelSettings | None = None) -> None:
        self.settings = settings or LevelSettings()
        self.reset()

    def reset(self) -> None:
        self.peak_db = self.settings.min_peak_db
        self.value = 0.0

    def update(self, db: float, dt: float, floor_db: float | None = None) -> float:
        """Feed this frame's dB value and the time since the last frame; returns 0..1.
        `floor_db` raises the lowest tracked peak above `min_peak_db` for this frame."""
        s = self.settings
        dt = max(dt, 0.0)
        lowest = s.min_peak_db if floor_db is None else max(s.min_peak_db, floor_db)
        self.peak_db = max(db, self.peak_db - s.peak_fall_db_per_s * dt, lowest)
        span = max(s.dynamic_range_db, 1e-3)
        target = min(max((db - (self.peak_db - span)) / span, 0.0), 1.0)
        tau = s.attack_s if target > self.value else s.release_s
        if tau <= 0.0:
            self.value = target
        else:
            self.value += (target - self.value) * (1.0 - math.exp(-dt / tau))
        return self.value


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


@dataclass
class OnsetSettings:
    """Spectral-flux onset detection. Mutable: changes apply from the next frame."""

    history_frames: int = 30  # frames of flux the adaptive threshold looks back on (~0.5 s)
    ratio: float = 1.3  # threshold = ratio * median(recent flux) + delta
    delta: float = 0.03  # absolute margin: a steady signal's tiny flux never counts
    min_interval_s: float = 0.1  # one onset at most in this time: a click spans a few frames
    compression: float = 100.0  # log(1 + c * magnitude / peak): detail 20-40 dB down counts
    envelope_s: float = 0.25  # the "onset" modulation source falls from 1 to 0 in this time
    # compare with a spectrum at least this old: about half the FFT window, so a click that
    # arrives at the window's tapered newest edge is compared with one that never held it
    lag_s: float = 0.02


class OnsetDetector:
    """Finds onsets as frames whose spectral flux rises above the median of recent flux.

    The spectrum is divided by the auto-gain's tracked peak first, so a click in a quiet room
    and a kick in a club both stand out.
    """

    def __init__(self, settings: OnsetSettings | None = None) -> None:
        self.settings = settings or OnsetSettings()
        self.reset()

    def reset(self) -> None:
        self._past: deque[tuple[float, np.ndarray]] = deque(maxlen=16)  # (time, spectrum)
        self._time = 0.0
        self._history: deque[float] = deque(maxlen=max(self.settings.history_frames, 1))
        self._since_onset = math.inf
        self.count = 0
        self.flux = 0.0
        self.threshold = 0.0
        self._zeros: np.ndarray | None = None  # a silent frame's spectrum (never written)

    @property
    def envelope(self) -> float:
        """1 at an onset, falling linearly to 0 over `envelope_s`: a kick that fades."""
        span = self.settings.envelope_s
        return max(0.0, 1.0 - self._since_onset / span) if span > 0 else 0.0

    def update(self, magnitude: np.ndarray, gain: float, dt: float) -> bool:
        """Feed this frame's magnitude spectrum and the auto-gain (1 / tracked peak)."""
        compressed = np.log1p(magnitude * (self.settings.compression * gain))
        return self._judge(compressed, dt, None)

    def silent(self, bins: int, dt: float) -> bool:
        """`update` with a spectrum of `bins` zeros, without the arithmetic: no rise over any
        earlier spectrum (none is below zero), so the flux is 0."""
        zeros = self._zeros
        if zeros is None or zeros.size != bins:
            zeros = self._zeros = np.zeros(bins)
            zeros.flags.writeable = False
        return self._judge(zeros, dt, 0.0)

    def _judge(self, compressed: np.ndarray, dt: float, flux: float | None) -> bool:
        """Keep `compressed` (this frame's spectrum); an onset where its flux over the one
        `lag_s` before (`flux`, where the caller knows it) rises above the recent median's."""
        s = self.settings
        if self._history.maxlen != max(s.history_frames, 1):
            self._history = deque(self._history, maxlen=max(s.history_frames, 1))
        self._since_onset += max(dt, 0.0)
        self._time += max(dt, 0.0)
        reference = None
        old_enough = self._time - s.lag_s + 1e-9
        for when, past in self._past:  # the newest spectrum at least `lag_s` old
            if when <= old_enough and past.shape == compressed.shape:
                reference = past
        self._past.append((self._time, compressed))
        if reference is None:
            return False
        if flux is None:
            rise = np.subtract(compressed, reference)
            np.maximum(rise, 0.0, out=rise)
            flux = float(rise.sum()) / rise.size
        self.flux = flux
        median = statistics.median(self._history) if self._history else 0.0
        self.threshold = s.ratio * median + s.delta
        self._history.append(self.flux)
        warm = len(self._history) > min(4, self._history.maxlen - 1)  # a threshold to trust
        if warm and self.flux > self.threshold and self._since_onset >= s.min_interval_s:
            self._since_onset = 0.0
            self.count += 1
            return True
        return False


@dataclass(frozen=True)
class AudioFeatures:
    """What one frame of analysis found; the sources expose these as properties."""

    rms: float = 0.0  # linear RMS of the newest level window, 1.0 = full scale
    rms_db: float = DB_FLOOR
    peak_db: float = DB_FLOOR
    level: float = 0.0  # 0..1 after auto-gain, dynamic range and smoothing
    bands: Bands = Bands()  # low, mid, high, each 0..1
    onset: bool = False  # an onset was found this frame
    onset_envelope: float = 0.0  # 1 at an onset, to 0 in OnsetSettings.envelope_s
    onsets: int = 0  # onsets found since the start

    def sources(self) -> dict[str, float]:
        """Values of the modulation sources, by the names routes use."""
        low, mid, high = self.bands
        return {"level": self.level, "low": low, "mid": mid, "high": high,
                "onset": self.onset_envelope}


@dataclass
class Analyzer:
    """All analysis of one stream: feed the newest `window_size` samples once a frame."""

    rate: float
    fft_size: int = 2048  # 43 ms at 48 kHz: 23 Hz bins, enough to split off the low band
    level_window: int = 1024  # 21 ms at 48 kHz: the level follows a kick, not a bar
    level_settings: LevelSettings = field(default_factory=LevelSettings)
    onset_settings: OnsetSettings = field(default_factory=OnsetSettings)
    band_headroom_db: float = 30.0  # a band's tracked peak stays within this of the level's

    def __post_init__(self) -> None:
        self.bands = BandAnalyzer(self.rate, self.fft_size)
        self.level_tracker = LevelTracker(self.level_settings)
        self.band_trackers = [LevelTracker(self.level_settings) for _ in BAND_NAMES]
        self.onsets = OnsetDetector(self.onset_settings)
        self._clean = np.zeros(self.window_size, np.float64)

    @property
    def window_size(self) -> int:
        return max(self.fft_size, self.level_window)

    def reset(self) -> None:
        self.level_tracker.reset()
        for tracker in self.band_trackers:
            tracker.reset()
        self.onsets.reset()

    def process(self, window: np.ndarray, dt: float) -> AudioFeatures:
        """Analyse the newest samples (oldest first, at least `window_size` of them)."""
        clean = self._clean
        n = min(len(window), len(clean))
        clean[:] = 0.0
        clean[len(clean) - n:] = window[len(window) - n:]
        # a malformed or broken block must not poison the trackers with NaN
        if not np.isfinite(clean).all():
            np.nan_to_num(clean, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
        clean.clip(-8.0, 8.0, out=clean)

        # the gain from before this frame: a loud hit must not turn itself down
        gain = 10.0 ** (-self.level_tracker.peak_db / 20.0)
        recent = clean[-self.level_window:]
        level_rms = rms(recent)
        db = to_db(level_rms)
        level = self.level_tracker.update(db, dt)
        magnitude = self.bands.spectrum(clean)
        # a band far below the loudest one is leakage or noise: its gain stops rising there
        floor = self.level_tracker.peak_db - self.band_headroom_db
        bands = Bands(*(tracker.update(band, dt, floor) for tracker, band
                        in zip(self.band_trackers, self.bands.band_db(magnitude))))
        onset = self.onsets.update(magnitude, gain, dt)
        return AudioFeatures(rms=level_rms, rms_db=db, peak_db=peak_db(recent), level=level,
                             bands=bands, onset=onset, onset_envelope=self.onsets.envelope,
                             onsets=self.onsets.count)

    def silent(self, dt: float) -> AudioFeatures:
        """`process` of a window of zeros (a source with no samples this frame: silence, an
        input lost or not yet delivering), the same features without the arithmetic on
        zeros: the levels fall through their release, the onsets' history moves on."""
        level = self.level_tracker.update(DB_FLOOR, dt)
        floor = self.level_tracker.peak_db - self.band_headroom_db
        quiet = self.bands.silent_db
        bands = Bands(*(tracker.update(quiet, dt, floor) for tracker in self.band_trackers))
        onset = self.onsets.silent(self.fft_size // 2 + 1, dt)
        return AudioFeatures(level=level, bands=bands, onset=onset,
                             onset_envelope=self.onsets.envelope, onsets=self.onsets.count)
