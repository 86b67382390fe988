"""The interface every audio source shares, plus the two that need no device: silence and an
array analysed offline.

Main thread only: `update(now)` once a frame runs the analysis over the newest samples, feeds
the beat tracker every sample that arrived since the last frame (audio/analysis/beats.py;
a live show's input hands them to a thread of its own, audio/analysis/beat_thread.py) and
everything else reads what they found. Sources with a device (live.py, playback.py) add a
callback thread that only writes their ring buffer.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from swarm_instrument.audio.analysis.beat_feed import MAX_S, RingBeatFeed
from swarm_instrument.audio.analysis.beat_thread import ThreadedRingFeed
from swarm_instrument.audio.analysis.beats import TEMPO_RANGE, BeatInfo, BeatTracker
from swarm_instrument.audio.analysis.features import Analyzer, AudioFeatures, Bands
from swarm_instrument.audio.analysis.window_measure import DB_FLOOR, Measures
from swarm_instrument.audio.input.ring import Ring

DEFAULT_RATE = 48000
_UNSHARED = contextlib.nullcontext()  # `beat_lock` where no thread feeds the tracker
MAX_DT = 0.25  # a longer gap (a hitch, a breakpoint) must not swing the smoothing wildly


class AudioFrameSource:
    """What the swarm reads from the sound, once a frame: the user's design and seed 000 name
    it so (`has_data`, `rms`), with the level, bands and onsets this instrument adds. The base
    is silence that analyses like a stream; subclasses fill `_window` in `_fill`.

    `beat_info` is the beat tracker's view this frame (bpm, beat count, its time, confidence)
    for sources with real samples (`tracks_beats`); None when it has no tempo to tell (no
    beat yet, silence for 2 s, no samples flowing) and always for those without samples.

    `state` is one short word or phrase for the HUD ("ok", "file", "audio lost", ...);
    `message` is the last thing worth telling the performer, and `take_messages` hands each
    new one out once so the instrument prints it once.
    """

    tracks_beats = False  # a source with real samples sets it: update() feeds a BeatTracker
    threads_beats = False  # ... and may feed it on a thread of its own (`beats_on_thread`)
    refreshes = False  # a source that reads new samples again at the late latch (`refresh`)

    def __init__(self, rate: float = DEFAULT_RATE, device: str = "", state: str = "silence",
                 message: str = "") -> None:
        self.beat_info: BeatInfo | None = None
        self._tempo_range = TEMPO_RANGE
        self._beats: BeatTracker | None = None
        self._ring_feed: RingBeatFeed | None = None
        self._beats_on_thread = False
        # Callables given every sample the beat tracker is fed (and zeros for those it skips),
        # in order, on the main thread: the live autopilot's ears (audio/form/form_live.py).
        self.sample_listeners: list = []
        self.device = device
        self.state = state
        self.message = ""
        self._pending: list[str] = []
        self._has_data = False
        self._last_now: float | None = None
        self._analyzer: Analyzer | None = None
        # A live show sets it where the source `refreshes`: its loop calls `refresh` once a
        # frame after `update`, which then leaves the level, bands and onsets to it.
        self.analysis_at_latch = False
        self._analysis_due = False
        self._silent = True  # `_window` holds zeros: no samples this frame
        self._set_rate(rate)
        self.features = AudioFeatures()
        if message:
            self._say(message)

    # -- for subclasses --------------------------------------------------------------------
    def _set_rate(self, rate: float) -> None:
        """(Re)build the analysis for a sample rate, keeping its settings."""
        old = self._analyzer
        if old is not None and old.rate == rate:
            return
        if old is None:
            self._analyzer = Analyzer(rate)
        else:
            self._analyzer = Analyzer(rate, old.fft_size, old.level_window,
                                      old.level_settings, old.onset_settings)
        self._window = np.zeros(self._analyzer.window_size, np.float32)
        if self.tracks_beats:
            self._beats = self._new_tracker()

    def _new_tracker(self) -> BeatTracker | None:
        """A beat tracker at this rate; None (said once) where one cannot be made."""
        try:
            return BeatTracker(self.rate, tempo_range=self._tempo_range)
        except Exception as exc:  # noqa: BLE001 - a rate it refuses: said, not raised
            self._pending.append(f"no beat tracking from the audio ({type(exc).__name__}: "
                                 f"{exc}); tap the tempo instead")
            return None

    def set_tempo_range(self, low: float, high: float) -> None:
        """The performer's tempo range (BPM): the beat tracker reads the tempo inside it."""
        self._tempo_range = (float(low), float(high))
        beats = self._beats
        # asked each frame: the lock (a step of the beat thread's) only when it changes
        if beats is not None and tuple(sorted(self._tempo_range)) != beats.tempo_range:
            with self.beat_lock:
                beats.set_range(low, high)

    def beats_on_thread(self) -> bool:
        """A live show's: the beat tracker (and the sample listeners) fed on a thread of their
        own, off the frame (audio/analysis/beat_thread.py), where the source `threads_beats`;
        whoever reads the tracker or the listeners' state then holds `beat_lock`."""
        self._beats_on_thread = self.threads_beats
        return self._beats_on_thread

    @property
    def beat_lock(self) -> Any:
        """Held while reading or changing the beat tracker or what its listeners found: the
        feeding thread's lock where there is one, else a context that holds nothing."""
        feed = self._ring_feed
        return feed.lock if isinstance(feed, ThreadedRingFeed) else _UNSHARED

    def _stop_feed(self) -> None:
        """The ring's feed is done with (a new tracker, an error, the end): its thread
        stopped."""
        feed, self._ring_feed = self._ring_feed, None
        if isinstance(feed, ThreadedRingFeed):
            feed.close()

    def _track_beats(self, now: float) -> BeatInfo | None:
        """Feed the tracker the samples that arrived since the last update, in order, and give
        this frame's view. The base has no samples."""
        return None

    def _track_ring(self, ring: Ring, now: float) -> BeatInfo | None:
        """`_track_beats` for a source whose samples arrive in a ring."""
        feed = self._ring_feed
        if feed is None or feed.tracker is not self._beats:
            assert self._beats is not None
            self._stop_feed()
            kind = ThreadedRingFeed if self._beats_on_thread else RingBeatFeed
            feed = self._ring_feed = kind(self._beats, listeners=self.sample_listeners)
        return feed.update(ring, now)

    def _hear(self, samples: np.ndarray) -> None:
        """Hand the samples the tracker was given (or zeros for those it skipped) on."""
        if len(samples):
            for listen in self.sample_listeners:
                listen(samples)

    def _fill(self, now: float) -> bool:
        """Put the newest samples into `_window`; False means 'use silence this frame'."""
        return False

    def _say(self, message: str) -> None:
        """Remember a message for the HUD and queue it to be printed, unless it repeats."""
        if message and message != self.message:
            self._pending.append(message)
        self.message = message

    # -- the interface ---------------------------------------------------------------------
    @property
    def analyzer(self) -> Analyzer:
        """The analysis; its `level_settings` and `onset_settings` may be changed live."""
        assert self._analyzer is not None
        return self._analyzer

    @property
    def rate(self) -> float:
        return self.analyzer.rate

    @property
    def beat_tracker(self) -> BeatTracker | None:
        """The beat tracker `update` feeds (every sample, in order, the listeners' too), for
        readers that want its beats (the live form); None for a source without samples or
        once it stopped. A new sample rate or a seek replaces it: read it again each frame."""
        return self._beats

    def update(self, now: float) -> AudioFeatures:
        """Once a frame, main thread: analyse the newest samples. `now` is in seconds. With
        `analysis_at_latch` (a source that reads again at the late latch, set by a live show)
        the samples are read and the beats fed here, but the level, bands and onsets wait for
        `refresh`: analysed once a frame, not twice, and `features` until then are the last
        frame's."""
        self._silent = not self._fill(now)
        if self._silent:
            self._has_data = False
            self._window[:] = 0.0  # levels fall to zero through the release smoothing
        if self.analysis_at_latch:
            self._analysis_due = True
        else:
            self._analyse_again(now)
        self.beat_info = None
        if self._beats is not None:
            try:
                self.beat_info = self._track_beats(now)
            except Exception as exc:  # noqa: BLE001 - a bug here must not stop the frame
                self._beats = None
                self._stop_feed()
                self._pending.append(f"beat tracking stopped ({type(exc).__name__}: {exc})")
        return self.features

    def refresh(self, now: float) -> bool:
        """Late latching, just before the draw: the samples that arrived since `update`
        analysed too (the level, bands and onsets; the beats take them at the next update).
        True when there were any; the base (silence, a file, an offline song) has none."""
        return False

    def _analyse_again(self, now: float) -> None:
        """The level, bands and onsets of `_window` (`update`'s, or `refresh`'s for a source
        whose `_fill` put new samples in it, or whose update left the analysis to the
        latch)."""
        dt = 1.0 / 60.0 if self._last_now is None else min(max(now - self._last_now, 0.0), MAX_DT)
        self._last_now = now
        self._analysis_due = False
        analyzer = self.analyzer
        # a window of zeros (no samples this frame) analysed without the arithmetic on zeros
        if self._silent:
            self.features = analyzer.silent(dt)
            return
        measures = self._measured()
        self.features = (analyzer.process(self._window, dt) if measures is None else
                         analyzer.apply(measures, dt))

    def _measured(self) -> Measures | None:
        """The newest window's measures where they were made off the frame (a live input's
        block analysis); None: `_window` holds the newest samples, measured here."""
        return None

    @property
    def has_data(self) -> bool:
        """True while real samples arrive (the seed's HasData)."""
        return self._has_data

    @property
    def rms(self) -> float:
        """Linear RMS of the newest samples, 1.0 = full scale (the seed's Rms)."""
        return self.features.rms

    @property
    def level(self) -> float:
        """0..1 loudness after auto-gain and smoothing: what drives the swarm's speed."""
        return self.features.level

    @property
    def peak_db(self) -> float:
        return self.features.peak_db

    @property
    def rms_db(self) -> float:
        return self.features.rms_db

    @property
    def bands(self) -> Bands:
        return self.features.bands

    @property
    def onset(self) -> bool:
        """True on the frame an onset was found."""
        return self.features.onset

    @property
    def onsets(self) -> int:
        """Onsets found since the start."""
        return self.features.onsets

    def sources(self) -> dict[str, float]:
        """Modulation source values for `control.parameters.modulation.modulate`."""
        return self.features.sources()

    def take_messages(self) -> list[str]:
        """New messages since the last call, each handed out once."""
        pending, self._pending = self._pending, []
        return pending

    def counters(self) -> dict[str, int]:
        """Blocks delivered and dropped; a device source overrides this."""
        return {"blocks": 0, "blocks_dropped": 0, "overflows": 0}

    def telemetry(self) -> dict[str, Any]:
        """The `audio` object of the instrument's telemetry."""
        f = self.features
        return {
            "device": self.device,
            "state": self.state,
            "message": self.message,
            "rate": self.rate,
            "rms": round(f.rms, 6),
            "rms_db": round(f.rms_db, 2) if f.rms_db > DB_FLOOR else None,
            "peak_db": round(f.peak_db, 2) if f.peak_db > DB_FLOOR else None,
            "level": round(f.level, 4),
            "bands": {name: round(value, 4) for name, value in f.bands._asdict().items()},
            "onsets": f.onsets,
            **self.counters(),
        }

    def close(self) -> None:
        """Stop any stream; the source then reads as silence."""


class Silence(AudioFrameSource):
    """No audio: used when there is no device or PortAudio, with the reason in `state`."""

    def __init__(self, state: str = "silence", message: str = "") -> None:
        super().__init__(DEFAULT_RATE, "", state, message)


class OfflineAudio(AudioFrameSource):
    """A whole recording analysed at chosen times: the offline renderer's audio.

    `update(t)` analyses the samples just before time t, so calling it at each frame's time
    in order gives the features a live run would have had at that moment. Going backwards
    starts the analysis over.

    The beat tracker is fed exactly the samples between the previous t and this one (the
    first call: from the start, or the `MAX_S` before t), so a render tracks the song's beats
    and gives the same `beat_info` every run; time past the song's end counts as silence.
    """

    tracks_beats = True

    def __init__(self, samples: np.ndarray, rate: float, name: str = "offline") -> None:
        super().__init__(rate, name, "offline")
        samples = np.asarray(samples, np.float32)
        self._samples = np.ascontiguousarray(
            samples.mean(axis=1, dtype=np.float32) if samples.ndim == 2 else samples)
        self._beat_end: int | None = None  # the next sample for the tracker

    @property
    def duration(self) -> float:
        return len(self._samples) / self.rate

    def _fill(self, now: float) -> bool:
        end = int(round(now * self.rate))
        if end <= 0 or end - len(self._window) >= len(self._samples):
            return False
        window = self._window
        start = end - len(window)
        got = self._samples[max(start, 0):min(end, len(self._samples))]
        window[:] = 0.0
        at = max(-start, 0)
        window[at:at + len(got)] = got
        self._has_data = end <= len(self._samples)
        return True

    def update(self, now: float) -> AudioFeatures:
        previous = self._last_now
        if previous is not None and now < previous - 1e-9:
            self.analyzer.reset()  # a seek backwards: start the analysis over
            self._last_now = None
            self._beats = self._new_tracker()
            self._beat_end = None
        return super().update(now)

    def _track_beats(self, now: float) -> BeatInfo | None:
        tracker = self._beats
        assert tracker is not None
        end = int(round(now * self.rate))
        if end <= 0:
            return None
        start = self._beat_end
        if start is None:  # the first frame: the position counts from the song's start
            start = max(0, end - int(MAX_S * self.rate))
            tracker.skip(start)
            self._hear(np.zeros(start, np.float32))
        elif end - start > MAX_S * self.rate:  # a jump forwards
            tracker.skip(end - int(MAX_S * self.rate) - start)
            self._hear(np.zeros(end - int(MAX_S * self.rate) - start, np.float32))
            start = end - int(MAX_S * self.rate)
        if end > start:
            stop = min(end, len(self._samples))
            if stop > start:
                tracker.feed(self._samples[start:stop])
                self._hear(self._samples[start:stop])
            tracker.skip(end - max(stop, start))  # past the end: silence
            self._hear(np.zeros(end - max(stop, start), np.float32))
            self._beat_end = end
        return tracker.info(end / self.rate)
