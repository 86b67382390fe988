"""The agents as both backends hold them: their layout on the GPU, the seed's spawn, obstacles and
the values a step derives for the SwarmParams block (visual/sim/swarm.py and swarm41.py write
the same block). Pure numpy: any thread.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from swarm_instrument.visual.gpu.uniforms import MAX_OBSTACLES, RULE_BITS
from swarm_instrument.visual.sim.grid import NO_GRID, GridShape

Values = Mapping[str, Any]  # parameter name -> this frame's value (plain numbers)
MAX_DT = 1.0 / 30.0  # the seed clamps a frame's step so a hitch does not explode the flock
AGENT_BYTES = 32  # shaders/agent.glsl's Agent: two vec4
NEIGHBOR_MODES = ("grid", "brute")


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


def checked_obstacles(spheres: Sequence[Sequence[float]]) -> list[tuple[float, ...]]:
    """Up to MAX_OBSTACLES (x, y, z, radius > 0) finite spheres, as tuples; ValueError says
    what is wrong (both backends' set_obstacles)."""
    spheres = [tuple(float(v) for v in s) for s in spheres]
    if len(spheres) > MAX_OBSTACLES:
        raise ValueError(f"at most {MAX_OBSTACLES} obstacles, got {len(spheres)}")
    for sphere in spheres:
        if len(sphere) != 4 or sphere[3] <= 0 or not all(map(math.isfinite, sphere)):
            raise ValueError(f"an obstacle is x, y, z, radius > 0; got {sphere}")
    return spheres


def rule_bits(p: Values) -> int:
    """SwarmParams.rules: the bits of the rules switched on."""
    bits = 0
    for name, bit in RULE_BITS.items():
        if p[name]:
            bits |= bit
    return bits


def step_values(swarm: Any, p: Values, dt: float, target: Sequence[float],
                speed_scale: float, shape: GridShape | None) -> dict[str, Any]:
    """SwarmParams' derived fields for one step of `swarm` (its count, steps and obstacles),
    for either backend (visual/sim/swarm41.py writes the same block)."""
    return {
        "target": target,
        "dt": dt,
        "center": (0.0, 0.0, 0.0),
        **(shape.block_values() if shape is not None else NO_GRID),
        "agent_count": swarm.count,
        "speed_limit": p["max_speed"] * max(float(speed_scale), 0.0),
        "rules": rule_bits(p),
        "wrap": p["boundary"] == "wrap",
        "step_index": swarm.steps,
        "obstacle_count": len(swarm.obstacles),
        "obstacles": swarm.obstacles,
    }


def pack_agents(position: np.ndarray, velocity: np.ndarray) -> np.ndarray:
    """(N, 3) position and velocity -> the (N, 8) float32 GPU layout with ids in position.w."""
    count = len(position)
    agents = np.zeros((count, 8), np.float32)
    agents[:, 0:3] = position
    agents[:, 3] = np.arange(count, dtype=np.float32)
    agents[:, 4:7] = velocity
    return agents
