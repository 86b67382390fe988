"""The swarm's renderer: GPU frustum culling into an indirect draw, one instanced draw, trails.

A frame (`Renderer.render`), with no agent data ever coming back to the CPU:

    params   the FrameParams uniform block (visual/uniforms.py: this frame's parameters, camera
             and derived values) written once and bound for every pass below
    cull     cull.comp: frustum test of every agent, visible indices appended to a near and a
             far list (the level of detail), instance counts written into two indirect draw
             commands, agents near the lure counted (seed 000's CSCull and damage hook)
    barrier  glMemoryBarrier with GL_COMMAND_BARRIER_BIT, so the draw reads the new counts
    draw     one render_indirect of the two commands into an HDR accumulation image (RGBA16F,
             linear light): the shape's mesh near the camera, one triangle (or quad) far away,
             pulled from the agent buffer by index; before it the previous image is cleared
             (trail 0) or faded towards the background
    post     visual/post.py: bloom and feedback (where the post chain is on), then exposure,
             the tone map and the sRGB transfer onto the caller's framebuffer (the window's
             default one, whose contents do not survive a buffer swap, or an offscreen one)

Colours (the registry's, the palettes', the background) are given as a screen shows them
(sRGB) and turned into linear light here, so the tone map and the display's transfer give
back about the colour chosen; `glow` above 1 makes agents brighter than white, into the bloom.

The counts are read back a few frames late (visual/counts.py), so reading never waits for the
GPU. Main thread only: the GL context belongs to it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from time import monotonic
from typing import Any

import moderngl
import numpy as np

from visual.camera import OrbitCamera
from visual.counts import DRAW_STATE_UINTS, CountsReadback, CountsView, CullCounts, SumScales
from visual.gl import (
    GpuTimer,
    ShaderError,
    ShaderSource,
    check_block,
    compute_program,
    dispatch_1d,
    is_software,
    resolve_shader_dir,
)
from visual.meshes import BILLBOARDS, SHAPES, MeshSet, cone_mesh, lod_distance
from visual.palettes import COLOR_BY, MAX_STOPS, palette_stops, srgb_to_linear
from visual.post import PostChain, PostSettings, scene_color_for
from visual.splat import FarSplat
from visual.stable_cull import StableCull
from visual.targets import Targets
from visual.uniforms import FRAME_PARAMS, BlockBuffer

__all__ = ["BACKGROUND", "CullCounts", "Renderer", "cone_mesh", "lod_distance"]

CULL_LOCAL_SIZE = 256
BACKGROUND = (0.035, 0.04, 0.07)  # near black, a hint of blue (as shown: sRGB)
TELEGRAPH_JUMP = 0.25       # seek_weight rising more than this in one frame is the tell
TELEGRAPH_SECONDS = 0.5     # how long the colour shift takes to fade out
FOG_START, FOG_END = 1.2, 3.5  # fog, in multiples of the camera's distance to its target
# Colour = mix(slow, fast, smoothstep(SPEED_RAMP, speed / max_speed)): a flock cruises at
# about 0.4-0.7 of max_speed, in the lower middle of the ramp, so bursts (and the audio speed
# boost, which lets agents pass max_speed) glow towards the fast colour.
SPEED_RAMP = (0.25, 0.95)
LURE_COLOR = (1.0, 0.95, 0.85)
STREAK_LENGTH = 4.0  # a streak at 1.5 x max_speed is this many agent sizes long (agent.vert)
# Additive blending: an agent with n neighbours adds ADDITIVE_CROWD / (ADDITIVE_CROWD + n) of its
# light, so a dense core stays coloured (agent.vert).
ADDITIVE_CROWD = 12.0
FAR_DRAW = "splat"

# glMemoryBarrier bits: the cull pass writes through shader storage what the draw then reads
# as commands (indirect), through shader storage (vertex pulling) and with a buffer copy.
GL_COMMAND_BARRIER_BIT = 0x00000040
GL_BUFFER_UPDATE_BARRIER_BIT = 0x00000200
GL_SHADER_STORAGE_BARRIER_BIT = 0x00002000
CULL_TO_DRAW_BARRIERS = (GL_COMMAND_BARRIER_BIT | GL_BUFFER_UPDATE_BARRIER_BIT
                         | GL_SHADER_STORAGE_BARRIER_BIT)


def _vec(values: Sequence[float]) -> str:
    """A GLSL vector literal for a #define: (0.25, 0.95) -> vec2(0.25, 0.95)."""
    return f"vec{len(values)}({', '.join(repr(float(v)) for v in values)})"


def _program(ctx: moderngl.Context, vertex: str, fragment: str, folder: Path,
             defines: Mapping[str, Any] | None = None, reads_params: bool = True
             ) -> moderngl.Program:
    vs, fs = ShaderSource(vertex, defines, folder), ShaderSource(fragment, defines, folder)
    try:
        program = ctx.program(vertex_shader=vs.text, fragment_shader=fs.text)
    except Exception as exc:  # moderngl raises plain Exceptions with the driver's log
        raise ShaderError(f"{vertex} + {fragment}: {vs.explain(str(exc))}") from exc
    if reads_params:
        try:
            check_block(program, FRAME_PARAMS, f"{vertex} + {fragment}")
        except ShaderError:
            program.release()
            raise
    return program


class Renderer(CountsView):
    """Culls and draws a `Swarm` each frame; owns every GPU object it uses (`release()`).

    After `render`, `visible`, `near_lure`, `swarm_center` and `swarm_radius` hold what the
    cull pass measured in the newest frame the GPU has finished (`counts_frame`; None until
    one has), read without waiting (GL fences); `gpu_ms` the GPU time of the cull
    and draw passes where the driver can time them; `telegraph` the current strength (0..1) of
    the telegraph colour shift. `shader_dir`: the shader folder to compile (and reload) from,
    default `visual.gl.shader_dir()` when made.
    """

    post_chain = PostChain  # the post chain's class (GL 4.1's: visual/post41.py)
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
        self._install(self._build_programs())
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
        self._splat = (self.far_splat(ctx, self._agent_defines(), shader_dir=self.shader_dir)
                       if self.far_splat is not None else None)
        # How far agents are drawn: "splat" (compute, visual/splat.py) or "points" (GL points).
        self.far_draw = FAR_DRAW if self._splat is not None else "points"
        self.post_on = False  # whether the last frame ran bloom and feedback (post_state)

        self._cull_timer = GpuTimer(ctx)
        self._draw_timer = GpuTimer(ctx)
        self.gpu_ms: dict[str, float | None] = {"cull": None, "draw": None}
        self.last_size: tuple[int, int] | None = None  # the frame last drawn, in pixels
        self._last_seek: float | None = None
        self._telegraph_start = -math.inf
        self.telegraph = 0.0

    @property
    def stable_order(self) -> bool:
        """Cull into lists in agent order (visual/stable_cull.py), so additive light sums in
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

    def _build_programs(self) -> dict[str, Any]:
        """Compile the cull kernel and the draw programs, with their vertex arrays."""
        ctx, folder, built = self.ctx, self.shader_dir, {}
        try:
            built["cull"] = compute_program(ctx, "cull.comp", {"LOCAL_SIZE": CULL_LOCAL_SIZE,
                                                              "STABLE": 0},
                                            folder, FRAME_PARAMS)
            for name, billboard, points in (("agent", 0, 0), ("agent_billboard", 1, 0),
                                            ("agent_points", 0, 1),
                                            ("agent_points_billboard", 1, 1)):
                built[name] = _program(ctx, "agent.vert", "agent.frag", folder, {
                    **self._agent_defines(), "BILLBOARD": billboard, "POINTS": points})
            built["fade"] = _program(ctx, "fade.vert", "fade.frag", folder)
            built["lure"] = _program(ctx, "lure.vert", "lure.frag", folder,
                                     {"LURE_COLOR": _vec(LURE_COLOR)})
            built["agent_vao"] = ctx.vertex_array(
                built["agent"], [(self._mesh, "3f 3f", "in_position", "in_normal")])
            built["agent_billboard_vao"] = ctx.vertex_array(  # in_normal unused: skipped
                built["agent_billboard"], [(self._mesh, "3f 12x", "in_position")])
            for name in ("agent_points", "agent_points_billboard"):  # a point: no mesh at all
                built[name + "_vao"] = ctx.vertex_array(built[name], [])
            built["fade_vao"] = ctx.vertex_array(built["fade"], [])
            built["lure_vao"] = ctx.vertex_array(built["lure"], [])
        except Exception:
            for obj in reversed(list(built.values())):
                obj.release()
            raise
        return built

    @staticmethod
    def _agent_defines() -> dict[str, str]:
        """agent_color.glsl's constants, for the draw programs and the splat alike."""
        return {"SPEED_RAMP": _vec(SPEED_RAMP), "ADDITIVE_CROWD": f"{ADDITIVE_CROWD:.1f}"}

    def _install(self, built: dict[str, Any]) -> None:
        self._built = built
        self._cull = built["cull"]
        self._agent_vao, self._fade_vao = built["agent_vao"], built["fade_vao"]
        self._billboard_vao = built["agent_billboard_vao"]
        self._points_vao = built["agent_points_vao"]
        self._points_billboard_vao = built["agent_points_billboard_vao"]
        self._lure_vao = built["lure_vao"]

    def reload_shaders(self) -> None:
        """Recompile from the shader folder; on an error (ShaderError, raised) the running
        ones stay (the post chain's too)."""
        built = self._build_programs()
        try:
            self._post.reload_shaders()
            if self._splat is not None:
                self._splat.reload_shaders()
            if self._stable is not None:
                self._stable.reload_shaders()
        except ShaderError:
            for obj in reversed(list(built.values())):
                obj.release()
            raise
        old = self._built
        self._install(built)
        for obj in reversed(list(old.values())):
            obj.release()

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

    # ---- telegraph --------------------------------------------------------------------------

    def _update_telegraph(self, seek_weight: float, time: float) -> None:
        if self._last_seek is not None and seek_weight - self._last_seek > TELEGRAPH_JUMP:
            self._telegraph_start = time
        self._last_seek = seek_weight
        age = time - self._telegraph_start
        fade = 1.0 - age / TELEGRAPH_SECONDS if age >= 0.0 else 0.0
        self.telegraph = max(0.0, min(1.0, fade)) ** 2

    # ---- buffers and framebuffers -----------------------------------------------------------

    def _ensure_capacity(self, count: int) -> None:
        if count > self._capacity:
            if self._visible_buffer is not None:
                self._visible_buffer.release()
            self._visible_buffer = self.ctx.buffer(reserve=2 * count * 4)  # near + far lists
            self._capacity = count
        self._far_base = self._capacity  # the far list starts after room for every agent

    def offscreen_framebuffer(self, size: tuple[int, int]) -> moderngl.Framebuffer:
        """An RGBA8 framebuffer with depth of `size`: one a size, kept until `release()`, so a
        caller may hold several (a preview and a full-size render)."""
        return self._targets.offscreen(size)

    # ---- the frame --------------------------------------------------------------------------

    def render(self, swarm: Any, camera: OrbitCamera, framebuffer: moderngl.Framebuffer,
               values: Mapping[str, Any], *, lure: Sequence[float] = (0.0, 0.0, 0.0),
               time: float | None = None, show_lure: bool = False,
               size: tuple[int, int] | None = None, dt: float = 1 / 60) -> None:
        """Cull, draw and present `swarm` (anything with `current` and `count`, as `Swarm`) as
        seen by `camera` into `framebuffer`, which is left bound.

        `lure` is the point the near-lure count is taken around; `time` (seconds, simulated
        time for reproducible renders; default: the wall clock) drives the telegraph's fade;
        `values` are this frame's parameter values (plain numbers by name). `show_lure` draws a
        marker at the lure (while the mouse holds it). `size` is the size drawn, in pixels:
        `framebuffer.size` unless given (a window's detected framebuffer keeps the size it had
        when the context was made, so the window passes its own). `dt`: seconds since the
        last frame (the feedback's motion and fade follow it).
        """
        p = values
        ctx = self.ctx
        size = tuple(size or framebuffer.size)
        self.last_size = size
        aspect = size[0] / max(size[1], 1)
        count = swarm.count
        self._ensure_capacity(count)
        self._set_shape(str(p.get("shape", "cone")))
        self._update_telegraph(float(p["seek_weight"]), monotonic() if time is None else time)
        scales = SumScales.for_frame(count, camera.target, float(p["contain_radius"]))
        self._write_params(p, camera, aspect, size, lure, scales)

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
        near = self._billboard_vao if billboard else self._agent_vao
        far = self._points_billboard_vao if billboard else self._points_vao
        with self._draw_timer:
            if self.far_draw == "splat" and self._splat is not None:
                # The far agents first (none for streaks: their passes run no groups), the near
                # meshes over them.
                self._splat.draw(swarm.current, self._visible_buffer, self._draw_state,
                                 target.color_attachments[0], additive=additive,
                                 billboard=billboard)
                target.use()
                near.render_indirect(self._draw_state, moderngl.TRIANGLES, count=1, first=0)
            else:  # the near command's meshes, then the far one's points
                near.render_indirect(self._draw_state, moderngl.TRIANGLES, count=1, first=0)
                ctx.enable(moderngl.PROGRAM_POINT_SIZE)
                far.render_indirect(self._draw_state, moderngl.POINTS, count=1, first=1)
                ctx.disable(moderngl.PROGRAM_POINT_SIZE)
        ctx.disable(moderngl.DEPTH_TEST | moderngl.BLEND)
        if show_lure:
            self._draw_lure()

        # 4. post onto the caller's framebuffer, and keep a copy of this frame's counts to read
        # once the GPU is done with it (a fence: reading never waits).
        self._post.run(target.color_attachments[0], framebuffer, size,
                       self.post_settings(p, background), dt)
        self._readback.push(self._draw_state, scales)
        self.gpu_ms = {"cull": self._cull_timer.last_ms, "draw": self._draw_timer.last_ms,
                       "post": self._post.gpu_ms}

    def _cull_agents(self, swarm: Any, count: int) -> None:
        """1. cull: reset the commands' instance counts and the sums (a GPU-side copy), then
        test, append and count; 2. the barrier before the draw (visual/renderer41.py culls
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
                dispatch_1d(self._cull, count, CULL_LOCAL_SIZE)
        # The draw reads the commands (COMMAND bit), the lists (SHADER_STORAGE bit) and the
        # counter copy reads the draw state (BUFFER_UPDATE bit).
        ctx.memory_barrier(CULL_TO_DRAW_BARRIERS)

    def scene_background(self, p: Mapping[str, Any]) -> tuple[float, float, float]:
        """The background in the HDR image: the linear colour that this frame's exposure and
        tone map show as `background` (sRGB), so the screen shows exactly the colour chosen."""
        return scene_color_for(srgb_to_linear(self.background), str(p.get("tonemap", "aces")),
                               float(p.get("exposure", 1.0)))

    def post_active(self, values: Mapping[str, Any]) -> bool:
        """Whether bloom and feedback run: `post` on, or auto on a GPU (not software GL)."""
        choice = values.get("post", "auto")
        return choice == "on" or (choice == "auto" and not self.software)

    def post_settings(self, p: Mapping[str, Any], background: Sequence[float]) -> PostSettings:
        """This frame's post chain. Off (software GL's default), bloom and feedback are
        skipped; exposure and the tone map always apply (one pass, as cheap as a copy)."""
        self.post_on = on = self.post_active(p)
        return PostSettings(
            exposure=float(p.get("exposure", 1.0)), tonemap=str(p.get("tonemap", "aces")),
            bloom=float(p.get("bloom", 0.0)) if on else 0.0,
            bloom_radius=float(p.get("bloom_radius", 0.6)),
            bloom_threshold=float(p.get("bloom_threshold", 1.0)),
            feedback=float(p.get("feedback", 0.0)) if on else 0.0,
            feedback_zoom=float(p.get("feedback_zoom", 0.0)),
            feedback_rotate=float(p.get("feedback_rotate", 0.0)),
            feedback_drift=(float(p.get("feedback_drift_x", 0.0)),
                            float(p.get("feedback_drift_y", 0.0))),
            background=tuple(background))

    @property
    def post_state(self) -> str:
        """The HUD's and telemetry's word on the post chain."""
        if self.post_on:
            return "on"
        return "off (software GL: post on turns it on)" if self.software else "off"

    def _write_params(self, p: Mapping[str, Any], camera: OrbitCamera, aspect: float,
                      size: tuple[int, int], lure: Sequence[float], scales: SumScales) -> None:
        """FrameParams for this frame, written once and bound for every pass that reads it."""
        eye = np.asarray(camera.eye, float)
        agent_size = float(p["agent_size"])
        stops = palette_stops(p)
        self._params.write(p, {
            "view_projection": camera.view_projection(aspect),
            "planes": camera.frustum(aspect),
            "eye": eye,
            "light": _light_direction(camera, eye),
            # A streak is a line several agent sizes long however small it is: a point would
            # lose it, so streaks keep their quad at any distance.
            "lod_distance": 1e30 if p.get("shape") == "streak" else lod_distance(
                agent_size, float(p["lod_pixels"]), size[1], camera.fov_y),
            "point_scale": size[1] / (2.0 * math.tan(math.radians(camera.fov_y) / 2.0)),
            "lure": lure,
            "center": scales.center,
            "spread_max": scales.reach * scales.reach,
            "spread_scale": scales.spread_scale,
            "reach": scales.reach,
            "offset_scale": scales.offset_scale,
            "background": self.scene_background(p),
            "telegraph": self.telegraph,
            "fog_range": (FOG_START * camera.distance, FOG_END * camera.distance),
            "cull_scale": (1.0 + 1.5 * float(p.get("size_by_speed", 0.0)))
                          * (STREAK_LENGTH if p.get("shape") == "streak" else 1.0),
            "shape_index": SHAPES.index(p.get("shape", "cone")),
            "color_by_index": COLOR_BY.index(p.get("color_by", "speed")),
            "palette_stops": len(stops),
            "additive": int(p.get("blend") == "additive"),
            "depth_range": (max(camera.distance - scales.reach, 0.0),
                            camera.distance + scales.reach),
            "viewport": size,
            "palette_colors": [(*srgb_to_linear(stop), 0.0) for stop in stops]
                       + [(0.0, 0.0, 0.0, 0.0)] * (MAX_STOPS - len(stops)),
            "agent_count": scales.count,
            "far_base": self._far_base,
            "lure_pixels": max(12.0, size[1] / 40.0),
        })

    def _draw_lure(self) -> None:
        """A ring at the lure (FrameParams: lure, lure_pixels), over the agents, blended."""
        ctx = self.ctx
        ctx.enable(moderngl.BLEND | moderngl.PROGRAM_POINT_SIZE)
        ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
        self._lure_vao.render(moderngl.POINTS, vertices=1)
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
        self._fade_vao.render(moderngl.TRIANGLES, vertices=3)
        ctx.disable(moderngl.BLEND)

    def release(self) -> None:
        """Free every GPU object this renderer made."""
        for obj in (*reversed(list(self._built.values())), self._mesh, self._draw_template,
                    self._draw_state, self._visible_buffer):
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
        self._built = {}
        self._cull_timer.release()
        self._draw_timer.release()


def _light_direction(camera: OrbitCamera, eye: np.ndarray) -> np.ndarray:
    """A light above and a little behind the camera's shoulder: lit faces face the viewer."""
    back = eye - np.asarray(camera.target, float)
    back /= np.linalg.norm(back)
    side = np.cross(np.array([0.0, 1.0, 0.0]), back)
    side = side / np.linalg.norm(side) if np.linalg.norm(side) > 1e-9 else np.array([1., 0, 0])
    light = 0.55 * back + 0.75 * np.array([0.0, 1.0, 0.0]) + 0.35 * side
    return light / np.linalg.norm(light)
