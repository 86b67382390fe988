"""The live input's beat tracker fed on a thread of its own, off the frame.

The beat tracker costs the frame about 0.4 ms a hop (two hops a 60 fps frame on the H200's
host, where a whole silent frame is about 0.6 ms), and the live form (audio/form/form_live.py,
a sample listener) more. A live show's input (audio/input/live_input.py) therefore hands its
samples to this thread instead of feeding them itself: `ThreadedRingFeed` is a RingBeatFeed
(audio/analysis/beat_feed.py) whose feeding and skipping are queued, in order, for the thread,
which makes exactly the calls the frame would have made (the tracker's and the listeners'),
so the beats are the same; the frame only copies the new samples out of the ring (a few
kilobytes) and asks the tracker for its view.

Everything that reads or changes the tracker or the listeners' state on the main thread does
it holding `lock` (the source's `beat_lock`): the frame's `info`, the tempo range, the live
autopilot reading its form. The thread holds it for one step at a time (a frame's samples, in
the chunks the frame read them in), and the frame asks for its view before it hands its new
samples over, so it waits only where the thread is still on the last frame's. An error on the
thread stops it; the frame's next `update` raises it where the frame's own feeding would
have.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

import numpy as np

from swarm_instrument.audio.analysis.beat_feed import MAX_S, BeatFeed, RingBeatFeed
from swarm_instrument.audio.analysis.beats import BeatInfo, BeatTracker
from swarm_instrument.audio.input.ring import Ring

JOIN_S = 2.0  # close() waits this long for a step under way


class ThreadedRingFeed(RingBeatFeed):
    """A RingBeatFeed whose tracker and listeners are fed on a thread of its own (see the
    module). `close()` must be called: it stops the thread."""

    def __init__(self, tracker: BeatTracker, max_s: float = MAX_S,
                 listeners: list[Callable[[np.ndarray], None]] | None = None) -> None:
        super().__init__(tracker, max_s, listeners)
        self.lock = threading.Lock()
        self._steps: queue.SimpleQueue = queue.SimpleQueue()
        self._held: list[np.ndarray | int] = []  # this frame's steps, queued after its `info`
        self._queued = 0  # samples handed to the thread (the frame's count)
        self._done = 0  # ... and fed or skipped there (the thread's, under `lock`)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="beat tracker", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        """Samples handed to the thread and not yet fed or skipped there."""
        return self._queued - self._done

    @property
    def fed_on_thread(self) -> int:
        """Samples the thread has fed or skipped."""
        return self._done

    # -- the frame (main thread) ----------------------------------------------------------
    def update(self, ring: Ring, now: float) -> BeatInfo | None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return super().update(ring, now)

    def _feed(self, samples: np.ndarray) -> None:
        self._hold(samples.copy())  # the ring's buffer is reused: a copy, in the frame's chunk

    def _skip_now(self, count: int) -> None:
        if count > 0:
            self._hold(count)

    def _hold(self, step: np.ndarray | int) -> None:
        self._queued += step if isinstance(step, int) else len(step)
        self._held.append(step)

    def _info(self, at: float) -> BeatInfo | None:
        """The tracker's view at the newest sample it has been fed (`at` is the newest one's
        in the ring, some of which may still be queued); then this frame's samples go to the
        thread: asked first, the tracker is seldom in the middle of a step."""
        with self.lock:
            info = self.tracker.info(at - self.pending / self.rate)
        for step in self._held:
            self._steps.put(step)
        self._held.clear()
        return info

    def close(self) -> None:
        """Stop the thread once the step under way is done (the rest are dropped)."""
        self._held.clear()
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
                        self._done += step
                    else:
                        BeatFeed._feed(self, step)
                        self._done += len(step)
            except BaseException as exc:  # noqa: BLE001 - told to the frame, which says it
                self._error = exc
                return
