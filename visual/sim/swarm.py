"""The GPU swarm: agent buffers and the simulation step (seed 000, 5.1-5.4).

`Swarm` owns every GPU object of the simulation and releases them. Each step writes the
SwarmParams uniform block once (visual/gpu/uniforms.py: this step's parameters and derived values),
then reads the current agents and writes the other buffer (the seed's ping-pong, 5.2). With
`neighbors="grid"` the current buffer is kept in cell order (visual/sim/grid.py):

    simulate_grid  current -> scratch (same order), each agent's new cell and rank there,
                   `lanes` invocations an agent (TUNING)
    scan, scatter, order   scratch -> cell order, stable inside a cell -> current

With `neighbors="brute"` the seed's tiled all-pairs kernel reads current, writes scratch and
the two swap. Nothing is read back to the CPU per step. Main thread only. `pass_timer`, when
set (benchmarks/bench_swarm.py), is wrapped around each pass by name: simulate, scan, scatter,
order, and bin on a re-sort.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import moderngl
import numpy as np

from swarm_instrument.visual.gpu.context import is_software
from swarm_instrument.visual.gpu.fence import ReadbackRing
from swarm_instrument.visual.gpu.programs import (
    ProgramSet,
    compute_program,
    dispatch_1d,
    set_uniforms,
    storage_barrier,
)
from swarm_instrument.visual.gpu.uniforms import SWARM_PARAMS, BlockBuffer
from swarm_instrument.visual.sim.agents import (
    AGENT_BYTES,
    Values,
    pack_agents,
    spawn_state,
    step_values,
)
from swarm_instrument.visual.sim.grid import (
    LOCAL_SIZE,
    SCAN_BLOCK,
    SCAN_ITEMS,
    SCAN_LOCAL_SIZE,
    UNTIMED,
    CellGrid,
    GridShape,
    PassTimer,
    cell_budget,
    grid_shape,
    zeroed,
)
from swarm_instrument.visual.sim.swarm_base import SwarmBase

# The kernels that read SwarmParams (scan reads only its own plain uniforms).
KERNELS = {"brute": "simulate_brute.comp", "grid": "simulate_grid.comp", "bin": "bin.comp",
           "scatter": "scatter.comp", "order": "order.comp", "resize": "resize.comp"}
# simulate_grid.comp's settings (benchmarks/bench_swarm.py --variant times others): invocations an
# agent ("auto": chosen each step, below) and the workgroup size.
TUNING = {"lanes": "auto", "local_size": 128}
# Software GL (llvmpipe) runs invocations on CPU cores, which have no latency to hide: a lane an
# agent there (lanes=4 took 1.7-2x longer a step at 2,000 and 16,384 agents on two cores).
SOFTWARE_TUNING = {**TUNING, "lanes": 1}
AUTO_LANES = (1, 4)
# Their workgroup sizes: one lane an agent ran 5 % faster in groups of 64 at 4M settled (2.69
# against 2.84 ms), four share groups of 128 (32 agents).
AUTO_LOCAL_SIZE = {1: 64, 4: 128}
# How often the grid kernel measures the crowd (mean candidates an agent). A measurement is
# read once the GPU is done with it (a fence: never waiting), or, with `fixed_lag` (--dt,
# --render: the same run makes the same choices), at the step after the next measurement,
# waiting if the GPU is further behind than that.
CROWD_EVERY = 8
CROWD_UNIT = 32  # simulate_grid.comp adds up visited candidates / 32 (a uint holds 4M x 4095)
# Where one lane an agent beats four, by mean candidates, against log2(count): measured on the
# H200 (2026-12-01, benchmarks/bench_swarm.py, l1 against l4, simulate pass): four lanes win
# wherever the GPU has few agents to spread (0.21 against 0.74 ms at 16,384 settled, 776
# candidates), one wins a spread crowd of a million or more (0.35 against 0.50 ms at 1M, 104
# candidates; 1.29 against 2.04 at 4M), and four win again as it crowds (0.81 against 1.04 ms at 1M,
# 192); the break-even points below are where the two lines cross at 262,144, 1,048,576 and
# 4,194,304.
CROWD_BREAK_EVEN = ((17.0, 0.0), (18.0, 110.0), (20.0, 140.0), (22.0, 265.0))


def choose_lanes(count: int, mean_candidates: float | None) -> int:
    """Invocations an agent for the grid kernel: 1 for a big spread swarm, else 4. Before the
    first measurement a swarm of 2^18 or more is taken to be spread (the spawn)."""
    if mean_candidates is None:
        return 1 if count >= 1 << 18 else 4
    points = CROWD_BREAK_EVEN
    x = math.log2(max(count, 1))
    if x <= points[0][0]:
        return 4
    threshold = points[-1][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x <= x1:
            threshold = y0 + (y1 - y0) * (x - x0) / (x1 - x0)
            break
    return 1 if mean_candidates < threshold else 4


class Swarm(SwarmBase):
    """The simulated swarm on the GPU, in compute shaders (see the module's comment)."""

    backend = "4.3"  # compute shaders (visual/sim/swarm41.py: the GL 4.1 backend)

    def __init__(self, ctx: moderngl.Context, values: Values, *, neighbors: str = "grid",
                 seed: int = 0, position: np.ndarray | None = None,
                 velocity: np.ndarray | None = None, shader_dir: Path | None = None,
                 tuning: Mapping[str, int] | None = None) -> None:
        super().__init__(ctx, values, neighbors, shader_dir)
        self.tuning = {**(SOFTWARE_TUNING if is_software(ctx) else TUNING), **(tuning or {})}
        auto = self.tuning["lanes"] == "auto"
        self.lanes = 4 if auto else int(self.tuning["lanes"])  # the grid kernel's, this step
        self.mean_candidates: float | None = None  # the crowd last measured ("auto" lanes)
        self._programs = ProgramSet(self._build_programs)
        self._params = BlockBuffer(ctx, SWARM_PARAMS)
        self._stats = zeroed(ctx, 16)
        self._zero = zeroed(ctx, 4)  # copied over the crowd counter before a measured step
        self._crowd = ReadbackRing(ctx, 16, depth=2)  # the stats of measured steps, copied
        self._cells = CellGrid(ctx)
        self._sorted: GridShape | None = None  # the grid `current` is in cell order for
        self._current = self._scratch = self._cell_rank = self._slots = None
        if position is None:
            position, velocity = spawn_state(values["count"], values, seed)
        self.set_state(position, velocity)

    # ---- programs -----------------------------------------------------------------------------

    def _build_programs(self, built: dict[str, Any]) -> None:
        """Every kernel from the shader folder (ShaderError names the file and line)."""
        ctx, folder = self.ctx, self.shader_dir
        tuning = self.tuning
        for name, file in KERNELS.items():
            if name != "grid":
                built[name] = compute_program(ctx, file, {"LOCAL_SIZE": LOCAL_SIZE,
                                                          "SCAN_BLOCK": SCAN_BLOCK},
                                              folder, SWARM_PARAMS)
        auto = tuning["lanes"] == "auto"
        for lanes in self._lane_choices():
            for measure in (0, 1) if auto else (0,):
                local_size = AUTO_LOCAL_SIZE[lanes] if auto else tuning["local_size"]
                built[f"grid{lanes}" + "m" * measure] = compute_program(
                    ctx, KERNELS["grid"], {"LOCAL_SIZE": local_size, "LANES": lanes,
                                           "MEASURE": measure, "SCAN_BLOCK": SCAN_BLOCK},
                    folder, SWARM_PARAMS)
        built["scan"] = compute_program(
            ctx, "scan.comp", {"LOCAL_SIZE": SCAN_LOCAL_SIZE, "ITEMS": SCAN_ITEMS}, folder)

    def _local_size(self) -> int:
        if self.tuning["lanes"] == "auto":
            return AUTO_LOCAL_SIZE[self.lanes]
        return int(self.tuning["local_size"])

    def _lane_choices(self) -> tuple[int, ...]:
        return AUTO_LANES if self.tuning["lanes"] == "auto" else (int(self.tuning["lanes"]),)

    # ---- state ------------------------------------------------------------------------------

    def _order_lost(self) -> None:
        self._sorted = None  # brute steps do not keep cell order: re-sort first

    @property
    def grid_capacity(self) -> int:
        """Cells (plus one) the grid's buffers hold now: they follow neighbor_radius with a
        quarter to spare (the soak logs it beside the memory)."""
        return self._cells.capacity

    @property
    def current(self) -> moderngl.Buffer:
        """The buffer holding the latest state (Agent[count], 32 bytes each)."""
        return self._current

    def _allocate(self, count: int) -> None:
        """Agent buffers for `count` agents (the current one is the caller's to release)."""
        for buffer in (self._scratch, self._cell_rank, self._slots):
            if buffer is not None:
                buffer.release()
        self._current = self.ctx.buffer(reserve=count * AGENT_BYTES)
        self._scratch = self.ctx.buffer(reserve=count * AGENT_BYTES)
        self._cell_rank = self.ctx.buffer(reserve=count * 8)  # uvec2: new cell, rank there
        self._slots = self.ctx.buffer(reserve=count * 4)  # agents' indices, in cell order
        self._count = count

    def set_state(self, position: np.ndarray, velocity: np.ndarray, *,
                  same_crowd: bool = False) -> None:
        """Replace every agent (ids follow the row order); reallocates when the count changes.
        The crowd measured so far is forgotten, unless `same_crowd` (a benchmark setting the
        state it measured again)."""
        position, velocity = self.checked_state(position, velocity)
        if self._current is None or self._count != len(position):
            if self._current is not None:
                self._current.release()
            self._allocate(len(position))
        self._current.write(pack_agents(position, velocity).tobytes())
        self._sorted = None  # re-sort on the next step
        if not same_crowd:
            self._forget_crowd()

    def resize(self, count: int, values: Values | None = None) -> None:
        """Change the number of agents on the GPU: agents with ids below `count` stay where
        they are, new ones are spawned like the guard's. No CPU upload, so no stalled frame."""
        if not self.resizing(count, values):
            return
        old, old_count = self._current, self._count
        self._allocate(count)
        program = self._programs["resize"]
        self._write_params(self.values, 0.0, (0.0, 0.0, 0.0), 1.0, None)
        set_uniforms(program, {"u_old_count": old_count, "u_new_count": count})
        self._current.bind_to_storage_buffer(0)
        old.bind_to_storage_buffer(1)
        self._stats.bind_to_storage_buffer(5)
        dispatch_1d(program, max(old_count, count), LOCAL_SIZE)
        storage_barrier(self.ctx)
        old.release()
        self._sorted = None  # in id order now: re-sort on the next step
        self._forget_crowd()

    def read_state(self) -> tuple[np.ndarray, np.ndarray]:
        """(position, velocity), (N, 3) float32, in id order. Waits for the GPU: not per frame."""
        self.ctx.memory_barrier()  # buffer reads need BUFFER_UPDATE, not only shader storage
        agents = np.frombuffer(self._current.read(), np.float32).reshape(-1, 8)
        order = np.argsort(agents[:, 3], kind="stable")
        agents = agents[order]
        return agents[:, 0:3].copy(), agents[:, 4:7].copy()

    def read_guarded(self) -> int:
        """How many agents the non-finite guard has put back so far (waits for the GPU)."""
        self.ctx.memory_barrier()
        return int(np.frombuffer(self._stats.read(4), np.uint32)[0])

    # ---- the step ---------------------------------------------------------------------------

    def step(self, dt: float, values: Values | None = None,
             target: Sequence[float] = (0.0, 0.0, 0.0), speed_scale: float = 1.0) -> None:
        """Advance one step of min(dt, 1/30) seconds towards `target` (the lure).

        `values`: this frame's parameter values (the show's, modulated); names it leaves out
        are taken from the values the swarm was made with. `speed_scale` multiplies max_speed
        (the audio boost: 1 + level * audio_speed_boost). The count is the swarm's own.
        """
        dt, p = self.step_inputs(dt, values)
        grid = self.neighbors == "grid"
        shape = None
        if grid:
            budget = self.max_cells if self.max_cells is not None else cell_budget(self._count)
            shape = grid_shape(p, budget)
        measure = grid and self.tuning["lanes"] == "auto" and self._measure_crowd()
        if measure:
            self.ctx.copy_buffer(self._stats, self._zero, 4, write_offset=4)
        self._write_params(p, dt, target, speed_scale, shape)
        timed = self.pass_timer or UNTIMED
        simulate = self._programs[f"grid{self.lanes}" + "m" * measure if grid
                                  else self.neighbors]
        if not grid:
            self._current.bind_to_storage_buffer(0)
            self._scratch.bind_to_storage_buffer(1)
            self._stats.bind_to_storage_buffer(5)
            with timed("simulate"):
                dispatch_1d(simulate, self._count, LOCAL_SIZE)
                storage_barrier(self.ctx)
            self._current, self._scratch = self._scratch, self._current
        else:
            if shape != self._sorted:
                self._resort(shape, timed)
            self._current.bind_to_storage_buffer(0)
            self._scratch.bind_to_storage_buffer(1)
            self._cells.bind_starts()
            self._cells.bind_counts()
            self._cell_rank.bind_to_storage_buffer(4)
            self._stats.bind_to_storage_buffer(5)
            with timed("simulate"):
                dispatch_1d(simulate, self._count * self.lanes, self._local_size())
                storage_barrier(self.ctx)
            if measure:  # a copy to read later: the counter itself stays in GPU memory
                self.ctx.memory_barrier(moderngl.BUFFER_UPDATE_BARRIER_BIT)
                self._crowd.push(self._stats, self._count)
            # The new states, in the old order, back into `current` in cell order.
            self._cells.sort(self._programs, self._scratch, self._current, self._cell_rank,
                             self._slots, self._count, timed)
        self.steps += 1

    @property
    def fixed_lag(self) -> bool:
        """Read each crowd measurement at a fixed step, waiting if need be: runs repeat."""
        return self._crowd.fixed_lag

    @fixed_lag.setter
    def fixed_lag(self, value: bool) -> None:
        self._crowd.fixed_lag = bool(value)

    def _forget_crowd(self) -> None:
        """A new state (a load, a respawn, a resize): the crowd measured before it is stale
        (a spawn after a settled swarm ran four lanes on a spread million until measured)."""
        self.mean_candidates = None
        if getattr(self, "_crowd", None) is not None:
            self._crowd.drop()

    def _measure_crowd(self) -> bool:
        """Take the newest crowd measurement the GPU has finished and choose this step's lanes
        from it; whether this step measures again."""
        done = self._crowd.poll()
        if done is not None:
            data, count = done
            self.mean_candidates = int(np.frombuffer(data, np.uint32)[1]) * CROWD_UNIT / count
        self.lanes = choose_lanes(self._count, self.mean_candidates)
        return self.steps % CROWD_EVERY == 0

    def _write_params(self, p: Values, dt: float, target: Sequence[float], speed_scale: float,
                      shape: GridShape | None) -> None:
        """SwarmParams for this step, written once and bound for every pass that follows."""
        self._params.write(p, step_values(self, p, dt, target, speed_scale, shape))

    def _resort(self, shape: GridShape, timed: PassTimer = UNTIMED) -> None:
        """Bring `current` (in any order) into the cell order of `shape`, by id inside a cell
        when it is in id order (a load, a resize)."""
        self._cells.fit(shape)
        self._cells.bin(self._programs, self._current, self._cell_rank, self._count, timed)
        self._cells.sort(self._programs, self._current, self._scratch, self._cell_rank,
                         self._slots, self._count, timed)
        self._current, self._scratch = self._scratch, self._current
        self._sorted = shape

    def release(self) -> None:
        self._programs.release()
        for buffer in (self._current, self._scratch, self._cell_rank, self._slots, self._stats,
                       self._zero):
            if buffer is not None:
                buffer.release()
        self._params.release()
        self._cells.release()
        self._current = self._scratch = self._cell_rank = self._slots = self._stats = None
        self._zero = None
        self._crowd.release()
