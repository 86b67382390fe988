"""Feeds a beat tracker every new sample of a stream, in order, and tells when they were heard.

Main thread only, once a frame, from a source's `update(now)` (audio/base.py). Two streams:

- a ring (`RingBeatFeed`: the live input): the ring's `written` counter says which samples
  are new since the last frame; they are read (`Ring.read_from`) in chunks into one
  preallocated buffer and fed to the tracker. After a stall longer than `max_s` only the
  newest `max_s` are read and the rest skipped, so a frame never waits on a backlog; samples
  overwritten before they could be read are skipped too.
- a sound file played from its start (`FileBeatFeed`: --audio-file): `played` says how many
  samples went out (to the speakers, or by the clock when muted); each is fed from the file
  itself, so none is lost however long the frame was, the ring's size notwithstanding. Only a
  stall longer than FILE_MAX_S (a debugger, a suspended laptop: no frame rate) skips the older
  part, counted. The tracker takes about 16 ms of CPU a second of sound (0.26 ms a 60 fps
  frame, benchmarks/bench_beats.py), so catching up a frame of any length costs about 1.6 %
  of it.

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
from collections.abc import Callable

import numpy as np

from swarm_instrument.audio.analysis.beats import BeatInfo, BeatTracker
from swarm_instrument.audio.input.ring import Ring

MAX_S = 2.0  # at most this much sound is caught up in one frame from a ring
FILE_MAX_S = 30.0  # ... and from a file (about 0.15 s of CPU)
CHUNK = 4096  # samples copied at a time
WINDOW_S = 2.0  # the arrival estimate is the earliest over this long
GAP_S = 0.25  # samples arriving this much later than due: a gap in the stream


class BeatFeed:
    """What both feeds share: the tracker, the arrival estimate and the samples skipped.
    `listeners` (callables) get every sample the tracker gets, in order, and zeros for the
    samples it skips, so their count stays the tracker's (the song's form follows them)."""

    def __init__(self, tracker: BeatTracker, max_s: float,
                 listeners: list[Callable[[np.ndarray], None]] | None = None) -> None:
        self.tracker = tracker
        self.listeners = listeners if listeners is not None else []
        self.rate = tracker.rate
        self.max_s = max_s
        self._next = 0  # the next sample to feed, counted from the stream's first
        self._offsets: deque[tuple[float, float]] = deque()  # (now, start estimate), rising
        self.skipped = 0  # samples never fed: stalls, overwrites, gaps

    def _start_estimate(self, now: float, written: int) -> float:
        """When the stream's sample 0 was heard, in the caller's clock."""
        offset = now - written / self.rate
        offsets = self._offsets
        if offsets and offset > offsets[0][1] + GAP_S:  # time passed without samples
            gap = round((offset - offsets[0][1]) * self.rate)
            self._skip(gap)
            offsets.clear()
        while offsets and offsets[-1][1] >= offset:
            offsets.pop()
        offsets.append((now, offset))
        while offsets[0][0] < now - WINDOW_S:
            offsets.popleft()
        return offsets[0][1]

    def _skip(self, count: int) -> None:
        self.skipped += count
        self._skip_now(count)

    def _skip_now(self, count: int) -> None:
        self.tracker.skip(count)
        if self.listeners and count > 0:
            silence = np.zeros(count, np.float32)
            for listen in self.listeners:
                listen(silence)

    def _feed(self, samples: np.ndarray) -> None:
        self.tracker.feed(samples)
        for listen in self.listeners:
            listen(samples)

    def _info(self, at: float) -> BeatInfo | None:
        """The tracker's view, `at` being the newest sample's time in the caller's clock."""
        return self.tracker.info(at)

    def _catch_up(self, written: int, cap: int) -> None:
        """After a stall longer than `cap` samples: skip ahead rather than stall the frame."""
        if written - self._next > cap:
            self._skip(written - cap - self._next)
            self._next = written - cap


class RingBeatFeed(BeatFeed):
    """Follows one ring (another one, or a ring that started over, is followed from its
    start) for `tracker`."""

    def __init__(self, tracker: BeatTracker, max_s: float = MAX_S,
                 listeners: list[Callable[[np.ndarray], None]] | None = None) -> None:
        super().__init__(tracker, max_s, listeners)
        self._ring: Ring | None = None
        self._chunk = np.zeros(CHUNK, np.float32)

    def update(self, ring: Ring, now: float) -> BeatInfo | None:
        """Feed what arrived since the last call; this frame's BeatInfo."""
        written = ring.written
        if ring is not self._ring or written < self._next:
            self._ring, self._next = ring, 0
            self._offsets.clear()
        start = self._start_estimate(now, written)  # a gap counts before the samples after it
        self._catch_up(written, min(int(self.max_s * self.rate), ring.capacity - ring.max_read))
        while self._next < written:
            count = min(written - self._next, CHUNK)
            chunk = self._chunk[:count]
            if ring.read_from(self._next, chunk):
                self._feed(chunk)
            else:  # overwritten under us
                self._skip(count)
            self._next += count
        return self._info(start + written / self.rate)


class FileBeatFeed(BeatFeed):
    """Follows a file's mono `samples` played from `offset` (the first by default), looping:
    the stream's sample k is `samples[(offset + k) % len(samples)]`."""

    def __init__(self, tracker: BeatTracker, samples: np.ndarray,
                 max_s: float = FILE_MAX_S,
                 listeners: list[Callable[[np.ndarray], None]] | None = None,
                 offset: int = 0) -> None:
        super().__init__(tracker, max_s, listeners)
        self.samples = np.ascontiguousarray(samples, np.float32)
        self.offset = offset

    @property
    def fed(self) -> int:
        """Samples of the stream counted so far (fed, or skipped after a stall)."""
        return self._next

    def update(self, played: int, now: float) -> BeatInfo | None:
        """Feed every sample played since the last call, in order; this frame's BeatInfo."""
        start = self._start_estimate(now, played)  # a gap counts before the samples after it
        self._catch_up(played, int(self.max_s * self.rate))
        total = len(self.samples)
        while self._next < played:
            at = (self.offset + self._next) % total
            count = min(played - self._next, total - at)
            self._feed(self.samples[at:at + count])  # a view: nothing copied
            self._next += count
        return self._info(start + played / self.rate)
