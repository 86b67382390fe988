"""The GPU swarm on OpenGL 4.1 core (macOS): no compute shaders, no storage buffers, no image
load/store. The same seed 000 arithmetic (shaders/boids.glsl), the same SwarmParams block and the
same interface as `visual.sim.swarm.Swarm`, so the show, the renderer and the tests take either.

The agents live in two RGBA32F textures (position with the id in w, velocity with the
neighbours seen in w: shaders/gl41_state.glsl), agent k at texel (k % STATE_WIDTH,
k / STATE_WIDTH). A step is a transform feedback pass (shaders/gl41_simulate.vert: one vertex
an agent, the rasteriser off) whose outputs are captured into three buffers, copied back into
the textures on the GPU (`Texture.write` from a buffer: a pixel unpack). With
`neighbors="grid"` the agents are first brought into cell order, in fragment passes:

    key      each agent's cell and its place: (key, k) pairs in an RG32UI texture, padded with
             keys that sort last to a power of two
    sort     a bitonic sort of the pairs in fragment passes of up to three of its stages each
             (51 passes for the 136 stages of 65,536 entries, 77 for 2^20's 210); the order is
             by key, then place: the same input, the same order, every run
    gather   the agents written in that order (two render targets: position, velocity)
    cells    each cell's [first, last) in that order, one point an agent at its cell's texel
             (only a cell's first and last agents are not clipped), stamped with the step, so
             that the table is never cleared
    simulate the 27 cells, as nine contiguous rows, read from the cell table

With `neighbors="brute"` the pass reads every agent (the seed's all pairs, O(N^2)): below
BRUTE_BELOW agents it is what "grid" runs too (on this backend the sort's fixed cost is
larger than the pairs there; benchmarks/bench_swarm.py --backend 4.1 measures both). The guard's
count (agents put back when non-finite) is a blended point a guarded agent into one float texel.
Nothing is read back to the CPU per step. Main thread only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import moderngl
import numpy as np

from swarm_instrument.visual.gpu.programs import ProgramSet
from swarm_instrument.visual.gpu.uniforms import SWARM_PARAMS, BlockBuffer
from swarm_instrument.visual.sim.agents import (
    pack_agents,
    spawn_state,
    step_values,
)
from swarm_instrument.visual.sim.grid import UNTIMED, GridShape, PassTimer, grid_shape
from swarm_instrument.visual.sim.state41 import (
    STATE_UNITS,
    STATE_WIDTH,
    StateTextures,
    program_410,
    release_framebuffer,
    sort_passes,
    sort_rows,
    state_rows,
)
from swarm_instrument.visual.sim.swarm_base import SwarmBase

Values = Mapping[str, Any]

CELL_WIDTH = 4096   # texels a row of the cell table
MAX_CELLS_41 = 1 << 24  # cells the table may take (16 bytes each: 256 MB at most)
CELLS_PER_AGENT_41 = 4  # the table is 16 bytes a cell (a compute grid's is 8)
MIN_CELLS_41 = 1 << 15
# Below this many agents "grid" runs the all-pairs pass: the sort's passes cost more than the
# pairs there. Measured with benchmarks/bench_swarm.py --backend 4.1 --variant g:brute_below=0 on
# llvmpipe (2 shared cores, 2026-12-01): all pairs 2.6 ms a step at 512 agents where the grid
# took 12.5; at 1,024 the two within the machine's noise (9.8-12.3 and 6.5-18 ms); at 1,536 the
# grid 1.6-3x faster. A GPU's crossover is for benchmarks/bench_swarm.py to say (README).
BRUTE_BELOW = 1024
SORT_STAGES = 3  # bitonic stages a sort pass runs (1 to 3; benchmarks/bench_swarm.py --variant)


def cell_budget_41(count: int) -> int:
    """The most cells worth having for `count` agents on this backend."""
    return min(MAX_CELLS_41, max(MIN_CELLS_41, CELLS_PER_AGENT_41 * count))


class Swarm41(SwarmBase):
    """The simulated swarm on a GL 4.1 core context (see the module's comment)."""

    backend = "4.1"
    lanes = 1  # one vertex an agent (the compute grid chooses its lanes per step)
    mean_candidates: float | None = None  # the compute grid's crowd measure: not taken here
    fixed_lag = False  # the show sets it for reproducible runs; nothing here reads late

    def __init__(self, ctx: moderngl.Context, values: Values, *, neighbors: str = "grid",
                 seed: int = 0, position: np.ndarray | None = None,
                 velocity: np.ndarray | None = None, shader_dir: Path | None = None,
                 tuning: Mapping[str, int] | None = None) -> None:
        super().__init__(ctx, values, neighbors, shader_dir)
        self.tuning = {"brute_below": BRUTE_BELOW, "sort_stages": SORT_STAGES, **(tuning or {})}
        self._outputs: list[moderngl.Buffer] = []  # the step's capture buffers
        self._programs = ProgramSet(self._build_programs)
        self._params = BlockBuffer(ctx, SWARM_PARAMS)
        self._guard_texture = ctx.texture((1, 1), 1, dtype="f4")
        self._guard_target = ctx.framebuffer([self._guard_texture])
        self._guard_target.clear(0.0, 0.0, 0.0, 0.0)
        self._current = self._sorted = None
        self._pairs: list[Any] = []
        self._cells: moderngl.Texture | None = None
        self._cells_target: moderngl.Framebuffer | None = None
        self._scatter: moderngl.Program | None = None
        self._count = 0
        self.last_path = neighbors  # the pass the last step ran: "grid" or "brute"
        if position is None:
            position, velocity = spawn_state(values["count"], values, seed)
        self.set_state(position, velocity)

    # ---- programs -----------------------------------------------------------------------------

    def _build_programs(self, built: dict[str, Any]) -> None:
        ctx, folder = self.ctx, self.shader_dir
        defines = {"STATE_WIDTH": STATE_WIDTH, "CELL_WIDTH": CELL_WIDTH}
        outputs = ("o_position", "o_velocity", "o_guard")
        for name, grid in (("brute", 0), ("grid", 1)):
            built[name] = program_410(ctx, "gl41_simulate.vert", None, folder,
                                      {**defines, "GRID": grid}, varyings=outputs,
                                      separate=True)
        built["key"] = program_410(ctx, "gl41_pass.vert", "gl41_key.frag", folder, defines)
        for stages in (1, 2, 3):
            built[f"sort{stages}"] = program_410(ctx, "gl41_pass.vert", "gl41_sort.frag",
                                                 folder, {**defines, "STAGES": stages},
                                                 block=None)
        built["gather"] = program_410(ctx, "gl41_pass.vert", "gl41_gather.frag", folder,
                                      defines)
        for name, first in (("cells_first", 1), ("cells_last", 0)):
            built[name] = program_410(ctx, "gl41_cells.vert", "gl41_cells.frag", folder,
                                      {**defines, "FIRST": first})
        built["spawn"] = program_410(ctx, "gl41_pass.vert", "gl41_spawn.frag", folder,
                                     defines)
        built["guard"] = program_410(ctx, "gl41_guard.vert", "gl41_guard.frag", folder,
                                     defines, block=None)
        for name in ("brute", "grid", "key", "sort1", "sort2", "sort3", "gather",
                     "cells_first", "cells_last", "spawn"):
            built[name + "_vao"] = ctx.vertex_array(built[name], [])
        if self._outputs:
            built["guard_vao"] = self._guard_vao(built["guard"])

    def _guard_vao(self, guard: moderngl.Program) -> moderngl.VertexArray:
        """The guard's points read the flags the step captured (made again with them)."""
        return self.ctx.vertex_array(guard, [(self._outputs[2], "f4", "in_guard")])

    # ---- state ------------------------------------------------------------------------------

    @property
    def positions(self) -> moderngl.Texture:
        """The latest positions (RGBA32F, agent k at texel (k % STATE_WIDTH, k // ...))."""
        return self._current.positions

    @property
    def velocities(self) -> moderngl.Texture:
        return self._current.velocities

    @property
    def grid_capacity(self) -> int:
        """Cells the cell table holds now."""
        return 0 if self._cells is None else self._cells.width * self._cells.height

    def _allocate(self, count: int) -> None:
        """Textures and capture buffers for `count` agents (the current state is the caller's
        to release)."""
        for obj in (self._sorted, *self._pairs[0::2], *self._outputs, self._scatter):
            if obj is not None:
                obj.release()
        self._current = StateTextures(self.ctx, count)
        self._sorted = StateTextures(self.ctx, count)
        pairs_size = (STATE_WIDTH, sort_rows(count))
        for obj in self._pairs[1::2]:
            release_framebuffer(obj)
        self._pairs = []
        for _ in range(2):
            texture = self.ctx.texture(pairs_size, 2, dtype="u4")
            texture.filter = (moderngl.NEAREST, moderngl.NEAREST)
            self._pairs.append((texture, self.ctx.framebuffer([texture])))
        self._pairs = [obj for pair in self._pairs for obj in pair]  # texture, fbo, texture...
        texels = STATE_WIDTH * state_rows(count)
        self._outputs = [self.ctx.buffer(reserve=texels * 16), self.ctx.buffer(reserve=texels * 16),
                         self.ctx.buffer(reserve=count * 4)]
        self._programs.put("guard_vao", self._guard_vao(self._programs["guard"]))
        self._scatter = None
        self._count = count

    def set_state(self, position: np.ndarray, velocity: np.ndarray, *,
                  same_crowd: bool = False) -> None:  # same_crowd: Swarm's (no crowd here)
        """Replace every agent (ids follow the row order); reallocates when the count changes."""
        position, velocity = self.checked_state(position, velocity)
        if self._current is None or self._count != len(position):
            if self._current is not None:
                self._current.release()
            self._allocate(len(position))
        agents = pack_agents(position, velocity)
        rows = state_rows(len(position))
        texels = np.zeros((STATE_WIDTH * rows, 8), np.float32)
        texels[:len(agents)] = agents
        self._current.positions.write(np.ascontiguousarray(texels[:, 0:4]).tobytes())
        self._current.velocities.write(np.ascontiguousarray(texels[:, 4:8]).tobytes())

    def resize(self, count: int, values: Values | None = None) -> None:
        """Change the number of agents on the GPU: agents with ids below `count` stay, new
        ones are spawned as the guard respawns them. No CPU upload, so no stalled frame."""
        if not self.resizing(count, values):
            return
        old, old_count = self._current, self._count
        self._allocate(count)
        self._write_params(self.values, 0.0, (0.0, 0.0, 0.0), 1.0, None)
        ctx = self.ctx
        ctx.disable(moderngl.BLEND | moderngl.DEPTH_TEST)
        target = self._current.framebuffer
        target.use()
        self._programs["spawn_vao"].render(moderngl.TRIANGLES, vertices=3)
        if self._scatter is None:
            self._scatter = program_410(
                ctx, "gl41_scatter.vert", "gl41_scatter.frag", self.shader_dir,
                {"STATE_WIDTH": STATE_WIDTH, "STATE_ROWS": state_rows(count)})
        old.use(0)
        vao = ctx.vertex_array(self._scatter, [])
        vao.render(moderngl.POINTS, vertices=old_count)
        vao.release()
        self._scatter.release()
        self._scatter = None
        old.release()

    def read_state(self) -> tuple[np.ndarray, np.ndarray]:
        """(position, velocity), (N, 3) float32, in id order. Waits for the GPU: not per frame."""
        n = self._count
        position = np.frombuffer(self._current.positions.read(), np.float32).reshape(-1, 4)[:n]
        velocity = np.frombuffer(self._current.velocities.read(), np.float32).reshape(-1, 4)[:n]
        order = np.argsort(position[:, 3], kind="stable")
        return position[order, 0:3].copy(), velocity[order, 0:3].copy()

    def read_guarded(self) -> int:
        """How many agents the non-finite guard has put back so far (waits for the GPU)."""
        return int(np.frombuffer(self._guard_texture.read(), np.float32)[0])

    # ---- the step ---------------------------------------------------------------------------

    def step(self, dt: float, values: Values | None = None,
             target: Sequence[float] = (0.0, 0.0, 0.0), speed_scale: float = 1.0) -> None:
        """Advance one step of min(dt, 1/30) seconds towards `target` (as Swarm.step)."""
        dt, p = self.step_inputs(dt, values)
        grid = self.neighbors == "grid" and self._count >= self.tuning["brute_below"]
        shape = None
        if grid:
            budget = self.max_cells if self.max_cells is not None else cell_budget_41(
                self._count)
            shape = grid_shape(p, budget)
            self._fit_cells(shape)
        self._write_params(p, dt, target, speed_scale, shape)
        timed = self.pass_timer or UNTIMED
        ctx = self.ctx
        ctx.disable(moderngl.BLEND | moderngl.DEPTH_TEST | moderngl.CULL_FACE)
        if grid:
            source = self._into_cell_order(shape, timed)
        else:
            source = self._current
        source.use(0)
        if grid:
            self._cells.use(STATE_UNITS["cell_table"])
        # A draw needs a complete framebuffer bound, rasteriser off or not (a surfaceless EGL
        # context has no default one): the guard's texel.
        self._guard_target.use()
        with timed("simulate"):
            vao = self._programs["grid_vao" if grid else "brute_vao"]
            vao.transform(self._outputs, moderngl.POINTS, vertices=self._count)
        with timed("copy"):  # the captured states back into the textures, on the GPU
            rows = state_rows(self._count)
            viewport = (0, 0, STATE_WIDTH, rows)
            self._current.positions.write(self._outputs[0], viewport=viewport)
            self._current.velocities.write(self._outputs[1], viewport=viewport)
        with timed("guard"):
            self._guard_target.use()
            ctx.enable(moderngl.BLEND)
            ctx.blend_func = moderngl.ONE, moderngl.ONE
            ctx.blend_equation = moderngl.FUNC_ADD
            self._programs["guard_vao"].render(moderngl.POINTS, vertices=self._count)
            ctx.disable(moderngl.BLEND)
        self.last_path = "grid" if grid else "brute"
        self.steps += 1

    def _fit_cells(self, shape: GridShape) -> None:
        """A cell table for `shape`'s cells, with a quarter to spare (a knob sweeping the
        radius does not remake it every frame); cleared when made: stamps start at 0."""
        rows = -(-shape.cells // CELL_WIDTH)
        if self._cells is not None and rows <= self._cells.height <= 4 * rows + 4:
            return
        if self._cells is not None:
            release_framebuffer(self._cells_target)
            self._cells.release()
        height = min(rows + rows // 4 + 1, -(-MAX_CELLS_41 // CELL_WIDTH))
        self._cells = self.ctx.texture((CELL_WIDTH, max(height, rows)), 4, dtype="f4")
        self._cells.filter = (moderngl.NEAREST, moderngl.NEAREST)
        self._cells_target = self.ctx.framebuffer([self._cells])
        self._cells_target.clear(0.0, 0.0, -1.0, 0.0)  # stamp -1: no step wrote it

    def _into_cell_order(self, shape: GridShape, timed: PassTimer) -> StateTextures:
        """Key, sort, gather and the cell table (see the module's comment); the state in
        cell order."""
        programs = self._programs
        first_texture, first_target, second_texture, second_target = self._pairs
        self._current.use(0)
        with timed("key"):
            first_target.use()
            programs["key_vao"].render(moderngl.TRIANGLES, vertices=3)
        entries = STATE_WIDTH * first_texture.height
        uniforms = {stages: (programs[f"sort{stages}"]["u_block"],
                             programs[f"sort{stages}"]["u_stride"]) for stages in (1, 2, 3)}
        reading, writing = (first_texture, first_target), (second_texture, second_target)
        with timed("sort"):
            for block, stride, stages in sort_passes(entries, self.tuning["sort_stages"]):
                reading[0].use(STATE_UNITS["pairs"])
                writing[1].use()
                block_uniform, stride_uniform = uniforms[stages]
                block_uniform.value = block
                stride_uniform.value = stride
                programs[f"sort{stages}_vao"].render(moderngl.TRIANGLES, vertices=3)
                reading, writing = writing, reading
        pairs = reading[0]
        pairs.use(STATE_UNITS["pairs"])
        with timed("gather"):
            target = self._sorted.framebuffer
            target.use()
            programs["gather_vao"].render(moderngl.TRIANGLES, vertices=3)
        with timed("cells"):
            table = self._cells_target
            table.viewport = (0, 0, CELL_WIDTH, -(-shape.cells // CELL_WIDTH))
            table.color_mask = (True, False, True, False)
            table.use()
            programs["cells_first_vao"].render(moderngl.POINTS, vertices=self._count)
            table.color_mask = (False, True, False, False)
            table.use()
            programs["cells_last_vao"].render(moderngl.POINTS, vertices=self._count)
            table.color_mask = (True, True, True, True)
        return self._sorted

    def _write_params(self, p: Values, dt: float, target: Sequence[float], speed_scale: float,
                      shape: GridShape | None) -> None:
        """SwarmParams for this step (the compute backend's block, the same fields)."""
        self._params.write(p, step_values(self, p, dt, target, speed_scale, shape))

    def release(self) -> None:
        self._programs.release()
        for framebuffer in (*self._pairs[1::2], self._cells_target, self._guard_target):
            if framebuffer is not None:
                release_framebuffer(framebuffer)
        for obj in (self._current, self._sorted, *self._pairs[0::2], *self._outputs,
                    self._cells, self._guard_texture):
            if obj is not None:
                obj.release()
        self._params.release()
        self._current = self._sorted = self._cells = self._cells_target = None
        self._pairs, self._outputs = [], []
