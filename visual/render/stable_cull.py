"""The cull in agent order, for reproducible runs (--dt, --render): the same frames every run.

The live cull (shaders/cull.comp) appends each workgroup's visible agents at a place taken with
a global atomic, so the lists come out in whatever order the workgroups ran (on llvmpipe, the
order its threads happen to finish in). Opaque agents with depth do not care; additive light
does: a pixel's sum in another order rounds to other half-floats, and a render is no longer bit
for bit the same. `StableCull` runs the same test in three passes instead:

    classify  cull.comp with STABLE: the counts and sums as live, plus each agent's list (none,
              near, far) and each workgroup's near and far counts
    scan      cull_scan.comp: the counts become each workgroup's first place in the two lists
    place     cull_place.comp: each visible agent written at its workgroup's place plus its
              rank in the workgroup (prefix sums in shared memory, no atomics)

so both lists hold the visible agents in ascending order. Owns its programs and its two
buffers (a word an agent, two a workgroup). Main thread only.
"""

from __future__ import annotations

from pathlib import Path

import moderngl

from swarm_instrument.visual.gpu.programs import (
    ProgramOwner,
    ProgramSet,
    compute_program,
    dispatch_1d,
    storage_barrier,
)
from swarm_instrument.visual.gpu.shaders import resolve_shader_dir
from swarm_instrument.visual.gpu.uniforms import FRAME_PARAMS

SCAN_LOCAL_SIZE = 256  # invocations of the one scan workgroup, each summing a run of groups


class StableCull(ProgramOwner):
    """The three passes; `local_size`: the cull's workgroup size (the renderer's)."""

    def __init__(self, ctx: moderngl.Context, local_size: int, *,
                 shader_dir: Path | None = None) -> None:
        self.ctx = ctx
        self.local_size = local_size
        self.shader_dir = resolve_shader_dir(shader_dir)
        self._programs = ProgramSet(self._build_programs)
        self._classes: moderngl.Buffer | None = None
        self._groups: moderngl.Buffer | None = None
        self._capacity = 0

    def _build_programs(self, built: dict[str, moderngl.ComputeShader]) -> None:
        sizes = {"LOCAL_SIZE": self.local_size}
        built["classify"] = compute_program(self.ctx, "cull.comp", {**sizes, "STABLE": 1},
                                            self.shader_dir, FRAME_PARAMS)
        built["scan"] = compute_program(
            self.ctx, "cull_scan.comp",
            {"LOCAL_SIZE": SCAN_LOCAL_SIZE, "CULL_LOCAL_SIZE": self.local_size},
            self.shader_dir, FRAME_PARAMS)
        built["place"] = compute_program(self.ctx, "cull_place.comp", sizes, self.shader_dir,
                                         FRAME_PARAMS)

    def _ensure(self, count: int) -> None:
        if count <= self._capacity:
            return
        for buffer in (self._classes, self._groups):
            if buffer is not None:
                buffer.release()
        groups = -(-count // self.local_size)
        self._classes = self.ctx.buffer(reserve=4 * count)
        self._groups = self.ctx.buffer(reserve=8 * groups)
        self._capacity = count

    def run(self, count: int) -> None:
        """The three passes over `count` agents. The caller has bound the agents (0), the lists
        (1) and the draw state (2), reset as for the live cull, and the FrameParams block."""
        self._ensure(count)
        self._classes.bind_to_storage_buffer(3)
        self._groups.bind_to_storage_buffer(4)
        dispatch_1d(self._programs["classify"], count, self.local_size)
        storage_barrier(self.ctx)
        self._programs["scan"].run(1, 1, 1)
        storage_barrier(self.ctx)
        dispatch_1d(self._programs["place"], count, self.local_size)

    def release(self) -> None:
        self._programs.release()
        for obj in (self._classes, self._groups):
            if obj is not None:
                obj.release()
        self._classes = self._groups = None
        self._capacity = 0
