"""A preallocated mono float32 ring buffer between an audio callback and the main thread.

Written by one audio callback thread (`write`, `note_status`): it only copies, allocates no
arrays, takes no lock and never raises, because an exception or a stall there loses audio.
Read by the main thread once a frame: `read_newest` for the analysis window and `read_from`
for every sample since the last frame, in order (the beat tracker's feed). There is no lock:
the writer stores a block before it advances `written`, and the reader copies only samples
older than the `written` it saw, which the writer cannot reach again while a read is shorter
than `capacity - max_block`. `read_from` may reach further back: before storing a block the
writer publishes `reserved` (where the block will end), and a copy that such a block could
have overwritten is reported as torn rather than trusted.

The ring can live in memory of its own or in a buffer shared with another process
(`create_in` / `attach`, over `multiprocessing.shared_memory`): the live input's worker process
writes it there and the show's process reads it. Its counters then live in the same buffer,
as sixteen int64 words before the samples (nine used), each changed by the writer alone
with one aligned 8-byte store. CPython stores in program order and x86-64 keeps stores in
order, so a reader that sees `written` move also sees the samples stored before it. After
the samples is the block analysis's `FeatureSlot` (audio/input/block_analysis.py): the
newest window's measures, written beside the samples.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from swarm_instrument.audio.input.block_analysis import FeatureSlot

HEADER_WORDS = 16  # int64 words before the samples
MAGIC = 0x5357524D52494E48  # "SWRMRINH": a shared buffer that really holds a ring (this layout)
(_MAGIC, _CAPACITY, _WRITTEN, _BLOCKS, _MALFORMED, _OVERSIZED, _ERRORS, _OVERFLOWS,
 _RESERVED) = range(9)
DEFAULT_CAPACITY = 1 << 17  # 2.7 s at 48 kHz: the beat tracker catches up after a 2 s stall
DEFAULT_MAX_READ = 4096


class Ring:
    """Newest audio samples, mixed to mono, with counters of what could not be stored."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, max_read: int = DEFAULT_MAX_READ,
                 buffer: Any = None) -> None:
        if capacity & (capacity - 1) or capacity <= max_read:
            raise ValueError(f"capacity must be a power of two above max_read, got {capacity}")
        self.capacity = capacity
        self.max_read = max_read
        self.max_block = capacity - max_read  # larger blocks would overwrite a read in progress
        self._mask = capacity - 1
        own = buffer is None
        if own:
            buffer = bytearray(self.nbytes(capacity))
        elif len(buffer) < self.nbytes(capacity):
            raise ValueError(f"a ring of {capacity} samples needs {self.nbytes(capacity)} "
                             f"bytes, the buffer has {len(buffer)}")
        self._counts = np.frombuffer(buffer, np.int64, HEADER_WORDS)
        self._data = np.frombuffer(buffer, np.float32, capacity, HEADER_WORDS * 8)
        self.features = FeatureSlot(buffer, HEADER_WORDS * 8 + capacity * 4)
        if own:
            self._counts[_MAGIC], self._counts[_CAPACITY] = MAGIC, capacity

    @staticmethod
    def nbytes(capacity: int = DEFAULT_CAPACITY) -> int:
        """Bytes a shared buffer needs for a ring of `capacity` samples."""
        return HEADER_WORDS * 8 + capacity * 4 + FeatureSlot.nbytes

    @classmethod
    def create_in(cls, buffer: Any, capacity: int = DEFAULT_CAPACITY,
                  max_read: int = DEFAULT_MAX_READ) -> Ring:
        """A new, empty ring in a (shared) buffer: the owner's side."""
        ring = cls(capacity, max_read, buffer)
        ring._counts[:] = 0
        ring._data[:] = 0.0
        ring.features.clear()
        ring._counts[_CAPACITY] = capacity
        ring._counts[_MAGIC] = MAGIC
        return ring

    @classmethod
    def attach(cls, buffer: Any, max_read: int = DEFAULT_MAX_READ) -> Ring:
        """The ring another process made in `buffer` with `create_in`: the writer's side."""
        header = np.frombuffer(buffer, np.int64, HEADER_WORDS)
        if int(header[_MAGIC]) != MAGIC:
            raise ValueError("the shared buffer holds no audio ring")
        capacity = int(header[_CAPACITY])
        del header  # a view left behind would keep the shared memory from closing
        return cls(capacity, max_read, buffer)

    # -- counters: in the header, so a reader in another process sees them -----------------
    @property
    def written(self) -> int:
        """Samples stored since the start; only the writer changes it."""
        return int(self._counts[_WRITTEN])

    @property
    def blocks(self) -> int:
        """Blocks stored: the watchdog watches this move."""
        return int(self._counts[_BLOCKS])

    @property
    def malformed(self) -> int:
        """Blocks that were not float arrays of a usable shape."""
        return int(self._counts[_MALFORMED])

    @property
    def oversized(self) -> int:
        """Blocks larger than max_block."""
        return int(self._counts[_OVERSIZED])

    @property
    def errors(self) -> int:
        """Anything else that went wrong in the callback."""
        return int(self._counts[_ERRORS])

    @property
    def overflows(self) -> int:
        """Input overflows the driver reported (samples lost before us)."""
        return int(self._counts[_OVERFLOWS])

    @property
    def dropped(self) -> int:
        """Blocks that reached the callback but were not stored."""
        return self.malformed + self.oversized + self.errors

    # -- the writer --------------------------------------------------------------------------
    def write(self, block: object) -> None:
        """Store one block: (frames,) or (frames, channels) floats, mixed to mono. Never raises."""
        counts = self._counts
        try:
            if not isinstance(block, np.ndarray) or block.dtype.kind != "f":
                counts[_MALFORMED] += 1
                return
            if block.ndim == 2 and block.shape[1] >= 1:
                frames = block.shape[0]
            elif block.ndim == 1:
                frames = block.shape[0]
            else:
                counts[_MALFORMED] += 1
                return
            if frames == 0:
                counts[_MALFORMED] += 1
                return
            if frames > self.max_block:
                counts[_OVERSIZED] += 1
                return
            written = int(counts[_WRITTEN])
            counts[_RESERVED] = written + frames  # before the samples: see read_from
            start = written & self._mask
            first = min(frames, self.capacity - start)
            self._store(block, 0, first, start)
            if first < frames:
                self._store(block, first, frames, 0)
            counts[_WRITTEN] = written + frames  # after the samples: the reader trusts this
            counts[_BLOCKS] += 1
        except Exception:  # noqa: BLE001 - the callback thread must survive anything
            counts[_ERRORS] += 1

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
                self._counts[_OVERFLOWS] += 1
        except Exception:  # noqa: BLE001
            self._counts[_ERRORS] += 1

    # -- the reader --------------------------------------------------------------------------
    def read_newest(self, out: np.ndarray) -> int:
        """Copy the newest len(out) samples into `out`, oldest first; zeros before the start.
        Returns the samples written when it read (the copy's end)."""
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
            return end
        at = start & self._mask
        first = min(count, self.capacity - at)
        out[head:head + first] = self._data[at:at + first]
        if first < count:
            out[head + first:head + count] = self._data[:count - first]
        return end

    def read_from(self, start: int, out: np.ndarray) -> bool:
        """Copy samples start .. start + len(out) (counted as `written` counts them, all
        already written) into `out`. False when they are gone: overwritten before or during
        the copy, so `out` holds nothing to trust."""
        n = len(out)
        if start < 0 or start + n > self.written:
            raise ValueError(f"samples {start}..{start + n} are not all written yet")
        if n == 0:
            return True
        at = start & self._mask
        first = min(n, self.capacity - at)
        out[:first] = self._data[at:at + first]
        if first < n:
            out[first:] = self._data[:n - first]
        # a block being stored ends at `reserved` and overwrites capacity samples before it
        return start >= int(self._counts[_RESERVED]) - self.capacity

    def clear(self) -> None:
        """Silence every stored sample (counters stay): a new writer must not replay a dead
        one's last second, nor its measures be taken for the new one's. Only while no writer
        runs."""
        self._data[:] = 0.0
        self.features.clear()

    def release(self) -> None:
        """Let go of a shared buffer: keep private copies, so it can be closed and unlinked
        while this ring (its counters for telemetry) lives on."""
        self._counts = self._counts.copy()
        self._data = self._data.copy()
        self.features.release()
