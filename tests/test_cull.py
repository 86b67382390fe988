"""The camera maths and the GPU cull pass: frustum planes, picking, the indirect command's counts,
the near/far lists of the level of detail, the near-lure count and its late read-back.

GPU tests compare the cull pass with the same test done in numpy on the same planes; those that
take the `backend` fixture run on both backends (compute, and GL 4.1's transform feedback cull).
"""

from __future__ import annotations

import numpy as np
import pytest

from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.visual.gpu import programs
from swarm_instrument.visual.render.camera import (
    OrbitCamera,
    frustum_planes,
    look_at,
    perspective,
    sphere_visible,
)
from swarm_instrument.visual.sim.agents import pack_agents
from swarm_instrument.visual.sim.state41 import STATE_WIDTH, state_rows
from swarm_instrument.visual.sim.swarm import Swarm
from swarm_instrument.visual.sim.swarm41 import Swarm41

from drawing import Drawn, Drawn41

SIZE = (64, 48)  # the cull tests only need a draw to happen, not to look at it


@pytest.fixture(autouse=True)
def strict_uniforms(monkeypatch):
    """A uniform name a program does not have, or a program without its block, is an error."""
    monkeypatch.setattr(programs, "STRICT", True)


class AgentBuffer:
    """Stands in for a Swarm on either backend: agents written straight into Swarm's GPU
    layout (`current`) and into Swarm41's state textures (`positions`, `velocities`)."""

    def __init__(self, ctx, position: np.ndarray, velocity: np.ndarray | None = None) -> None:
        position = np.asarray(position, np.float32)
        if velocity is None:
            velocity = np.tile(np.array([1.0, 0.0, 0.0], np.float32), (len(position), 1))
        self.count = len(position)
        self.current = ctx.buffer(reserve=self.count * 32)
        size = (STATE_WIDTH, state_rows(self.count))
        self.positions = ctx.texture(size, 4, dtype="f4")
        self.velocities = ctx.texture(size, 4, dtype="f4")
        self.write(position, velocity)

    def write(self, position: np.ndarray, velocity: np.ndarray) -> None:
        agents = pack_agents(position, velocity)
        self.current.write(agents.tobytes())
        texels = np.zeros((self.positions.width * self.positions.height, 8), np.float32)
        texels[:len(agents)] = agents
        self.positions.write(np.ascontiguousarray(texels[:, :4]).tobytes())
        self.velocities.write(np.ascontiguousarray(texels[:, 4:]).tobytes())

    def release(self) -> None:
        for obj in (self.current, self.positions, self.velocities):
            obj.release()


BACKENDS = {"4.3": (Drawn, Swarm), "4.1": (Drawn41, Swarm41)}


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    """The test runs on this backend: `Drawn` and `Swarm` here are its classes."""
    drawn, swarm = BACKENDS[request.param]
    monkeypatch.setitem(globals(), "Drawn", drawn)
    monkeypatch.setitem(globals(), "Swarm", swarm)
    return request.param


def clear_of_planes(points: np.ndarray, planes: np.ndarray, radius: float,
                    margin: float = 1e-2) -> np.ndarray:
    """Points not within `margin` of a plane's cull boundary: float32 vs float64 cannot
    disagree about them, so counts can be compared exactly."""
    distances = points @ planes[:, :3].T + planes[:, 3] + radius
    return np.all(np.abs(distances) > margin, axis=1)


# ---- camera maths (no GPU) ------------------------------------------------------------------

def test_look_at_and_perspective_put_the_target_in_the_middle():
    eye, target = np.array([10.0, 20.0, 30.0]), np.array([1.0, -2.0, 3.0])
    clip = perspective(50, 1.5, 0.5, 500) @ look_at(eye, target) @ np.append(target, 1.0)
    ndc = clip[:3] / clip[3]
    assert ndc[:2] == pytest.approx([0.0, 0.0], abs=1e-12)
    assert -1.0 < ndc[2] < 1.0


def test_frustum_planes_agree_with_clip_space():
    camera = OrbitCamera(time=7.0)
    vp = camera.view_projection(16 / 9)
    planes = frustum_planes(vp)
    assert np.linalg.norm(planes[:, :3], axis=1) == pytest.approx(np.ones(6))
    rng = np.random.default_rng(1)
    points = rng.uniform(-300, 300, size=(20000, 3))
    clip = np.c_[points, np.ones(len(points))] @ vp.T
    inside_clip = np.all(np.abs(clip[:, :3]) <= clip[:, 3:4], axis=1) & (clip[:, 3] > 0)
    inside_planes = sphere_visible(planes, points, 0.0)
    assert 1000 < inside_clip.sum() < 19000  # both outcomes are well represented
    assert np.array_equal(inside_clip, inside_planes)
    # A radius lets a sphere just outside a plane through.
    left = planes[0]
    outside = -left[:3] * (left[3] + 0.5)  # 0.5 beyond the left plane, on its normal line
    assert sphere_visible(planes[:1], outside, 0.6)[0]
    assert not sphere_visible(planes[:1], outside, 0.4)[0]


def test_orbit_turns_with_time_and_keeps_its_distance():
    camera = OrbitCamera(distance=100, orbit_speed=10.0, azimuth=5.0)
    first = camera.eye
    camera.time = 9.0
    assert camera.orbit_angle() == pytest.approx(95.0)
    assert np.linalg.norm(camera.eye) == pytest.approx(100.0)
    assert camera.eye[1] == pytest.approx(first[1])  # same height (elevation)
    horizontal = [0, 2]
    assert np.dot(first[horizontal], camera.eye[horizontal]) == pytest.approx(0.0, abs=1e-9)
    camera.zoom(0.5)
    assert camera.distance == pytest.approx(50.0)
    camera.zoom(1e-6)
    assert camera.distance == camera.min_distance


def test_follow_frames_the_swarm_and_keeps_the_users_zoom():
    camera = OrbitCamera(fov_y=50.0, fill=0.7)  # not the default, to see it is used
    radius = 20.0
    distance = camera.fit_distance(radius)
    # The ball's silhouette (tangent rays from the eye) sits at 70 % of the half-height.
    half_angle = np.arcsin(radius / distance)
    assert np.tan(half_angle) / np.tan(np.radians(25.0)) == pytest.approx(0.7)
    rms = radius / np.sqrt(5 / 3)  # a uniform ball of radius 20
    camera.follow(rms, dt=1.5)  # one time constant: 63 % of the way
    assert camera.distance == pytest.approx(110 + (distance - 110) * (1 - np.exp(-1)))
    for _ in range(100):
        camera.follow(rms, dt=0.5)
    assert camera.distance == pytest.approx(distance)
    camera.zoom(2.0)
    for _ in range(100):
        camera.follow(rms, dt=0.5)
    assert camera.distance == pytest.approx(2 * distance)
    camera.follow(None, dt=1.0)  # nothing measured yet: stay
    assert camera.distance == pytest.approx(2 * distance)


def test_follow_keeps_a_rushing_growing_swarm_in_the_frame():
    """A loud passage: the swarm's centre runs off at 40 units a second while it swells from 20
    to 60; the counts the camera follows are two frames late (a render's fixed lag). The ball
    must stay inside the frame's four sides the whole time, after the first quarter second."""
    camera = OrbitCamera()
    aspect = 16 / 9
    history = []
    worst = np.inf
    for frame in range(300):
        t = frame / 60
        center = np.array([40.0 * t, 25.0 * np.sin(t), 0.0])
        radius = 20.0 + 8.0 * t  # the ball's radius
        history.append((center, radius / np.sqrt(5 / 3)))
        seen_center, seen_rms = history[max(0, len(history) - 3)]
        camera.time = t
        camera.follow(seen_rms, 1 / 60, seen_center)
        planes = camera.frustum(aspect)[:4]  # left, right, bottom, top
        inside = planes[:, :3] @ center + planes[:, 3]  # distance inside each side
        if t >= 0.25:
            worst = min(worst, float((inside / radius).min()))
    assert worst >= 1.0, f"the swarm left the frame: {worst:.2f} of its radius inside"


def test_screen_point_maps_onto_the_plane_facing_the_camera():
    camera = OrbitCamera(time=3.0)
    width, height = 800, 600
    middle = camera.screen_to_swarm(width / 2, height / 2, width, height)
    assert middle == pytest.approx([0.0, 0.0, 0.0], abs=1e-9)
    point = camera.screen_to_swarm(600, 450, width, height)
    assert np.dot(point, camera.forward) == pytest.approx(0.0, abs=1e-9)  # on the plane
    clip = camera.view_projection(width / height) @ np.append(point, 1.0)
    ndc = clip[:2] / clip[3]
    pixel = (ndc + 1.0) / 2.0 * [width, height]
    assert pixel == pytest.approx([600, 450], abs=1e-6)  # and under the mouse
    assert point[1] > 0  # the top half of the screen (pyglet's y grows upwards) is up


# ---- the cull pass on the GPU ---------------------------------------------------------------

def test_visible_count_in_the_indirect_command_matches_numpy(ctx, backend):
    params = Params({"agent_size": 0.6,
                     "lod_pixels": 0.6 * SIZE[1] / (2 * np.tan(np.radians(50.0) / 2)) / 120.0})
    camera = OrbitCamera(time=11.0)
    planes = camera.frustum(SIZE[0] / SIZE[1])
    rng = np.random.default_rng(2)
    points = rng.uniform(-200, 200, size=(40000, 3)).astype(np.float32)
    points = points[clear_of_planes(points.astype(float), planes, 0.6)][:5037]  # 20 groups, ragged
    far_ok = np.abs(np.linalg.norm(points - camera.eye, axis=1) - 120.0) > 1e-2
    points = points[far_ok]
    agents = AgentBuffer(ctx, points)
    renderer = Drawn(ctx, params)
    framebuffer = renderer.offscreen_framebuffer(SIZE)
    try:
        renderer.render(agents, camera, framebuffer)
        counts = renderer.read_counts_now()
        expected = sphere_visible(planes, points.astype(float), 0.6)
        far = np.linalg.norm(points - camera.eye, axis=1) > 120.0
        assert 0 < expected.sum() < len(points)
        assert counts.visible == expected.sum()
        assert counts.near == (expected & ~far).sum()
        assert counts.far == (expected & far).sum()
        assert counts.far > 0 and counts.near > 0
        # The draw command itself, as glDrawArraysIndirect reads it.
        near_indices, far_indices = renderer.read_visible_now()
        assert sorted(near_indices) == list(np.flatnonzero(expected & ~far))
        assert sorted(far_indices) == list(np.flatnonzero(expected & far))
    finally:
        renderer.release()
        agents.release()


def test_reproducible_runs_list_the_visible_agents_in_agent_order(ctx, backend):
    """stable_order (what --dt and --render set): both lists hold the visible agents in
    ascending order, every frame, so additive light is summed in the same order every run
    (the live cull appends each workgroup wherever it finishes); the counts are unchanged."""
    params = Params({"agent_size": 0.6,
                     "lod_pixels": 0.6 * SIZE[1] / (2 * np.tan(np.radians(50.0) / 2)) / 120.0})
    camera = OrbitCamera(time=11.0)
    rng = np.random.default_rng(3)
    points = rng.uniform(-150, 150, size=(70001, 3)).astype(np.float32)  # 274 groups, ragged
    agents = AgentBuffer(ctx, points)
    renderer = Drawn(ctx, params)
    renderer.stable_order = True
    framebuffer = renderer.offscreen_framebuffer(SIZE)
    try:
        planes = camera.frustum(SIZE[0] / SIZE[1])
        expected = sphere_visible(planes, points.astype(float), 0.6)
        far = np.linalg.norm(points - camera.eye, axis=1) > 120.0
        sure = clear_of_planes(points.astype(float), planes, 0.6) & (
            np.abs(np.linalg.norm(points - camera.eye, axis=1) - 120.0) > 1e-2)
        for _ in range(2):  # the second frame over the first one's lists
            renderer.render(agents, camera, framebuffer)
            near, far_list = renderer.read_visible_now()
            assert len(near) > 1000 and len(far_list) > 1000
            assert np.all(np.diff(near.astype(np.int64)) > 0)
            assert np.all(np.diff(far_list.astype(np.int64)) > 0)
            assert set(np.flatnonzero(expected & ~far & sure)) <= set(near.tolist())
            assert set(np.flatnonzero(expected & far & sure)) <= set(far_list.tolist())
            counts = renderer.read_counts_now()
            assert (counts.near, counts.far) == (len(near), len(far_list))
    finally:
        renderer.release()
        agents.release()


def test_indirect_commands_hold_the_mesh_and_the_counts(ctx, backend):
    points = np.zeros((300, 3), np.float32)
    agents = AgentBuffer(ctx, points)
    renderer = Drawn(ctx, Params({"lod_pixels": 0}))  # every agent a cone
    try:
        renderer.render(agents, OrbitCamera(), renderer.offscreen_framebuffer(SIZE))
        ctx.finish()
        words = np.frombuffer(renderer._draw_state.read(), np.uint32)
        # DrawArraysIndirectCommand x 2: count, instanceCount, first, baseInstance, pad
        (near_count, near_first), (far_count, far_first) = renderer.meshes.commands("cone")
        assert list(words[0:5]) == [near_count, 300, near_first, 0, 0]
        assert list(words[5:10]) == [far_count, 0, far_first, 0, 0]
        assert 8 * 3 <= near_count <= 12 * 3 and far_count == 1  # a far agent: one point
    finally:
        renderer.release()
        agents.release()


def test_nothing_visible_draws_nothing(ctx, backend):
    camera = OrbitCamera()
    behind = np.asarray(camera.eye) * 1.5  # behind the camera
    agents = AgentBuffer(ctx, np.tile(behind, (1000, 1)))
    renderer = Drawn(ctx, Params())
    try:
        renderer.render(agents, camera, renderer.offscreen_framebuffer(SIZE))
        assert renderer.read_counts_now().visible == 0
    finally:
        renderer.release()
        agents.release()


def test_near_lure_count_matches_numpy_and_ignores_visibility(ctx, backend):
    params = Params({"lure_radius": 12.0})
    rng = np.random.default_rng(3)
    points = rng.uniform(-30, 30, size=(8000, 3)).astype(np.float32)
    lure = np.array([10.0, -5.0, 3.0])
    distance = np.linalg.norm(points - lure, axis=1)
    points = points[np.abs(distance - 12.0) > 1e-3]
    agents = AgentBuffer(ctx, points)
    renderer = Drawn(ctx, params)
    try:
        # A camera looking away from the swarm: nothing visible, the count still holds.
        away = OrbitCamera(distance=100.0)
        away.target = -away.eye * 3.0  # the eye is then 200 out, the swarm behind it
        renderer.render(agents, away, renderer.offscreen_framebuffer(SIZE), lure=lure)
        counts = renderer.read_counts_now()
        expected = int((np.linalg.norm(points - lure, axis=1) <= 12.0).sum())
        assert counts.visible == 0
        assert counts.near_lure == expected > 100
        params["lure_radius"] = 0.0
        renderer.render(agents, away, renderer.offscreen_framebuffer(SIZE), lure=lure)
        assert renderer.read_counts_now().near_lure == 0
    finally:
        renderer.release()
        agents.release()


def test_swarm_centre_and_radius_match_numpy(ctx, backend):
    rng = np.random.default_rng(5)
    centre = np.array([30.0, -20.0, 10.0])
    points = (centre + rng.normal(scale=12.0, size=(7000, 3))).astype(np.float32)
    agents = AgentBuffer(ctx, points)
    renderer = Drawn(ctx, Params())
    camera = OrbitCamera()
    try:
        renderer.render(agents, camera, renderer.offscreen_framebuffer(SIZE))
        counts = renderer.read_counts_now()
        mean = points.astype(float).mean(axis=0)
        rms = np.sqrt(((points - mean) ** 2).sum(axis=1).mean())
        assert counts.center == pytest.approx(mean, abs=1e-2)
        assert counts.rms_radius == pytest.approx(rms, rel=1e-3)
        assert renderer.swarm_center == counts.center
        # An agent gone astray (or not finite) counts as 4 x contain_radius away at most.
        points[0] = (1e9, 0.0, 0.0)
        points[1] = (np.nan, 0.0, 0.0)
        agents.write(points, np.ones_like(points))
        renderer.render(agents, camera, renderer.offscreen_framebuffer(SIZE))
        counts = renderer.read_counts_now()
        assert np.all(np.isfinite(counts.center)) and np.isfinite(counts.rms_radius)
        assert np.abs(np.subtract(counts.center, mean)).max() < 2 * 4 * 60.0 / 7000 + 0.05
        assert counts.rms_radius == pytest.approx(rms, rel=0.05)
        # The camera eases onto the swarm: centred on it, framing it.
        for _ in range(60):
            camera.follow(counts.rms_radius, 0.5, counts.center)
        assert camera.target == pytest.approx(counts.center)
        assert camera.distance == pytest.approx(
            camera.fit_distance(counts.rms_radius * np.sqrt(5 / 3)))
    finally:
        renderer.release()
        agents.release()


def test_counts_arrive_once_the_gpu_has_finished_their_frame(ctx, backend):
    camera = OrbitCamera()
    agents = AgentBuffer(ctx, np.zeros((1000, 3), np.float32))
    renderer = Drawn(ctx, Params({"lure_radius": 1.0}))
    framebuffer = renderer.offscreen_framebuffer(SIZE)
    hidden = np.tile(np.asarray(camera.eye) * 1.5, (1000, 1))
    velocity = np.ones((1000, 3), np.float32)
    assert renderer._readback.ring.fences is not None  # EGL on llvmpipe has GL fences
    # Frame k shows 1000 - 100 k agents: the rest are hidden behind the camera.
    seen = []
    try:
        for k in range(6):
            position = np.zeros((1000, 3), np.float32)
            position[: 100 * k] = hidden[: 100 * k]
            agents.write(position, velocity)
            renderer.render(agents, camera, framebuffer)
            seen.append((k, renderer.counts_frame, renderer.visible, renderer.near_lure))
        for k, frame, visible, near in seen:
            if frame is not None:  # counts of a finished frame, never of a later one
                assert frame <= k and visible == near == 1000 - 100 * frame, seen
        frames = [frame for _, frame, _, _ in seen if frame is not None]
        assert frames == sorted(frames)
        ctx.finish()  # every frame so far finished: the next render reads the newest of them
        renderer.render(agents, camera, framebuffer)
        assert renderer.counts_frame >= 5 and renderer.visible == 500
    finally:
        renderer.release()
        agents.release()


def test_fixed_lag_reads_exactly_two_frames_late(ctx, backend):
    """--dt and --render: the camera follows counts of a fixed frame, so runs repeat."""
    agents = AgentBuffer(ctx, np.zeros((300, 3), np.float32))
    renderer = Drawn(ctx, Params())
    renderer.fixed_lag = True
    framebuffer = renderer.offscreen_framebuffer(SIZE)
    try:
        lags = []
        for _ in range(6):
            renderer.render(agents, OrbitCamera(), framebuffer)
            lags.append(None if renderer.counts_frame is None
                        else renderer.frames - 1 - renderer.counts_frame)
        assert lags == [None, None, 2, 2, 2, 2] and renderer.readback == "two frames late"
    finally:
        renderer.release()
        agents.release()


class _StuckFences:
    """Fences of a GPU that never gets there: whatever waits on them would hang."""

    def __init__(self):
        self.live = set()
        self.made = 0
        self.done = False

    def insert(self):
        self.made += 1
        self.live.add(self.made)
        return self.made

    def signalled(self, token):
        return self.done

    def delete(self, token):
        self.live.remove(token)


def test_counts_are_never_read_before_the_gpu_is_done(ctx, backend):
    """With the GPU behind, frames go on without counts (nothing reads an unfinished copy),
    a full ring drops its oldest copy, and the fences are all freed."""
    agents = AgentBuffer(ctx, np.zeros((500, 3), np.float32))
    renderer = Drawn(ctx, Params())
    stuck = _StuckFences()
    renderer._readback.ring.fences = stuck
    framebuffer = renderer.offscreen_framebuffer(SIZE)
    try:
        for _ in range(5):
            renderer.render(agents, OrbitCamera(), framebuffer)
            assert renderer.counts is None
        assert renderer._readback.ring.overwritten == 2 and len(stuck.live) == 3
        stuck.done = True
        renderer.render(agents, OrbitCamera(), framebuffer)
        assert renderer.counts_frame == 5 and renderer.visible == 500
        assert not stuck.live
    finally:
        renderer.release()
        agents.release()


def test_cull_reads_a_stepped_swarm(ctx, backend):
    params = Params({"count": 2000})
    swarm = Swarm(ctx, params, seed=4)
    renderer = Drawn(ctx, params)
    try:
        for _ in range(3):
            swarm.step(1 / 30)
        renderer.render(swarm, OrbitCamera(), renderer.offscreen_framebuffer(SIZE), lure=(0, 0, 0))
        counts = renderer.read_counts_now()
        position, _ = swarm.read_state()
        assert counts.visible == 2000  # the whole swarm is in view of the default camera
        expected = int((np.linalg.norm(position, axis=1) <= params["lure_radius"]).sum())
        assert abs(counts.near_lure - expected) <= 1  # an agent may sit on the sphere
        assert counts.near_lure > 0
    finally:
        renderer.release()
        swarm.release()


def test_a_failed_fence_wait_reads_instead_of_freezing_the_counts():
    from swarm_instrument.visual.gpu.fence import GL_TIMEOUT_EXPIRED, GL_WAIT_FAILED, Fences

    status = [GL_TIMEOUT_EXPIRED]
    fences = Fences(lambda condition, flags: 7, lambda sync, flags, timeout: status[0],
                    lambda sync: None)
    assert not fences.signalled(fences.insert())  # still running: no read
    status[0] = GL_WAIT_FAILED
    assert fences.signalled(fences.insert())
    assert fences.signalled(0)  # glFenceSync failed: read (and wait) rather than freeze
