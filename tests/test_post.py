"""The HDR post chain (visual/post/post_chain.py): tone mapping against numpy, the bloom's reach and
energy, the feedback's bound and decay, the fast path, resizes, reloads and releases; on both
backends (`chain_class`: compute passes, or GL 4.1's fragment passes, visual/post/post_chain41.py).

Images are small (llvmpipe renders in software); the HDR results are read back as floats from
`PostChain.composite` (the image `run` tone maps) or from an RGBA32F output target.
"""

from __future__ import annotations

import math
import shutil

import moderngl
import numpy as np
import pytest

from swarm_instrument.visual.gpu import context, programs, shaders
from swarm_instrument.visual.gpu.shaders import ShaderError
from swarm_instrument.visual.post.feedback import feedback_step
from swarm_instrument.visual.post.post_chain import PostChain, bloom_level_sizes
from swarm_instrument.visual.post.post_chain41 import PostChain41
from swarm_instrument.visual.post.post_settings import HISTORY_MAX, PostSettings
from swarm_instrument.visual.post.tonemap import TONEMAPS, tonemap_reference

FLAT = {"dither": False}  # the display values exactly, no noise


@pytest.fixture(autouse=True)
def strict_uniforms(monkeypatch):
    """A uniform name a program does not have is an error, not skipped."""
    monkeypatch.setattr(programs, "STRICT", True)


@pytest.fixture(params=[PostChain, PostChain41], ids=["4.3", "4.1"])
def chain_class(request):
    return request.param


@pytest.fixture
def chain(ctx, chain_class):
    made = chain_class(ctx)
    yield made
    made.release()


@pytest.fixture
def gpu(ctx):
    """Make HDR textures and float output framebuffers that are released after the test."""
    made = []

    class Gpu:
        @staticmethod
        def hdr(rgb: np.ndarray) -> moderngl.Texture:
            """An RGBA16F texture of an (H, W, 3) array, row 0 at the bottom (GL's order)."""
            height, width, _ = rgb.shape
            data = np.concatenate([rgb, np.ones((height, width, 1))], axis=2).astype(np.float16)
            texture = ctx.texture((width, height), 4, data.tobytes(), dtype="f2")
            made.append(texture)
            return texture

        @staticmethod
        def float_target(size: tuple[int, int]) -> moderngl.Framebuffer:
            texture = ctx.texture(size, 4, dtype="f4")
            framebuffer = ctx.framebuffer([texture])
            made.extend([texture, framebuffer])
            return framebuffer

    yield Gpu
    if ctx.fbo in made:
        ctx.detect_framebuffer(0).use()
    for obj in reversed(made):
        obj.release()


def read_rgb(texture: moderngl.Texture) -> np.ndarray:
    """An RGBA16F/32F texture as an (H, W, 3) float64 array, row 0 at the bottom."""
    dtype = np.float16 if texture.dtype == "f2" else np.float32
    width, height = texture.size
    return np.frombuffer(texture.read(), dtype).reshape(height, width, 4)[..., :3].astype(float)


def aces(x: np.ndarray) -> np.ndarray:
    """Narkowicz 2015, as the brief gives it."""
    return np.clip((x * (2.51 * x + 0.03)) / (x * (2.43 * x + 0.59) + 0.14), 0.0, 1.0)


def srgb(linear: np.ndarray) -> np.ndarray:
    linear = np.clip(linear, 0.0, 1.0)
    return np.where(linear <= 0.0031308, 12.92 * linear,
                    1.055 * np.power(linear, 1 / 2.4) - 0.055)


# ---- tone mapping -------------------------------------------------------------------------------

def ramp(gpu, top: float = 64.0, count: int = 2048) -> tuple[moderngl.Texture, np.ndarray]:
    """A grey ramp 0..top (half floats, so the values the GPU reads exactly), one row."""
    values = np.linspace(0.0, top, count).astype(np.float16).astype(float)
    return gpu.hdr(np.repeat(values[None, :, None], 3, axis=2)), values


def display(chain, gpu, hdr, settings: PostSettings) -> np.ndarray:
    target = gpu.float_target(hdr.size)
    chain.run(hdr, target, hdr.size, settings)
    return read_rgb(target.color_attachments[0])


@pytest.mark.parametrize("tonemap", TONEMAPS)
def test_tonemap_is_monotonic_over_0_to_64_and_black_is_exactly_black(chain, gpu, tonemap):
    hdr, values = ramp(gpu)
    shown = display(chain, gpu, hdr, PostSettings(tonemap=tonemap, **FLAT))[0]
    assert shown[0].tolist() == [0.0, 0.0, 0.0]
    steps = np.diff(shown, axis=0)
    assert steps.min() >= -1e-6, f"{tonemap} goes down by {-steps.min()} somewhere"
    assert np.all(shown >= 0.0) and np.all(shown <= 1.0)
    assert shown[-1].min() > 0.95  # 64 is near white (AgX: 0.96 of the way)
    # Grey stays grey (AgX within 1e-3: its published matrices' rows sum to 1 +- 1e-4).
    assert np.ptp(shown, axis=1).max() < (1e-3 if tonemap == "agx" else 1e-5)


@pytest.mark.parametrize("exposure", [1.0, 0.5, 3.0])
def test_aces_matches_numpy_within_1_over_255(chain, gpu, exposure):
    hdr, values = ramp(gpu, top=16.0)
    settings = PostSettings(tonemap="aces", exposure=exposure, **FLAT)
    shown = display(chain, gpu, hdr, settings)[0, :, 0]
    assert np.abs(shown - srgb(aces(values * exposure))).max() < 1 / 255


def test_linear_tonemap_is_a_clamp_and_dither_stays_within_one_step(chain, gpu):
    hdr, values = ramp(gpu, top=2.0, count=512)
    shown = display(chain, gpu, hdr, PostSettings(tonemap="linear", **FLAT))
    np.testing.assert_allclose(shown[0, :, 1], srgb(np.clip(values, 0, 1)), atol=2e-5)
    dithered = display(chain, gpu, hdr, PostSettings(tonemap="linear"))
    assert np.abs(dithered - shown).max() <= 1 / 255 + 1e-6
    assert dithered[0, 0].tolist() == [0.0, 0.0, 0.0]  # dither leaves black alone


# ---- the fast path ------------------------------------------------------------------------------

@pytest.mark.parametrize("tonemap", TONEMAPS)
def test_without_bloom_and_feedback_one_pass_tone_maps_the_input(chain, gpu, monkeypatch,
                                                                 tonemap):
    """One display pass, compiled for the tone map chosen (no branch on a uniform: software GL
    runs every side of one), gives numpy's values within 2e-5 (a 200th of an 8-bit step: the
    sRGB curve is a polynomial within 8.4e-6 of it, post_tonemap.glsl)."""
    rng = np.random.default_rng(3)
    scene = rng.exponential(1.0, (24, 40, 3)).astype(np.float16).astype(float)
    hdr = gpu.hdr(scene)
    settings = PostSettings(exposure=1.5, tonemap=tonemap, **FLAT)
    assert chain.composite(hdr, hdr.size, settings) is hdr  # no HDR pass at all
    passes = []
    draw = chain._draw
    monkeypatch.setattr(chain, "_draw", lambda name: (passes.append(name), draw(name)))
    shown = display(chain, gpu, hdr, settings)
    assert passes == [f"display_{tonemap}"]
    np.testing.assert_allclose(shown, srgb(tonemap_reference(scene * 1.5, tonemap)),
                               atol=2e-5)


def bilinear_up(image: np.ndarray, factor: int) -> np.ndarray:
    """`image` (H, W, 3) scaled up `factor` times as a bilinear sampler reads it at the pixel
    centres (edges clamped)."""
    height, width, _ = image.shape

    def taps(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        at = np.clip((np.arange(n * factor) + 0.5) / factor - 0.5, 0.0, n - 1)
        low = np.floor(at).astype(int)
        return low, np.minimum(low + 1, n - 1), at - low

    y0, y1, fy = taps(height)
    x0, x1, fx = taps(width)
    rows = image[y0] * (1 - fy)[:, None, None] + image[y1] * fy[:, None, None]
    return rows[:, x0] * (1 - fx)[None, :, None] + rows[:, x1] * fx[None, :, None]


@pytest.mark.parametrize("tonemap", ["agx", "aces"])
def test_under_a_render_scale_the_display_runs_on_the_scenes_pixels_then_scales_up(
        chain, gpu, monkeypatch, tonemap):
    """The display pass (software GL: 7 ms at 1280x720 whatever the render scale, when it ran
    at the target's size) runs on the scene's pixels into an RGBA8 picture, which is scaled up
    (bilinear) onto the target: the picture drawn pixel for pixel, in 8 bits, scaled up."""
    y, x = np.mgrid[0:24, 0:40]
    scene = np.stack([x / 10.0, y / 6.0, (x + y) / 16.0], axis=2)  # smooth, 0..4
    hdr = gpu.hdr(scene.astype(np.float16).astype(float))
    settings = PostSettings(tonemap=tonemap, **FLAT)
    picture = np.round(display(chain, gpu, hdr, settings) * 255) / 255  # RGBA8
    passes = []
    draw = chain._draw
    monkeypatch.setattr(chain, "_draw", lambda name: (passes.append(name), draw(name)))
    target = gpu.float_target((80, 48))
    chain.run(hdr, target, (80, 48), settings, scene_size=hdr.size)
    assert passes == [f"display_{tonemap}", "upscale"]
    shown = read_rgb(target.color_attachments[0])
    assert np.abs(shown - bilinear_up(picture, 2)).max() < 1.5 / 255


def test_the_display_takes_settings_newer_than_the_bloom_and_feedback_were_made_with(
        chain_class, ctx, gpu):
    """A live frame makes its bloom and feedback with the scene and reads its inputs again
    before the display pass (show/show.py Show.draw): the display's exposure and tone map are
    the newer settings', the bloom and feedback the ones they were made with. Two chains fed
    the same frames: one prepared with the old settings and displayed with the new, the other
    run with the old threshold and feedback and the new exposure and tone map."""
    y, x = np.mgrid[0:32, 0:48]
    scene = np.stack([x / 8.0, y / 5.0, ((x - 24) ** 2 + (y - 16) ** 2 < 30) * 6.0], axis=2)
    hdr = gpu.hdr(scene.astype(np.float16).astype(float))
    old = PostSettings(exposure=0.3, bloom=0.8, bloom_threshold=1.0, feedback=0.6,
                       feedback_zoom=0.01, **FLAT)
    new = PostSettings(exposure=2.5, tonemap="agx", bloom=0.8, bloom_threshold=3.0,
                       feedback=0.2, feedback_zoom=0.01, **FLAT)
    made_then = PostSettings(exposure=2.5, tonemap="agx", bloom=0.8, bloom_threshold=1.0,
                             feedback=0.6, feedback_zoom=0.01, **FLAT)
    late, plain = chain_class(ctx), chain_class(ctx)
    try:
        late_target, plain_target = gpu.float_target(hdr.size), gpu.float_target(hdr.size)
        for _ in range(3):  # the feedback's history builds up alike
            late.prepare(hdr, hdr.size, old)
            late.display(late_target, new)
            plain.run(hdr, plain_target, hdr.size, made_then)
        shown = read_rgb(late_target.color_attachments[0])
        expected = read_rgb(plain_target.color_attachments[0])
        assert np.abs(shown - expected).max() < 1e-6
        assert np.abs(shown - display(plain, gpu, hdr, new)).max() > 0.05  # new's own bloom
    finally:
        late.release()
        plain.release()


# ---- bloom --------------------------------------------------------------------------------------

SIDE = 256
CENTRE = 128


def point_bloom(chain, gpu, value: float = 100.0, **settings) -> np.ndarray:
    """The bloom alone (composite - scene, channel 0) of one pixel of `value` at the centre
    of a black SIDE x SIDE image."""
    scene = np.zeros((SIDE, SIDE, 3))
    scene[CENTRE, CENTRE] = value
    hdr = gpu.hdr(scene)
    image = read_rgb(chain.composite(hdr, hdr.size, PostSettings(**settings)))
    return image[..., 0] - scene[..., 0]


def ring_means(bloom: np.ndarray, edges: np.ndarray) -> np.ndarray:
    y, x = np.mgrid[:SIDE, :SIDE]
    radius = np.hypot(x - CENTRE, y - CENTRE)
    return np.array([bloom[(radius >= low) & (radius < high)].mean()
                     for low, high in zip(edges, edges[1:])])


@pytest.mark.parametrize("radius", [0.0, 0.3, 0.6, 0.9])
def test_bloom_of_one_pixel_carries_its_energy_above_threshold_within_2_percent(chain, gpu,
                                                                                 radius):
    """value 100, threshold 1: (100 - 1) x intensity over the image, whatever the radius."""
    for intensity in (1.0, 2.0):
        bloom = point_bloom(chain, gpu, bloom=intensity, bloom_radius=radius,
                            bloom_threshold=1.0)
        assert bloom.min() >= -1e-3  # the bloom only adds
        assert bloom.sum() == pytest.approx(99.0 * intensity, rel=0.02)


def test_bloom_spreads_with_the_radius_and_falls_off_with_distance(chain, gpu):
    """bloom_radius 0 (level 0 only): nothing 7.5 px or more from the pixel (the prefilter's
    4x4 texels and the tent's 3x3 half-resolution taps reach 5 px along each axis). 0.6: the
    ring means (2 px rings) fall with distance out to 100 px, the glow still > 1e-4 at 32 px,
    and 85 % of the energy within 32 px, 93 % within 64 px (the 8x8 level has 13 %)."""
    y, x = np.mgrid[:SIDE, :SIDE]
    radius = np.hypot(x - CENTRE, y - CENTRE)
    tight = point_bloom(chain, gpu, bloom=1.0, bloom_radius=0.0)
    assert np.abs(tight[radius >= 7.5]).max() == 0.0
    assert tight[CENTRE, CENTRE] > 3.0  # of 99 over ~25 px

    wide = point_bloom(chain, gpu, bloom=1.0, bloom_radius=0.6)
    means = ring_means(wide, np.arange(0.0, 102.0, 2.0))
    assert np.all(np.diff(means) <= 1e-6), "the glow should fall off with distance"
    assert means[16] > 1e-4  # 32..34 px
    assert wide[radius < 32].sum() > 0.85 * wide.sum()
    assert wide[radius < 64].sum() > 0.93 * wide.sum()
    assert wide[radius >= 7.5].sum() > 10.0  # of 99: the wider levels carry a good part


def test_bloom_ignores_what_is_below_the_knee(chain, gpu):
    """threshold 1, knee 0.5: a pixel of 0.5 or less does not bloom at all."""
    bloom = point_bloom(chain, gpu, value=0.5, bloom=2.0, bloom_threshold=1.0)
    assert np.abs(bloom).max() == 0.0


def test_bloom_levels_stop_at_8_pixels_and_6_levels():
    assert bloom_level_sizes((256, 256)) == [(128, 128), (64, 64), (32, 32), (16, 16), (8, 8)]
    assert len(bloom_level_sizes((3840, 2160))) == 6
    assert bloom_level_sizes((1920, 1080))[-1] == (30, 17)
    assert bloom_level_sizes((10, 6)) == [(5, 3)]


# ---- feedback -----------------------------------------------------------------------------------

def random_settings(rng: np.random.Generator, index: int) -> PostSettings:
    """Anything in range, feedback near its top; bloom in every third set (it is slow here)."""
    return PostSettings(
        feedback=float(rng.uniform(0.5, 0.98)),
        feedback_zoom=float(rng.uniform(-0.1, 0.1)),
        feedback_rotate=float(rng.uniform(-0.1, 0.1)),
        feedback_drift=(float(rng.uniform(-0.05, 0.05)), float(rng.uniform(-0.05, 0.05))),
        background=tuple(float(v) for v in rng.uniform(0.0, 0.2, 3)),
        bloom=float(rng.uniform(0.5, 2.0)) if index % 3 == 0 else 0.0,
        bloom_radius=float(rng.uniform(0.0, 1.0)),
        bloom_threshold=float(rng.uniform(0.0, 4.0)),
        **FLAT)


@pytest.mark.slow  # a thousand frames
def test_feedback_stays_below_16_for_1000_frames_of_random_settings(chain, gpu):
    """10 seeded parameter sets, 1,000 frames each at 64x64: 500 of a constant bright scene
    (values up to 4), then 500 flickering between it and black. Every 50 frames the HDR result
    is finite, >= 0 and <= 16 (HISTORY_MAX; with a scene <= 4 and bloom <= 2 x 4 the scene's
    own part is below it), and the picture is read through `run` at the end."""
    rng = np.random.default_rng(20240611)
    size = (64, 64)
    bright = gpu.hdr(rng.uniform(0.0, 4.0, (64, 64, 3)) ** 2 / 4.0)
    black = gpu.hdr(np.zeros((64, 64, 3)))
    target = gpu.float_target(size)
    assert HISTORY_MAX == 16.0
    for index in range(10):
        settings = random_settings(rng, index)
        dts = rng.uniform(1 / 144, 1 / 20, 1000)
        for frame in range(1000):
            scene = bright if frame < 500 or frame % 2 else black
            image = chain.composite(scene, size, settings, dt=float(dts[frame]))
            if frame % 50 == 49:
                values = read_rgb(image)
                assert np.all(np.isfinite(values)), f"set {index}, frame {frame}"
                assert values.min() >= 0.0 and values.max() <= HISTORY_MAX, (
                    f"set {index} ({settings}), frame {frame}: max {values.max()}")
        chain.run(bright, target, size, settings)
        shown = read_rgb(target.color_attachments[0])
        assert np.all(np.isfinite(shown)) and shown.max() <= 1.0


def test_feedback_of_a_black_scene_decays_to_the_background_geometrically(chain, gpu):
    """No warp: after a bright frame, each black frame takes the image a factor `feedback`
    closer to the background (numpy reference, 0.5 % + half-float rounding)."""
    background = (0.1, 0.05, 0.2)
    feedback = 0.9
    scene = np.zeros((16, 16, 3))
    scene[4:12, 4:12] = (3.0, 0.5, 0.04)  # the blue below the background: it never rises
    lit, black = gpu.hdr(scene), gpu.hdr(np.zeros((16, 16, 3)))
    settings = PostSettings(feedback=feedback, background=background, **FLAT)
    first = read_rgb(chain.composite(lit, (16, 16), settings))
    # The first frame starts from the background: max(scene, background).
    np.testing.assert_allclose(first, np.maximum(scene, background), rtol=2e-3, atol=1e-4)
    expected = first
    for _ in range(60):
        image = read_rgb(chain.composite(black, (16, 16), settings))
        expected = np.maximum(0.0, background + feedback * (expected - background))
        np.testing.assert_allclose(image, expected, rtol=5e-3, atol=2e-3)
    for _ in range(140):
        image = chain.composite(black, (16, 16), settings)
    np.testing.assert_allclose(read_rgb(image), np.broadcast_to(background, (16, 16, 3)),
                               atol=1e-3)


def test_feedback_turned_off_and_on_starts_again_from_the_background(chain, gpu):
    lit = gpu.hdr(np.full((8, 8, 3), 2.0))
    black = gpu.hdr(np.zeros((8, 8, 3)))
    on = PostSettings(feedback=0.95, **FLAT)
    chain.composite(lit, (8, 8), on)
    chain.composite(black, (8, 8), PostSettings(**FLAT))
    assert read_rgb(chain.composite(black, (8, 8), on)).max() == 0.0


def test_feedback_zoom_grows_the_old_image_outwards(chain, gpu):
    """A bright dot right of the centre, then black frames with zoom 0.1: the brightest
    pixel moves right, by about the zoom each frame (1.1^n from the centre)."""
    scene = np.zeros((64, 64, 3))
    scene[32, 40] = 4.0  # 8 px right of the centre (32, 32), half a pixel to the left
    lit, black = gpu.hdr(scene), gpu.hdr(np.zeros((64, 64, 3)))
    settings = PostSettings(feedback=0.98, feedback_zoom=0.1, **FLAT)
    chain.composite(lit, (64, 64), settings)
    for _ in range(5):
        image = read_rgb(chain.composite(black, (64, 64), settings))
    column = np.unravel_index(np.argmax(image[..., 0]), image.shape[:2])[1]
    assert column + 0.5 - 32 == pytest.approx(8.5 * 1.1 ** 5, abs=1.5)


def test_feedback_motion_does_not_depend_on_the_frame_rate():
    """Two frames at 120 fps warp and fade as one at 60 fps (the drift to first order)."""
    settings = PostSettings(feedback=0.8, feedback_zoom=0.05, feedback_rotate=0.07,
                            feedback_drift=(0.01, -0.02))
    size = (1920, 1080)
    whole = feedback_step(settings, 1 / 60, size)
    half = feedback_step(settings, 1 / 120, size)
    assert half.fade ** 2 == pytest.approx(whole.fade)
    as_matrix = lambda m: np.array(m).reshape(2, 2).T  # noqa: E731 (column-major)
    np.testing.assert_allclose(as_matrix(half.matrix) @ as_matrix(half.matrix),
                               as_matrix(whole.matrix), atol=1e-12)
    np.testing.assert_allclose(2 * np.array(half.offset), whole.offset)
    # A rotation in square pixels: the aspect-corrected matrix is a scaled rotation.
    aspect = np.diag([size[0] / size[1], 1.0])
    square = aspect @ as_matrix(whole.matrix) @ np.linalg.inv(aspect)
    np.testing.assert_allclose(square @ square.T, np.eye(2) / 1.05 ** 2, atol=1e-12)
    assert math.atan2(square[1, 0], square[0, 0]) == pytest.approx(-0.07)


# ---- sizes, reloads, releases -------------------------------------------------------------------

def test_a_new_size_remakes_the_images_and_runs_clean(ctx, chain, gpu):
    settings = PostSettings(bloom=1.0, feedback=0.9, **FLAT)
    for size in ((64, 64), (48, 30), (7, 5), (64, 64)):
        hdr = gpu.hdr(np.full((size[1], size[0], 3), 2.0))
        target = gpu.float_target(size)
        chain.run(hdr, target, size, settings)
        assert ctx.fbo is target
        shown = read_rgb(target.color_attachments[0])
        assert np.all(np.isfinite(shown)) and shown.min() > 0.5
        assert chain._history[0].texture.size == size
        assert chain._levels[0].texture.size == bloom_level_sizes(size)[0]


def test_a_broken_shader_on_reload_keeps_the_running_programs(ctx, gpu, tmp_path, chain_class):
    folder = tmp_path / "shaders"
    shutil.copytree(shaders.BUNDLED_SHADERS, folder)
    chain = chain_class(ctx, shader_dir=folder)
    try:
        (folder / "post_display.frag").write_text("void main() { this is not GLSL }\n")
        with pytest.raises(ShaderError, match="post_display.frag"):
            chain.reload_shaders()
        hdr = gpu.hdr(np.full((8, 8, 3), 0.5))
        shown = display(chain, gpu, hdr, PostSettings(**FLAT))
        np.testing.assert_allclose(shown, srgb(aces(np.full((8, 8, 3), 0.5))), atol=1e-5)
    finally:
        chain.release()


def resident_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 1e6


@pytest.mark.linux  # the process's memory from /proc
def test_release_frees_everything_and_remade_chains_do_not_grow_memory(ctx, gpu):
    """Every object a chain held is released (moderngl marks it invalid; twice is fine), and
    chains made, run at 1024x1024 with bloom, feedback and the composite image (~30 MB of
    textures each, in process memory under llvmpipe) and released, 8 in turn, grow the
    process by less than 3 chains' worth (leaking would be 8)."""
    if not context.is_software(ctx):
        pytest.skip("measures textures in process memory: software GL only")
    size = (1024, 1024)
    hdr = gpu.hdr(np.full((size[1], size[0], 3), 2.0))
    target = gpu.float_target(size)
    settings = PostSettings(bloom=1.0, feedback=0.9, **FLAT)
    start = 0.0
    for made in range(10):
        chain = PostChain(ctx)
        chain.run(hdr, target, size, settings)
        chain.composite(hdr, size, PostSettings(bloom=1.0, **FLAT))  # the scratch image
        ctx.finish()
        owned = chain.owned()
        assert len(owned) > 20
        chain.release()
        chain.release()
        assert all(isinstance(obj.mglo, moderngl.mgl.InvalidObject) for obj in owned)
        assert chain.owned() == []
        if made == 1:  # after a warm-up: the driver's own caches are made
            start = resident_mb()
    assert resident_mb() - start < 3 * 30.0
