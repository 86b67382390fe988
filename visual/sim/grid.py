"""The uniform grid (seed 000, 5.4): its shape for a set of parameters, and `CellGrid`, which owns
the grid's buffers and runs the passes that put an agent buffer in cell order:

    bin      unsorted agents -> each one's cell and its rank there (atomicAdd); the simulation
             step counts its output the same way, so a step needs no bin pass
    scan     cell counts -> cell starts (2-4 dispatches), zeroing the counts; each block of
             SCAN_BLOCK cells keeps its own prefix and the block totals are scanned apart
             (shaders/grid.glsl's cell_begin adds the two), so no pass adds them back grid-wide;
             a block nobody was counted in (a flag the counting passes set) is skipped
    scatter  each agent's index -> its slot in its cell (start + rank): 4 bytes an agent
    order    each agent -> its cell's start + the number of its cell's slots holding a smaller
             index: a stable counting sort, so the same input gives the same order

Every pass reads the grid's shape and the count from the SwarmParams block, which the swarm has
written and bound for the step. The counts and block flags are zero between steps (made so,
and the scan zeroes what it reads), so nothing clears them. Main thread only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import moderngl

from swarm_instrument.visual.gpu.programs import dispatch_1d, set_uniforms, storage_barrier

PassTimer = Callable[[str], AbstractContextManager]  # a pass's name -> a timer around it
_NOTHING = nullcontext()  # reusable: it holds no state


def UNTIMED(name: str) -> AbstractContextManager:  # noqa: N802 - a PassTimer that times nothing
    return _NOTHING

LOCAL_SIZE = 256
SCAN_LOCAL_SIZE = 256
SCAN_ITEMS = 4
SCAN_BLOCK = SCAN_LOCAL_SIZE * SCAN_ITEMS
MAX_CELLS = 1 << 26  # 256 MB of counts and as much of starts: radius-wide cells for 4M agents
MIN_CELLS = 1 << 15
CELLS_PER_AGENT = 16  # more cells than this only adds scan work: the cells are mostly empty


@dataclass(frozen=True)
class GridShape:
    """Where the uniform grid lies: cells of `cell` units, `dims` of them, from `origin`."""

    origin: tuple[float, float, float]
    cell: float
    dims: tuple[int, int, int]

    @property
    def cells(self) -> int:
        return self.dims[0] * self.dims[1] * self.dims[2]

    def block_values(self) -> dict[str, Any]:
        """The SwarmParams fields that describe this grid."""
        return {"grid_origin": self.origin, "grid_inv_cell": 1.0 / self.cell,
                "grid_dims": self.dims}


# What SwarmParams holds for the grid when there is none (brute force): never read.
NO_GRID = {"grid_origin": (0.0, 0.0, 0.0), "grid_inv_cell": 1.0, "grid_dims": (1, 1, 1)}


def cell_budget(count: int) -> int:
    """The most cells worth having for `count` agents: each frame scans every block of them that
    holds an agent, and they take memory, so a tiny neighbor_radius must not ask 16M cells for
    16K agents (it did in the soak: frames of 15-60 ms and 170 MB of grid). Past CELLS_PER_AGENT
    a cell per agent, a finer grid would only save candidates of crowded cells, at the cost of
    scanning empty ones."""
    return min(MAX_CELLS, max(MIN_CELLS, CELLS_PER_AGENT * count))


def grid_shape(params: Mapping[str, Any], max_cells: int | None = None) -> GridShape:
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


def zeroed(ctx: moderngl.Context, size: int) -> moderngl.Buffer:
    """A buffer of `size` zero bytes, uploaded with it. Not moderngl's Buffer.clear(): that maps
    the buffer and writes it from the CPU, and the NVIDIA driver then keeps it in system memory,
    where every atomic and every read of the GPU crosses PCIe (measured on the H200: the cell
    counts' atomics and scan ran 10-20x slower than in video memory)."""
    return ctx.buffer(data=bytes(size))


def scan_levels(n: int) -> list[int]:
    """Values at each level of the blocked prefix sum: n, then one block total per block (plus
    a last 0 at the first level, so that the block starts end with the total), down to a
    single block (at least two levels: the cells' block starts are always scanned)."""
    sizes = [n, -(-n // SCAN_BLOCK) + 1]
    while sizes[-1] > SCAN_BLOCK:
        sizes.append(-(-sizes[-1] // SCAN_BLOCK))
    return sizes


class CellGrid:
    """The grid's buffers (cell counts, cell starts, the scan's block sums) and its passes.
    The programs are the swarm's (it compiles and reloads them all at once), passed in."""

    def __init__(self, ctx: moderngl.Context) -> None:
        self.ctx = ctx
        self.buffers: list[moderngl.Buffer] = []  # counts, starts, then sums of each level
        self.block_used: moderngl.Buffer | None = None  # a flag a block of cells
        self.capacity = 0  # entries the counts and starts buffers hold
        self._scan_sizes: list[int] = []

    @property
    def counts(self) -> moderngl.Buffer:
        return self.buffers[0]

    def bind_starts(self) -> None:
        """Bind what shaders/grid.glsl's cell_begin reads: starts within each block (binding 2)
        and the blocks' starts (binding 6)."""
        self.buffers[1].bind_to_storage_buffer(2)
        self.buffers[2].bind_to_storage_buffer(6)

    def fit(self, shape: GridShape) -> None:
        """Make room for `shape`'s cells (plus one: the end of the last cell)."""
        needed = shape.cells + 1
        if needed > self.capacity or needed * 4 < self.capacity:
            self._allocate(needed)  # grow, or give back memory once far too big
        self._scan_sizes = scan_levels(needed)

    def _allocate(self, needed: int) -> None:
        """Counts and starts for `needed` entries with a quarter to spare, so a knob sweeping
        neighbor_radius does not reallocate every frame (slow, and it left driver memory growing
        in the soak)."""
        self.release()
        capacity = max(needed, min(needed + needed // 4 + SCAN_BLOCK, MAX_CELLS + 1))
        counts = zeroed(self.ctx, capacity * 4)  # and zero again after every scan
        starts = self.ctx.buffer(reserve=capacity * 4)
        self.buffers = [counts, starts]
        # sums[k] holds the block totals of level k (then scanned in place), and a last 0.
        for size in scan_levels(capacity):
            self.buffers.append(self.ctx.buffer(reserve=(-(-size // SCAN_BLOCK) + 1) * 4))
        self.block_used = zeroed(self.ctx, (-(-capacity // SCAN_BLOCK) + 1) * 4)
        self.capacity = capacity

    def bind_counts(self) -> None:
        """Bind what shaders/grid.glsl's count_into writes: counts (3) and block flags (9)."""
        self.counts.bind_to_storage_buffer(3)
        self.block_used.bind_to_storage_buffer(9)

    def bin(self, programs: Mapping[str, Any], unsorted: moderngl.Buffer,
            cell_rank: moderngl.Buffer, count: int, timed: PassTimer = UNTIMED) -> None:
        """Count the agents of `unsorted` into their cells, keeping their cells and ranks. The
        counts and block flags are zero: as made, and the scan zeroes what it reads."""
        unsorted.bind_to_storage_buffer(1)
        self.bind_counts()
        cell_rank.bind_to_storage_buffer(4)
        with timed("bin"):
            dispatch_1d(programs["bin"], count, LOCAL_SIZE)
            storage_barrier(self.ctx)

    def sort(self, programs: Mapping[str, Any], unsorted: moderngl.Buffer,
             sorted_: moderngl.Buffer, cell_rank: moderngl.Buffer, slots: moderngl.Buffer,
             count: int, timed: PassTimer = UNTIMED) -> None:
        """The counted agents of `unsorted` written to `sorted_` in cell order, inside a cell in
        their order in `unsorted` (so that the same start gives the same steps, bit for bit)."""
        with timed("scan"):
            self._scan(programs["scan"])
        self.bind_starts()
        cell_rank.bind_to_storage_buffer(4)
        slots.bind_to_storage_buffer(7)
        with timed("scatter"):  # each agent's index into its slot of its cell
            dispatch_1d(programs["scatter"], count, LOCAL_SIZE)
            storage_barrier(self.ctx)
        sorted_.bind_to_storage_buffer(0)
        unsorted.bind_to_storage_buffer(1)
        with timed("order"):  # each agent to its place, by index inside its cell
            dispatch_1d(programs["order"], count, LOCAL_SIZE)
            storage_barrier(self.ctx)

    def _scan(self, scan: moderngl.ComputeShader) -> None:
        counts, starts, sums = self.buffers[0], self.buffers[1], self.buffers[2:]
        levels = len(self._scan_sizes)
        # Down: scan each level in blocks, its block totals feed the next level.
        for k, size in enumerate(self._scan_sizes):
            source = counts if k == 0 else sums[k - 1]
            target = starts if k == 0 else sums[k - 1]
            source.bind_to_storage_buffer(0)
            target.bind_to_storage_buffer(1)
            sums[k].bind_to_storage_buffer(2)
            if k == 0:
                self.block_used.bind_to_storage_buffer(3)
            set_uniforms(scan, {"u_n": size, "u_add": False, "u_clear_input": k == 0})
            dispatch_1d(scan, size, SCAN_BLOCK)
            storage_barrier(self.ctx)
        # Up: add each level's scanned block totals back into the level below, except into the
        # cells themselves (cell_begin adds their block's start where a start is read).
        for k in range(levels - 2, 0, -1):
            sums[k - 1].bind_to_storage_buffer(1)
            sums[k].bind_to_storage_buffer(2)
            set_uniforms(scan, {"u_n": self._scan_sizes[k], "u_add": True})
            dispatch_1d(scan, self._scan_sizes[k], SCAN_BLOCK)
            storage_barrier(self.ctx)

    def release(self) -> None:
        for buffer in self.buffers:
            buffer.release()
        if self.block_used is not None:
            self.block_used.release()
        self.buffers = []
        self.block_used = None
        self.capacity = 0
