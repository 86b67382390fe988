"""A numpy implementation of seed 000's CSSimulate (plus the project's switches, wrap, 2D and
obstacles), the reference the GPU kernels are tested against. All pairs, float32, chunked."""

from __future__ import annotations

import numpy as np

from swarm_instrument.control.parameters.registry import Params

F = np.float32


def _limit(v: np.ndarray, max_length: float) -> np.ndarray:
    length = np.linalg.norm(v, axis=-1, keepdims=True)
    scale = np.where(length > max_length, F(max_length) / np.maximum(length, F(1e-30)), F(1))
    return (v * scale).astype(F)


def _normalize(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(F)


def gather(position: np.ndarray, velocity: np.ndarray, params: Params, chunk: int = 512):
    """Sums over neighbours j != i: (sep, ali, coh, n) and, per agent, the smallest relative gap
    between any pair's squared distance and a radius threshold (to spot rounding-sensitive
    agents)."""
    n = len(position)
    r2 = F(params["neighbor_radius"]) ** 2
    s2 = F(params["separation_radius"]) ** 2
    sep = np.zeros((n, 3), F)
    ali = np.zeros((n, 3), F)
    coh = np.zeros((n, 3), F)
    count = np.zeros(n, np.int64)
    margin = np.full(n, np.inf)
    for start in range(0, n, chunk):
        rows = slice(start, min(start + chunk, n))
        d = (position[None, :, :] - position[rows, None, :]).astype(F)  # other - self
        dist2 = np.einsum("ijk,ijk->ij", d, d).astype(F)
        index = np.arange(rows.start, rows.stop)
        not_self = np.ones_like(dist2, bool)
        not_self[np.arange(len(index)), index] = False
        near = (dist2 < r2) & not_self
        close = near & (dist2 < s2)
        ali[rows] = (near[..., None] * velocity[None]).sum(1)
        coh[rows] = (near[..., None] * position[None]).sum(1)
        count[rows] = near.sum(1)
        inv = np.where(close, F(1) / np.maximum(dist2, F(1e-4)), F(0)).astype(F)
        sep[rows] = -(d * inv[..., None]).sum(1)
        gaps = [np.abs(dist2 - r2) / max(r2, 1e-12)]
        if s2 > 0:
            gaps.append(np.abs(dist2 - s2) / s2)
        gap = np.min(np.stack(gaps), axis=0)
        gap[~not_self] = np.inf
        margin[rows] = gap.min(1)
    return sep, ali, coh, count, margin


def step(position: np.ndarray, velocity: np.ndarray, params: Params, dt: float,
         target=(0.0, 0.0, 0.0), obstacles=(), speed_scale: float = 1.0):
    """One step of the seed's kernel. Returns (position, velocity, margin)."""
    position = position.astype(F)
    velocity = velocity.astype(F)
    p = params
    max_speed = F(p["max_speed"] * speed_scale)
    max_force = F(p["max_force"])
    dt = F(min(dt, 1 / 30))
    sep, ali, coh, count, margin = gather(position, velocity, params)
    steer = np.zeros_like(position)
    has = count > 0
    inv = np.where(has, 1.0 / np.maximum(count, 1), 0).astype(F)[:, None]
    desired_ali = _normalize(ali * inv + F(1e-5)) * max_speed
    desired_coh = _normalize(coh * inv - position + F(1e-5)) * max_speed
    rules = np.zeros_like(position)
    if p["alignment"]:
        rules += _limit(desired_ali - velocity, max_force) * F(p["alignment_weight"])
    if p["cohesion"]:
        rules += _limit(desired_coh - velocity, max_force) * F(p["cohesion_weight"])
    if p["separation"]:
        rules += _limit(sep * max_speed, max_force * 2) * F(p["separation_weight"])
    steer += np.where(has[:, None], rules, F(0))
    if p["seek"]:
        to_target = np.asarray(target, F) - position
        steer += _limit(_normalize(to_target + F(1e-5)) * max_speed - velocity, max_force) * F(
            p["seek_weight"])
    wrap = p["boundary"] == "wrap"
    radius = F(p["contain_radius"])
    if p["containment"] and not wrap:
        length = np.linalg.norm(position, axis=1, keepdims=True)
        over = length - radius
        push = position / np.maximum(length, F(1e-30)) * over * max_force
        steer -= np.where(over > 0, push, F(0))
    for ox, oy, oz, orad in obstacles:
        away = position - np.asarray([ox, oy, oz], F)
        dist = np.linalg.norm(away, axis=1, keepdims=True)
        reach = F(orad + p["neighbor_radius"])
        strength = np.minimum((reach - dist) / F(p["neighbor_radius"]), F(1))
        push = _limit(_normalize(away + F(1e-5)) * max_speed - velocity, max_force * 2)
        steer += np.where(dist < reach, push * F(p["obstacle_weight"]) * strength, F(0))
    v = _limit(velocity + steer * dt, max_speed)
    x = (position + v * dt).astype(F)
    if p["dimensions"] == 2:
        v[:, 2] = 0
        x[:, 2] = 0
    if wrap:
        side = F(2) * radius
        w = x + radius
        w = w - side * np.floor(w / side)
        x = (w - radius).astype(F)
        if p["dimensions"] == 2:
            x[:, 2] = 0
    return x, v.astype(F), margin
