"""Far agents splatted by compute (visual/render/splat.py) against the same agents drawn as GL
points: the same pixels and colours, opaque and added light, meshes and billboards, near meshes over
far splats, and the splat's state empty again after every frame.

Small frames and a few thousand agents: llvmpipe draws in software.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_cull import AgentBuffer
from test_render import ball

from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.visual.gpu import programs
from swarm_instrument.visual.render.camera import OrbitCamera

from drawing import Drawn, render_offscreen

SIZE = (200, 150)


@pytest.fixture(autouse=True)
def strict_uniforms(monkeypatch):
    monkeypatch.setattr(programs, "STRICT", True)


def both_ways(ctx, values: dict, position, velocity, camera: OrbitCamera):
    """(points image, splat image, counts) of one frame of the same agents."""
    agents = AgentBuffer(ctx, position, velocity)
    images = {}
    try:
        for mode in ("points", "splat"):
            renderer = Drawn(ctx, Params(values))
            renderer.far_draw = mode
            try:
                render_offscreen(ctx, renderer, agents, camera, SIZE)  # the counts, a frame late
                images[mode] = render_offscreen(ctx, renderer, agents, camera, SIZE)
                counts = renderer.read_counts_now()
            finally:
                renderer.release()
    finally:
        agents.release()
    return images["points"], images["splat"], counts


def drawn(image: np.ndarray) -> np.ndarray:
    """Pixels clearly not the background (the display pass dithers it by a level or two)."""
    background = np.median(image.reshape(-1, 3)[:200], axis=0)
    return np.abs(image.astype(int) - background).max(axis=2) > 6


def assert_same_picture(points: np.ndarray, splat: np.ndarray, what: str) -> None:
    """Nearly every pixel the same (a point's edge pixel may round the other way, an
    overlap of two opaque points at one depth may go either way), none far off on average."""
    difference = np.abs(points.astype(int) - splat.astype(int)).max(axis=2)
    either = drawn(points) | drawn(splat)
    assert either.mean() > 0.05, f"{what}: too little drawn to compare"
    off = (difference > 12)[either].mean()
    assert off < 0.01, f"{what}: {off:.1%} of the drawn pixels differ"
    assert difference[either].mean() < 1.0, f"{what}: mean difference {difference.mean():.2f}"


SPREAD = ball(3000, 12.0, 6.0, seed=3)  # speeds differ below: sizes differ (size_by_speed)
SPEEDS = np.random.default_rng(4).uniform(0.5, 12.0, size=(3000, 1)).astype(np.float32)


@pytest.mark.parametrize("shape, blend", [("cone", "opaque"), ("arrow", "opaque"),
                                          ("glow", "additive"), ("glow", "opaque"),
                                          ("cone", "additive")])
def test_far_agents_splat_as_their_points_draw(ctx, shape, blend):
    """Every agent far (lod_pixels 40: points of 1 to a dozen pixels across)."""
    position, velocity = SPREAD
    velocity = velocity / np.linalg.norm(velocity, axis=1, keepdims=True) * SPEEDS
    values = {"shape": shape, "blend": blend, "lod_pixels": 40, "agent_size": 0.6,
              "size_by_speed": 0.8, "max_speed": 8.0, "post": "off", "glow": 1.4}
    camera = OrbitCamera(distance=38.0, orbit_speed=0.0)
    points, splat, counts = both_ways(ctx, values, position, velocity, camera)
    assert counts.near == 0 and counts.far > 2500
    assert_same_picture(points, splat, f"{shape}, {blend}")


def test_near_meshes_cover_far_splats(ctx):
    """A cone close to the camera in front of a wall of far agents hides them, as it hides
    their points."""
    camera = OrbitCamera(distance=30.0, elevation=0.0, azimuth=0.0, orbit_speed=0.0)
    toward_eye = camera.eye / np.linalg.norm(camera.eye)
    across = np.cross(toward_eye, [0.0, 1.0, 0.0])
    across /= np.linalg.norm(across)
    up = np.cross(across, toward_eye)
    rng = np.random.default_rng(5)
    u, v = rng.uniform(-14, 14, 4000), rng.uniform(-10, 10, 4000)
    wall = -20.0 * toward_eye + u[:, None] * across + v[:, None] * up
    position = np.concatenate([wall, [24.0 * toward_eye]]).astype(np.float32)
    velocity = np.tile(up * 0.5, (len(position), 1)).astype(np.float32)  # slow: blue
    velocity[-1] = up * 8.0  # the near cone is fast: red
    values = {"shape": "cone", "blend": "opaque", "agent_size": 1.2, "lod_pixels": 6,
              "max_speed": 8.0, "post": "off", "slow_color": (0.1, 0.2, 1.0),
              "fast_color": (1.0, 0.2, 0.1)}
    points, splat, counts = both_ways(ctx, values, position, velocity, camera)
    assert counts.near == 1 and counts.far > 3000
    assert_same_picture(points, splat, "a near cone over a far wall")
    h, w = SIZE[1] // 2, SIZE[0] // 2
    for image in (points, splat):  # the cone's red where it stands, the wall's blue around
        centre = image[h - 2:h + 3, w - 2:w + 3].astype(int)
        assert (centre[..., 0] > 2 * centre[..., 2]).all()
    wall = (splat[..., 2].astype(int) > 2 * splat[..., 0]).mean()
    assert wall > 0.05


def test_splat_state_is_empty_after_each_frame(ctx):
    """What a frame splats is gone by the next: a frame with no far agents after many
    shows nothing but the background (opaque and added light alike)."""
    position, velocity = SPREAD
    agents = AgentBuffer(ctx, position, velocity)
    renderer = Drawn(ctx, Params({"lod_pixels": 40, "post": "off", "agent_size": 0.6,
                                   "trail": 0.0}))
    try:
        camera = OrbitCamera(distance=38.0, orbit_speed=0.0)
        for blend in ("additive", "opaque"):
            busy = render_offscreen(ctx, renderer, agents, camera, SIZE, values={"blend": blend})
            assert drawn(busy).mean() > 0.05
        agents.write(position + 5000.0, velocity)  # out of sight: no far agent is left
        for blend in ("additive", "opaque", "additive"):
            empty = render_offscreen(ctx, renderer, agents, camera, SIZE, values={"blend": blend})
            assert not drawn(empty).any(), blend
    finally:
        renderer.release()
        agents.release()
