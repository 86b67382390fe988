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


LOOK_COUNT = 16384  # the count the bundled looks are made for (their radii)
CROWDED_PAIRS = 64e6  # neighbour pairs a step where a count is said to crowd (see crowding_note)


def neighbours_each(values: Values) -> float:
    """About how many neighbours an agent has, spread evenly through the containing sphere
    (disc in 2D): a grid step's work an agent grows with it. The default look: radius 3 in
    60, 16,384 agents: about 2."""
    flat = values["dimensions"] == 2
    ratio = float(values["neighbor_radius"]) / max(float(values["contain_radius"]), 1e-9)
    return float(values["count"]) * ratio ** (2 if flat else 3)


def crowding_note(values: Values) -> str | None:
    """One line where `values`' count crowds its space past CROWDED_PAIRS neighbour pairs a
    step (a count raised alone: four million agents in the default look's sphere have about
    520 neighbours each, 2.2 billion pairs, a second a step on an H100, where the look's
    density at that count, about 2 each, takes 5 ms): how crowded, and the radii that keep the
    density the look has at LOOK_COUNT. None where it is not crowded."""
    count = float(values["count"])
    each = neighbours_each(values)
    if count * each <= CROWDED_PAIRS:
        return None
    scale = max(count / LOOK_COUNT, 1.0) ** (1.0 / (2 if values["dimensions"] == 2 else 3))
    contain, spawn = float(values["contain_radius"]), float(values["spawn_radius"])
    return (f"count {int(count):,}: about {each:,.0f} neighbours an agent within contain_radius "
            f"{contain:g} ({count * each / 1e9:.2g} billion pairs a step): frames will be slow "
            f"even on a large GPU, and live the governor lowers the count; the look's density "
            f"at {LOOK_COUNT:,} agents, spread over this count, is contain_radius "
            f"{contain * scale:.0f} and spawn_radius {spawn * scale:.0f} (a preset sets them)")


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
