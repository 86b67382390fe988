"""The swarm's renderer: GPU frustum culling into an indirect draw, one instanced draw, trails.

A frame (`Renderer.render`), with no agent data ever coming back to the CPU:

    cull     cull.comp: frustum test of every agent, visible indices appended to a near and a
             far list (the level of detail), instance counts written into two indirect draw
             commands, agents near the lure counted (seed 000's CSCull and damage hook)
    barrier  glMemoryBarrier with GL_COMMAND_BARRIER_BIT, so the draw reads the new counts
    draw     one render_indirect of the two commands into an accumulation framebuffer: cones
             near the camera, single triangles far away, pulled from the agent buffer by index;
             before it the previous image is cleared (trail 0) or faded towards the background
    present  the accumulation image is blitted to the caller's framebuffer (the window's
             default one, whose contents do not survive a buffer swap, or an offscreen one)

The counts are read back a few frames late from a ring of small buffers, so reading never waits
for the GPU.
Main thread only: the GL context belongs to it.
"""

from __future__ import annotations

import math
from time import monotonic
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import moderngl
import numpy as np

from visual.camera import OrbitCamera, matrix_bytes
from visual.fence import ReadbackRing
from visual.gl import GpuTimer, ShaderError, ShaderSource, compute_program, dispatch_1d, \
    set_uniforms

CULL_LOCAL_SIZE = 256
BACKGROUND = (0.012, 0.014, 0.024)  # near black, a hint of blue
TELEGRAPH_JUMP = 0.25       # seek_weight rising more than this in one frame is the tell
TELEGRAPH_SECONDS = 0.5     # how long the colour shift takes to fade out
COUNTER_RING = 3            # counter copies in flight before the oldest is dropped unread
FOG_START, FOG_END = 1.2, 3.5  # fog, in multiples of the camera's distance to its target
# Colour = mix(slow, fast, smoothstep(SPEED_RAMP, speed / max_speed)): a flock cruises at
# about 0.4-0.7 of max_speed, in the lower middle of the ramp, so bursts (and the audio speed
# boost, which lets agents pass max_speed) glow towards the fast colour.
SPEED_RAMP = (0.25, 0.95)

# glMemoryBarrier bits: the cull pass writes through shader storage what the draw then reads
# as commands (indirect), through shader storage (vertex pulling) and with a buffer copy.
GL_COMMAND_BARRIER_BIT = 0x00000040
GL_BUFFER_UPDATE_BARRIER_BIT = 0x00000200
GL_SHADER_STORAGE_BARRIER_BIT = 0x00002000
CULL_TO_DRAW_BARRIERS = (GL_COMMAND_BARRIER_BIT | GL_BUFFER_UPDATE_BARRIER_BIT
                         | GL_SHADER_STORAGE_BARRIER_BIT)

DRAW_STATE_UINTS = 16  # two 5-uint commands, near_lure, spread, offset[3], pad (cull.comp)
SUM_BUDGET = 4.0e9     # fixed-point scales keep the spread and offset sums below 2^32


def cone_mesh(sides: int = 6, tip: float = 1.0, tail: float = -0.8, radius: float = 0.28
              ) -> tuple[np.ndarray, np.ndarray]:
    """A closed cone along +x with flat normals: `sides` side faces and a fan for the base.

    Returns (positions, normals), (V, 3) float32, three vertices a triangle; every vertex lies
    within distance 1 of the origin, which is what the cull radius assumes.
    """
    # Half a step round: a flat face, not an edge, faces sideways, so a side view shows 3 faces.
    angles = np.linspace(0.0, 2.0 * math.pi, sides, endpoint=False) + math.pi / sides
    ring = np.stack([np.full(sides, tail), radius * np.cos(angles), radius * np.sin(angles)], 1)
    apex = np.array([tip, 0.0, 0.0])
    triangles = [(apex, ring[k], ring[(k + 1) % sides]) for k in range(sides)]
    triangles += [(ring[0], ring[k + 1], ring[k]) for k in range(1, sides - 1)]  # the base
    positions = np.array(triangles).reshape(-1, 3)
    normals = []
    for a, b, c in triangles:
        n = np.cross(b - a, c - a)
        n /= np.linalg.norm(n)
        if np.dot(n, (a + b + c) / 3.0 - np.array([0.15, 0.0, 0.0])) < 0:
            n = -n  # point outwards from a point inside the cone
        normals += [n, n, n]
    return positions.astype(np.float32), np.array(normals, np.float32)


def far_triangle() -> tuple[np.ndarray, np.ndarray]:
    """The far level of detail: one triangle (x forward, y across); the shader turns its plane
    to hold the view direction, and flips the +z normal towards the camera. Its outline is the
    cone's seen side-on (tip 1, tail -0.8, half-width 0.28), so switching detail does not show."""
    positions = np.array([[1.0, 0.0, 0.0], [-0.8, 0.28, 0.0], [-0.8, -0.28, 0.0]], np.float32)
    normals = np.tile(np.array([0.0, 0.0, 1.0], np.float32), (3, 1))
    return positions, normals


@dataclass(frozen=True)
class CullCounts:
    """What one cull pass counted: visible agents by level of detail, agents near the lure,
    and where the swarm is (mean position, RMS distance from it) for the camera to frame."""

    near: int
    far: int
    near_lure: int
    center: tuple[float, float, float]
    rms_radius: float

    @property
    def visible(self) -> int:
        return self.near + self.far


@dataclass(frozen=True)
class _SumScales:
    """How a frame's fixed-point sums were made, to decode them when they are read back."""

    count: int
    center: tuple[float, float, float]
    reach: float
    spread_scale: float
    offset_scale: float


def _program(ctx: moderngl.Context, vertex: str, fragment: str) -> moderngl.Program:
    vs, fs = ShaderSource(vertex), ShaderSource(fragment)
    try:
        return ctx.program(vertex_shader=vs.text, fragment_shader=fs.text)
    except Exception as exc:  # moderngl raises plain Exceptions with the driver's log
        raise ShaderError(f"{vertex} + {fragment}: {vs.explain(str(exc))}") from exc


class Renderer:
    """Culls and draws a `Swarm` each frame; owns every GPU object it uses (`release()`).

    After `render`, `visible`, `near_lure`, `swarm_center` and `swarm_radius` hold what the
    cull pass measured in the newest frame the GPU has finished (`counts_frame`; None until
    one has), read without waiting (GL fences); `gpu_ms` the GPU time of the cull
    and draw passes where the driver can time them; `telegraph` the current strength (0..1) of
    the telegraph colour shift.
    """

    def __init__(self, ctx: moderngl.Context, *, samples: int = 0) -> None:
        self.ctx = ctx
        self.samples = samples
        self.background = BACKGROUND
        cone_positions, cone_normals = cone_mesh()
        far_positions, far_normals = far_triangle()
        self.near_vertices = len(cone_positions)
        self.far_vertices = len(far_positions)
        mesh = np.hstack([np.vstack([cone_positions, far_positions]),
                          np.vstack([cone_normals, far_normals])]).astype(np.float32)
        self._mesh = ctx.buffer(mesh.tobytes())
        self._install(self._build_programs())

        # The draw state as the cull pass starts it: both commands with no instances yet.
        template = np.zeros(DRAW_STATE_UINTS, np.uint32)
        template[0:5] = (self.near_vertices, 0, 0, 0, 0)
        template[5:10] = (self.far_vertices, 0, self.near_vertices, 0, 0)
        self._draw_template = ctx.buffer(template.tobytes())
        self._draw_state = ctx.buffer(template.tobytes())
        self._counter_ring = ReadbackRing(ctx, template.nbytes, COUNTER_RING)
        self._last_scales = _SumScales(1, (0.0, 0.0, 0.0), 1.0, 1.0, 1.0)
        self._frames = 0
        self._visible_buffer: moderngl.Buffer | None = None
        self._capacity = 0
        self._far_base = 0

        self._accumulation: moderngl.Framebuffer | None = None
        self._accumulation_parts: list[Any] = []
        self._offscreen: dict[tuple[int, int], tuple[moderngl.Framebuffer, list[Any]]] = {}

        self._cull_timer = GpuTimer(ctx)
        self._draw_timer = GpuTimer(ctx)
        self.gpu_ms: dict[str, float | None] = {"cull": None, "draw": None}
        self.counts: CullCounts | None = None
        self.last_size: tuple[int, int] | None = None  # the frame last drawn, in pixels
        self.counts_frame: int | None = None  # the render (from 0) that `counts` comes from
        self._last_seek: float | None = None
        self._telegraph_start = -math.inf
        self.telegraph = 0.0

    # ---- programs -------------------------------------------------------------------------------

    def _build_programs(self) -> dict[str, Any]:
        """Compile the cull kernel and the draw programs, with their vertex arrays."""
        ctx, built = self.ctx, {}
        try:
            built["cull"] = compute_program(ctx, "cull.comp", {"LOCAL_SIZE": CULL_LOCAL_SIZE})
            built["agent"] = _program(ctx, "agent.vert", "agent.frag")
            built["fade"] = _program(ctx, "fade.vert", "fade.frag")
            built["present"] = _program(ctx, "fade.vert", "present.frag")
            built["lure"] = _program(ctx, "lure.vert", "lure.frag")
            built["agent_vao"] = ctx.vertex_array(
                built["agent"], [(self._mesh, "3f 3f", "in_position", "in_normal")])
            built["fade_vao"] = ctx.vertex_array(built["fade"], [])
            built["present_vao"] = ctx.vertex_array(built["present"], [])
            built["lure_vao"] = ctx.vertex_array(built["lure"], [])
        except Exception:
            for obj in reversed(list(built.values())):
                obj.release()
            raise
        return built

    def _install(self, built: dict[str, Any]) -> None:
        self._built = built
        self._cull, self._agent_program = built["cull"], built["agent"]
        self._fade_program, self._present_program = built["fade"], built["present"]
        self._agent_vao, self._fade_vao = built["agent_vao"], built["fade_vao"]
        self._present_vao = built["present_vao"]
        self._lure_program, self._lure_vao = built["lure"], built["lure_vao"]

    def reload_shaders(self) -> None:
        """Recompile from shaders/; on an error (ShaderError, raised) the running ones stay."""
        built = self._build_programs()
        old = self._built
        self._install(built)
        for obj in reversed(list(old.values())):
            obj.release()

    # ---- counts -----------------------------------------------------------------------------

    @property
    def readback(self) -> str:
        """"fences" (counts read once the GPU is done, never waiting) or "two frames late"
        (`fixed_lag`, or a driver without fences: waits when the GPU is further behind)."""
        ring = self._counter_ring
        return "two frames late" if ring.fixed_lag or ring.fences is None else "fences"

    @property
    def has_fences(self) -> bool:
        return self._counter_ring.fences is not None

    @property
    def fixed_lag(self) -> bool:
        """Read counts exactly two frames late, waiting if need be: reproducible frames."""
        return self._counter_ring.fixed_lag

    @fixed_lag.setter
    def fixed_lag(self, value: bool) -> None:
        self._counter_ring.fixed_lag = value

    @property
    def frames(self) -> int:
        """Frames rendered so far."""
        return self._frames

    @property
    def visible(self) -> int | None:
        """Agents drawn in the newest finished frame, None until the GPU has finished one."""
        return None if self.counts is None else self.counts.visible

    @property
    def near_lure(self) -> int | None:
        """Agents within lure_radius of the lure in a recent frame, None until known."""
        return None if self.counts is None else self.counts.near_lure

    @property
    def swarm_center(self) -> tuple[float, float, float] | None:
        """The agents' mean position a few frames ago (None until known): `OrbitCamera.follow`
        can keep it in the middle of the frame."""
        return None if self.counts is None else self.counts.center

    @property
    def swarm_radius(self) -> float | None:
        """The agents' RMS distance from their mean position a few frames ago (None until
        known): `OrbitCamera.follow` frames a ball of that size."""
        return None if self.counts is None else self.counts.rms_radius

    @staticmethod
    def _decode(data: bytes, frame: _SumScales) -> CullCounts:
        words = np.frombuffer(data, np.uint32)
        count = max(frame.count, 1)
        mean_square = int(words[11]) / frame.spread_scale / count  # E|p - c|^2
        offset = words[12:15].astype(float) / frame.offset_scale / count - frame.reach  # E(p - c)
        variance = max(mean_square - float(np.dot(offset, offset)), 0.0)
        center = tuple(float(v) for v in np.asarray(frame.center) + offset)
        return CullCounts(near=int(words[1]), far=int(words[6]), near_lure=int(words[10]),
                          center=center, rms_radius=math.sqrt(variance))

    def read_counts_now(self) -> CullCounts:
        """The last rendered frame's counts, waiting for the GPU: for tests, not per frame."""
        self.ctx.finish()
        self.counts = self._decode(self._draw_state.read(), self._last_scales)
        return self.counts

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

    def _ensure_accumulation(self, size: tuple[int, int]) -> moderngl.Framebuffer:
        """A float colour image kept between frames (so a trail fades smoothly to the exact
        background instead of sticking at 8-bit rounding) and a depth buffer."""
        if self._accumulation is not None and self._accumulation.size == size:
            return self._accumulation
        self._release_parts(self._accumulation, self._accumulation_parts)
        if self.samples > 0:
            color = self.ctx.renderbuffer(size, 4, samples=self.samples, dtype="f2")
        else:
            color = self.ctx.texture(size, 4, dtype="f2")
        depth = self.ctx.depth_renderbuffer(size, samples=self.samples)
        self._accumulation = self.ctx.framebuffer([color], depth)
        self._accumulation_parts = [color, depth]
        self._accumulation.use()
        self._accumulation.clear(*self.background, 1.0, depth=1.0)
        return self._accumulation

    def _release_parts(self, framebuffer: moderngl.Framebuffer | None, parts: list[Any]) -> None:
        if framebuffer is not None:
            if self.ctx.fbo is framebuffer:
                # moderngl re-binds its "current" framebuffer after creating another one: it
                # must not be a deleted one (GL_INVALID_OPERATION). Standalone has no screen.
                (self.ctx.screen or self.ctx.detect_framebuffer(0)).use()
            framebuffer.release()
        for part in parts:
            part.release()
        parts.clear()

    def offscreen_framebuffer(self, size: tuple[int, int]) -> moderngl.Framebuffer:
        """An RGBA8 framebuffer with depth of `size`: one a size, kept until `release()`, so a
        caller may hold several (a preview and a full-size render)."""
        size = (int(size[0]), int(size[1]))
        if size not in self._offscreen:
            color = self.ctx.renderbuffer(size, 4)
            depth = self.ctx.depth_renderbuffer(size)
            self._offscreen[size] = (self.ctx.framebuffer([color], depth), [color, depth])
        return self._offscreen[size][0]

    # ---- the frame --------------------------------------------------------------------------

    def render(self, swarm: Any, camera: OrbitCamera, framebuffer: moderngl.Framebuffer,
               values: Mapping[str, Any], *, lure: Sequence[float] = (0.0, 0.0, 0.0),
               time: float | None = None, show_lure: bool = False,
               size: tuple[int, int] | None = None) -> None:
        """Cull, draw and present `swarm` (anything with `current` and `count`, as `Swarm`) as
        seen by `camera` into `framebuffer`, which is left bound.

        `lure` is the point the near-lure count is taken around; `time` (seconds, simulated
        time for reproducible renders; default: the wall clock) drives the telegraph's fade;
        `values` are this frame's parameter values (plain numbers by name). `show_lure` draws a
        marker at the lure (while the mouse holds it). `size` is the size drawn, in pixels:
        `framebuffer.size` unless given (a window's detected framebuffer keeps the size it had
        when the context was made, so the window passes its own).
        """
        p = values
        ctx = self.ctx
        size = tuple(size or framebuffer.size)
        self.last_size = size
        aspect = size[0] / max(size[1], 1)
        count = swarm.count
        self._ensure_capacity(count)
        self._update_telegraph(float(p["seek_weight"]), monotonic() if time is None else time)

        eye = np.asarray(camera.eye, float)
        view_projection = camera.view_projection(aspect)
        planes = camera.frustum(aspect)
        cull_radius = float(p["agent_size"])  # the meshes lie within 1 of the agent
        reach = 4.0 * float(p["contain_radius"])  # beyond this, an agent counts as this far
        scales = _SumScales(count=count, center=tuple(float(v) for v in camera.target),
                            reach=reach, spread_scale=SUM_BUDGET / (count * reach * reach),
                            offset_scale=SUM_BUDGET / (count * 2.0 * reach))

        # 1. cull: reset the commands' instance counts and the sums (a GPU-side copy), then
        # test, append and count.
        ctx.copy_buffer(self._draw_state, self._draw_template)
        swarm.current.bind_to_storage_buffer(0)
        self._visible_buffer.bind_to_storage_buffer(1)
        self._draw_state.bind_to_storage_buffer(2)
        self._cull["u_planes"].write(planes.astype(np.float32).tobytes())
        set_uniforms(self._cull, {
            "u_count": count,
            "u_cull_radius": cull_radius,
            "u_camera": tuple(eye),
            "u_lod_distance": lod_distance(float(p["agent_size"]), float(p["lod_pixels"]),
                                           size[1], camera.fov_y),
            "u_far_base": self._far_base,
            "u_lure": tuple(float(v) for v in lure),
            "u_lure_radius": float(p["lure_radius"]),
            "u_center": scales.center,
            "u_spread_max": reach * reach,
            "u_spread_scale": scales.spread_scale,
            "u_reach": reach,
            "u_offset_scale": scales.offset_scale,
        })
        with self._cull_timer:
            dispatch_1d(self._cull, count, CULL_LOCAL_SIZE)
        # 2. the draw reads the commands (COMMAND bit), the lists (SHADER_STORAGE bit) and the
        # counter copy below reads the draw state (BUFFER_UPDATE bit).
        ctx.memory_barrier(CULL_TO_DRAW_BARRIERS)

        # 3. draw into the accumulation image: clear or fade, then the agents.
        target = self._ensure_accumulation(size)
        target.use()
        trail = float(p["trail"])
        ctx.disable(moderngl.DEPTH_TEST | moderngl.CULL_FACE)
        if trail > 0.0:
            self._fade(target, trail)
        else:
            target.clear(*self.background, 1.0, depth=1.0)
        program = self._agent_program
        program["u_view_projection"].write(matrix_bytes(view_projection))
        light = _light_direction(camera, eye)
        set_uniforms(program, {
            "u_camera": tuple(eye),
            "u_light": tuple(light),
            "u_size": float(p["agent_size"]),
            "u_near_vertices": self.near_vertices,
            "u_far_base": self._far_base,
            "u_inv_max_speed": 1.0 / max(float(p["max_speed"]), 1e-6),
            "u_speed_ramp": SPEED_RAMP,
            "u_slow_color": tuple(p["slow_color"]),
            "u_fast_color": tuple(p["fast_color"]),
            "u_telegraph_color": tuple(p["telegraph_color"]),
            "u_telegraph": self.telegraph,
            "u_background": self.background,
            "u_fog": (FOG_START * camera.distance, FOG_END * camera.distance),
        })
        swarm.current.bind_to_storage_buffer(0)
        self._visible_buffer.bind_to_storage_buffer(1)
        ctx.enable(moderngl.DEPTH_TEST)
        with self._draw_timer:
            self._agent_vao.render_indirect(self._draw_state, moderngl.TRIANGLES, count=2)
        ctx.disable(moderngl.DEPTH_TEST)
        if show_lure:
            self._draw_lure(view_projection, lure, size)

        # 4. present, and keep a copy of this frame's counts to read once the GPU is done
        # with it (a fence: reading never waits).
        self._present(framebuffer, target)
        self._counter_ring.push(self._draw_state, (self._frames, scales))
        self._last_scales = scales
        self._frames += 1
        done = self._counter_ring.poll()
        if done is not None:
            data, (self.counts_frame, done_scales) = done
            self.counts = self._decode(data, done_scales)
        self.gpu_ms = {"cull": self._cull_timer.last_ms, "draw": self._draw_timer.last_ms}

    def _present(self, framebuffer: moderngl.Framebuffer, image: moderngl.Framebuffer) -> None:
        """Put the image on `framebuffer`, left bound. A full-screen triangle, not a blit: a
        window's default framebuffer has its own depth format, which glBlitFramebuffer refuses
        (GL_INVALID_OPERATION) when copying depth too, as moderngl's copy_framebuffer does."""
        color = image.color_attachments[0]
        if not isinstance(color, moderngl.Texture):  # multisampled: the blit resolves it
            self.ctx.copy_framebuffer(framebuffer, image)
            framebuffer.use()
            return
        framebuffer.use()
        color.use(0)
        set_uniforms(self._present_program, {"u_image": 0})
        self._present_vao.render(moderngl.TRIANGLES, vertices=3)

    def _draw_lure(self, view_projection: np.ndarray, lure: Sequence[float],
                   size: tuple[int, int]) -> None:
        """A ring at the lure, over the agents, blended."""
        ctx = self.ctx
        self._lure_program["u_view_projection"].write(matrix_bytes(view_projection))
        set_uniforms(self._lure_program, {"u_lure": tuple(float(v) for v in lure),
                                          "u_pixels": max(12.0, size[1] / 40.0),
                                          "u_color": (1.0, 0.95, 0.85)})
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
        set_uniforms(self._fade_program, {"u_background": self.background,
                                          "u_alpha": 1.0 - trail})
        self._fade_vao.render(moderngl.TRIANGLES, vertices=3)
        ctx.disable(moderngl.BLEND)

    def release(self) -> None:
        """Free every GPU object this renderer made."""
        for obj in (*reversed(list(self._built.values())), self._mesh, self._draw_template,
                    self._draw_state, self._visible_buffer):
            if obj is not None:
                obj.release()
        self._release_parts(self._accumulation, self._accumulation_parts)
        for framebuffer, parts in self._offscreen.values():
            self._release_parts(framebuffer, parts)
        self._offscreen.clear()
        self._accumulation = self._visible_buffer = None
        self._counter_ring.release()
        self._built = {}
        self._cull_timer.release()
        self._draw_timer.release()


def lod_distance(agent_size: float, lod_pixels: float, height: int, fov_y: float) -> float:
    """The distance beyond which an agent looks smaller than `lod_pixels` on a frame `height`
    pixels tall: there a cone is a few pixels and one triangle looks the same, far cheaper."""
    if lod_pixels <= 0.0:
        return 1e30
    pixels_per_unit_at_1 = height / (2.0 * math.tan(math.radians(fov_y) / 2.0))
    return agent_size * pixels_per_unit_at_1 / lod_pixels


def _light_direction(camera: OrbitCamera, eye: np.ndarray) -> np.ndarray:
    """A light above and a little behind the camera's shoulder: lit faces face the viewer."""
    back = eye - np.asarray(camera.target, float)
    back /= np.linalg.norm(back)
    side = np.cross(np.array([0.0, 1.0, 0.0]), back)
    side = side / np.linalg.norm(side) if np.linalg.norm(side) > 1e-9 else np.array([1., 0, 0])
    light = 0.55 * back + 0.75 * np.array([0.0, 1.0, 0.0]) + 0.35 * side
    return light / np.linalg.norm(light)
