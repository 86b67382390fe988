"""A preallocated mono float32 ring buffer between the audio callback and the main thread.

Written by the audio callback thread (`write`, `note_status`): it only copies, allocates no
arrays, takes no lock and never raises, because an exception or a stall there loses audio.
Read by the main thread (`read_newest`) once a frame. There is no lock: the writer stores a
block before it advances `written`, and the reader copies only samples older than the
`written` it saw, which the writer cannot reach again while a read is shorter than
`capacity - max_block`.
"""

from __future__ import annotations

import numpy as np


class Ring:
    """Newest audio samples, mixed to mono, with counters of what could not be stored."""

    def __init__(self, capacity: int = 1 << 16, max_read: int = 4096) -> None:
        if capacity & (capacity - 1) or capacity <= max_read:
            raise ValueError(f"capacity must be a power of two above max_read, got {capacity}")
        self.capacity = capacity
        self.max_read = max_read
        self.max_block = capacity - max_read  # larger blocks would overwrite a read in progress
        self._mask = capacity - 1
        self._data = np.zeros(capacity, np.float32)
        self.written = 0  # samples stored since the start; only the writer changes it
        self.blocks = 0  # blocks stored: the watchdog watches this move
        self.malformed = 0  # blocks that were not float arrays of a usable shape
        self.oversized = 0  # blocks larger than max_block
        self.errors = 0  # anything else that went wrong in the callback
        self.overflows = 0  # input overflows the driver reported (samples lost before us)

    @property
    def dropped(self) -> int:
        """Blocks that reached the callback but were not stored."""
        return self.malformed + self.oversized + self.errors

    def write(self, block: object) -> None:
        """Store one block: (frames,) or (frames, channels) floats, mixed to mono. Never raises."""
        try:
            if not isinstance(block, np.ndarray) or block.dtype.kind != "f":
                self.malformed += 1
                return
            if block.ndim == 2 and block.shape[1] >= 1:
                frames = block.shape[0]
            elif block.ndim == 1:
                frames = block.shape[0]
            else:
                self.malformed += 1
                return
            if frames == 0:
                self.malformed += 1
                return
            if frames > self.max_block:
                self.oversized += 1
                return
            start = self.written & self._mask
            first = min(frames, self.capacity - start)
            self._store(block, 0, first, start)
            if first < frames:
                self._store(block, first, frames, 0)
            self.written += frames
            self.blocks += 1
        except Exception:  # noqa: BLE001 - the callback thread must survive anything
            self.errors += 1

    def _store(self, block: np.ndarray, begin: int, end: int, at: int) -> None:
        # element-wise ufuncs on float32 views need no buffers; a reduction (np.mean over the
        # channel axis) would allocate numpy's iteration buffer on every call
        out = self._data[at:at + end - begin]
        if block.ndim == 1:
            np.copyto(out, block[begin:end], casting="same_kind")
            return
        channels = block.shape[1]
        np.copyto(out, block[begin:end, 0], casting="same_kind")
        if channels > 1:
            for channel in range(1, channels):
                np.add(out, block[begin:end, channel], out=out, casting="same_kind")
            np.multiply(out, 1.0 / channels, out=out, casting="same_kind")

    def note_status(self, status: object) -> None:
        """Count an input overflow from sounddevice's CallbackFlags. Never raises."""
        try:
            if status and getattr(status, "input_overflow", False):
                self.overflows += 1
        except Exception:  # noqa: BLE001
            self.errors += 1

    def read_newest(self, out: np.ndarray) -> None:
        """Copy the newest len(out) samples into `out`, oldest first; zeros before the start."""
        n = len(out)
        if n > self.max_read:
            raise ValueError(f"cannot read {n} samples at once (max_read is {self.max_read})")
        end = self.written  # one snapshot: the writer may move on while we copy
        start = end - n
        if start < 0:
            out[:-start] = 0.0
            head = -start
            start = 0
        else:
            head = 0
        count = end - start
        if count <= 0:
            return
        at = start & self._mask
        first = min(count, self.capacity - at)
        out[head:head + first] = self._data[at:at + first]
        if first < count:
            out[head + first:head + count] = self._data[:count - first]
