"""The live input's beat tracker fed on a thread of its own, off the frame.

The beat tracker costs the frame about 0.4 ms a hop (two hops a 60 fps frame on the H200's
host, where the rest of a silent frame is 0.58 ms), and the live form (audio/form/form_live.py,
a sample listener) more. A live show's input (audio/input/live_input.py) therefore hands its
samples to this thread instead of feeding them itself: `ThreadedRingFeed` is a RingBeatFeed
(audio/analysis/beat_feed.py) whose feeding and skipping are queued, in order, for the thread,
which makes exactly the calls the frame would have made (the tracker's and the listeners'),
so the beats are the same; the frame only copies the new samples out of the ring (a few
kilobytes) and asks the tracker for its view.

Everything that reads or changes the tracker or the listeners' state on the main thread does
it holding `lock` (the source's `beat_lock`): the frame's `info`, the tempo range, the live
autopilot reading its form. The thread holds it for one queued step at a time (at most CHUNK
samples: a few hops), so the frame waits for one step at most. An error on the thread stops
it; the frame's next `update` raises it where the synchronous feed would have raised its own.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

import numpy as np

from swarm_instrument.audio.analysis.beat_feed import MAX_S, BeatFeed, RingBeatFeed
from swarm_instrument.audio.analysis.beats import BeatInfo, BeatTracker
from swarm_instrument.audio.input.ring import Ring

CHUNK = 1024  # samples fed in one step on the thread (two hops at 48 kHz)
JOIN_S = 2.0  # close() waits this long for a step under way


class ThreadedRingFeed(RingBeatFeed):
    """A RingBeatFeed whose tracker and listeners are fed on a thread of its own (see the
    module). `close()` must be called: it stops the thread."""

    def __init__(self, tracker: BeatTracker, max_s: float = MAX_S,
                 listeners: list[Callable[[np.ndarray], None]] | None = None) -> None:
        super().__init__(tracker, max_s, listeners)
        self.lock = threading.Lock()
        self._steps: queue.SimpleQueue = queue.SimpleQueue()
        self._pending = 0  # samples queued and not yet fed or skipped (under `lock`)
        self._error: BaseException | None = None
        self.fed_on_thread = 0  # samples the thread fed or skipped
        self._thread = threading.Thread(target=self._run, name="beat tracker", daemon=True)
        self._thread.start()

    # -- the frame (main thread) ----------------------------------------------------------
    def update(self, ring: Ring, now: float) -> BeatInfo | None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return super().update(ring, now)

    def _feed(self, samples: np.ndarray) -> None:
        for start in range(0, len(samples), CHUNK):
            self._queue(samples[start:start + CHUNK].copy())  # the ring's buffer is reused

    def _skip(self, count: int) -> None:
        self.skipped += count
        if count > 0:
            self._queue(count)

    def _queue(self, step: np.ndarray | int) -> None:
        with self.lock:
            self._pending += step if isinstance(step, int) else len(step)
        self._steps.put(step)

    def _info(self, at: float) -> BeatInfo | None:
        """The tracker's view at the newest sample it has been fed (`at` is the newest one's
        in the ring, some of which may still be queued)."""
        with self.lock:
            return self.tracker.info(at - self._pending / self.rate)

    def close(self) -> None:
        """Stop the thread once the step under way is done (the rest are dropped)."""
        self._steps.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join(JOIN_S)

    # -- the thread -----------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            step = self._steps.get()
            if step is None:
                return
            try:
                with self.lock:
                    if isinstance(step, int):
                        BeatFeed._skip_now(self, step)
                        count = step
                    else:
                        BeatFeed._feed(self, step)
                        count = len(step)
                    self._pending -= count
                    self.fed_on_thread += count
            except BaseException as exc:  # noqa: BLE001 - told to the frame, which says it
                self._error = exc
                return
