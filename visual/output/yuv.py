"""A render's frames turned into 4:2:0 video on the GPU (shaders/yuv420.comp) and read back two
frames late, so the frame loop never waits for a frame to finish and the encoder's thread
gets planes x264 takes as they are (no RGB read back, flipped and converted on the CPU).

    capture(texture, tag)   after frame `tag` is drawn into `texture` (RGBA8): its planes are
                            made into the next of `depth` buffers; returns the frames whose
                            planes are ready, oldest first: with depth 3, the one captured two
                            frames before (its GPU work long done, so reading it is a copy)
    flush()                 the frames still in the ring, oldest first (at the end)

Frames come out in the order they went in and none is dropped: a render keeps every frame.
Owns its program and buffers (`release()`). Main thread only.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

import moderngl

from swarm_instrument.visual.gpu.programs import compute_program
from swarm_instrument.visual.gpu.shaders import resolve_shader_dir
from swarm_instrument.visual.output.video import Planes420

DEPTH = 3
BLOCK = (8, 2)  # pixels an invocation makes (yuv420.comp)
LOCAL_SIZE = 8
GL_BUFFER_UPDATE_BARRIER_BIT = 0x00000200
GL_SHADER_STORAGE_BARRIER_BIT = 0x00002000


def supported(size: tuple[int, int]) -> bool:
    """Sizes the GPU conversion takes: a width of whole 8-pixel blocks, an even height."""
    return size[0] % BLOCK[0] == 0 and size[1] % BLOCK[1] == 0


class YuvReadback:
    """See the module. `size` must be `supported`."""

    def __init__(self, ctx: moderngl.Context, size: tuple[int, int], depth: int = DEPTH,
                 shader_dir: Path | None = None) -> None:
        if not supported(size):
            raise ValueError(f"{size[0]}x{size[1]}: the GPU conversion takes widths of whole "
                             f"{BLOCK[0]}-pixel blocks and even heights")
        self.ctx = ctx
        self.size = (int(size[0]), int(size[1]))
        self.frame_bytes = self.size[0] * self.size[1] * 3 // 2
        self._program = compute_program(ctx, "yuv420.comp", None, resolve_shader_dir(shader_dir))
        self._buffers = [ctx.buffer(reserve=self.frame_bytes) for _ in range(depth)]
        self._pending: deque[tuple[int, int]] = deque()  # (tag, slot), oldest first
        self._next = 0

    def capture(self, texture: moderngl.Texture, tag: int) -> list[tuple[int, Planes420]]:
        ready = []
        if len(self._pending) == len(self._buffers):
            ready.append(self._read(*self._pending.popleft()))
        slot = self._next % len(self._buffers)
        self._next += 1
        texture.use(0)
        self._buffers[slot].bind_to_storage_buffer(0)
        width, height = self.size
        groups_x = -(-width // BLOCK[0] // LOCAL_SIZE)
        groups_y = -(-height // BLOCK[1] // LOCAL_SIZE)
        self._program.run(groups_x, groups_y, 1)
        # the planes are read with a buffer copy; the frame's texture is drawn into again
        self.ctx.memory_barrier(GL_BUFFER_UPDATE_BARRIER_BIT | GL_SHADER_STORAGE_BARRIER_BIT)
        self._pending.append((tag, slot))
        return ready

    def flush(self) -> list[tuple[int, Planes420]]:
        ready = [self._read(*entry) for entry in self._pending]
        self._pending.clear()
        return ready

    def _read(self, tag: int, slot: int) -> tuple[int, Planes420]:
        return tag, Planes420(self.size, self._buffers[slot].read())

    def release(self) -> None:
        for buffer in self._buffers:
            buffer.release()
        self._buffers = []
        self._program.release()
