"""GL timer queries read without waiting: each is read once a fence says the GPU has finished
it. Main thread only, with the context current.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import moderngl

from swarm_instrument.visual.gpu.context import is_software
from swarm_instrument.visual.gpu.fence import fences_for


class GpuTimer:
    """GL timer queries read once a fence says the GPU has finished them, so reading never
    stalls the frame (without fences: read a few frames late, which waits only when the GPU
    is further behind than that). The fence is the next one anyone inserts (the renderer's,
    once a frame: visual/gpu/fence.py `Fences.cover`), not one a query: each costs the CPU.

    `available` is False where the driver has no meaningful timer queries (software GL):
    `last_ms` then stays None and callers fall back to wall time around `ctx.finish()`.

    `every`: one use in that many is timed (TIME_EVERY: 15 times a second at 60 fps, where
    the HUD shows them 4 times and telemetry once): a query begun, ended and read costs the
    frame's CPU, and a show runs four timers a frame. 1 times each.
    """

    def __init__(self, ctx: moderngl.Context, depth: int = 3, every: int = 4) -> None:
        self.ctx = ctx
        self.every = max(1, int(every))
        self._wait = 0  # uses left untimed before the next timed one
        self._free = deque()
        self.available = not is_software(ctx)
        if self.available:
            try:
                self._free.extend(ctx.query(time=True) for _ in range(depth))
            except Exception:
                self.available = False
        self._fences = fences_for(ctx) if self.available else None
        self._pending: deque = deque()  # (query, fence), oldest first
        self.last_ms: float | None = None

    def __enter__(self) -> "GpuTimer":
        if self._wait > 0:
            self._wait -= 1
            self._active = None
            return self
        self._wait = self.every - 1
        if self.available and self._free:
            query = self._free.popleft()
            self._active = query
            query.__enter__()
        else:
            self._active = None  # every query still in flight: this frame goes untimed
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._active is None and not self._pending:
            return
        fences = self._fences
        if fences is not None and self._pending:
            fences.cover(self._pending[0][1])  # nobody fenced last time's query: we do
        if self._active is not None:
            self._active.__exit__(*exc)
            self._pending.append((self._active, fences.issued + 1 if fences else 0))
        if fences is not None:
            while self._pending and fences.has_passed(self._pending[0][1]):
                self._read_oldest()
        elif not self._free and self._pending:
            self._read_oldest()  # a few frames old

    def _read_oldest(self) -> None:
        query, _ = self._pending.popleft()
        self.last_ms = query.elapsed / 1e6
        self._free.append(query)

    def flush(self) -> float | None:
        """Read every pending query (waits for the GPU): for benchmarks and the end of a run."""
        while self._pending:
            self._read_oldest()
        return self.last_ms

    def release(self) -> None:
        # moderngl's Query has no release(); dropping the references frees them.
        self._free.clear()
        self._pending.clear()
