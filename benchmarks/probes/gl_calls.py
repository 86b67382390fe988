"""The CPU time the main thread spends inside GL calls, method by method: moderngl's call
methods (and the fences' ctypes calls) wrapped with `time.thread_time` while a `GlCalls` is
active, so a frame's CPU splits into the driver's work (inside the calls) and the show's own
Python (the rest). Each wrapped call costs about a microsecond more: the split is for finding
where the time goes, the unwrapped frame for the figure. For benchmarks/bench_frame.py --split.
"""

from __future__ import annotations

import time
from collections import Counter

import moderngl

from swarm_instrument.visual.gpu.fence import Fences

WRAPPED = (
    (moderngl.ComputeShader, ("run", "run_indirect")),
    (moderngl.VertexArray, ("render", "render_indirect")),
    (moderngl.Buffer, ("write", "read", "bind_to_uniform_block", "bind_to_storage_buffer")),
    (moderngl.Context, ("copy_buffer", "memory_barrier", "finish", "enable", "disable")),
    (moderngl.Framebuffer, ("use", "clear")),
    (moderngl.Texture, ("use", "bind_to_image")),
    (moderngl.Query, ("__enter__", "__exit__")),
    (Fences, ("insert", "signalled", "delete")),
)


class GlCalls:
    """`with GlCalls() as calls:` ... `calls.ms` (method -> total ms), `calls.count`."""

    def __init__(self) -> None:
        self.ms: Counter[str] = Counter()
        self.count: Counter[str] = Counter()
        self._saved: list[tuple[type, str, object]] = []

    def __enter__(self) -> GlCalls:
        for cls, names in WRAPPED:
            for name in names:
                original = cls.__dict__.get(name)
                if original is None:
                    continue
                self._saved.append((cls, name, original))
                setattr(cls, name, self._wrap(original, f"{cls.__name__}.{name}"))
        return self

    def _wrap(self, original, label: str):
        ms, count, clock = self.ms, self.count, time.thread_time

        def timed(*args, **kwargs):
            start = clock()
            try:
                return original(*args, **kwargs)
            finally:
                ms[label] += (clock() - start) * 1e3
                count[label] += 1
        return timed

    def __exit__(self, *exc: object) -> None:
        for cls, name, original in reversed(self._saved):
            setattr(cls, name, original)
        self._saved.clear()

    def total_ms(self) -> float:
        return sum(self.ms.values())
