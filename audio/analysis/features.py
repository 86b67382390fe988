"""Audio analysis in pure numpy: levels, bands and onsets from the newest samples.

Main thread only: a source calls `Analyzer.process` once a frame with a window of the newest
samples, or `Analyzer.apply` with what a live input's block analysis measured of them off the
frame (the window's arithmetic is audio/analysis/window_measure.py's). Nothing here touches a
device, so tests feed synthetic signals straight in.

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

from swarm_instrument.audio.analysis.window_measure import (
    BAND_NAMES,
    DB_FLOOR,
    BandAnalyzer,
    Measures,
    WindowMeasure,
)


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
    """Finds onsets as windows whose spectral flux (window_measure.py: the spectrum divided by
    the auto-gain's tracked peak, so a click in a quiet room and a kick in a club both stand
    out) rises above the median of the recent flux."""

    def __init__(self, settings: OnsetSettings | None = None) -> None:
        self.settings = settings or OnsetSettings()
        self.reset()

    def reset(self) -> None:
        self._history: deque[float] = deque(maxlen=max(self.settings.history_frames, 1))
        self._since_onset = math.inf
        self.count = 0
        self.flux = 0.0
        self.threshold = 0.0

    @property
    def envelope(self) -> float:
        """1 at an onset, falling linearly to 0 over `envelope_s`: a kick that fades."""
        span = self.settings.envelope_s
        return max(0.0, 1.0 - self._since_onset / span) if span > 0 else 0.0

    def judge(self, flux: float, dt: float) -> bool:
        """This frame's flux (NaN: none to judge, no older window to compare with or no new
        one) after `dt` seconds; True at an onset: the flux above the recent median's."""
        s = self.settings
        if self._history.maxlen != max(s.history_frames, 1):
            self._history = deque(self._history, maxlen=max(s.history_frames, 1))
        self._since_onset += max(dt, 0.0)
        if flux != flux:  # NaN
            return False
        self.flux = flux
        median = statistics.median(self._history) if self._history else 0.0
        self.threshold = s.ratio * median + s.delta
        self._history.append(flux)
        warm = len(self._history) > min(4, self._history.maxlen - 1)  # a threshold to trust
        if warm and flux > self.threshold and self._since_onset >= s.min_interval_s:
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
    """All analysis of one stream: feed the newest `window_size` samples once a frame
    (`process`), or what a block analysis measured of them (`apply`)."""

    rate: float
    fft_size: int = 2048  # 43 ms at 48 kHz: 23 Hz bins, enough to split off the low band
    level_window: int = 1024  # 21 ms at 48 kHz: the level follows a kick, not a bar
    level_settings: LevelSettings = field(default_factory=LevelSettings)
    onset_settings: OnsetSettings = field(default_factory=OnsetSettings)
    band_headroom_db: float = 30.0  # a band's tracked peak stays within this of the level's

    def __post_init__(self) -> None:
        self.measure = WindowMeasure(self.rate, self.fft_size, self.level_window)
        self.level_tracker = LevelTracker(self.level_settings)
        self.band_trackers = [LevelTracker(self.level_settings) for _ in BAND_NAMES]
        self.onsets = OnsetDetector(self.onset_settings)
        self._time = 0.0  # the frames' steps summed: the flux's clock

    @property
    def window_size(self) -> int:
        return max(self.fft_size, self.level_window)

    @property
    def gain(self) -> float:
        """The auto-gain from before this frame (1 / the tracked peak): a loud hit must not
        turn itself down."""
        return 10.0 ** (-self.level_tracker.peak_db / 20.0)

    def reset(self) -> None:
        self.level_tracker.reset()
        for tracker in self.band_trackers:
            tracker.reset()
        self.onsets.reset()
        self.measure.reset()
        self._time = 0.0

    def process(self, window: np.ndarray, dt: float) -> AudioFeatures:
        """Analyse the newest samples (oldest first, at least `window_size` of them)."""
        self._time += max(dt, 0.0)
        s = self.onset_settings
        return self.apply(self.measure.measure(window, self.gain, s.compression, s.lag_s,
                                               self._time), dt)

    def apply(self, measures: Measures, dt: float) -> AudioFeatures:
        """Track and judge one window's measures, `dt` seconds after the last frame's."""
        level = self.level_tracker.update(measures.rms_db, dt)
        # a band far below the loudest one is leakage or noise: its gain stops rising there
        floor = self.level_tracker.peak_db - self.band_headroom_db
        bands = Bands(*(tracker.update(band, dt, floor) for tracker, band
                        in zip(self.band_trackers, measures.bands_db)))
        onset = self.onsets.judge(measures.flux, dt)
        return AudioFeatures(rms=measures.rms, rms_db=measures.rms_db,
                             peak_db=measures.peak_db, level=level, bands=bands, onset=onset,
                             onset_envelope=self.onsets.envelope, onsets=self.onsets.count)

    def silent(self, dt: float) -> AudioFeatures:
        """`process` of a window of zeros (a source with no samples this frame: silence, an
        input lost or not yet delivering), the same features without the arithmetic on
        zeros: the levels fall through their release, the onsets' history moves on."""
        level = self.level_tracker.update(DB_FLOOR, dt)
        floor = self.level_tracker.peak_db - self.band_headroom_db
        quiet = BandAnalyzer.silent_db
        bands = Bands(*(tracker.update(quiet, dt, floor) for tracker in self.band_trackers))
        self._time += max(dt, 0.0)
        compared = self.measure.silent(self._time, self.onset_settings.lag_s)
        onset = self.onsets.judge(0.0 if compared else math.nan, dt)
        return AudioFeatures(level=level, bands=bands, onset=onset,
                             onset_envelope=self.onsets.envelope, onsets=self.onsets.count)
