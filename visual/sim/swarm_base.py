"""What both backends' swarms share (visual/sim/swarm.py's compute one, swarm41.py's transform
feedback one): the parameters they were made with, how neighbours are found, the obstacles, the
count, and the checks on a new state, a new count and a step's inputs. Main thread only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import moderngl
import numpy as np

from swarm_instrument.visual.gpu.limits import MAX_COUNT
from swarm_instrument.visual.gpu.programs import ProgramOwner
from swarm_instrument.visual.gpu.shaders import resolve_shader_dir
from swarm_instrument.visual.sim.agents import MAX_DT, NEIGHBOR_MODES, Values, checked_obstacles
from swarm_instrument.visual.sim.grid import PassTimer


def checked_mode(mode: str) -> str:
    if mode not in NEIGHBOR_MODES:
        raise ValueError(f"neighbors must be one of {NEIGHBOR_MODES}, got {mode!r}")
    return mode


class SwarmBase(ProgramOwner):
    """A swarm's state apart from its GPU objects. `shader_dir`: the shader folder to compile
    from (and reload from), default `visual.gpu.shaders.shader_dir()` when made."""

    backend: str
    _count = 0

    def __init__(self, ctx: moderngl.Context, values: Values, neighbors: str,
                 shader_dir: Path | None) -> None:
        self.ctx = ctx
        self.values = values  # the parameters' values: as made, then each step's
        self.shader_dir = resolve_shader_dir(shader_dir)
        self._neighbors = checked_mode(neighbors)
        self.steps = 0
        self.pass_timer: PassTimer | None = None
        self.obstacles: list[tuple[float, float, float, float]] = []
        self.max_cells: int | None = None  # None: the backend's budget for its count

    @property
    def neighbors(self) -> str:
        """How neighbours are found: "grid" (uniform grid) or "brute" (the seed's all pairs)."""
        return self._neighbors

    @neighbors.setter
    def neighbors(self, mode: str) -> None:
        if checked_mode(mode) != self._neighbors:
            self._neighbors = mode
            self._order_lost()

    def _order_lost(self) -> None:
        """The agents' order no longer follows the grid (a backend that keeps it re-sorts)."""

    @property
    def count(self) -> int:
        return self._count

    def set_obstacles(self, spheres: Sequence[Sequence[float]]) -> None:
        """Up to MAX_OBSTACLES (x, y, z, radius) spheres the agents steer around."""
        self.obstacles = checked_obstacles(spheres)

    @staticmethod
    def checked_state(position: np.ndarray, velocity: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
        """(N, 3) float32 position and velocity for set_state; ValueError says what is wrong."""
        position = np.ascontiguousarray(position, np.float32).reshape(-1, 3)
        velocity = np.ascontiguousarray(velocity, np.float32).reshape(-1, 3)
        if len(position) != len(velocity) or not 1 <= len(position) <= MAX_COUNT:
            raise ValueError(f"need 1..{MAX_COUNT} agents with matching position and velocity")
        return position, velocity

    def resizing(self, count: int, values: Values | None) -> bool:
        """Checks a resize to `count` (ValueError), takes `values`; whether the count changes."""
        if not 1 <= count <= MAX_COUNT:
            raise ValueError(f"count must be 1..{MAX_COUNT}, got {count}")
        if values is not None:
            self.values = values
        return count != self._count

    def step_inputs(self, dt: float, values: Values | None) -> tuple[float, Mapping[str, Any]]:
        """A step's dt, clamped to the seed's 1/30 s, and its values: this frame's over the
        ones the swarm was made with (names `values` leaves out)."""
        dt = min(max(float(dt), 0.0), MAX_DT)
        # One merged dict (a ChainMap looks each name up in Python: a dozen calls a step).
        return dt, ({**self.values, **values} if values else self.values)
