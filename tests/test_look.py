"""The look: palettes picked by speed, heading, depth and density as the numpy reference says,
the shapes, additive light, the post chain on and off (software GL's default), the camera's
modes, and every bundled preset a lit picture unlike the others.

GPU tests draw agents placed by hand (no simulation) through the renderer, read the pixel at
each agent's centre and compare it with visual/render/palettes.py's reference.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from test_cull import AgentBuffer

from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.show.cli.options import START_LOOK
from swarm_instrument.show.offline.contact_sheet import (
    SheetSettings,
    bundled_presets,
    contact_sheet,
)
from swarm_instrument.visual.gpu import programs
from swarm_instrument.visual.render.camera import OrbitCamera
from swarm_instrument.visual.render.frame_values import SPEED_RAMP
from swarm_instrument.visual.render.palettes import PALETTES, palette_stops, sample, srgb_to_linear
from swarm_instrument.visual.render.renderer import Renderer

from conftest import run_instrument

SIZE = (256, 160)


@pytest.fixture(autouse=True)
def strict_uniforms(monkeypatch):
    monkeypatch.setattr(programs, "STRICT", True)


@pytest.fixture
def renderer(ctx):
    made = Renderer(ctx)
    yield made
    made.release()


def srgb(linear: np.ndarray) -> np.ndarray:
    linear = np.clip(linear, 0.0, 1.0)
    return np.where(linear <= 0.0031308, 12.92 * linear,
                    1.055 * np.power(linear, 1 / 2.4) - 0.055)


def smoothstep(edge0: float, edge1: float, x: np.ndarray) -> np.ndarray:
    t = np.clip((x - edge0) / (edge1 - edge0), 0.0, 1.0)
    return t * t * (3 - 2 * t)


def camera_on_z() -> OrbitCamera:
    """A still camera on the +z axis looking at the origin: the xy plane faces it."""
    camera = OrbitCamera(distance=40.0, elevation=0.0, orbit_speed=0.0)
    camera.mode = "orbit"
    return camera


def look_values(**changes) -> dict:
    values = Params().as_dict()
    values.update({"shape": "glow", "blend": "opaque", "fog": 0.0, "glow": 1.0, "trail": 0.0,
                   "agent_size": 4.0, "lod_pixels": 0.0, "tonemap": "linear", "exposure": 1.0,
                   "post": "off", "size_by_speed": 0.0})
    values.update(changes)
    return values


def centres(camera: OrbitCamera, points: np.ndarray, size=SIZE) -> list[tuple[int, int]]:
    """Each point's pixel (column, row from the top) on screen."""
    vp = camera.view_projection(size[0] / size[1])
    out = []
    for p in points:
        clip = vp @ np.append(p, 1.0)
        ndc = clip[:3] / clip[3]
        out.append((int((ndc[0] * 0.5 + 0.5) * size[0]), int((0.5 - ndc[1] * 0.5) * size[1])))
    return out


def draw(ctx, renderer, agents, camera, values, size=SIZE) -> np.ndarray:
    framebuffer = renderer.offscreen_framebuffer(size)
    renderer.render(agents, camera, framebuffer, values, time=0.0)
    ctx.finish()
    pixels = np.frombuffer(framebuffer.read(components=3, alignment=1), np.uint8)
    return pixels.reshape(size[1], size[0], 3)[::-1].astype(float) / 255.0


def glow_centre_light() -> float:
    """agent.frag: an opaque glow's light at its centre."""
    light = 1.0 - math.exp(-4.0)
    return 0.5 + 0.5 * light


def expected(stops, x: np.ndarray) -> np.ndarray:
    """What the screen shows of an agent at palette place x: the stops in linear light (as the
    renderer hands them to the shader), interpolated, lit as an opaque glow's centre, shown
    through a linear tone map and the sRGB transfer."""
    linear = sample([srgb_to_linear(stop) for stop in stops], x)
    return srgb(linear * glow_centre_light())


def a_row(count: int) -> np.ndarray:
    """Agents side by side across the screen, far enough apart not to overlap."""
    return np.c_[np.linspace(-24.0, 24.0, count), np.zeros(count), np.zeros(count)]


@pytest.mark.parametrize("palette,far,hue", [("ember", False, 0.0), ("neon", False, 0.0),
                                             ("colors", False, 0.0), ("ember", True, 0.0),
                                             ("ember", False, 120.0), ("colors", True, -90.0)])
def test_agents_take_the_palette_colour_of_their_speed(ctx, renderer, palette, far, hue):
    """Near agents (a glow's quad) and far ones (a point, past the level of detail) alike;
    with hue_shift, the palette turned round the colour wheel."""
    values = look_values(palette=palette, color_by="speed", lod_pixels=1e6 if far else 0.0,
                         hue_shift=hue)
    speeds = np.linspace(0.0, 1.2, 7) * values["max_speed"]
    position = a_row(len(speeds))
    velocity = np.c_[speeds, np.zeros(len(speeds)), np.zeros(len(speeds))]
    agents = AgentBuffer(ctx, position, velocity)
    try:
        camera = camera_on_z()
        image = draw(ctx, renderer, agents, camera, values)
        x = smoothstep(*SPEED_RAMP, speeds / values["max_speed"])
        want = expected(palette_stops(values), x)
        got = np.array([image[row, col] for col, row in centres(camera, position)])
        np.testing.assert_allclose(got, want, atol=3 / 255)
        counts = renderer.read_counts_now()
        assert (counts.far, counts.near) == ((len(speeds), 0) if far else (0, len(speeds)))
        if palette != "colors":
            assert len(palette_stops(values)) == len(PALETTES[palette])
    finally:
        agents.release()


def test_hue_shift_turns_the_palette_round_the_colour_wheel():
    ember = PALETTES["ember"]
    assert palette_stops({"palette": "ember"}) == [tuple(stop) for stop in ember]
    assert palette_stops({"palette": "ember", "hue_shift": 0.0}) == \
        [tuple(stop) for stop in ember]  # 0: the very same colours
    turned = palette_stops({"palette": "ember", "hue_shift": 120.0})
    red, green, blue = turned[2]  # ember's orange (1.0, 0.30, 0.04), a third of a turn on
    assert green > 0.9 and red < green and blue < green
    for stop, turn in zip(ember, turned):  # lightness and saturation kept
        assert max(turn) + min(turn) == pytest.approx(max(stop) + min(stop), abs=1e-9)
    around = palette_stops({"palette": "neon", "hue_shift": 180.0})
    np.testing.assert_allclose(palette_stops({"palette": "neon", "hue_shift": -180.0}), around)
    colours = palette_stops({"palette": "colors", "slow_color": (0.0, 0.0, 1.0),
                             "fast_color": (0.5, 0.5, 0.5), "hue_shift": 120.0})
    assert colours[0] == pytest.approx((1.0, 0.0, 0.0)) and colours[1] == pytest.approx(
        (0.5, 0.5, 0.5))  # blue a third of a turn on is red; a grey has no hue to turn


def test_heading_colours_go_round_the_compass_without_a_seam(ctx, renderer):
    values = look_values(palette="aurora", color_by="heading")
    angles = np.radians([-179.0, -120.0, -60.0, 0.0, 60.0, 120.0, 179.0])
    position = a_row(len(angles))
    velocity = np.c_[np.cos(angles), np.zeros(len(angles)), np.sin(angles)] * 4.0
    agents = AgentBuffer(ctx, position, velocity)
    try:
        camera = camera_on_z()
        image = draw(ctx, renderer, agents, camera, values)
        turn = np.mod(angles / (2 * math.pi) + 0.5, 1.0)
        x = 1.0 - np.abs(2.0 * turn - 1.0)
        got = np.array([image[row, col] for col, row in centres(camera, position)])
        np.testing.assert_allclose(got, expected(palette_stops(values), x), atol=3 / 255)
        assert np.abs(got[0] - got[-1]).max() < 6 / 255  # -179 and 179 degrees: neighbours
    finally:
        agents.release()


def test_density_colours_follow_the_neighbours_the_step_saw(ctx, renderer):
    values = look_values(palette="ember", color_by="density")
    neighbours = np.array([0.0, 3.0, 12.0, 40.0, 200.0])
    position = a_row(len(neighbours))
    agents = AgentBuffer(ctx, position)
    data = np.frombuffer(agents.current.read(), np.float32).reshape(-1, 8).copy()
    data[:, 7] = neighbours  # velocity.w: what the grid step writes there
    agents.current.write(data.tobytes())
    try:
        camera = camera_on_z()
        image = draw(ctx, renderer, agents, camera, values)
        got = np.array([image[row, col] for col, row in centres(camera, position)])
        want = expected(palette_stops(values), neighbours / (neighbours + 12.0))
        np.testing.assert_allclose(got, want, atol=3 / 255)
    finally:
        agents.release()


def test_depth_colours_run_from_bright_near_to_dark_far(ctx, renderer):
    values = look_values(palette="ice", color_by="depth")
    position = np.array([[-6.0, 0.0, 20.0], [0.0, 0.0, 0.0], [6.0, 0.0, -20.0]])
    agents = AgentBuffer(ctx, position)
    try:
        camera = camera_on_z()
        image = draw(ctx, renderer, agents, camera, values)
        got = np.array([image[row, col] for col, row in centres(camera, position)])
        brightness = got.sum(axis=1)
        assert brightness[0] > brightness[1] > brightness[2] > 0.05
    finally:
        agents.release()


def test_additive_light_adds_up_and_a_crowd_stays_coloured(ctx, renderer):
    """Ten glows on one spot, added: brighter than one. Bright, the ten burn to white; the
    same ten with many neighbours each (a dense core) give less and keep the palette's hue."""
    stack = np.zeros((10, 3))
    agents = AgentBuffer(ctx, stack)
    one = AgentBuffer(ctx, stack[:1])
    try:
        camera = camera_on_z()
        values = look_values(palette="neon", color_by="speed", blend="additive", glow=0.05)
        (col, row), = centres(camera, stack[:1])
        single = draw(ctx, renderer, one, camera, values)[row, col]
        added = draw(ctx, renderer, agents, camera, values)[row, col]
        assert added.sum() > 2.0 * single.sum()
        bright = {**values, "glow": 20.0}
        burnt = draw(ctx, renderer, agents, camera, bright)[row, col]
        assert burnt.min() > 0.85  # white
        data = np.frombuffer(agents.current.read(), np.float32).reshape(-1, 8).copy()
        data[:, 7] = 200.0  # velocity.w: the neighbours the last step counted
        agents.current.write(data.tobytes())
        crowded = draw(ctx, renderer, agents, camera, bright)[row, col]
        assert crowded.max() - crowded.min() > 0.3  # still the palette's colour
    finally:
        agents.release()
        one.release()


@pytest.mark.parametrize("shape", ["cone", "arrow", "streak", "glow"])
def test_every_shape_draws_where_the_agents_are(ctx, renderer, shape):
    rng = np.random.default_rng(4)
    position = rng.uniform(-8, 8, (64, 3))
    velocity = rng.normal(size=(64, 3)) * 4.0
    agents = AgentBuffer(ctx, position, velocity)
    try:
        camera = camera_on_z()
        image = draw(ctx, renderer, agents, camera, look_values(shape=shape, palette="ember",
                                                                glow=1.5, agent_size=1.0))
        lit = image.max(axis=2) > 0.2
        assert 0.003 < lit.mean() < 0.6
        rows, cols = np.nonzero(lit)  # light only around the agents
        pixels = np.array(centres(camera, position))
        nearest = np.min(np.hypot(cols[:, None] - pixels[None, :, 0],
                                  rows[:, None] - pixels[None, :, 1]), axis=1)
        assert np.percentile(nearest, 99) < 20
    finally:
        agents.release()


def test_streaks_stay_streaks_far_away_where_other_shapes_become_points(ctx, renderer):
    position = np.array([[0.0, 0.0, -150.0]])  # far: a few pixels
    agents = AgentBuffer(ctx, position, np.array([[6.0, 0.0, 0.0]]))
    try:
        camera = camera_on_z()
        for shape, far in (("cone", 1), ("glow", 1), ("streak", 0)):
            draw(ctx, renderer, agents, camera, look_values(shape=shape, lod_pixels=6.0,
                                                            agent_size=1.0))
            counts = renderer.read_counts_now()
            assert (counts.far, counts.near) == (far, 1 - far), shape
    finally:
        agents.release()


def test_post_is_off_by_default_on_software_gl_and_bloom_spreads_light_when_on(ctx, renderer):
    """`post auto` is off on software GL (llvmpipe) and on with a GPU; on, the bloom spreads
    light beside the glow; off, the picture is auto's on software GL."""
    agents = AgentBuffer(ctx, np.zeros((1, 3)))
    try:
        camera = camera_on_z()
        values = look_values(post="auto", bloom=2.0, bloom_threshold=0.2, glow=8.0,
                             tonemap="aces")
        auto = draw(ctx, renderer, agents, camera, values)
        if renderer.software:
            assert not renderer.post_on and renderer.post_state.startswith("off (software GL")
        else:
            assert renderer.post_on and renderer.post_state == "on"
        on = draw(ctx, renderer, agents, camera, {**values, "post": "on"})
        assert renderer.post_on and renderer.post_state == "on"
        off = draw(ctx, renderer, agents, camera, {**values, "post": "off"})
        assert not renderer.post_on and renderer.post_state.startswith("off")
        (col, row), = centres(camera, np.zeros((1, 3)))
        around = (slice(row - 30, row + 30), slice(col + 12, col + 30))  # beside the glow
        assert on[around].mean() > off[around].mean() + 0.01
        np.testing.assert_array_equal(off if renderer.software else on, auto)
    finally:
        agents.release()


# ---- the camera's modes (no GPU) ----------------------------------------------------------------

def test_camera_modes():
    camera = OrbitCamera(distance=50.0, time=30.0)
    for mode in ("orbit", "follow", "fly", "top"):
        camera.mode = mode
        eye = camera.eye
        assert np.all(np.isfinite(camera.view_projection(16 / 9)))
        if mode == "top":  # straight on the xy plane (a 2D swarm), from +z
            assert eye == pytest.approx([0.0, 0.0, 50.0])
            assert camera.forward == pytest.approx([0.0, 0.0, -1.0])
        elif mode == "fly":  # inside the framing distance: flying through the swarm
            assert 0.2 * 50.0 < np.linalg.norm(eye) < 0.5 * 50.0
            assert np.linalg.norm(camera.look_at_point() - eye) > 1.0
        else:
            assert np.linalg.norm(eye) == pytest.approx(50.0)
    follow = OrbitCamera(distance=50.0)
    follow.mode = "follow"
    for step in range(400):  # the swarm travels along +x: the camera ends up behind it
        follow.follow(10.0, 1 / 30, np.array([step * 0.5, 0.0, 0.0]))
    behind = follow.eye - follow.target
    assert behind[0] < -0.7 * np.linalg.norm(behind)


def test_camera_distance_scales_the_framing():
    near, far = OrbitCamera(), OrbitCamera()
    far.distance_scale = 2.0
    for camera in (near, far):
        for _ in range(300):
            camera.follow(20.0, 1 / 30, np.zeros(3))
    assert far.distance == pytest.approx(2.0 * near.distance, rel=1e-3)


# ---- the bundled looks --------------------------------------------------------------------------

@pytest.mark.slow  # twelve looks played
def test_twelve_bundled_looks_each_lit_and_unlike_every_other():
    """Every bundled preset, played 1.5 s of the drum loop at a thumbnail's size (2,048 agents
    at most, post on): at least 3 % of its pixels lit (brighter than 0.15), and every pair
    differs by a mean absolute difference of at least 0.02 (of full scale) at 48 x 27 pixels
    (same picture: 0; the closest two bundled looks measured 0.05 at the time of writing)."""
    presets = bundled_presets()
    assert len(presets) >= 12
    assert [slot for slot, _ in presets[:9]] == list(range(1, 10))
    settings = SheetSettings(size=(96, 54), seconds=1.5, fps=20.0, count_cap=2048, columns=4)
    sheet, names = contact_sheet(settings, presets)
    assert len(set(names)) == len(names) == len(presets)
    images = []
    for k in range(len(names)):
        row, column = divmod(k, settings.columns)
        top, left = 6 + row * (54 + 6), 6 + column * (96 + 6)
        image = sheet[top:top + 54 - 12, left:left + 96].astype(float) / 255.0  # above the label
        lit = (image @ [0.2126, 0.7152, 0.0722] > 0.15).mean()
        assert lit > 0.03, f"{names[k]}: only {lit:.1%} of the picture lit"
        images.append(image.reshape(21, 2, 48, 2, 3).mean(axis=(1, 3)))
    closest = min((np.abs(images[i] - images[j]).mean(), names[i], names[j])
                  for i in range(len(images)) for j in range(i + 1, len(images)))
    assert closest[0] > 0.02, f"{closest[1]} and {closest[2]} look alike ({closest[0]:.3f})"


@pytest.mark.slow  # the command, played
def test_post_from_the_command_line_is_said_in_telemetry(tmp_path):
    telemetry = tmp_path / "t.jsonl"
    for choice, said in (("on", "on"), (None, "off (software GL")):
        args = ["--headless", "--frames", "3", "--count", "256", "--size", "160x90",
                "--no-midi", "--preset", "aurora", "--telemetry", str(telemetry)]
        result = run_instrument(*args, *(["--post", choice] if choice else []))
        assert result.returncode == 0, result.stderr
        record = json.loads(telemetry.read_text().splitlines()[-1])
        assert record["look"]["post"].startswith(said)
        assert record["look"]["shape"] == "streak" and record["look"]["palette"] == "aurora"
        assert "post" in record["gpu_ms"]
    bad = run_instrument("--post", "sometimes")
    assert bad.returncode == 2 and "--post" in bad.stderr and "Traceback" not in bad.stderr


# ---- the start look ------------------------------------------------------------------------------

@pytest.mark.slow  # the command, played
def test_a_headless_run_that_chooses_no_look_opens_on_the_start_look(tmp_path):
    """As the window does: the start look, said in the log (issue 26: headless runs and
    renders played the registry's plain defaults, small yellow dots, and named nothing)."""
    telemetry = tmp_path / "t.jsonl"
    result = run_instrument("--headless", "--frames", "3", "--count", "256", "--size", "160x90",
                            "--no-midi", "--telemetry", str(telemetry))
    assert result.returncode == 0, result.stderr
    assert f"opening on the bundled look '{START_LOOK}' (--preset chooses another)" \
        in result.stdout
    record = json.loads(telemetry.read_text().splitlines()[-1])
    assert record["preset"]["name"] == START_LOOK
    assert (record["look"]["shape"], record["look"]["palette"]) == ("streak", "aurora")


@pytest.mark.slow  # the command renders a video
def test_the_readmes_music_video_opens_on_the_start_look_and_pulses_with_the_kick(tmp_path):
    """`--render SONG --out VIDEO` with no --preset: the start look, named in the log, whose
    light rises on each kick of a 120 BPM drum loop (kicks 1 s apart from 0.1 s) on software GL
    too, where the post chain (the bloom that breathes on the beat) is off: the frames just
    after a kick at least 15 % brighter than those just before the next."""
    from swarm_instrument.audio.files.wav_writer import write_wav
    from swarm_instrument.audio.synth import drum_loop
    from swarm_instrument.visual.output.video_files import decode_frames

    song, video = tmp_path / "loop.wav", tmp_path / "loop.mp4"
    write_wav(song, drum_loop(120, 3.0, 48000, seed=1), 48000)
    result = run_instrument("--render", str(song), "--out", str(video), "--size", "160x90",
                            "--fps", "30", "--count", "2000")
    assert result.returncode == 0, result.stderr
    assert f"opening on the bundled look '{START_LOOK}'" in result.stdout + result.stderr
    frames = decode_frames(video).astype(float)
    brightness = (frames @ [0.2126, 0.7152, 0.0722]).mean(axis=(1, 2))
    since_kick = (np.arange(len(brightness)) / 30.0 - 0.1) % 1.0
    late = np.arange(len(brightness)) >= 30  # the auto-gain has heard a kick by then
    after = brightness[late & (since_kick >= 0.05) & (since_kick < 0.25)].mean()
    before = brightness[late & (since_kick >= 0.75) & (since_kick < 0.95)].mean()
    assert after > 1.15 * before, (after, before)
