"""Rendered frames: the swarm is drawn where it is, coloured by speed, with trails, the far
level of detail, the telegraph colour; screenshots go through PNG and back unchanged.

Frames are small (320x240) and agents few (a few thousand): llvmpipe renders in software.
"""

from __future__ import annotations

from time import sleep

import numpy as np
import pytest
from test_cull import AgentBuffer

from swarm_instrument.control.parameters.registry import ParamError, Params
from swarm_instrument.visual.gpu import programs
from swarm_instrument.visual.output.png import SIGNATURE, encode_png, write_png
from swarm_instrument.visual.render.camera import OrbitCamera
from swarm_instrument.visual.render.frame_values import BACKGROUND, lod_distance
from swarm_instrument.visual.render.palettes import srgb_to_linear
from swarm_instrument.visual.sim.agents import spawn_state
from swarm_instrument.visual.sim.swarm import Swarm

from drawing import Drawn, render_offscreen
from pictures import read_png

SIZE = (320, 240)
BLUE, RED, GREEN = (0.0, 0.0, 1.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)


@pytest.fixture(autouse=True)
def strict_uniforms(monkeypatch):
    """A uniform name a program does not have, or a program without its block, is an error."""
    monkeypatch.setattr(programs, "STRICT", True)


def colour_params(**values) -> Params:
    """Pure colours that are easy to tell apart, big agents that cover pixels at 320x240."""
    base = {"slow_color": BLUE, "fast_color": RED, "telegraph_color": GREEN, "agent_size": 2.0,
            "max_speed": 8.0}
    base.update(values)
    return Params(base)


def srgb_to_linear_array(encoded: np.ndarray) -> np.ndarray:
    return np.where(encoded <= 0.04045, encoded / 12.92, ((encoded + 0.055) / 1.055) ** 2.4)


def linear_to_srgb_array(linear: np.ndarray) -> np.ndarray:
    linear = np.clip(linear, 0.0, 1.0)
    return np.where(linear <= 0.0031308, 12.92 * linear, 1.055 * linear ** (1 / 2.4) - 0.055)


def swarm_pixels(image: np.ndarray) -> np.ndarray:
    """Mask of pixels that are clearly not the background."""
    background = np.array(BACKGROUND) * 255
    return np.abs(image.astype(float) - background).max(axis=2) > 24


def mean_direction(image: np.ndarray) -> np.ndarray:
    """The average colour of swarm pixels, as a unit vector (hue, whatever the lighting)."""
    pixels = image[swarm_pixels(image)].astype(float)
    mean = pixels.mean(axis=0)
    return mean / np.linalg.norm(mean)


def ball(count: int, radius: float, speed: float, seed: int = 0,
         centre=(0.0, 0.0, 0.0)) -> tuple[np.ndarray, np.ndarray]:
    """Agents in a ball, all moving at `speed` in random directions."""
    rng = np.random.default_rng(seed)
    position = rng.normal(size=(count, 3))
    position *= (radius * rng.random(count) ** (1 / 3) / np.linalg.norm(position, axis=1))[:, None]
    velocity = rng.normal(size=(count, 3))
    velocity *= (speed / np.linalg.norm(velocity, axis=1))[:, None]
    return (position + centre).astype(np.float32), velocity.astype(np.float32)


@pytest.fixture
def renderer_for(ctx):
    """Build renderers (and agent buffers) that are released after the test."""
    made = []

    def make(params: Params) -> Drawn:
        renderer = Drawn(ctx, params)
        made.append(renderer)
        return renderer

    def agents(position, velocity) -> AgentBuffer:
        buffer = AgentBuffer(ctx, position, velocity)
        made.append(buffer)
        return buffer

    make.agents = agents
    yield make
    for thing in made:
        thing.release()


# ---- parameters and PNG (no GPU) ------------------------------------------------------------

def test_colour_parameters_take_hex_or_rgb():
    params = Params()
    params["slow_color"] = "#ff8000"
    assert params["slow_color"] == pytest.approx((1.0, 128 / 255, 0.0))
    params["fast_color"] = [0, 0.5, 1]
    assert params["fast_color"] == (0.0, 0.5, 1.0)
    for bad in ("#12345", "#gg0000", [0, 0, 2], [0, 0], [True, 0, 0], 3, [0, float("nan"), 0]):
        with pytest.raises(ParamError, match="fast_color"):
            params["fast_color"] = bad
    with pytest.raises(ParamError):
        params["trail"] = 1.5


def test_png_round_trip_rgb_and_rgba(tmp_path):
    """What write_png saves, Pillow reads back (its CRCs checked) to the very pixels."""
    rng = np.random.default_rng(0)
    for channels in (3, 4):
        image = rng.integers(0, 256, size=(7, 13, channels), dtype=np.uint8)
        path = tmp_path / f"image{channels}.png"
        write_png(path, image)
        assert path.read_bytes().startswith(SIGNATURE)
        assert np.array_equal(read_png(path), image)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["image3.png", "image4.png"]
    with pytest.raises(ValueError):
        encode_png(np.zeros((4, 4), np.uint8))


# ---- rendered frames ------------------------------------------------------------------------

def test_swarm_is_drawn_in_the_middle_of_the_frame(ctx, renderer_for):
    params = colour_params()
    renderer = renderer_for(params)
    agents = renderer_for.agents(*ball(3000, 20.0, 4.0))
    image = render_offscreen(ctx, renderer, agents, OrbitCamera(), SIZE)
    assert image.shape == (240, 320, 3) and image.dtype == np.uint8
    mask = swarm_pixels(image)
    middle = mask[80:160, 110:210]
    assert middle.mean() > 0.5  # the ball covers the middle of the frame
    assert mask[:20].mean() == 0 and mask[-20:].mean() == 0  # and not the edges
    assert mask[:, :40].mean() == 0 and mask[:, -40:].mean() == 0
    corner = image[5, 5].astype(float)
    assert corner == pytest.approx(np.array(BACKGROUND) * 255, abs=1.0)
    assert renderer.read_counts_now().visible == 3000


def test_slow_agents_take_the_slow_colour_and_fast_ones_the_fast_colour(ctx, renderer_for):
    params = colour_params()
    renderer = renderer_for(params)
    slow = renderer_for.agents(*ball(2000, 20.0, 0.05))
    fast = renderer_for.agents(*ball(2000, 20.0, 8.0))
    slow_image = render_offscreen(ctx, renderer, slow, OrbitCamera(), SIZE)
    fast_image = render_offscreen(ctx, renderer, fast, OrbitCamera(), SIZE)
    # Pixels point in the colour's direction (lighting and fog only scale and darken them).
    assert np.dot(mean_direction(slow_image), BLUE) > 0.95
    assert np.dot(mean_direction(fast_image), RED) > 0.95
    # Above max_speed (the audio boost) stays at the fast colour.
    faster = renderer_for.agents(*ball(2000, 20.0, 30.0))
    assert np.dot(mean_direction(render_offscreen(ctx, renderer, faster, OrbitCamera(), SIZE)),
                  RED) > 0.95
    # Hex colours from the registry reach the shader.
    params["fast_color"] = "#00ff00"
    assert np.dot(mean_direction(render_offscreen(ctx, renderer, fast, OrbitCamera(), SIZE)),
                  GREEN) > 0.95


def test_agents_are_lit_cones_not_flat_blobs(ctx, renderer_for):
    """One big agent seen side-on: its shading varies over its faces, and it points along its
    velocity (the tip, to the right, is narrower than the tail)."""
    params = colour_params(agent_size=12.0, slow_color=(0.8, 0.8, 0.8),
                           fast_color=(0.8, 0.8, 0.8))
    renderer = renderer_for(params)
    camera = OrbitCamera(distance=60.0, elevation=0.0, orbit_speed=0.0, azimuth=0.0)
    agent = renderer_for.agents(np.zeros((1, 3), np.float32),
                                np.array([[4.0, 0.0, 0.0]], np.float32))
    image = render_offscreen(ctx, renderer, agent, camera, SIZE)
    mask = swarm_pixels(image)
    columns = np.flatnonzero(mask.any(axis=0))
    assert columns.size > 60
    left, right = columns[0], columns[-1]
    heights = mask.sum(axis=0)
    tail = heights[left + (right - left) // 6]
    tip = heights[right - (right - left) // 6]
    assert tail > 2 * tip  # the cone points along +x, which is to the right on screen
    shades = np.unique(image[mask].sum(axis=1) // 8)
    assert len(shades) >= 3  # several lit faces, not one flat colour


def lod_pixels_at(distance: float, agent_size: float, height: int, fov_y: float = 50.0) -> float:
    """The lod_pixels that puts the cone / triangle switch at `distance` from the camera."""
    return agent_size * height / (2 * np.tan(np.radians(fov_y) / 2)) / distance


def test_lod_switches_where_an_agent_is_a_few_pixels():
    assert lod_distance(0.6, 3.0, 1080, 50.0) == pytest.approx(0.6 * 1158.05 / 3, rel=1e-4)
    assert lod_distance(0.6, 3.0, 2160, 50.0) == pytest.approx(2 * lod_distance(0.6, 3, 1080, 50))
    assert lod_distance(0.6, 0.0, 1080, 50.0) > 1e20  # 0: always cones


def test_far_agents_are_drawn_with_the_single_triangle(ctx, renderer_for):
    params = colour_params(lod_pixels=lod_pixels_at(50.0, 2.0, SIZE[1]))
    renderer = renderer_for(params)
    agents = renderer_for.agents(*ball(2000, 15.0, 8.0))
    image = render_offscreen(ctx, renderer, agents, OrbitCamera(distance=100.0), SIZE)
    counts = renderer.read_counts_now()
    assert counts.far == 2000 and counts.near == 0
    assert swarm_pixels(image)[80:160, 110:210].mean() > 0.3
    assert np.dot(mean_direction(image), RED) > 0.95
    # The same agents as cones cover the same region.
    params["lod_pixels"] = 0.0  # always cones
    near_image = render_offscreen(ctx, renderer, agents, OrbitCamera(distance=100.0), SIZE)
    assert renderer.read_counts_now().near == 2000
    assert swarm_pixels(near_image)[80:160, 110:210].mean() > 0.3


def test_trail_keeps_the_previous_frame_fading_and_zero_trail_clears(ctx, renderer_for):
    camera = OrbitCamera(orbit_speed=0.0)
    # Two balls, left and right on screen: apart along the camera's side axis.
    side = np.cross(camera.forward, [0.0, 1.0, 0.0])
    side /= np.linalg.norm(side)
    position, velocity = ball(1500, 10.0, 8.0)
    left = (position - side * 35).astype(np.float32), velocity
    right = (position + side * 35).astype(np.float32), velocity

    def two_frames(trail: float) -> tuple[np.ndarray, np.ndarray]:
        # The post chain on wherever this runs ("auto" is off on software GL), its bloom off:
        # the glow's threshold is not linear, so a faded image glows less than in proportion.
        renderer = renderer_for(colour_params(trail=trail, tonemap="linear", post="on",
                                              bloom=0.0))
        agents = renderer_for.agents(*left)
        first = render_offscreen(ctx, renderer, agents, camera, SIZE)
        agents.write(*right)
        return first, render_offscreen(ctx, renderer, agents, camera, SIZE)

    left_half, right_half = slice(0, 140), slice(180, 320)
    first, cleared = two_frames(0.0)
    assert swarm_pixels(first)[:, left_half].mean() > 0.05
    assert swarm_pixels(cleared)[:, right_half].mean() > 0.05
    assert swarm_pixels(cleared)[:, left_half].mean() == 0  # the old frame is gone
    first, trailed = two_frames(0.8)
    assert swarm_pixels(trailed)[:, right_half].mean() > 0.05
    # The old frame lingers, each pixel 80 % of the way from the background to what it was, in
    # linear light (the HDR image), shown through the sRGB transfer (a linear tone map here).
    # Tolerance: the display's dither (one 8-bit step) on each frame, and rounding.
    expected_linear = (srgb_to_linear_array(first[:, left_half] / 255.0) * 0.8
                       + np.array(srgb_to_linear(BACKGROUND)) * 0.2)
    expected = linear_to_srgb_array(expected_linear) * 255.0
    assert np.abs(trailed[:, left_half] - expected).max() <= 2.5
    assert swarm_pixels(trailed)[:, left_half].mean() > 0.05


def test_trail_fades_to_the_exact_background(ctx, renderer_for):
    renderer = renderer_for(colour_params(trail=0.9))
    agents = renderer_for.agents(*ball(1500, 15.0, 8.0))
    camera = OrbitCamera()
    render_offscreen(ctx, renderer, agents, camera, SIZE)
    hidden = np.tile(np.asarray(camera.eye) * 2.0, (1500, 1)).astype(np.float32)
    agents.write(hidden, np.ones_like(hidden))
    for _ in range(150):  # 0.9 ** 150: a millionth, in linear light (the HDR image)
        image = render_offscreen(ctx, renderer, agents, camera, SIZE)
    assert not swarm_pixels(image).any()
    # The background exactly, up to the display's dither (one 8-bit step) and rounding.
    assert np.abs(image.astype(float) - np.array(BACKGROUND) * 255).max() <= 1.5


def test_telegraph_shifts_the_colour_when_seek_weight_jumps(ctx, renderer_for):
    params = colour_params(slow_color=BLUE, fast_color=BLUE, telegraph_color=GREEN,
                           seek_weight=0.4)
    renderer = renderer_for(params)
    agents = renderer_for.agents(*ball(1500, 15.0, 8.0))
    camera = OrbitCamera()

    def green_share(time: float) -> float:
        image = render_offscreen(ctx, renderer, agents, camera, SIZE, time=time).astype(float)
        pixels = image[swarm_pixels(image.astype(np.uint8))]
        return float(pixels[:, 1].sum() / pixels.sum())

    before = green_share(0.0)
    params["seek_weight"] = 0.5  # a small change is a knob turning, not the tell
    assert green_share(0.02) == pytest.approx(before, abs=0.02) and renderer.telegraph == 0.0
    params["seek_weight"] = 3.0  # the jump
    flash = green_share(0.04)
    assert renderer.telegraph == 1.0 and flash > before + 0.4
    middle = green_share(0.04 + 0.25)
    assert before + 0.05 < middle < flash
    assert green_share(0.04 + 0.6) == pytest.approx(before, abs=0.02)  # over after ~0.5 s
    assert renderer.telegraph == 0.0
    # Modulated values passed per frame count as well.
    render_offscreen(ctx, renderer, agents, camera, SIZE, time=2.0, values={"seek_weight": 9.0})
    assert renderer.telegraph == 1.0
    # Without a time the wall clock drives the fade: it still ends.
    params["seek_weight"] = 0.4
    renderer.render(agents, camera, renderer.offscreen_framebuffer(SIZE))
    params["seek_weight"] = 3.0
    renderer.render(agents, camera, renderer.offscreen_framebuffer(SIZE))
    assert renderer.telegraph > 0.5
    sleep(0.55)
    renderer.render(agents, camera, renderer.offscreen_framebuffer(SIZE))
    assert renderer.telegraph == 0.0


def test_headless_screenshot_through_png(ctx, renderer_for, tmp_path):
    params = Params({"count": 4096})
    position, velocity = spawn_state(4096, params, seed=5)
    renderer = renderer_for(params)
    agents = renderer_for.agents(position, velocity)
    image = render_offscreen(ctx, renderer, agents, OrbitCamera(distance=70.0), SIZE)
    path = tmp_path / "frame.png"
    write_png(path, image)
    loaded = read_png(path)
    assert loaded.shape == (240, 320, 3)
    assert np.array_equal(loaded, image)
    assert swarm_pixels(loaded)[100:140, 140:180].mean() > 0.2
    assert swarm_pixels(loaded).mean() < 0.6


def test_render_into_another_framebuffer_and_resize(ctx, renderer_for):
    """What the window does: a target the renderer does not own, whose size can change."""
    renderer = renderer_for(colour_params())
    agents = renderer_for.agents(*ball(1000, 15.0, 8.0))
    for size in ((200, 100), (120, 160)):
        color = ctx.renderbuffer(size, 4)
        target = ctx.framebuffer([color])
        renderer.render(agents, OrbitCamera(), target, time=0.0)
        assert ctx.fbo is target  # left bound for the HUD to draw over
        image = np.frombuffer(target.read(components=3), np.uint8).reshape(size[1], size[0], 3)
        h, w = size[1] // 2, size[0] // 2
        assert swarm_pixels(image)[h - 10:h + 10, w - 10:w + 10].mean() > 0.5
        renderer.offscreen_framebuffer(size).use()  # never release a bound framebuffer
        target.release()
        color.release()


def test_stepped_swarm_renders(ctx, renderer_for):
    params = colour_params(count=3000, agent_size=1.0)
    swarm = Swarm(ctx, params, seed=6)
    try:
        renderer = renderer_for(params)
        for _ in range(3):
            swarm.step(1 / 30)
        image = render_offscreen(ctx, renderer, swarm, OrbitCamera(distance=70.0), SIZE)
        assert renderer.read_counts_now().visible == 3000
        assert swarm_pixels(image)[100:140, 140:180].mean() > 0.2
    finally:
        swarm.release()


def test_offscreen_framebuffers_of_two_sizes_coexist(ctx, renderer_for):
    """A preview and a full-size render: asking for one size must not free the other."""
    renderer = renderer_for(colour_params())
    agents = renderer_for.agents(*ball(500, 15.0, 8.0))
    big = renderer.offscreen_framebuffer((160, 120))
    small = render_offscreen(ctx, renderer, agents, OrbitCamera(), (80, 60))
    renderer.render(agents, OrbitCamera(), big)
    assert renderer.offscreen_framebuffer((160, 120)) is big
    image = np.frombuffer(big.read(components=3), np.uint8).reshape(120, 160, 3)
    assert swarm_pixels(image).any() and swarm_pixels(small).any()


def test_the_lure_marker_shows_where_the_mouse_holds_the_lure(ctx, renderer_for):
    renderer = renderer_for(colour_params())
    agents = renderer_for.agents(*ball(200, 5.0, 8.0))  # a small ball at the centre
    camera = OrbitCamera(distance=100.0, orbit_speed=0.0)
    lure = camera.screen_to_swarm(SIZE[0] * 0.8, SIZE[1] * 0.5, *SIZE)  # right of the swarm
    framebuffer = renderer.offscreen_framebuffer(SIZE)
    x, y = round(SIZE[0] * 0.8), round(SIZE[1] * 0.5)

    def pixel(show_lure):
        renderer.render(agents, camera, framebuffer, lure=lure, show_lure=show_lure)
        image = np.frombuffer(framebuffer.read(components=3), np.uint8).reshape(
            SIZE[1], SIZE[0], 3)
        return image[y - 1:y + 2, x - 1:x + 2].astype(int).max(axis=(0, 1))

    assert pixel(True).min() > 150  # a bright marker where the lure is
    assert pixel(False).max() < 40  # nothing there without it
