"""The GL 4.1 backend's own machinery (visual/sim/swarm41.py): the bitonic network, the cell order a
grid step leaves, the guard's count without atomics, the all-pairs pass below BRUTE_BELOW.
The seed's arithmetic on this backend is tested in tests/test_swarm.py (the `backend` fixture),
against the same numpy reference as the compute backend."""

from __future__ import annotations

import numpy as np
import pytest
from test_swarm import assert_matches, crowded_state

from swarm_instrument import visual
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.visual.gpu import programs
from swarm_instrument.visual.sim.agents import spawn_state
from swarm_instrument.visual.sim.state41 import STATE_WIDTH, sort_passes, sort_stages
from swarm_instrument.visual.sim.swarm41 import BRUTE_BELOW, Swarm41

import reference


@pytest.fixture(autouse=True)
def strict_uniforms(monkeypatch):
    monkeypatch.setattr(programs, "STRICT", True)


def _textures(swarm: Swarm41) -> tuple[np.ndarray, np.ndarray]:
    n = swarm.count
    position = np.frombuffer(swarm.positions.read(), np.float32).reshape(-1, 4)[:n]
    velocity = np.frombuffer(swarm.velocities.read(), np.float32).reshape(-1, 4)[:n]
    return position.copy(), velocity.copy()


def test_the_bitonic_passes_sort_every_input_of_their_size():
    """The passes' (block, stride, stages) list, run on the CPU as gl41_sort.frag runs it (each
    entry's group of 2^stages read, the stages run on it, its own kept), sorts (0-1 principle:
    every 0/1 input of 16 entries; random inputs of 1024), with 1, 2 or 3 stages a pass."""

    def run(values: np.ndarray, most: int) -> np.ndarray:
        """`values`: (inputs, entries), each row sorted as the passes sort it."""
        values = values.copy()
        index = np.arange(values.shape[1])
        for block, stride, stages in sort_passes(values.shape[1], most):
            low = stride >> (stages - 1)
            span = (stride << 1) - low
            group = 1 << stages
            base = index & ~span
            v = [values[:, base + k * low] for k in range(group)]
            up = (index & block) == 0
            for t in range(stages):
                half = group >> (t + 1)
                for k in range(group):
                    if not k & half:
                        a, b = v[k], v[k + half]
                        swap = np.where(up, b < a, a < b)
                        v[k], v[k + half] = np.where(swap, b, a), np.where(swap, a, b)
            values = np.stack(v)[(index & span) // low, :, index].T
        return values

    every = (np.arange(1 << 16)[:, None] >> np.arange(16)) & 1  # every 0/1 input of 16
    rng = np.random.default_rng(0)
    for most in (1, 2, 3):
        assert np.all(np.diff(run(every, most), axis=1) >= 0), most
        values = rng.integers(0, 50, (4, 1024))
        np.testing.assert_array_equal(run(values, most), np.sort(values, axis=1))
    assert len(sort_stages(65536)) == 136 and len(sort_passes(65536)) == 51
    assert sum(stages for _, _, stages in sort_passes(65536)) == 136


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_a_grid_step_leaves_the_agents_in_cell_order_by_their_previous_place(ctx, stages):
    """After a step the textures hold the agents in the cell order of the positions the step
    started from, inside a cell in the order they had before it (the sort's second key),
    whether the sort's passes run one, two or three stages each."""
    params = Params({"count": 2500})
    position, velocity = crowded_state(2500, params, seed=8)
    swarm = Swarm41(ctx, params, position=position, velocity=velocity,
                    tuning={"brute_below": 0, "sort_stages": stages})
    try:
        swarm.step(1 / 60)
        for _ in range(2):
            before, _ = _textures(swarm)
            swarm.step(1 / 60)
            after, _ = _textures(swarm)
            shape = visual.sim.swarm41.grid_shape(params, visual.sim.swarm41.cell_budget_41(2500))
            place_before = np.empty(len(before), np.int64)
            place_before[before[:, 3].astype(np.int64)] = np.arange(len(before))
            old = before[place_before[after[:, 3].astype(np.int64)], :3]  # where each started
            cell = np.clip(np.floor((old - shape.origin) / shape.cell), 0,
                           np.array(shape.dims) - 1).astype(np.int64)
            index = cell[:, 0] + shape.dims[0] * (cell[:, 1] + shape.dims[1] * cell[:, 2])
            assert np.all(np.diff(index) >= 0), "not in cell order"
            rank = place_before[after[:, 3].astype(np.int64)]
            same = np.diff(index) == 0
            assert np.all(np.diff(rank)[same] > 0), "a cell out of its previous order"
        assert swarm.last_path == "grid"
    finally:
        swarm.release()


def test_the_guard_counts_without_atomics(ctx):
    """Three agents poisoned in the state textures are put back and counted (blended points
    into one float texel), on both neighbour paths; ids stay unique."""
    params = Params({"count": 3000})
    position, velocity = spawn_state(3000, params, 1)
    for path in ("grid", "brute"):
        swarm = Swarm41(ctx, params, neighbors=path, position=position, velocity=velocity)
        try:
            swarm.step(1 / 60)
            positions, velocities = _textures(swarm)
            rows = -(-3000 // STATE_WIDTH)
            pad = np.zeros((rows * STATE_WIDTH - 3000, 4), np.float32)
            positions[[5, 300, 2999], 0] = np.nan
            velocities[300, 1] = np.inf
            swarm.positions.write(np.concatenate([positions, pad]).tobytes())
            swarm.velocities.write(np.concatenate([velocities, pad]).tobytes())
            for _ in range(3):
                swarm.step(1 / 60)
            x, v = swarm.read_state()
            assert np.isfinite(x).all() and np.isfinite(v).all()
            assert swarm.read_guarded() == 3, path
            assert len(np.unique(_textures(swarm)[0][:, 3])) == 3000
        finally:
            swarm.release()


def test_below_brute_below_the_grid_runs_all_pairs_and_matches(ctx):
    """A small swarm asked for the grid runs the all-pairs pass (cheaper there) and is the
    seed's kernel all the same; at BRUTE_BELOW it runs the grid."""
    for count, expected in ((BRUTE_BELOW - 1, "brute"), (BRUTE_BELOW, "grid")):
        params = Params({"count": count})
        position, velocity = crowded_state(count, params, seed=2)
        swarm = Swarm41(ctx, params, neighbors="grid", position=position, velocity=velocity)
        try:
            swarm.step(1 / 60, target=(4.0, 2.0, -1.0))
            assert swarm.last_path == expected
            rx, rv, margin = reference.step(position, velocity, params, 1 / 60,
                                            target=(4.0, 2.0, -1.0))
            assert_matches(swarm.read_state(), (rx, rv), margin, f"{count} agents")
        finally:
            swarm.release()
