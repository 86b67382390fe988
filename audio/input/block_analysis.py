"""The live input's analysis per block, off the frame: the newest window measured each time a
block lands in the ring, for the frame to track at its late latch.

The window's arithmetic (its RMS and peak, the spectrum, the bands, the flux:
audio/analysis/window_measure.py) cost the show's main thread a quarter of a millisecond a
paced frame, most of it numpy calls made cold after the frame's idle. Here it runs where the
samples arrive: on a thread of the audio worker's process (audio/input/worker.py; in the
show's process for a stand-in sounddevice), woken through a pipe by the stream's callback,
which stays a copy and one non-blocking write. It publishes each window's `Measures` in the
ring's `FeatureSlot` (after the samples, in the same shared memory) with the count of samples
it had seen; the frame reads them there and tracks and judges a few floats
(`Analyzer.apply`). What the measuring needs of the frame (the auto-gain's tracked peak, the
onsets' compression and lag, the window sizes) the frame writes into the slot's settings.

The slot is a sequence lock: the one writer makes its counter odd, stores, makes it even; a
reader that saw the counter odd or changed reads again. Stores are in program order
(CPython, and x86-64 keeps them so), as for the ring itself (ring.py).
"""

from __future__ import annotations

import math
import os
import select
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

import numpy as np

from swarm_instrument.audio.analysis.features import Analyzer, LevelSettings, OnsetSettings
from swarm_instrument.audio.analysis.window_measure import Measures, WindowMeasure

if TYPE_CHECKING:
    from swarm_instrument.audio.input.ring import Ring

# the slot's int64 words, then its float64 words (measures, then the frame's settings)
_SEQ, _END, _STATE, _COUNT = range(4)
_MEASURES = slice(4, 11)  # rms, rms_db, peak_db, low, mid, high, flux
_SETTINGS = slice(11, 16)  # peak_db (the gain's), compression, lag_s, fft_size, level_window
WORDS = 16
NONE, RUNNING, FAILED = 0, 1, 2  # the slot's state: who measures
IDLE_WAKE_S = 0.5  # the thread looks for its stop this often without blocks
JOIN_S = 1.0
_DEFAULTS = (LevelSettings().min_peak_db, OnsetSettings().compression, OnsetSettings().lag_s,
             2048.0, 1024.0)


class FeatureSlot:
    """The newest window's measures and the frame's settings, in WORDS words of `buffer` at
    `offset` (shared with another process, or the ring's own memory)."""

    nbytes = WORDS * 8

    def __init__(self, buffer: Any, offset: int) -> None:
        self._ints = np.frombuffer(buffer, np.int64, WORDS, offset)
        self._floats = np.frombuffer(buffer, np.float64, WORDS, offset)

    def clear(self) -> None:
        """Nothing measured, nobody measuring (a new writer's start)."""
        self._ints[_STATE] = NONE
        self._ints[_COUNT] = 0

    def release(self) -> None:
        """Keep private copies: the shared memory may close."""
        self._ints = self._ints.copy()
        self._floats = self._ints.view(np.float64)  # still one memory, two views

    @property
    def state(self) -> int:
        return int(self._ints[_STATE])

    @state.setter
    def state(self, value: int) -> None:
        self._ints[_STATE] = value

    @property
    def count(self) -> int:
        """Windows measured since the last `clear`."""
        return int(self._ints[_COUNT])

    # -- the measuring side -----------------------------------------------------------------
    def publish(self, end: int, measures: Measures) -> None:
        ints = self._ints
        seq = int(ints[_SEQ])
        ints[_SEQ] = seq + 1
        ints[_END] = end
        low, mid, high = measures.bands_db
        self._floats[_MEASURES] = (measures.rms, measures.rms_db, measures.peak_db, low, mid,
                                   high, measures.flux)
        ints[_COUNT] += 1
        ints[_SEQ] = seq + 2

    def settings(self) -> tuple[float, float, float, int, int]:
        """The frame's: the tracked peak (dB), compression, lag (s), FFT and level windows;
        the analysis' defaults until the frame wrote them."""
        peak, compression, lag, fft, level = self._floats[_SETTINGS].tolist()
        if fft < 16 or level < 1:
            peak, compression, lag, fft, level = _DEFAULTS
        return peak, compression, lag, int(fft), int(level)

    # -- the frame's side -------------------------------------------------------------------
    def set_settings(self, peak_db: float, compression: float, lag_s: float, fft_size: int,
                     level_window: int) -> None:
        self._floats[_SETTINGS] = (peak_db, compression, lag_s, fft_size, level_window)

    def read(self) -> tuple[int, Measures] | None:
        """(samples seen, measures) of the newest window measured; None where none was, or
        the writer kept the slot changing under every try."""
        ints = self._ints
        for _ in range(16):
            seq = int(ints[_SEQ])
            if seq & 1:
                continue
            end = int(ints[_END])
            rms, rms_db, peak, low, mid, high, flux = self._floats[_MEASURES].tolist()
            if int(ints[_SEQ]) == seq:
                if not ints[_COUNT]:
                    return None
                return end, Measures(rms, rms_db, peak, (low, mid, high), flux)
        return None

    def newest(self, end: int, wait_s: float) -> tuple[int, Measures] | None:
        """`read`, waiting up to `wait_s` (in sleeps of a tenth of a millisecond) for a window
        of at least `end` samples seen while the analysis runs; the newest there is then
        (None: none yet). None at once where no analysis runs."""
        if self.state != RUNNING:
            return None
        got = self.read()
        if got is not None and got[0] >= end:
            return got
        deadline = time.perf_counter() + wait_s
        while time.perf_counter() < deadline and self.state == RUNNING:
            time.sleep(0.0001)
            newer = self.read()
            if newer is not None:
                got = newer
                if got[0] >= end:
                    break
        return got


class LatchedMeasures:
    """The frame's side of the slot: each frame it writes the settings the measuring needs
    and takes the newest window's measures. A window it took before has nothing new for the
    onsets to judge (its flux is NaN); with no analysis running, None: the frame measures."""

    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s
        self.end: int | None = None  # the samples the last measures taken had seen

    def measures(self, slot: FeatureSlot, analyzer: Analyzer, end: int) -> Measures | None:
        onsets = analyzer.onset_settings
        slot.set_settings(analyzer.level_tracker.peak_db, onsets.compression, onsets.lag_s,
                          analyzer.fft_size, analyzer.level_window)
        got = slot.newest(end, self.wait_s)
        if got is None:
            if self.end is not None:  # the frame's own spectra are from before the analysis
                analyzer.measure.reset()
            self.end = None
            return None
        seen, measures = got
        if seen == self.end:
            measures = measures._replace(flux=math.nan)
        self.end = seen
        return measures


class BlockAnalysis:
    """Measures the newest window of `ring` after each block, on a thread of its own, into
    `ring.features`. `wake` is the stream callback's (never blocks, never raises); `start`
    once the stream's rate is known; `stop` at the end."""

    def __init__(self, ring: Ring) -> None:
        self.ring = ring
        self.rate = 0.0
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._stopping = False
        self._thread: threading.Thread | None = None

    def wake(self) -> None:
        """A block was stored (the stream's callback): one byte down a non-blocking pipe."""
        try:
            os.write(self._wake_w, b"\0")
        except OSError:  # full (the thread is behind: it reads the newest anyway), or closed
            pass

    def start(self, rate: float) -> None:
        self.rate = float(rate)
        self.ring.features.clear()
        self.ring.features.state = RUNNING
        self._thread = threading.Thread(target=self._run, name="block analysis", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (once its window under way is measured) and close the pipe."""
        self._stopping = True
        self.wake()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(JOIN_S)
            if thread.is_alive():
                return  # the pipe is left to it
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def _run(self) -> None:
        slot = self.ring.features
        window = np.zeros(self.ring.max_read, np.float32)
        measure: WindowMeasure | None = None
        done = -1
        try:
            while not self._stopping:
                ready, _, _ = select.select([self._wake_r], [], [], IDLE_WAKE_S)
                if ready:
                    self._drain()
                written = self.ring.written
                if written == done or written == 0 or self._stopping:
                    continue
                peak, compression, lag, fft, level = slot.settings()
                if measure is None or (measure.fft_size, measure.level_window) != (fft, level):
                    measure = WindowMeasure(self.rate, fft, level)
                size = min(measure.window_size, len(window))
                end = self.ring.read_newest(window[:size])  # where the copy ended
                gain = 10.0 ** (-peak / 20.0) if math.isfinite(peak) else 1.0
                slot.publish(end, measure.measure(window[:size], gain, compression, lag,
                                                  end / self.rate))
                done = end
        except Exception:  # noqa: BLE001 - said on stderr; the frame measures for itself
            slot.state = FAILED
            traceback.print_exc(file=sys.stderr)
            return
        if slot.state == RUNNING:
            slot.state = NONE

    def _drain(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except OSError:  # empty (BlockingIOError) or closed
            pass
