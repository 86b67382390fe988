"""The swarm's renderer: GPU frustum culling into an indirect draw, one instanced draw, trails.

A frame (`Renderer.render`), with no agent data ever coming back to the CPU:

    params   the FrameParams uniform block (visual/gpu/uniforms.py: this frame's parameters, camera
             and derived values) written once and bound for every pass below
    cull     cull.comp: frustum test of every agent, visible indices appended to a near and a
             far list (the level of detail), instance counts written into two indirect draw
             commands, agents near the lure counted (seed 000's CSCull and damage hook)
    barrier  glMemoryBarrier with GL_COMMAND_BARRIER_BIT, so the draw reads the new counts
    draw     one render_indirect of the two commands into an HDR accumulation image (RGBA16F,
             linear light): the shape's mesh near the camera, one triangle (or quad) far away,
             pulled from the agent buffer by index; before it the previous image is cleared
             (trail 0) or faded towards the background
    post     visual/post/post_chain.py: bloom and feedback where the post chain is on
             (`draw_scene`), then exposure, tone map and sRGB onto the caller's framebuffer
             (`present`: a window's, whose contents do not survive a swap, or an offscreen one)

Colours (the registry's, the palettes', the background) are given as a screen shows them
(sRGB) and turned into linear light here, so the tone map and the display's transfer give
back about the colour chosen; `glow` above 1 makes agents brighter than white, into the bloom.

The counts are read back a few frames late (visual/render/counts.py), so reading never waits
for the GPU. Main thread only: the GL context belongs to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from time import monotonic
from typing import Any

import moderngl
import numpy as np

from swarm_instrument.visual.gpu.context import is_software
from swarm_instrument.visual.gpu.programs import (
    ProgramOwner,
    ProgramSet,
    compute_program,
    dispatch_1d,
    render_program,
)
from swarm_instrument.visual.gpu.shaders import resolve_shader_dir
from swarm_instrument.visual.gpu.timers import GpuTimer
from swarm_instrument.visual.gpu.uniforms import FRAME_PARAMS, BlockBuffer
from swarm_instrument.visual.post.post_chain import PostChain
from swarm_instrument.visual.render.camera import OrbitCamera
from swarm_instrument.visual.render.counts import (
    DRAW_STATE_UINTS,
    CountsReadback,
    CountsView,
    CullCounts,
    SumScales,
)
from swarm_instrument.visual.render.frame_values import (
    BACKGROUND,
    LURE_COLOR,
    PostSwitch,
    Telegraph,
    agent_defines,
    frame_block,
    glsl_vec,
    post_settings,
    scene_background,
)
from swarm_instrument.visual.render.meshes import BILLBOARDS, MeshSet
from swarm_instrument.visual.render.splat import FarSplat
from swarm_instrument.visual.render.stable_cull import StableCull
from swarm_instrument.visual.render.targets import Targets

CULL_LOCAL_SIZE = 256
FAR_DRAW = "splat"
# The agents' draw programs: (name, BILLBOARD, POINTS): meshes near, points far, each as a
# mesh or a quad turned to the camera.
AGENT_PROGRAMS = (("agent", 0, 0), ("agent_billboard", 1, 0), ("agent_points", 0, 1),
                  ("agent_points_billboard", 1, 1))

# glMemoryBarrier bits: the cull pass writes through shader storage what the draw then reads
# as commands (indirect), through shader storage (vertex pulling) and with a buffer copy.
GL_COMMAND_BARRIER_BIT = 0x00000040
GL_BUFFER_UPDATE_BARRIER_BIT = 0x00000200
GL_SHADER_STORAGE_BARRIER_BIT = 0x00002000
CULL_TO_DRAW_BARRIERS = (GL_COMMAND_BARRIER_BIT | GL_BUFFER_UPDATE_BARRIER_BIT
                         | GL_SHADER_STORAGE_BARRIER_BIT)


class Renderer(PostSwitch, CountsView, ProgramOwner):
    """Culls and draws a `Swarm` each frame; owns every GPU object it uses (`release()`).

    After `render`, `visible`, `near_lure`, `swarm_center` and `swarm_radius` hold what the
    cull pass measured in the newest frame the GPU has finished (`counts_frame`; None until
    one has), read without waiting (GL fences); `gpu_ms` the GPU time of the cull and draw
    passes where the driver can time them; `telegraph` the telegraph shift's strength (0..1).
    `shader_dir`: the folder to compile (and reload) from, default `shaders.shader_dir()`.
    """

    post_chain = PostChain  # the post chain's class (GL 4.1's: visual/post/post_chain41.py)
    far_splat: type | None = FarSplat  # far agents' compute splat (None: GL points only)
    # The cull in agent order for reproducible runs (`stable_order`); None: the lists come out
    # in order already (GL 4.1's transform feedback)
    stable_cull: type | None = StableCull
    backend = "4.3"

    def __init__(self, ctx: moderngl.Context, *, shader_dir: Path | None = None) -> None:
        self.ctx = ctx
        self.shader_dir = resolve_shader_dir(shader_dir)
        self.software = is_software(ctx)  # post "auto" is off there: too slow in software
        self.background = BACKGROUND
        self.meshes = MeshSet()
        self._mesh = ctx.buffer(self.meshes.vertices.tobytes())
        self.shape = ""  # the shape the draw commands are set up for (_set_shape)
        self._programs = ProgramSet(self._build_programs)
        self._params = BlockBuffer(ctx, FRAME_PARAMS)

        # The draw state as the cull pass starts it: both commands with no instances yet.
        self._draw_template = ctx.buffer(reserve=DRAW_STATE_UINTS * 4)
        self._draw_state = ctx.buffer(reserve=DRAW_STATE_UINTS * 4)
        self._set_shape("cone")
        self._readback = CountsReadback(ctx, DRAW_STATE_UINTS * 4)
        self._visible_buffer: moderngl.Buffer | None = None
        self._capacity = 0
        self._far_base = 0
        self._stable: StableCull | None = None  # made once `stable_order` is set
        self._in_order = False

        self._targets = Targets(ctx)
        self._post = self.post_chain(ctx, shader_dir=self.shader_dir)
        self._splat = (self.far_splat(ctx, agent_defines(), shader_dir=self.shader_dir)
                       if self.far_splat is not None else None)
        # How far agents are drawn: "splat" (compute, visual/render/splat.py) or GL "points"
        self.far_draw = FAR_DRAW if self._splat is not None else "points"
        self.post_on = False  # whether the last frame ran bloom and feedback (post_state)
        self.post_held = False  # the governor holds bloom and feedback off (show/governor.py)

        self._cull_timer = GpuTimer(ctx)
        self._draw_timer = GpuTimer(ctx)
        self.gpu_ms: dict[str, float | None] = {"cull": None, "draw": None}
        self.last_size: tuple[int, int] | None = None  # the frame last drawn, in pixels
        self.scene_size: tuple[int, int] | None = None  # ... drawn at this size, scaled up
        self._scene: tuple | None = None  # draw_scene's background, sums, values, settings
        self._telegraph = Telegraph()

    @property
    def stable_order(self) -> bool:
        """Cull into lists in agent order (visual/render/stable_cull.py), so additive light sums in
        the same order and a reproducible run (--dt, --render) gives the same frames."""
        return self._stable is not None or (self.stable_cull is None and self._in_order)

    @stable_order.setter
    def stable_order(self, value: bool) -> None:
        self._in_order = bool(value)
        if value and self._stable is None and self.stable_cull is not None:
            self._stable = self.stable_cull(self.ctx, CULL_LOCAL_SIZE,
                                            shader_dir=self.shader_dir)
        elif not value and self._stable is not None:
            self._stable.release()
            self._stable = None

    # ---- programs -------------------------------------------------------------------------------

    def _build_programs(self, built: dict[str, Any]) -> None:
        """The cull kernel and the draw programs, with their vertex arrays."""
        ctx, folder = self.ctx, self.shader_dir
        built["cull"] = compute_program(ctx, "cull.comp", {"LOCAL_SIZE": CULL_LOCAL_SIZE,
                                                          "STABLE": 0}, folder, FRAME_PARAMS)
        for name, billboard, points in AGENT_PROGRAMS:
            built[name] = render_program(ctx, "agent.vert", "agent.frag", {
                **agent_defines(), "BILLBOARD": billboard, "POINTS": points}, folder,
                block=FRAME_PARAMS)
        built["fade"] = render_program(ctx, "fade.vert", "fade.frag", None, folder,
                                       block=FRAME_PARAMS)
        built["lure"] = render_program(ctx, "lure.vert", "lure.frag",
                                       {"LURE_COLOR": glsl_vec(LURE_COLOR)}, folder,
                                       block=FRAME_PARAMS)
        built["agent_vao"] = ctx.vertex_array(
            built["agent"], [(self._mesh, "3f 3f", "in_position", "in_normal")])
        built["agent_billboard_vao"] = ctx.vertex_array(  # in_normal unused: skipped
            built["agent_billboard"], [(self._mesh, "3f 12x", "in_position")])
        for name in ("agent_points", "agent_points_billboard"):  # a point: no mesh at all
            built[name + "_vao"] = ctx.vertex_array(built[name], [])
        built["fade_vao"] = ctx.vertex_array(built["fade"], [])
        built["lure_vao"] = ctx.vertex_array(built["lure"], [])

    @property
    def program_sets(self) -> tuple[ProgramSet, ...]:
        """Its programs, its post chain's, its splat's and its ordered cull's: reloaded all or
        none."""
        parts = [part.program_sets for part in (self._post, self._splat, self._stable)
                 if part is not None]
        return (self._programs, *(program_set for sets in parts for program_set in sets))

    def _set_shape(self, shape: str) -> None:
        """Point the two draw commands at `shape`'s near and far meshes (a 40-byte write,
        only when the shape changes)."""
        if shape == self.shape:
            return
        (near_count, near_first), (far_count, far_first) = self.meshes.commands(shape)
        template = np.zeros(DRAW_STATE_UINTS, np.uint32)
        template[0:5] = (near_count, 0, near_first, 0, 0)
        template[5:10] = (far_count, 0, far_first, 0, 0)
        self._draw_template.write(template.tobytes())
        self._draw_state.write(template.tobytes())
        self.shape = shape

    # ---- counts -----------------------------------------------------------------------------

    def read_counts_now(self) -> CullCounts:
        """The last rendered frame's counts, waiting for the GPU: for tests, not per frame."""
        return self._readback.read_now(self._draw_state)

    def read_visible_now(self) -> tuple[np.ndarray, np.ndarray]:
        """The last frame's (near, far) visible agent indices, in no particular order.
        Waits for the GPU and copies the lists: for tests and debugging, never per frame."""
        counts = self.read_counts_now()
        lists = np.frombuffer(self._visible_buffer.read(), np.uint32)
        far_base = self._far_base
        return (lists[:counts.near].copy(), lists[far_base:far_base + counts.far].copy())

    @property
    def telegraph(self) -> float:
        """The telegraph colour shift's strength in the last frame (0..1)."""
        return self._telegraph.strength

    # ---- buffers and framebuffers -----------------------------------------------------------

    def _ensure_capacity(self, count: int) -> None:
        if count > self._capacity:
            if self._visible_buffer is not None:
                self._visible_buffer.release()
            self._visible_buffer = self.ctx.buffer(reserve=2 * count * 4)  # near + far lists
            self._capacity = count
        self._far_base = self._capacity  # the far list starts after room for every agent

    def offscreen_framebuffer(self, size: tuple[int, int]) -> moderngl.Framebuffer:
        """An RGBA8 framebuffer with depth of `size`, kept until `release()` (targets.py)."""
        return self._targets.offscreen(size)

    # ---- the frame --------------------------------------------------------------------------

    def render(self, swarm: Any, camera: OrbitCamera, framebuffer: moderngl.Framebuffer,
               values: Mapping[str, Any], *, lure: Sequence[float] = (0.0, 0.0, 0.0),
               time: float | None = None, show_lure: bool = False,
               size: tuple[int, int] | None = None, dt: float = 1 / 60,
               scale: float = 1.0) -> None:
        """Cull, draw and present `swarm` (anything with `current` and `count`, as `Swarm`) as
        seen by `camera` into `framebuffer`, left bound: `draw_scene`, then `present`. `lure`:
        the point the near-lure count is taken around; `time` (seconds, simulated in renders;
        default the wall clock): the telegraph's fade; `values`: this frame's values by name;
        `show_lure`: a marker at the lure; `size`: the pixels drawn (default framebuffer.size;
        a window's detected one keeps its first); `dt`: seconds since the last frame (the
        feedback follows it); `scale`: the render scale (at most 1), the display scales up."""
        self.draw_scene(swarm, camera, tuple(size or framebuffer.size), values, lure=lure,
                        time=time, show_lure=show_lure, scale=scale, dt=dt)
        self.present(framebuffer, values)

    def draw_scene(self, swarm: Any, camera: OrbitCamera, size: tuple[int, int],
                   values: Mapping[str, Any], *, lure: Sequence[float] = (0.0, 0.0, 0.0),
                   time: float | None = None, show_lure: bool = False,
                   scale: float = 1.0, dt: float = 1 / 60) -> None:
        """The frame's scene (`render`'s arguments; `size`: the output's): the cull, the agents
        drawn into the HDR accumulation image, its bloom and feedback, for `present` to show."""
        p = values
        ctx = self.ctx
        out_size = (int(size[0]), int(size[1]))
        self.last_size = out_size
        scale = min(max(float(scale), 0.05), 1.0)
        size = out_size if scale == 1.0 else (max(1, round(out_size[0] * scale)),
                                               max(1, round(out_size[1] * scale)))
        self.scene_size = size
        count = swarm.count
        self._ensure_capacity(count)
        self._set_shape(str(p.get("shape", "cone")))
        self._telegraph.update(float(p["seek_weight"]), monotonic() if time is None else time)
        scales = SumScales.for_frame(count, camera.target, float(p["contain_radius"]))
        self._write_params(p, camera, size, lure, scales)

        # 1-2. cull into the lists and the indirect commands
        self._cull_agents(swarm, count)

        # 3. draw into the accumulation image: clear or fade, then the agents.
        background = self.scene_background(p)
        target = self._targets.accumulation(size, background)
        target.use()
        trail = float(p["trail"])
        ctx.disable(moderngl.DEPTH_TEST | moderngl.CULL_FACE)
        if trail > 0.0:
            self._fade(target, trail)
        else:
            target.clear(*background, 1.0, depth=1.0)
        additive = p.get("blend") == "additive"
        if additive:  # light adds up, in any order: no depth, no sorting
            ctx.enable(moderngl.BLEND)
            ctx.blend_func = moderngl.ONE, moderngl.ONE
        else:
            ctx.enable(moderngl.DEPTH_TEST)
        billboard = self.shape in BILLBOARDS
        programs = self._programs
        near = programs["agent_billboard_vao" if billboard else "agent_vao"]
        far = programs["agent_points_billboard_vao" if billboard else "agent_points_vao"]
        with self._draw_timer:
            if self.far_draw == "splat" and self._splat is not None:
                # The far agents first (none for streaks: their passes run no groups), the near
                # meshes over them (the splat's compute passes leave the target bound).
                self._splat.draw(target.color_attachments[0], additive=additive,
                                 billboard=billboard)
                near.render_indirect(self._draw_state, moderngl.TRIANGLES, count=1, first=0)
            else:  # the near command's meshes, then the far one's points
                near.render_indirect(self._draw_state, moderngl.TRIANGLES, count=1, first=0)
                ctx.enable(moderngl.PROGRAM_POINT_SIZE)
                far.render_indirect(self._draw_state, moderngl.POINTS, count=1, first=1)
                ctx.disable(moderngl.PROGRAM_POINT_SIZE)
        ctx.disable(moderngl.DEPTH_TEST | moderngl.BLEND)
        if show_lure:
            self._draw_lure()
        # 4. bloom and feedback, before a live frame's late latch (Show.draw)
        settings = self.post_settings(p, background)
        self._post.prepare(target.color_attachments[0], out_size, settings, dt, scene_size=size)
        self._scene = (background, scales, p, settings)

    def present(self, framebuffer: moderngl.Framebuffer, values: Mapping[str, Any]) -> None:
        """5. The last `draw_scene`'s image onto `framebuffer` (left bound): the display pass
        with `values`' exposure and tone map (maybe newer: Show.draw's late latch), and this
        frame's counts kept to read once the GPU is done with them (a fence: never waits)."""
        background, scales, scene_values, settings = self._scene
        if values is not scene_values:  # the late latch made them anew
            settings = post_settings(values, background, self.post_on)
        self._post.display(framebuffer, settings)
        self._readback.push(self._draw_state, scales)
        self.gpu_ms = {"cull": self._cull_timer.last_ms, "draw": self._draw_timer.last_ms,
                       "post": self._post.gpu_ms}

    def _cull_agents(self, swarm: Any, count: int) -> None:
        """1. cull: reset the commands' instance counts and the sums (a GPU-side copy), then
        test, append and count; 2. the barrier before the draw (visual/render/renderer41.py culls
        without compute)."""
        ctx = self.ctx
        ctx.copy_buffer(self._draw_state, self._draw_template)
        swarm.current.bind_to_storage_buffer(0)
        self._visible_buffer.bind_to_storage_buffer(1)
        self._draw_state.bind_to_storage_buffer(2)
        with self._cull_timer:
            if self._stable is not None:
                self._stable.run(count)
            else:
                dispatch_1d(self._programs["cull"], count, CULL_LOCAL_SIZE)
        # The draw reads the commands (COMMAND bit), the lists (SHADER_STORAGE bit) and the
        # counter copy reads the draw state (BUFFER_UPDATE bit).
        ctx.memory_barrier(CULL_TO_DRAW_BARRIERS)

    def scene_background(self, p: Mapping[str, Any]) -> tuple[float, float, float]:
        """The background as the HDR image holds it (visual/render/frame_values.py)."""
        return scene_background(self.background, p)

    def _write_params(self, p: Mapping[str, Any], camera: OrbitCamera,
                      size: tuple[int, int], lure: Sequence[float], scales: SumScales) -> None:
        """FrameParams for this frame, written once and bound for every pass that reads it."""
        self._params.write(p, frame_block(p, camera, size, lure, scales,
                                          background=self.scene_background(p),
                                          telegraph=self.telegraph, far_base=self._far_base))

    def _draw_lure(self) -> None:
        """A ring at the lure (FrameParams: lure, lure_pixels), over the agents, blended."""
        ctx = self.ctx
        ctx.enable(moderngl.BLEND | moderngl.PROGRAM_POINT_SIZE)
        ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
        self._programs["lure_vao"].render(moderngl.POINTS, vertices=1)
        ctx.disable(moderngl.BLEND | moderngl.PROGRAM_POINT_SIZE)

    def _fade(self, target: moderngl.Framebuffer, trail: float) -> None:
        """Pull last frame's image towards the background by 1 - trail; clear only depth."""
        ctx = self.ctx
        target.color_mask = (False, False, False, False)  # glClear honours the colour mask
        target.clear(depth=1.0)
        target.color_mask = (True, True, True, True)
        target.use()  # moderngl applies a framebuffer's colour mask when it is bound
        ctx.enable(moderngl.BLEND)
        ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
        self._programs["fade_vao"].render(moderngl.TRIANGLES, vertices=3)
        ctx.disable(moderngl.BLEND)

    def release(self) -> None:
        """Free every GPU object this renderer made."""
        self._programs.release()
        for obj in (self._mesh, self._draw_template, self._draw_state, self._visible_buffer):
            if obj is not None:
                obj.release()
        self._params.release()
        self._targets.release()
        self._post.release()
        if self._splat is not None:
            self._splat.release()
        if self._stable is not None:
            self._stable.release()
            self._stable = None
        self._visible_buffer = None
        self._readback.release()
        self._cull_timer.release()
        self._draw_timer.release()
