"""The HDR post chain: the renderer's linear float image to the display, with bloom, feedback
and tone mapping (the projector-grade look). Main thread only: the GL context belongs to it.

A frame (`PostChain.run`: `prepare`, then `display`, which a live frame runs after its late
latch), the HDR passes compute shaders writing images (the H200 runs full-screen fragment work
several times slower than the same work in compute), the display a full-screen triangle (it
writes the caller's framebuffer, a window's too) (shaders/post_*):

    bloom     (bloom > 0) the mip-chain bloom of Jimenez 2014 (Call of Duty: Advanced Warfare),
              as in LearnOpenGL's "Physically Based Bloom": post_prefilter.comp keeps each scene
              texel's part above the threshold (quadratic soft knee, knee = threshold / 2) and
              filters it to half resolution; post_downsample.comp's 13-tap filter halves it
              again, down to MAX_LEVELS levels or MIN_LEVEL_PIXELS; post_upsample.comp then
              walks back up, mixing each coarser level (3x3 tent) into the finer one
    feedback  (feedback > 0) post_composite.comp: scene + bloom x intensity, and last frame's
              result warped (zoom, rotation, drift) and faded, kept where brighter (Milkdrop's
              idea; the blend and why it is bounded are in that shader's opening comment)
    display   post_display.frag: exposure, a tone map (ACES fitted, AgX or a linear clamp), the
              sRGB transfer, dither; into the caller's framebuffer, left bound (under a render
              scale into an RGBA8 picture of the scene's size, which post_upscale.frag scales
              up onto it, bilinear)

With bloom 0 and feedback 0 the chain is the display pass alone; with bloom but no feedback
the bloom is added in the display pass (no full-size HDR pass of its own).

Bloom energy. Every filter keeps the integral of the image (value x area, in full-resolution
pixels): the prefilter and the 13-tap downsample give each finer texel a total weight of 1/4
over the coarser level, and the tent upsample is a weighted sum of bilinear upsamples, weights
summing to 1. The up pass mixes rather than adds: level i ends up with the weight
(1 - r) r^i and the last level r^n (r = bloom_radius), a convex mix whose weights sum to 1.
So the bloom of any image integrates to the integral of its above-threshold part: a single
pixel of value v blooms with energy (v - threshold) x bloom, whatever the radius (up to what
the clamped edges of the image reflect). bloom_radius moves that energy from the tight glow of
the first level (r = 0) to the wide one of the last (r = 1).

Display encoding. The tone mapped values are linear light; the display pass writes them sRGB
encoded, which is what a projector or monitor expects of an RGBA8 (non-sRGB) framebuffer.
Black stays exactly black.

Owns every GPU object it makes (`release()`): the programs, the bloom levels and the feedback
history (textures made per size and kept, remade on a size change).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import moderngl

from swarm_instrument.visual.gpu.programs import (
    ProgramOwner,
    ProgramSet,
    compute_program,
    render_program,
)
from swarm_instrument.visual.gpu.shaders import resolve_shader_dir
from swarm_instrument.visual.gpu.timers import GpuTimer
from swarm_instrument.visual.gpu.uniforms import POST_PARAMS, BlockBuffer
from swarm_instrument.visual.post.post_settings import (
    HISTORY_MAX,
    PostSettings,
    block_values,
)
from swarm_instrument.visual.post.tonemap import HDR_MAX, TONEMAPS, clamp_finite

MAX_LEVELS = 6         # bloom levels: half resolution, then halved again ...
MIN_LEVEL_PIXELS = 8   # ... while the smaller side of the next level keeps this many pixels


# ---- the tone maps in numpy (post_tonemap.glsl's): the background's inverse, tests ------------


def bloom_level_sizes(size: tuple[int, int]) -> list[tuple[int, int]]:
    """The bloom levels' sizes: half of `size` (rounded up), then halved again while the next
    level's smaller side keeps MIN_LEVEL_PIXELS, MAX_LEVELS at most, one at least."""
    levels = [(max(1, (size[0] + 1) // 2), max(1, (size[1] + 1) // 2))]
    while len(levels) < MAX_LEVELS:
        width, height = levels[-1]
        following = ((width + 1) // 2, (height + 1) // 2)
        if min(following) < MIN_LEVEL_PIXELS:
            break
        levels.append(following)
    return levels


# The passes that read no PostParams (the downsample filter is the same every frame).
NO_PARAMS = frozenset({"post_downsample.comp", "post_upscale.frag"})
LOCAL_SIZE = 8  # the compute passes' workgroups: 8 x 8 pixels
# glMemoryBarrier bits: an image a pass wrote is then sampled (or loaded) by the next.
GL_SHADER_IMAGE_ACCESS_BARRIER_BIT = 0x00000020
GL_TEXTURE_FETCH_BARRIER_BIT = 0x00000008
IMAGE_TO_NEXT_PASS = GL_SHADER_IMAGE_ACCESS_BARRIER_BIT | GL_TEXTURE_FETCH_BARRIER_BIT


def _program(ctx: moderngl.Context, fragment: str, folder: Path,
             defines: Mapping[str, Any]) -> Any:
    """A compute pass (.comp), or the display's full-screen triangle (.frag)."""
    block = None if fragment in NO_PARAMS else POST_PARAMS
    if fragment.endswith(".comp"):
        return compute_program(ctx, fragment, defines, folder, block)
    return render_program(ctx, "post_triangle.vert", fragment, defines, folder, block=block)


def display_name(bloom: bool, operator: str) -> str:
    """The display program's name, with or without the bloom, `operator` one of TONEMAPS."""
    return f"display{'_bloom' if bloom else ''}_{operator}"


class _Image:
    """A texture (half floats, or `dtype` "f1": RGBA8; linear filtering, clamp to edge) and a
    framebuffer drawing into it."""

    def __init__(self, ctx: moderngl.Context, size: tuple[int, int], dtype: str = "f2") -> None:
        self.size = (int(size[0]), int(size[1]))  # kept: moderngl's size is a Python call
        self.groups = (-(-self.size[0] // LOCAL_SIZE), -(-self.size[1] // LOCAL_SIZE), 1)
        self.texture = ctx.texture(size, 4, dtype=dtype)
        self.texture.filter = (moderngl.LINEAR, moderngl.LINEAR)
        self.texture.repeat_x = self.texture.repeat_y = False
        self.framebuffer = ctx.framebuffer([self.texture])

    def release(self, ctx: moderngl.Context) -> None:
        if ctx.fbo is self.framebuffer:
            # moderngl re-binds its "current" framebuffer after making another: it must not be
            # a deleted one. Standalone contexts have no screen.
            (ctx.screen or ctx.detect_framebuffer(0)).use()
        self.framebuffer.release()
        self.texture.release()


class PostChain(ProgramOwner):
    """Bloom, feedback and tone mapping from an HDR texture to a framebuffer; see the module.

    `gpu_ms`: the chain's GPU time in a recent frame (GL timer queries, read without waiting),
    None where the driver has none (software GL). `shader_dir`: the folder to compile (and
    reload) from, default `visual.gpu.shaders.shader_dir()` when made.
    """

    def __init__(self, ctx: moderngl.Context, shader_dir: Path | str | None = None) -> None:
        self.ctx = ctx
        self.shader_dir = resolve_shader_dir(shader_dir)
        self._programs = ProgramSet(self._build_programs)
        self._params = BlockBuffer(ctx, POST_PARAMS)
        self._timer = GpuTimer(ctx)  # bloom and feedback (prepare)
        self._display_timer = GpuTimer(ctx)
        self.gpu_ms: float | None = None
        self._frame: tuple | None = None  # what prepare made, for display
        self._levels: list[_Image] = []
        self._history: list[_Image] = []
        self._history_current = 0     # the history image holding the last result
        self._history_valid = False   # False: last frame kept no history (off, or new size)
        self._scratch: _Image | None = None  # composite()'s result when there is no history
        self._picture: _Image | None = None  # the display's, under a render scale
        self._mix = 0.0  # this frame's bloom_radius, clamped

    # ---- programs -------------------------------------------------------------------------

    # The passes' shader files (the GL 4.1 chain, visual/post/post_chain41.py, names its own).
    PASS_FILES = {"prefilter": "post_prefilter.comp", "downsample": "post_downsample.comp",
                  "upsample": "post_upsample.comp", "composite": "post_composite.comp",
                  "display": "post_display.frag", "upscale": "post_upscale.frag"}

    @staticmethod
    def _compile(ctx: moderngl.Context, fragment: str, folder: Path,
                 defines: Mapping[str, Any]) -> Any:
        return _program(ctx, fragment, folder, defines)

    def _build_programs(self, built: dict[str, Any]) -> None:
        """Every pass (all variants, so a reload reports any error at once)."""
        ctx, folder = self.ctx, self.shader_dir
        common = {"HDR_MAX": f"{HDR_MAX:.1f}", "HISTORY_MAX": f"{HISTORY_MAX:.1f}"}
        files = self.PASS_FILES
        variants = {
            "prefilter": (files["prefilter"], {}),
            "downsample": (files["downsample"], {}),
            "upsample": (files["upsample"], {}),
            "composite_bloom": (files["composite"], {"BLOOM": 1, "FEEDBACK": 0}),
            "composite_feedback": (files["composite"], {"BLOOM": 0, "FEEDBACK": 1}),
            "composite_both": (files["composite"], {"BLOOM": 1, "FEEDBACK": 1}),
        }
        # The display, with or without the bloom, one tone map each, chosen when compiled
        # (software GL runs every side of a branch on a uniform: 4 ms at 720p); its picture
        # scaled up under a render scale.
        for bloom in (False, True):
            for index, operator in enumerate(TONEMAPS):
                variants[display_name(bloom, operator)] = (
                    files["display"], {"BLOOM": int(bloom), "OPERATOR": index})
        variants["upscale"] = (files["upscale"], {})
        for name, (fragment, defines) in variants.items():
            program = self._compile(ctx, fragment, folder, {**common, **defines})
            built[name] = program
            if fragment.endswith(".frag"):
                built[name + "_vao"] = ctx.vertex_array(program, [])

    def _draw(self, name: str) -> None:
        self._programs[name + "_vao"].render(moderngl.TRIANGLES, vertices=3)

    def _dispatch(self, name: str, out: _Image, read: bool = False) -> None:
        """A compute pass over `out`'s pixels, written through image unit 0 (`read`: loaded
        too); then what it wrote is there for the next pass to sample or load."""
        out.texture.bind_to_image(0, read=read, write=True)
        self._programs[name].run(*out.groups)
        self.ctx.memory_barrier(IMAGE_TO_NEXT_PASS)

    # ---- images ---------------------------------------------------------------------------

    def _ensure_levels(self, size: tuple[int, int]) -> None:
        sizes = bloom_level_sizes(size)
        if [level.size for level in self._levels] != sizes:
            self._release_images(self._levels)
            self._levels = [_Image(self.ctx, level) for level in sizes]

    def _ensure_history(self, size: tuple[int, int]) -> None:
        if not self._history or self._history[0].size != size:
            self._release_images(self._history)
            self._history = [_Image(self.ctx, size), _Image(self.ctx, size)]
            self._history_valid = False

    def _sized(self, image: _Image | None, size: tuple[int, int], dtype: str = "f2") -> _Image:
        """`image` where it is `size`, else a new one (the old one released)."""
        if image is not None and image.size == size:
            return image
        if image is not None:
            image.release(self.ctx)
        return _Image(self.ctx, size, dtype)

    def _release_images(self, images: list[_Image]) -> None:
        for image in images:
            image.release(self.ctx)
        images.clear()

    # ---- the frame ------------------------------------------------------------------------

    def run(self, hdr: moderngl.Texture, out: moderngl.Framebuffer, size: tuple[int, int],
            settings: PostSettings, dt: float = 1 / 60,
            scene_size: tuple[int, int] | None = None) -> None:
        """Post-process `hdr` (linear RGBA16F, `size` pixels, read pixel for pixel) into
        `out` (RGBA8 or a window's default framebuffer, drawn in its viewport), left bound:
        `prepare`, then `display` with the same settings. `dt`: seconds since the last frame
        (the feedback's motion and fade follow it). `scene_size`: `hdr`'s size where it is
        smaller than `size` (the render scale): bloom, feedback and the display pass run at
        that size, and its picture is scaled up."""
        self.prepare(hdr, size, settings, dt, scene_size)
        self.display(out, settings)

    def prepare(self, hdr: moderngl.Texture, size: tuple[int, int], settings: PostSettings,
                dt: float = 1 / 60, scene_size: tuple[int, int] | None = None) -> None:
        """The frame's bloom and feedback (`run`'s arguments), for the next `display` to show.
        A live frame runs them with the scene, before its late latch (show/show.py Show.draw):
        what follows the latch is the display pass alone."""
        size = (int(size[0]), int(size[1]))
        scene = size if scene_size is None else (int(scene_size[0]), int(scene_size[1]))
        self._frame = None
        if min(size) < 1 or min(scene) < 1:  # a minimised window: nothing to draw
            return
        with self._timer:
            image, bloom = self._prepare(hdr, scene, settings, dt, fold_bloom=True)
        self._frame = (image, bloom, size, scene, settings, dt)

    def display(self, out: moderngl.Framebuffer, settings: PostSettings) -> None:
        """The prepared frame onto `out`, left bound: exposure, the tone map, dither (and the
        bloom where no feedback took it) from `settings`, which may be newer than
        `prepare`'s (the late latch's); scaled up under a render scale."""
        frame, self._frame = self._frame, None
        if frame is None:
            out.use()
            return
        image, bloom, size, scene, prepared, dt = frame
        if settings != prepared:  # the late latch moved them: the display's values anew
            self._params.write({}, block_values(settings, dt, scene))
        with self._display_timer:
            picture = None  # under a render scale: the display's picture (RGBA8, the scene's size)
            if scene != size:
                picture = self._picture = self._sized(self._picture, scene, "f1")
            (out if picture is None else picture.framebuffer).use()
            image.use(0)
            if bloom is not None:
                bloom.use(1)
            self._draw(display_name(bloom is not None, settings.tonemap))
            if picture is not None:  # the render scale: scaled up (bilinear) onto `out`
                out.use()
                picture.texture.use(0)
                self._draw("upscale")
        prepared_ms, display_ms = self._timer.last_ms, self._display_timer.last_ms
        self.gpu_ms = None if prepared_ms is None or display_ms is None else (
            prepared_ms + display_ms)

    def composite(self, hdr: moderngl.Texture, size: tuple[int, int], settings: PostSettings,
                  dt: float = 1 / 60) -> moderngl.Texture:
        """The HDR image `run` would tone map (scene + bloom, then feedback), still linear: for
        tests and HDR captures. It is a frame, as `run` is (the feedback moves on). Returns
        `hdr` itself when bloom and feedback are off, else a texture of this chain's, valid
        until the next call."""
        size = (int(size[0]), int(size[1]))
        if min(size) < 1:
            return hdr
        image, _ = self._prepare(hdr, size, settings, dt, fold_bloom=False)
        return image

    def _prepare(self, hdr: moderngl.Texture, size: tuple[int, int], settings: PostSettings,
                 dt: float, fold_bloom: bool
                 ) -> tuple[moderngl.Texture, moderngl.Texture | None]:
        """Bloom and feedback: (the HDR image to display, the bloom level 0 still to add to it
        or None). `fold_bloom`: without feedback, leave the bloom for the display pass."""
        ctx = self.ctx
        ctx.disable(moderngl.BLEND | moderngl.DEPTH_TEST | moderngl.CULL_FACE)
        values = block_values(settings, dt, size)
        self._params.write({}, values)  # bound for every pass below
        self._mix = values["bloom_mix"]
        bloom = self._bloom(hdr, size) if settings.bloom_on else None
        if not settings.feedback_on:
            self._history_valid = False  # turned back on later, it starts from the background
            if bloom is None or fold_bloom:
                return hdr, bloom
            target = self._scratch = self._sized(self._scratch, size)
            hdr.use(0)
            bloom.use(1)
            self._dispatch("composite_bloom", target)
            return target.texture, None

        self._ensure_history(size)
        previous = self._history[self._history_current]
        if not self._history_valid:
            background = tuple(clamp_finite(c, 0.0, HISTORY_MAX) for c in settings.background)
            previous.framebuffer.clear(*background, 1.0)
        target = self._history[1 - self._history_current]
        hdr.use(0)
        previous.texture.use(2)
        if bloom is not None:
            bloom.use(1)
            self._dispatch("composite_both", target)
        else:
            self._dispatch("composite_feedback", target)
        self._history_current = 1 - self._history_current
        self._history_valid = True
        return target.texture, None

    def _bloom(self, hdr: moderngl.Texture, size: tuple[int, int]) -> moderngl.Texture:
        """The bloom chain down and back up; returns level 0 (half resolution), whose integral
        is that of the scene's part above the threshold (see the module's opening comment)."""
        self._ensure_levels(size)
        levels = self._levels
        hdr.use(0)
        self._dispatch("prefilter", levels[0])
        if self._mix > 0.0 and len(levels) > 1:  # mix 0: level 0 alone, the others weigh 0
            for finer, coarser in zip(levels, levels[1:]):
                finer.texture.use(0)
                self._dispatch("downsample", coarser)
            for coarser, finer in zip(levels[:0:-1], levels[-2::-1]):
                coarser.texture.use(0)
                self._dispatch("upsample", finer, read=True)
        return levels[0].texture

    def owned(self) -> list[Any]:
        """Every GPU object this chain holds now (for leak checks)."""
        images = [*self._levels, *self._history,
                  *(image for image in (self._scratch, self._picture) if image is not None)]
        return [*self._programs.values(), *(part for image in images
                                         for part in (image.framebuffer, image.texture))]

    def release(self) -> None:
        """Free every GPU object this chain made; safe to call twice."""
        self._programs.release()
        self._release_images(self._levels)
        self._release_images(self._history)
        for image in (self._scratch, self._picture):
            if image is not None:
                image.release(self.ctx)
        self._scratch = self._picture = None
        self._history_valid = False
        self._timer.release()
        self._display_timer.release()
        self._frame = None
        if self._params is not None:
            self._params.release()
            self._params = None
