"""The GPU swarm: agent buffers, the uniform grid and the simulation step (seed 000, 5.1-5.4).

`Swarm` owns every GPU object of the simulation and releases them. Each step reads the current
agents and writes the other buffer (the seed's ping-pong, 5.2). With `neighbors="grid"` the
current buffer is kept in cell order:

    simulate_grid  current -> scratch, counting each agent's new cell (rank = atomicAdd)
    scan           cell counts -> cell starts (2-3 dispatches), zeroing the counts
    scatter        scratch -> current at start[cell] + rank, sorted for the next step
    order          inside each cell, by agent id (atomics rank in any order): deterministic

With `neighbors="brute"` the seed's tiled all-pairs kernel reads current, writes scratch and
the two swap. Nothing is read back to the CPU per step. Main thread only.
"""

from __future__ import annotations

import math
from collections import ChainMap
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import moderngl
import numpy as np

from visual.gl import compute_program, dispatch_1d, set_uniforms

Values = Mapping[str, Any]  # parameter name -> this frame's value (plain numbers)

LOCAL_SIZE = 256
SCAN_LOCAL_SIZE = 256
SCAN_ITEMS = 4
SCAN_BLOCK = SCAN_LOCAL_SIZE * SCAN_ITEMS
MAX_CELLS = 1 << 24
MIN_CELLS = 1 << 15
CELLS_PER_AGENT = 16  # more cells than this only adds scan work: the cells are mostly empty
MAX_OBSTACLES = 8
MAX_DT = 1.0 / 30.0  # the seed clamps a frame's step so a hitch does not explode the flock
AGENT_BYTES = 32
MAX_COUNT = 1 << 24  # agent ids are stored as float32 on the GPU: exact below 2^24
NEIGHBOR_MODES = ("grid", "brute")

RULE_BITS = {"separation": 1, "alignment": 2, "cohesion": 4, "seek": 8, "containment": 16}


@dataclass(frozen=True)
class GridShape:
    """Where the uniform grid lies: cells of `cell` units, `dims` of them, from `origin`."""

    origin: tuple[float, float, float]
    cell: float
    dims: tuple[int, int, int]

    @property
    def cells(self) -> int:
        return self.dims[0] * self.dims[1] * self.dims[2]


def cell_budget(count: int) -> int:
    """The most cells worth having for `count` agents: every frame scans and clears all of
    them, so a tiny neighbor_radius must not ask 16M cells for 16K agents (it did in the soak:
    frames of 15-60 ms and 170 MB of grid). Past CELLS_PER_AGENT a cell per agent, a finer grid
    would only save candidates of crowded cells, at the cost of scanning empty ones."""
    return min(MAX_CELLS, max(MIN_CELLS, CELLS_PER_AGENT * count))


def grid_shape(params: Values, max_cells: int | None = None) -> GridShape:
    """The grid for these parameters: it covers the containment sphere (or the wrap box).

    Cells are `neighbor_radius` wide, or wider when that would need more than `max_cells`
    (default: `cell_budget` of the count): a wider cell is still exact (only slower), a
    narrower one would miss neighbours.
    """
    if max_cells is None:
        max_cells = cell_budget(params["count"])
    radius = params["contain_radius"]
    extent = radius if params["boundary"] == "wrap" else radius * 1.25
    flat = params["dimensions"] == 2
    cell = params["neighbor_radius"]
    per_axis = max_cells if flat else round(max_cells ** (1 / 3))
    cell = max(cell, 2 * extent / per_axis * (1 + 1e-6))
    if flat:
        cell = max(cell, 2 * extent / math.isqrt(max_cells) * (1 + 1e-6))
    n = max(1, math.ceil(2 * extent / cell))
    dims = (n, n, 1 if flat else n)
    origin = (-n * cell / 2, -n * cell / 2, 0.0 if flat else -n * cell / 2)
    return GridShape(origin, cell, dims)


def scan_levels(n: int) -> list[int]:
    """Values at each level of the blocked prefix sum: n, then one block total per block."""
    sizes = [n]
    while sizes[-1] > SCAN_BLOCK:
        sizes.append(-(-sizes[-1] // SCAN_BLOCK))
    return sizes


def spawn_state(count: int, params: Values, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The seed's spawn: positions inside a sphere of spawn_radius, velocities on a sphere of
    max_speed / 2 (a disc and a circle in 2D). Same seed, same start."""
    rng = np.random.default_rng(seed)
    flat = params["dimensions"] == 2
    dims = 2 if flat else 3
    direction = rng.normal(size=(count, dims))
    direction /= np.maximum(np.linalg.norm(direction, axis=1, keepdims=True), 1e-12)
    radius = params["spawn_radius"] * rng.random(count) ** (1.0 / dims)
    position = np.zeros((count, 3), np.float32)
    position[:, :dims] = direction * radius[:, None]
    heading = rng.normal(size=(count, dims))
    heading /= np.maximum(np.linalg.norm(heading, axis=1, keepdims=True), 1e-12)
    velocity = np.zeros((count, 3), np.float32)
    velocity[:, :dims] = heading * params["max_speed"] * 0.5
    return position, velocity


def pack_agents(position: np.ndarray, velocity: np.ndarray) -> np.ndarray:
    """(N, 3) position and velocity -> the (N, 8) float32 GPU layout with ids in position.w."""
    count = len(position)
    agents = np.zeros((count, 8), np.float32)
    agents[:, 0:3] = position
    agents[:, 3] = np.arange(count, dtype=np.float32)
    agents[:, 4:7] = velocity
    return agents


class Swarm:
    """The simulated swarm on the GPU."""

    def __init__(self, ctx: moderngl.Context, values: Values, *, neighbors: str = "grid",
                 seed: int = 0, position: np.ndarray | None = None,
                 velocity: np.ndarray | None = None) -> None:
        if neighbors not in NEIGHBOR_MODES:
            raise ValueError(f"neighbors must be one of {NEIGHBOR_MODES}, got {neighbors!r}")
        self.ctx = ctx
        self.values = values  # the parameters' values: as made, then each step's
        self._neighbors = neighbors
        self.steps = 0
        self.obstacles: list[tuple[float, float, float, float]] = []
        self._programs = self._build_programs()
        self._stats = ctx.buffer(reserve=16)
        self._stats.clear()
        self._grid: GridShape | None = None
        self._grid_buffers: list[moderngl.Buffer] = []
        self._grid_capacity = 0  # entries the counts and starts buffers hold
        self.max_cells: int | None = None  # None: cell_budget(count)
        self._current = self._scratch = self._rank = None
        if position is None:
            position, velocity = spawn_state(values["count"], values, seed)
        self.set_state(position, velocity)

    # ---- programs -----------------------------------------------------------------------------

    def _build_programs(self) -> dict[str, moderngl.ComputeShader]:
        """Compile every kernel from shaders/ (ShaderError names the file and line)."""
        ctx, defines = self.ctx, {"LOCAL_SIZE": LOCAL_SIZE}
        built: dict[str, moderngl.ComputeShader] = {}
        try:
            for name, file in (("brute", "simulate_brute.comp"), ("grid", "simulate_grid.comp"),
                               ("bin", "bin.comp"), ("scatter", "scatter.comp"),
                               ("order", "order.comp"), ("resize", "resize.comp")):
                built[name] = compute_program(ctx, file, defines)
            built["scan"] = compute_program(
                ctx, "scan.comp", {"LOCAL_SIZE": SCAN_LOCAL_SIZE, "ITEMS": SCAN_ITEMS})
        except Exception:
            for program in built.values():
                program.release()
            raise
        return built

    def reload_shaders(self) -> None:
        """Recompile from shaders/; on an error (ShaderError, raised) the running kernels stay."""
        programs = self._build_programs()
        for program in self._programs.values():
            program.release()
        self._programs = programs

    # ---- state ------------------------------------------------------------------------------

    @property
    def neighbors(self) -> str:
        """How neighbours are found: "grid" (uniform grid) or "brute" (the seed's all pairs)."""
        return self._neighbors

    @neighbors.setter
    def neighbors(self, mode: str) -> None:
        if mode not in NEIGHBOR_MODES:
            raise ValueError(f"neighbors must be one of {NEIGHBOR_MODES}, got {mode!r}")
        if mode != self._neighbors:
            self._neighbors = mode
            self._grid = None  # brute steps do not keep cell order: re-sort first

    @property
    def grid_capacity(self) -> int:
        """Cells (plus one) the grid's buffers hold now: they follow neighbor_radius with a
        quarter to spare (the soak logs it beside the memory)."""
        return self._grid_capacity

    @property
    def count(self) -> int:
        return self._count

    @property
    def current(self) -> moderngl.Buffer:
        """The buffer holding the latest state (Agent[count], 32 bytes each)."""
        return self._current

    def set_state(self, position: np.ndarray, velocity: np.ndarray) -> None:
        """Replace every agent (ids follow the row order); reallocates when the count changes."""
        position = np.ascontiguousarray(position, np.float32).reshape(-1, 3)
        velocity = np.ascontiguousarray(velocity, np.float32).reshape(-1, 3)
        if len(position) != len(velocity) or not 1 <= len(position) <= MAX_COUNT:
            raise ValueError(f"need 1..{MAX_COUNT} agents with matching position and velocity")
        count = len(position)
        if self._current is None or self._count != count:
            for buffer in (self._current, self._scratch, self._rank):
                if buffer is not None:
                    buffer.release()
            self._current = self.ctx.buffer(reserve=count * AGENT_BYTES)
            self._scratch = self.ctx.buffer(reserve=count * AGENT_BYTES)
            self._rank = self.ctx.buffer(reserve=count * 4)
            self._count = count
        self._current.write(pack_agents(position, velocity).tobytes())
        self._grid = None  # re-sort on the next step

    def _barrier(self) -> None:
        """Between compute passes: shader storage writes become visible to the next pass (and to
        the renderer's cull and vertex shaders). Narrower than all bits: cheaper on NVIDIA."""
        self.ctx.memory_barrier(moderngl.SHADER_STORAGE_BARRIER_BIT)

    def resize(self, count: int, values: Values | None = None) -> None:
        """Change the number of agents on the GPU: agents with ids below `count` stay where
        they are, new ones are spawned like the guard's. No CPU upload, so no stalled frame."""
        if not 1 <= count <= MAX_COUNT:
            raise ValueError(f"count must be 1..{MAX_COUNT}, got {count}")
        if values is not None:
            self.values = values
        if count == self._count:
            return
        old, old_count = self._current, self._count
        for buffer in (self._scratch, self._rank):
            buffer.release()
        self._current = self.ctx.buffer(reserve=count * AGENT_BYTES)
        self._scratch = self.ctx.buffer(reserve=count * AGENT_BYTES)
        self._rank = self.ctx.buffer(reserve=count * 4)
        program = self._programs["resize"]
        set_uniforms(program, self._uniforms(self.values, 0.0, (0.0, 0.0, 0.0), 1.0))
        set_uniforms(program, {"u_old_count": old_count, "u_new_count": count})
        self._current.bind_to_storage_buffer(0)
        old.bind_to_storage_buffer(1)
        self._stats.bind_to_storage_buffer(5)
        dispatch_1d(program, max(old_count, count), LOCAL_SIZE)
        self._barrier()
        old.release()
        self._count = count
        self._grid = None  # in id order now: re-sort on the next step

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

    def set_obstacles(self, spheres: Sequence[Sequence[float]]) -> None:
        """Up to eight (x, y, z, radius) spheres the agents steer around."""
        spheres = [tuple(float(v) for v in s) for s in spheres]
        if len(spheres) > MAX_OBSTACLES:
            raise ValueError(f"at most {MAX_OBSTACLES} obstacles, got {len(spheres)}")
        for sphere in spheres:
            if len(sphere) != 4 or sphere[3] <= 0 or not all(map(math.isfinite, sphere)):
                raise ValueError(f"an obstacle is x, y, z, radius > 0; got {sphere}")
        self.obstacles = spheres

    # ---- the step ---------------------------------------------------------------------------

    def step(self, dt: float, values: Values | None = None,
             target: Sequence[float] = (0.0, 0.0, 0.0), speed_scale: float = 1.0) -> None:
        """Advance one step of min(dt, 1/30) seconds towards `target` (the lure).

        `values`: this frame's parameter values (the show's, modulated); names it leaves out
        are taken from the values the swarm was made with. `speed_scale` multiplies max_speed
        (the audio boost: 1 + level * audio_speed_boost). The count is the swarm's own.
        """
        dt = min(max(float(dt), 0.0), MAX_DT)
        p = ChainMap(dict(values), self.values) if values else self.values
        uniforms = self._uniforms(p, dt, target, speed_scale)
        simulate = self._programs[self.neighbors]
        set_uniforms(simulate, uniforms)
        if self.neighbors == "brute":
            self._current.bind_to_storage_buffer(0)
            self._scratch.bind_to_storage_buffer(1)
            self._stats.bind_to_storage_buffer(5)
            dispatch_1d(simulate, self._count, LOCAL_SIZE)
            self._barrier()
            self._current, self._scratch = self._scratch, self._current
        else:
            self._ensure_sorted(p)
            counts, starts = self._grid_buffers[0], self._grid_buffers[1]
            self._current.bind_to_storage_buffer(0)
            self._scratch.bind_to_storage_buffer(1)
            starts.bind_to_storage_buffer(2)
            counts.bind_to_storage_buffer(3)
            self._rank.bind_to_storage_buffer(4)
            self._stats.bind_to_storage_buffer(5)
            set_uniforms(simulate, self._grid_uniforms())
            dispatch_1d(simulate, self._count, LOCAL_SIZE)
            self._barrier()
            self._sort_scratch_into_current()
        self.steps += 1

    def _uniforms(self, p: Values, dt: float, target: Sequence[float], speed_scale: float
                  ) -> dict:
        rules = sum(bit for name, bit in RULE_BITS.items() if p[name])
        obstacles = list(self.obstacles) + [(0.0, 0.0, 0.0, 0.0)] * (
            MAX_OBSTACLES - len(self.obstacles))
        return {
            "u_count": self._count,
            "u_dt": dt,
            "u_neighbor_radius": p["neighbor_radius"],
            "u_separation_radius": p["separation_radius"],
            "u_separation_weight": p["separation_weight"],
            "u_alignment_weight": p["alignment_weight"],
            "u_cohesion_weight": p["cohesion_weight"],
            "u_seek_weight": p["seek_weight"],
            "u_max_speed": p["max_speed"] * max(float(speed_scale), 0.0),
            "u_max_force": p["max_force"],
            "u_target": tuple(float(v) for v in target),
            "u_center": (0.0, 0.0, 0.0),
            "u_contain_radius": p["contain_radius"],
            "u_spawn_radius": p["spawn_radius"],
            "u_rules": rules,
            "u_wrap": p["boundary"] == "wrap",
            "u_flat": p["dimensions"] == 2,
            "u_obstacle_count": len(self.obstacles),
            "u_obstacles": obstacles,
            "u_obstacle_weight": p["obstacle_weight"],
            "u_step": self.steps,
            "u_neighbor_cap": p["neighbor_cap"] or 0xFFFFFFFF,
        }

    # ---- the grid ---------------------------------------------------------------------------

    def _grid_uniforms(self) -> dict:
        g = self._grid
        return {"u_grid_origin": g.origin, "u_grid_inv_cell": 1.0 / g.cell, "u_grid_dims": g.dims,
                "u_count": self._count}

    def _ensure_sorted(self, values: Values) -> None:
        """Bring `current` into cell order when the state or the grid's shape has changed."""
        budget = self.max_cells if self.max_cells is not None else cell_budget(self._count)
        shape = grid_shape(values, budget)
        if shape == self._grid:
            return
        needed = shape.cells + 1
        if needed > self._grid_capacity or needed * 4 < self._grid_capacity:
            self._allocate_grid(needed)  # grow, or give back memory once far too big
        self._scan_sizes = scan_levels(shape.cells + 1)
        self._grid = shape
        # Count the unsorted agents (in current), then sort them via scratch.
        self._grid_buffers[0].clear()
        self._current.bind_to_storage_buffer(1)
        self._grid_buffers[0].bind_to_storage_buffer(3)
        self._rank.bind_to_storage_buffer(4)
        set_uniforms(self._programs["bin"], self._grid_uniforms())
        dispatch_1d(self._programs["bin"], self._count, LOCAL_SIZE)
        self._barrier()
        self._current, self._scratch = self._scratch, self._current
        self._sort_scratch_into_current()

    def _allocate_grid(self, needed: int) -> None:
        """Counts and starts for `needed` entries (cells + 1: the end of the last cell) with a
        quarter to spare, so a knob sweeping neighbor_radius does not reallocate every frame
        (slow, and it left driver memory growing in the soak)."""
        for buffer in self._grid_buffers:
            buffer.release()
        capacity = max(needed, min(needed + needed // 4 + SCAN_BLOCK, MAX_CELLS + 1))
        counts = self.ctx.buffer(reserve=capacity * 4)
        counts.clear()
        starts = self.ctx.buffer(reserve=capacity * 4)
        self._grid_buffers = [counts, starts]
        # sums[k] holds the block totals of level k (then scanned in place).
        for size in scan_levels(capacity):
            self._grid_buffers.append(self.ctx.buffer(reserve=max(1, -(-size // SCAN_BLOCK)) * 4))
        self._grid_capacity = capacity

    def _sort_scratch_into_current(self) -> None:
        """scan counts -> starts (zeroing counts), scatter scratch into cell order, then order
        each cell by id so that the same start gives the same steps, bit for bit."""
        self._scan_counts()
        self._grid_buffers[1].bind_to_storage_buffer(2)  # cell starts
        self._rank.bind_to_storage_buffer(4)
        # scatter: unsorted (binding 1) -> cell order (binding 0)
        self._current.bind_to_storage_buffer(0)
        self._scratch.bind_to_storage_buffer(1)
        set_uniforms(self._programs["scatter"], self._grid_uniforms())
        dispatch_1d(self._programs["scatter"], self._count, LOCAL_SIZE)
        self._barrier()
        # order: cell order, any order inside a cell (binding 1) -> by id (binding 0)
        self._scratch.bind_to_storage_buffer(0)
        self._current.bind_to_storage_buffer(1)
        set_uniforms(self._programs["order"], self._grid_uniforms())
        dispatch_1d(self._programs["order"], self._count, LOCAL_SIZE)
        self._barrier()
        self._current, self._scratch = self._scratch, self._current

    def _scan_counts(self) -> None:
        counts, starts, sums = self._grid_buffers[0], self._grid_buffers[1], self._grid_buffers[2:]
        scan = self._programs["scan"]
        levels = len(self._scan_sizes)
        # Down: scan each level in blocks, its block totals feed the next level.
        for k, size in enumerate(self._scan_sizes):
            source = counts if k == 0 else sums[k - 1]
            target = starts if k == 0 else sums[k - 1]
            source.bind_to_storage_buffer(0)
            target.bind_to_storage_buffer(1)
            sums[k].bind_to_storage_buffer(2)
            set_uniforms(scan, {"u_n": size, "u_add": False, "u_clear_input": k == 0})
            dispatch_1d(scan, size, SCAN_BLOCK)
            self._barrier()
        # Up: add each level's scanned block totals back into the level below.
        for k in range(levels - 2, -1, -1):
            target = starts if k == 0 else sums[k - 1]
            target.bind_to_storage_buffer(1)
            sums[k].bind_to_storage_buffer(2)
            set_uniforms(scan, {"u_n": self._scan_sizes[k], "u_add": True})
            dispatch_1d(scan, self._scan_sizes[k], SCAN_BLOCK)
            self._barrier()

    def release(self) -> None:
        for program in self._programs.values():
            program.release()
        self._programs = {}
        for buffer in [self._current, self._scratch, self._rank, self._stats,
                       *self._grid_buffers]:
            if buffer is not None:
                buffer.release()
        self._grid_buffers = []
        self._grid_capacity = 0
        self._current = self._scratch = self._rank = None
