"""The GPU swarm against the numpy reference of seed 000's kernel, both neighbour paths, on both
backends: compute (GL 4.3) and transform feedback (GL 4.1, visual/sim/swarm41.py). A test that takes
the `backend` fixture runs on both; the others test the compute backend's own machinery (its
lanes, scan levels and buffers; tests/test_swarm41.py has the 4.1 backend's)."""

from __future__ import annotations

import numpy as np
import pytest

from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.visual.gpu import programs
from swarm_instrument.visual.sim import swarm41 as swarm41_module
from swarm_instrument.visual.sim.agents import pack_agents, spawn_state
from swarm_instrument.visual.sim.grid import MAX_CELLS
from swarm_instrument.visual.sim.swarm import Swarm, cell_budget, grid_shape
from swarm_instrument.visual.sim.swarm41 import Swarm41

import reference

PATHS = ("grid", "brute")
TOL = 2e-4  # positions and velocities are O(1..100); float32 rounding differs in sum order


def crowded_state(count: int, params: Params, seed: int = 7):
    """Spawned agents plus a crowded knot (many within separation radius), some agents far
    outside the containment sphere, and a few exact duplicates."""
    position, velocity = spawn_state(count, params, seed)
    rng = np.random.default_rng(seed + 1)
    knot = count // 10
    position[:knot] = rng.normal(scale=0.4, size=(knot, 3)) + np.array([5.0, -3.0, 2.0])
    far = count // 20
    direction = rng.normal(size=(far, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    position[knot:knot + far] = direction * params["contain_radius"] * rng.uniform(
        1.05, 3.0, size=(far, 1))
    position[knot + far:knot + far + 4] = position[knot + far + 4:knot + far + 8]
    if params["dimensions"] == 2:
        position[:, 2] = 0
        velocity[:, 2] = 0
    return position.astype(np.float32), velocity.astype(np.float32)


def assert_matches(gpu, ref, margin, what: str, min_margin: float = 1e-4):
    """Compare GPU and numpy states, leaving out agents with a pair so near a radius threshold
    that float rounding could decide either way (counted, and required to be few)."""
    certain = margin > min_margin
    assert certain.mean() > 0.97, f"{what}: too many rounding-sensitive agents"
    for name, g, r in zip(("position", "velocity"), gpu, ref):
        error = np.abs(g - r)[certain]
        scale = 1 + np.abs(r[certain])
        assert np.all(error <= TOL * scale), (
            f"{what}: {name} differs by up to {error.max():.3g} "
            f"(agent {np.argmax(error.max(axis=1))})")


@pytest.fixture(autouse=True)
def strict_uniforms(monkeypatch):
    """A uniform name a kernel does not have, or a kernel without its block, is an error."""
    monkeypatch.setattr(programs, "STRICT", True)


@pytest.fixture(params=PATHS)
def path(request):
    return request.param


SWARMS = {"4.3": Swarm, "4.1": Swarm41}


@pytest.fixture(params=SWARMS)
def backend(request, monkeypatch):
    """The test runs on this backend: `Swarm` here is its class. On 4.1 "grid" runs the grid
    at every count (BRUTE_BELOW 0), so small tests exercise it."""
    monkeypatch.setitem(globals(), "Swarm", SWARMS[request.param])
    monkeypatch.setattr(swarm41_module, "BRUTE_BELOW", 0)
    return request.param


def raw_ids(swarm) -> np.ndarray:
    """The ids as the swarm stores them, in its own order (a buffer, or the 4.1 textures)."""
    if isinstance(swarm, Swarm41):
        return np.frombuffer(swarm.positions.read(), np.float32)[3::4][:swarm.count]
    return np.frombuffer(swarm.current.read(), np.float32)[3::8]


def run_gpu(ctx, params, position, velocity, path, steps=1, dt=1 / 60, target=(4.0, 2.0, -1.0),
            obstacles=(), max_cells=None, tuning=None):
    swarm = Swarm(ctx, params, neighbors=path, position=position, velocity=velocity,
                  tuning=tuning)
    swarm.max_cells = max_cells
    try:
        if obstacles:
            swarm.set_obstacles(obstacles)
        for _ in range(steps):
            swarm.step(dt, target=target)
        return swarm.read_state(), swarm.read_guarded()
    finally:
        swarm.release()


def test_one_step_matches_seed_kernel(ctx, backend, path):
    params = Params({"count": 2000})
    position, velocity = crowded_state(2000, params)
    (x, v), guarded = run_gpu(ctx, params, position, velocity, path)
    rx, rv, margin = reference.step(position, velocity, params, 1 / 60, target=(4.0, 2.0, -1.0))
    assert guarded == 0
    assert_matches((x, v), (rx, rv), margin, f"{path} one step")
    # The step really moved the agents and the crowded knot really separated.
    assert np.abs(x - position).max() > 0.01


@pytest.mark.slow  # ten steps, each against numpy (O(n^2) on the CPU): seconds a case
def test_every_step_of_a_trajectory_matches(ctx, backend, path):
    """Ten steps on the GPU; each step checked against numpy from the GPU's previous state,
    so ping-pong, the re-sort and the grid's counts are exercised across steps."""
    params = Params({"count": 1500})
    position, velocity = crowded_state(1500, params, seed=3)
    swarm = Swarm(ctx, params, neighbors=path, position=position, velocity=velocity)
    try:
        state = swarm.read_state()
        for k in range(10):
            target = (10.0 * np.sin(k), 0.0, 5.0)
            swarm.step(1 / 50, target=target)
            after = swarm.read_state()
            rx, rv, margin = reference.step(*state, params, 1 / 50, target=target)
            assert_matches(after, (rx, rv), margin, f"{path} step {k}")
            state = after
    finally:
        swarm.release()


def test_several_steps_match_directly(ctx, backend, path):
    """Three steps on both sides from one start, on a calm state with no pair near a radius."""
    params = Params({"count": 800})
    rng = np.random.default_rng(11)
    # A jittered lattice, spacing 1.6: pairs are far from the 1 and 3 unit thresholds.
    grid = np.stack(np.meshgrid(*[np.arange(10)] * 3, indexing="ij"), -1).reshape(-1, 3)
    position = ((grid[:800] - 4.5) * 1.6 + rng.uniform(-0.05, 0.05, (800, 3))).astype(np.float32)
    velocity = rng.normal(scale=0.5, size=(800, 3)).astype(np.float32)
    (x, v), _ = run_gpu(ctx, params, position, velocity, path, steps=3, dt=0.01)
    rx, rv = position, velocity
    for _ in range(3):
        rx, rv, margin = reference.step(rx, rv, params, 0.01, target=(4.0, 2.0, -1.0))
        assert margin.min() > 1e-3
    assert_matches((x, v), (rx, rv), np.ones(800), f"{path} three steps")


def test_grid_and_brute_force_agree(ctx, backend):
    params = Params({"count": 3000})
    position, velocity = crowded_state(3000, params, seed=5)
    (gx, gv), _ = run_gpu(ctx, params, position, velocity, "grid", steps=2)
    (bx, bv), _ = run_gpu(ctx, params, position, velocity, "brute", steps=2)
    _, _, margin = reference.step(position, velocity, params, 1 / 60)
    assert_matches((gx, gv), (bx, bv), margin, "grid vs brute")


RULES = ("separation", "alignment", "cohesion", "seek", "containment")


@pytest.mark.parametrize("rule", RULES)
def test_each_rule_on_its_own(ctx, backend, rule):
    """Only `rule` switched on: the GPU matches numpy, and the rule changes the velocities."""
    only = {name: name == rule for name in RULES}
    params = Params({"count": 1500, **only})
    position, velocity = crowded_state(1500, params, seed=9)
    rx, rv, margin = reference.step(position, velocity, params, 1 / 30, target=(20.0, 0, 0))
    for path in PATHS:
        (x, v), _ = run_gpu(ctx, params, position, velocity, path, dt=1 / 30,
                            target=(20.0, 0, 0))
        assert_matches((x, v), (rx, rv), margin, f"{rule} alone, {path}")
    changed = np.linalg.norm(rv - velocity, axis=1)
    assert changed.max() > 0.05, f"{rule} alone changed nothing"
    if rule == "seek":  # every agent turns towards the target
        toward = np.einsum("ij,ij->i", rv - velocity, np.array([20.0, 0, 0]) - position)
        assert (toward > 0).mean() > 0.99
    if rule == "containment":  # only agents outside the sphere are pushed, inwards
        outside = np.linalg.norm(position, axis=1) > params["contain_radius"]
        assert np.allclose(rv[~outside], velocity[~outside], atol=1e-5)
        inward = np.einsum("ij,ij->i", rv[outside] - velocity[outside], position[outside])
        assert np.all(inward < 0)
    if rule == "separation":  # the crowded knot spreads out
        knot = slice(0, 150)
        spread = lambda p: np.linalg.norm(p[knot] - p[knot].mean(0), axis=1).mean()  # noqa: E731
        (x, _), _ = run_gpu(ctx, params, position, velocity, "grid", steps=10, dt=1 / 30)
        assert spread(x) > spread(position) * 1.2


def test_all_rules_off_is_straight_motion(ctx, backend, path):
    params = Params({"count": 500, **{name: False for name in RULES}})
    position, velocity = crowded_state(500, params)
    (x, v), _ = run_gpu(ctx, params, position, velocity, path, dt=0.02)
    speed = np.linalg.norm(velocity, axis=1, keepdims=True)
    limited = velocity * np.minimum(1, params["max_speed"] / speed)
    np.testing.assert_allclose(v, limited, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(x, position + limited * 0.02, rtol=1e-5, atol=1e-4)


def test_wrap_moves_agents_to_the_other_side(ctx, backend, path):
    params = Params({"count": 1000, "boundary": "wrap", "contain_radius": 20})
    position, velocity = spawn_state(1000, params, 2)
    position *= 20 / 30
    # Agents at the +x face heading out must come back in at -x.
    position[:50] = [19.95, 0.0, 0.0] + np.random.default_rng(0).uniform(-5, 5, (50, 3)) * [0, 1, 1]
    velocity[:50] = [8.0, 0.0, 0.0]
    (x, v), _ = run_gpu(ctx, params, position, velocity, path, dt=1 / 30)
    rx, rv, margin = reference.step(position, velocity, params, 1 / 30, target=(4.0, 2.0, -1.0))
    assert_matches((x, v), (rx, rv), margin, "wrap")
    assert np.all(x[:50, 0] < -19.0), "agents leaving at +x did not reappear at -x"
    assert np.all(np.abs(x) <= 20.0 + 1e-4)


def test_flat_swarm_stays_in_the_plane(ctx, backend, path):
    params = Params({"count": 1200, "dimensions": 2})
    position, velocity = crowded_state(1200, params)
    assert np.all(position[:, 2] == 0)
    (x, v), _ = run_gpu(ctx, params, position, velocity, path, steps=4, target=(10, 5, 0))
    assert np.all(x[:, 2] == 0) and np.all(v[:, 2] == 0)
    rx, rv, margin = reference.step(position, velocity, params, 1 / 60, target=(10, 5, 0))
    (x1, v1), _ = run_gpu(ctx, params, position, velocity, path, target=(10, 5, 0))
    assert_matches((x1, v1), (rx, rv), margin, "2D")


def test_obstacles_are_avoided(ctx, backend, path):
    obstacles = [(0.0, 0.0, 0.0, 6.0), (15.0, 0.0, 0.0, 3.0)]
    params = Params({"count": 1500})
    position, velocity = crowded_state(1500, params, seed=4)
    (x, v), _ = run_gpu(ctx, params, position, velocity, path, obstacles=obstacles)
    rx, rv, margin = reference.step(position, velocity, params, 1 / 60,
                                    target=(4.0, 2.0, -1.0), obstacles=obstacles)
    assert_matches((x, v), (rx, rv), margin, "obstacles")
    # Agents that start heading straight at the big sphere steer out of it over time.
    ring = np.array([[12.0 * np.cos(a), 12.0 * np.sin(a), 0.0]
                     for a in np.linspace(0, 2 * np.pi, 64, endpoint=False)], np.float32)
    calm = Params({"count": 64, "seek": False, "cohesion": False, "alignment": False})
    (x, _), _ = run_gpu(ctx, calm, ring, -ring / 12 * 8, path, steps=60, dt=1 / 30,
                        obstacles=obstacles[:1])
    assert np.linalg.norm(x, axis=1).min() > 6.0, "an agent went through the obstacle"


def test_guard_puts_back_non_finite_agents(ctx, path):
    params = Params({"count": 1000})
    position, velocity = spawn_state(1000, params, 1)
    swarm = Swarm(ctx, params, neighbors=path, position=position, velocity=velocity)
    try:
        swarm.step(1 / 60)
        # Poison three agents in the live buffer, as a driver fault or a bad write would.
        agents = np.frombuffer(swarm.current.read(), np.float32).reshape(-1, 8).copy()
        agents[[5, 300, 999], 0] = np.nan
        agents[300, 5] = np.inf
        swarm.current.write(agents.tobytes())
        for _ in range(3):
            swarm.step(1 / 60)
        x, v = swarm.read_state()
        assert np.isfinite(x).all() and np.isfinite(v).all()
        assert swarm.read_guarded() == 3
        assert np.linalg.norm(x, axis=1).max() < params["contain_radius"] * 2
        assert len(np.unique(np.frombuffer(swarm.current.read(), np.float32)[3::8])) == 1000
    finally:
        swarm.release()


def test_grid_follows_a_changed_neighbor_radius(ctx, backend):
    params = Params({"count": 1500})
    position, velocity = crowded_state(1500, params)
    swarm = Swarm(ctx, params, position=position, velocity=velocity)
    try:
        swarm.step(1 / 60)
        params["neighbor_radius"] = 5.5  # the grid changes shape between steps
        before = swarm.read_state()
        swarm.step(1 / 60)
        rx, rv, margin = reference.step(*before, params, 1 / 60)
        assert_matches(swarm.read_state(), (rx, rv), margin, "new radius")
        swarm.neighbors = "brute"
        swarm.step(1 / 60)
        swarm.neighbors = "grid"  # switching back re-sorts
        before = swarm.read_state()
        swarm.step(1 / 60)
        rx, rv, margin = reference.step(*before, params, 1 / 60)
        assert_matches(swarm.read_state(), (rx, rv), margin, "brute then grid")
    finally:
        swarm.release()


def test_fine_grid_with_three_scan_levels(ctx):
    """A tiny radius in a big sphere: 16M cells, three levels of prefix sum."""
    params = Params({"count": 2000, "neighbor_radius": 0.4, "separation_radius": 0.2})
    shape = grid_shape(params, 1 << 24)
    assert shape.cells + 1 > 1024 * 1024 and shape.cells <= 1 << 24 <= MAX_CELLS
    position, velocity = crowded_state(2000, params)
    (x, v), _ = run_gpu(ctx, params, position, velocity, "grid", max_cells=1 << 24)
    rx, rv, margin = reference.step(position, velocity, params, 1 / 60, target=(4.0, 2.0, -1.0))
    assert_matches((x, v), (rx, rv), margin, "fine grid")


def test_tiny_radius_gets_cells_wider_than_the_radius_and_stays_exact(ctx, backend):
    """16K agents with a 0.5 radius asked for 16M cells (the soak's slow frames); the count
    bounds the grid now, and the wider cells still find every neighbour."""
    params = Params({"count": 16384, "neighbor_radius": 0.5})
    assert grid_shape(params).cells <= cell_budget(16384) < grid_shape(params, MAX_CELLS).cells
    assert grid_shape(params).cell > 0.5
    params = Params({"count": 2000, "neighbor_radius": 0.4, "separation_radius": 0.2})
    shape = grid_shape(params)
    assert shape.cells <= cell_budget(2000) and shape.cell > 0.4
    position, velocity = crowded_state(2000, params)
    (x, v), _ = run_gpu(ctx, params, position, velocity, "grid")
    rx, rv, margin = reference.step(position, velocity, params, 1 / 60, target=(4.0, 2.0, -1.0))
    assert_matches((x, v), (rx, rv), margin, "coarse grid")


def test_grid_shape_is_exact_and_bounded():
    for radius in (0.01, 0.5, 3.0, 50.0):
        for dims in (2, 3):
            params = Params({"neighbor_radius": radius, "dimensions": dims})
            shape = grid_shape(params)
            assert shape.cell >= radius  # narrower cells would miss neighbours
            assert shape.cells <= MAX_CELLS
            extent = params["contain_radius"] * 1.25
            assert shape.dims[0] * shape.cell >= 2 * extent
            assert (shape.dims[2] == 1) == (dims == 2)


def test_time_step_is_clamped_to_a_thirtieth(ctx, backend):
    params = Params({"count": 300})
    position, velocity = spawn_state(300, params, 0)
    (x_big, _), _ = run_gpu(ctx, params, position, velocity, "grid", dt=1.0)
    (x_30, _), _ = run_gpu(ctx, params, position, velocity, "grid", dt=1 / 30)
    np.testing.assert_allclose(x_big, x_30, atol=1e-4)


def test_spawn_is_reproducible():
    params = Params()
    a = spawn_state(1000, params, 42)
    b = spawn_state(1000, params, 42)
    c = spawn_state(1000, params, 43)
    np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(a[0], c[0])
    assert np.linalg.norm(a[0], axis=1).max() <= params["spawn_radius"] + 1e-4
    np.testing.assert_allclose(np.linalg.norm(a[1], axis=1), params["max_speed"] / 2, rtol=1e-5)
    flat = spawn_state(100, Params({"dimensions": 2}), 1)
    assert np.all(flat[0][:, 2] == 0) and np.all(flat[1][:, 2] == 0)


def test_audio_speed_scale_raises_the_speed_limit(ctx, backend):
    params = Params({"count": 200, **{name: False for name in RULES}})
    position, velocity = spawn_state(200, params, 0)
    velocity *= 10  # 40 units/s, over max_speed 8
    swarm = Swarm(ctx, params, position=position, velocity=velocity)
    try:
        swarm.step(0.01, speed_scale=1 + 0.5 * params["audio_speed_boost"])  # level 0.5 -> x2
        _, v = swarm.read_state()
    finally:
        swarm.release()
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 16.0, rtol=1e-5)


def test_ids_survive_reordering():
    agents = pack_agents(np.zeros((5, 3)), np.ones((5, 3)))
    assert agents.shape == (5, 8) and list(agents[:, 3]) == [0, 1, 2, 3, 4]


def test_the_grid_is_deterministic(ctx, backend):
    """Same start, same steps, same bits: atomics rank agents in any order inside a cell, and
    the order pass puts them back by id (offline renders depend on this)."""
    params = Params({"count": 4000})
    position, velocity = crowded_state(4000, params, seed=12)
    runs = []
    for _ in range(2):
        (x, v), _ = run_gpu(ctx, params, position, velocity, "grid", steps=25, dt=1 / 30)
        runs.append((x, v))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


def test_neighbor_cap_bounds_the_work_and_zero_is_the_seed(ctx, backend):
    """Everyone in one grid cell. Uncapped (0, the default) is the seed's kernel; with a cap K
    each agent examines only the first K agents of its cell (id order), so the work is bounded
    however crowded the cell."""
    count, cap = 600, 16
    rng = np.random.default_rng(3)
    # Cells are 6 wide from -75 (neighbor_radius 6): [-3, 0) on each axis is inside one cell,
    # and every pair there is closer than 6.
    position = rng.uniform(-2.9, -0.1, size=(count, 3)).astype(np.float32)
    velocity = rng.normal(scale=3.0, size=(count, 3)).astype(np.float32)
    only_alignment = {"count": count, "neighbor_radius": 6.0, "separation": False,
                      "cohesion": False, "seek": False, "containment": False}
    params = Params(only_alignment)
    (x, v), _ = run_gpu(ctx, params, position, velocity, "grid", dt=1 / 30)
    rx, rv, margin = reference.step(position, velocity, params, 1 / 30)
    assert_matches((x, v), (rx, rv), margin, "uncapped")

    params["neighbor_cap"] = cap
    (_, v), _ = run_gpu(ctx, params, position, velocity, "grid", dt=1 / 30)
    max_speed, max_force = params["max_speed"], params["max_force"]
    for i in (0, 5, cap - 1, cap, 300, count - 1):
        others = [j for j in range(cap) if j != i]  # the first `cap` of the cell, not itself
        mean = velocity[others].mean(axis=0)
        desired = (mean + 1e-5) / np.linalg.norm(mean + 1e-5) * max_speed
        steer = desired - velocity[i]
        steer *= min(1.0, max_force / np.linalg.norm(steer))
        expected = velocity[i] + steer / 30
        expected *= min(1.0, max_speed / np.linalg.norm(expected))
        np.testing.assert_allclose(v[i], expected, rtol=1e-4, atol=1e-4)


def test_resize_keeps_agents_and_spawns_new_ones_on_the_gpu(ctx, backend):
    params = Params({"count": 1000})
    position, velocity = spawn_state(1000, params, 4)
    swarm = Swarm(ctx, params, position=position, velocity=velocity)
    try:
        swarm.step(1 / 60)
        before, _ = swarm.read_state()
        swarm.resize(600)  # shrink: ids 0..599 stay as they were
        x, v = swarm.read_state()
        assert x.shape == (600, 3)
        np.testing.assert_array_equal(x, before[:600])
        swarm.resize(1500)  # grow: 600..1499 spawned inside the spawn sphere, moving
        x, v = swarm.read_state()
        np.testing.assert_array_equal(x[:600], before[:600])
        assert np.linalg.norm(x[600:], axis=1).max() <= params["spawn_radius"] + 1e-3
        assert len(np.unique(np.round(x[600:], 4), axis=0)) == 900
        np.testing.assert_allclose(np.linalg.norm(v[600:], axis=1), 4.0, rtol=1e-4)
        assert sorted(raw_ids(swarm)) == list(range(1500))
        params["count"] = 1500
        swarm.step(1 / 60)  # the grid re-sorts the resized buffer: a normal step follows
        rx, rv, margin = reference.step(x, v, params, 1 / 60)
        assert_matches(swarm.read_state(), (rx, rv), margin, "after resize")
    finally:
        swarm.release()


def test_a_neighbor_radius_sweep_reuses_the_grid_buffers(ctx):
    """A knob sweeping neighbor_radius changes the grid's shape every frame: the buffers are
    kept (with room to spare) instead of reallocated, and every step stays exact."""
    params = Params({"count": 800})
    position, velocity = crowded_state(800, params)
    swarm = Swarm(ctx, params, position=position, velocity=velocity)
    swarm.max_cells = MAX_CELLS  # 800 agents' own budget would cap the 1.0 radius's grid
    try:
        swarm.step(1 / 60)
        buffers = list(swarm._cells.buffers)
        for radius in (3.05, 3.1, 3.2, 3.35, 3.5, 3.4, 3.0, 2.9):  # 2.9: more cells, within room
            params["neighbor_radius"] = radius
            before = swarm.read_state()
            swarm.step(1 / 60)
            rx, rv, margin = reference.step(*before, params, 1 / 60)
            assert_matches(swarm.read_state(), (rx, rv), margin, f"radius {radius}")
        assert swarm._cells.buffers == buffers
        params["neighbor_radius"] = 1.0  # 27x the cells: now it must grow
        swarm.step(1 / 60)
        assert swarm._cells.buffers[0] is not buffers[0]
        grown = swarm.grid_capacity
        params["neighbor_radius"] = 3.0  # far smaller again: the memory is given back
        swarm.step(1 / 60)
        assert swarm.grid_capacity < grown / 4
    finally:
        swarm.release()


@pytest.mark.parametrize("tuning", [{"lanes": 1}, {"lanes": 4}, {"lanes": 8, "local_size": 64}],
                         ids=lambda t: ",".join(f"{k}={v}" for k, v in t.items()))
def test_lanes_match_the_seed_kernel_and_repeat(ctx, tuning):
    """However an agent's candidates are shared out among invocations (one, or lanes each
    summing every k-th candidate, added in lane order; the knot here has hundreds), the step is
    the seed's, with and without a neighbour cap, and the same start gives the same bits."""
    params = Params({"count": 3000})
    position, velocity = crowded_state(3000, params, seed=21)
    rx, rv, margin = reference.step(position, velocity, params, 1 / 60, target=(4.0, 2.0, -1.0))
    (x, v), _ = run_gpu(ctx, params, position, velocity, "grid", tuning=tuning)
    assert_matches((x, v), (rx, rv), margin, f"{tuning}")
    params["neighbor_cap"] = 40
    runs = []
    for _ in range(2):
        swarm = Swarm(ctx, params, position=position, velocity=velocity, tuning=tuning)
        try:
            for _ in range(4):
                swarm.step(1 / 30, target=(4.0, 2.0, -1.0))
            runs.append(np.frombuffer(swarm.current.read(), np.float32))
        finally:
            swarm.release()
    np.testing.assert_array_equal(runs[0], runs[1])


def test_the_buffer_is_in_cell_order_stable_inside_a_cell(ctx):
    """After a step the agents are in cell order; inside a cell they keep the order they had
    in the buffer before the step (a stable counting sort: deterministic)."""
    params = Params({"count": 2000})
    position, velocity = crowded_state(2000, params, seed=8)
    swarm = Swarm(ctx, params, position=position, velocity=velocity)
    try:
        shape = grid_shape(params)
        swarm.step(1 / 60)  # the first step sorts the loaded state first
        for _ in range(2):
            before = np.frombuffer(swarm.current.read(), np.float32).reshape(-1, 8)
            swarm.step(1 / 60)
            agents = np.frombuffer(swarm.current.read(), np.float32).reshape(-1, 8)
            cell = np.clip(np.floor((agents[:, :3] - shape.origin) / shape.cell), 0,
                           np.array(shape.dims) - 1).astype(np.int64)
            index = cell[:, 0] + shape.dims[0] * (cell[:, 1] + shape.dims[1] * cell[:, 2])
            assert np.all(np.diff(index) >= 0), "not in cell order"
            # Inside a cell: the order of the buffer before the step.
            previous = np.empty(len(before), np.int64)
            previous[before[:, 3].astype(np.int64)] = np.arange(len(before))
            rank = previous[agents[:, 3].astype(np.int64)]
            same = np.diff(index) == 0
            assert np.all(np.diff(rank)[same] > 0), "a cell out of its previous order"
    finally:
        swarm.release()


@pytest.mark.slow  # a crowd played until the lanes follow it
def test_auto_lanes_measure_the_crowd_and_follow_it(ctx, monkeypatch):
    """With lanes "auto" the grid kernel counts, every CROWD_EVERY steps, the candidates its
    agents visit; with `fixed_lag` (reproducible runs) the swarm reads a measurement at the
    step after the next one (the same mean as counting the 27 cells around each agent on the
    CPU) and picks the kernel it runs from it. Each kernel is the seed's step, and the same
    start makes the same choices and the same bits."""
    import swarm_instrument.visual.sim.swarm as swarm_module
    from benchmarks.bench_swarm import candidates

    params = Params({"count": 3000})
    position, velocity = crowded_state(3000, params, seed=21)
    expected = candidates(position, params)["mean"]
    threshold = expected / 2  # crowded enough for four lanes, once it has been measured
    monkeypatch.setattr(swarm_module, "choose_lanes",
                        lambda count, mean: 1 if mean is None or mean < threshold else 4)
    runs = []
    for _ in range(2):
        swarm = Swarm(ctx, params, position=position, velocity=velocity,
                      tuning={"lanes": "auto"})
        swarm.fixed_lag = True
        try:
            lanes = []
            for _ in range(swarm_module.CROWD_EVERY + 1):
                swarm.step(1 / 60, target=(4.0, 2.0, -1.0))
                lanes.append(swarm.lanes)
            assert swarm.mean_candidates is None  # step 0's is read at step CROWD_EVERY + 1
            x, v = swarm.read_state()
            rx, rv, margin = reference.step(x, v, params, 1 / 60, target=(4.0, 2.0, -1.0))
            swarm.step(1 / 60, target=(4.0, 2.0, -1.0))
            lanes.append(swarm.lanes)
            assert swarm.mean_candidates == pytest.approx(expected, abs=0.5)
            assert lanes == [1] * (swarm_module.CROWD_EVERY + 1) + [4]
            assert_matches(swarm.read_state(), (rx, rv), margin, "the step after the switch")
            runs.append(np.frombuffer(swarm.current.read(), np.float32))
        finally:
            swarm.release()
    np.testing.assert_array_equal(runs[0], runs[1])


def test_auto_lanes_read_the_crowd_as_soon_as_the_gpu_is_done(ctx):
    """A live swarm (no fixed lag) never waits for a measurement: it takes it at the first
    step after the GPU has finished it (a fence)."""
    params = Params({"count": 3000})
    position, velocity = crowded_state(3000, params, seed=21)
    swarm = Swarm(ctx, params, position=position, velocity=velocity, tuning={"lanes": "auto"})
    try:
        assert swarm._crowd.fences is not None, "EGL offers fences: the live path uses them"
        swarm.step(1 / 60)  # measures
        assert swarm.mean_candidates is None
        ctx.finish()
        swarm.step(1 / 60)
        assert swarm.mean_candidates is not None and swarm.mean_candidates > 10
        # A new state (a respawn, a load): what was measured before no longer holds.
        swarm.set_state(position, velocity, same_crowd=True)  # the benchmark's: kept
        assert swarm.mean_candidates is not None
        swarm.step(1 / 60)
        swarm.set_state(position, velocity)
        ctx.finish()
        swarm.step(1 / 60)
        assert swarm.mean_candidates is None
    finally:
        swarm.release()


def test_the_lane_rule_follows_the_h200_measurements():
    """Four lanes where the GPU has few agents or they crowd, one for a spread million."""
    from swarm_instrument.visual.sim.swarm import choose_lanes

    assert choose_lanes(16384, 95) == 4 and choose_lanes(16384, 776) == 4
    assert choose_lanes(262144, 102) == 1 and choose_lanes(262144, 244) == 4
    assert choose_lanes(1 << 20, 104) == 1 and choose_lanes(1 << 20, 192) == 4
    assert choose_lanes(1 << 22, 171) == 1 and choose_lanes(1 << 22, 400) == 4
    assert choose_lanes(1 << 20, None) == 1 and choose_lanes(65536, None) == 4
