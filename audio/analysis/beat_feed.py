"""Feeds a ring's new samples to a beat tracker, in order, and tells when they were heard.

Main thread only, once a frame, from a source's `update(now)` (audio/base.py): the ring's
`written` counter says which samples are new since the last frame; they are read
(`Ring.read_from`) in chunks into one preallocated buffer and fed to the tracker. After a
stall longer than `max_s` only the newest `max_s` are read and the rest skipped, so a frame
never waits on a backlog; samples overwritten before they could be read are skipped too.

The newest sample's time in the caller's clock is estimated from the frames' `now`: a sample
cannot have arrived after the frame that first saw it, so `now - written / rate` over-states
the stream's start by the wait between a block's arrival and the next frame (up to a frame
and a block); the smallest value over the last WINDOW_S (a block soon after the frame, often)
is taken. A jump above it larger than GAP_S is time without samples (the stream lost and
reopened, a worker restarted): the tracker counts it as skipped samples and the estimate
starts over from there.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from audio.analysis.beats import BeatInfo, BeatTracker
from audio.input.ring import Ring

MAX_S = 2.0  # at most this much sound is caught up in one frame
CHUNK = 4096  # samples copied at a time
WINDOW_S = 2.0  # the arrival estimate is the earliest over this long
GAP_S = 0.25  # samples arriving this much later than due: a gap in the stream


class RingBeatFeed:
    """Follows one ring (another one, or a ring that started over, is followed from its
    start) for `tracker`."""

    def __init__(self, tracker: BeatTracker, max_s: float = MAX_S) -> None:
        self.tracker = tracker
        self.rate = tracker.rate
        self.max_s = max_s
        self._ring: Ring | None = None
        self._next = 0  # the next sample to read, as `written` counts
        self._chunk = np.zeros(CHUNK, np.float32)
        self._offsets: deque[tuple[float, float]] = deque()  # (now, start estimate), rising
        self.skipped = 0  # samples never fed: stalls, overwrites, gaps

    def _start_estimate(self, now: float, written: int) -> float:
        """When the stream's sample 0 was heard, in the caller's clock."""
        offset = now - written / self.rate
        offsets = self._offsets
        if offsets and offset > offsets[0][1] + GAP_S:  # time passed without samples
            gap = round((offset - offsets[0][1]) * self.rate)
            self.tracker.skip(gap)
            self.skipped += gap
            offsets.clear()
        while offsets and offsets[-1][1] >= offset:
            offsets.pop()
        offsets.append((now, offset))
        while offsets[0][0] < now - WINDOW_S:
            offsets.popleft()
        return offsets[0][1]

    def update(self, ring: Ring, now: float) -> BeatInfo | None:
        """Feed what arrived since the last call; this frame's BeatInfo."""
        written = ring.written
        if ring is not self._ring or written < self._next:
            self._ring, self._next = ring, 0
            self._offsets.clear()
        tracker = self.tracker
        start = self._start_estimate(now, written)  # a gap counts before the samples after it
        cap = min(int(self.max_s * self.rate), ring.capacity - ring.max_read)
        if written - self._next > cap:  # a stall: skip ahead rather than stall the frame
            lost = written - cap - self._next
            tracker.skip(lost)
            self.skipped += lost
            self._next = written - cap
        while self._next < written:
            count = min(written - self._next, CHUNK)
            chunk = self._chunk[:count]
            if ring.read_from(self._next, chunk):
                tracker.feed(chunk)
            else:  # overwritten under us
                tracker.skip(count)
                self.skipped += count
            self._next += count
        return tracker.info(start + written / self.rate)
