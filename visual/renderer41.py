"""The renderer on OpenGL 4.1 core (macOS): `visual.renderer.Renderer`'s frame, look and counts
with a cull that needs no compute shader and no storage buffer. It draws a `Swarm41` (the
agents in its state textures). Its cull (`_cull_agents`), every frame:

    clear    the near and far lists filled with 0xffffffff (a GPU copy from a buffer of them)
    lists    shaders/gl41_cull.vert + .geom, one point an agent, twice (near, far): the geometry
             shader passes on the points of that list and transform feedback appends their
             indices, in agent order (the order is the GL's: the same frame, the same lists)
    counts   shaders/gl41_counts.vert: one point an agent blended (ONE, ONE) into one of
             COUNT_LANES texels of two RGBA32F targets: the lists' lengths (their entries that are not 0xffffffff),
             the agents near the lure and the sums that frame the camera
    words    shaders/gl41_words.frag: the 16 words of cull.comp's draw state, from the template
             and the counts, into a 16x1 R32UI texture copied into the draw state buffer on the
             GPU (a pixel pack), where the indirect draw and the counts' readback find them

Nothing waits for the GPU: the indirect commands are filled on the GPU, and the counts are read
back a few frames late as on the compute backend (visual/counts.py). The draw is the compute
backend's: shaders/agent.vert (GL41: the agent from the textures, the list's entry as a
per-instance attribute, divisor 1), one render_indirect a list; far agents are GL points (the
compute backend's splat, visual/splat.py, is a compute pass). The post chain is
visual/post41.py's. Main thread only.
"""

from __future__ import annotations

from typing import Any

import moderngl
import numpy as np

from visual.counts import DRAW_STATE_UINTS
from visual.gl import bind_blocks, bind_samplers
from visual.post41 import PostChain41
from visual.renderer import LURE_COLOR, Renderer, _vec
from visual.swarm41 import STATE_WIDTH, program_410
from visual.uniforms import FRAME_PARAMS

UNITS = {"agent_positions": 0, "agent_velocities": 1, "cull_counts": 4, "cull_offsets": 5,
         "draw_template": 6}
EMPTY = 0xFFFFFFFF  # a list entry the cull did not write
COUNT_LANES = 256  # texels the counts are blended into (gl41_counts.vert)


class Renderer41(Renderer):
    """Culls and draws a `Swarm41` each frame (see the module's comment); owns what it makes."""

    post_chain = PostChain41
    far_splat = None  # the splat is a compute pass: far agents are GL points here
    stable_cull = None  # transform feedback writes the lists in agent order already
    backend = "4.1"

    def __init__(self, ctx: moderngl.Context, **kwargs: Any) -> None:
        self._near_list = self._far_list = self._empty = None
        self._template_texture = ctx.texture((DRAW_STATE_UINTS, 1), 1, dtype="u4")
        self._words = ctx.texture((DRAW_STATE_UINTS, 1), 1, dtype="u4")
        self._words_target = ctx.framebuffer([self._words])
        self._count_textures = [ctx.texture((COUNT_LANES, 1), 4, dtype="f4") for _ in range(2)]
        self._counts_target = ctx.framebuffer(self._count_textures)
        for texture in (self._template_texture, self._words, *self._count_textures):
            texture.filter = (moderngl.NEAREST, moderngl.NEAREST)
        super().__init__(ctx, **kwargs)

    # ---- programs -------------------------------------------------------------------------------

    def _build_programs(self) -> dict[str, Any]:
        ctx, folder, built = self.ctx, self.shader_dir, {}
        state = {"STATE_WIDTH": STATE_WIDTH, "COUNT_LANES": COUNT_LANES}
        try:
            for name, near in (("cull_near", 1), ("cull_far", 0)):
                built[name] = self._cull_program(near)
            built["counts"] = program_410(ctx, "gl41_counts.vert", "gl41_counts.frag", folder,
                                          state, block=FRAME_PARAMS, units=UNITS)
            built["words"] = program_410(ctx, "gl41_pass.vert", "gl41_words.frag", folder,
                                         state, block=FRAME_PARAMS, units=UNITS)
            for name, billboard, points in (("agent", 0, 0), ("agent_billboard", 1, 0),
                                            ("agent_points", 0, 1),
                                            ("agent_points_billboard", 1, 1)):
                built[name] = program_410(ctx, "agent.vert", "agent.frag", folder, {
                    **state, **self._agent_defines(), "BILLBOARD": billboard,
                    "POINTS": points}, block=FRAME_PARAMS, units=UNITS)
            built["fade"] = program_410(ctx, "fade.vert", "fade.frag", folder,
                                        block=FRAME_PARAMS, units=UNITS)
            built["lure"] = program_410(ctx, "lure.vert", "lure.frag", folder,
                                        {"LURE_COLOR": _vec(LURE_COLOR)}, block=FRAME_PARAMS,
                                        units=UNITS)
            for name in ("cull_near", "cull_far", "words", "fade", "lure"):
                built[name + "_vao"] = ctx.vertex_array(built[name], [])
        except Exception:
            for obj in reversed(list(built.values())):
                obj.release()
            raise
        return built

    def _cull_program(self, near: int) -> moderngl.Program:
        """A list's cull: vertex + geometry shader, o_index captured (GLSL 4.10)."""
        from visual.gl import GLSL_410, ShaderError, ShaderSource, check_block

        defines = {"STATE_WIDTH": STATE_WIDTH, "NEAR": near}
        vs = ShaderSource("gl41_cull.vert", defines, self.shader_dir, GLSL_410)
        gs = ShaderSource("gl41_cull.geom", defines, self.shader_dir, GLSL_410)
        try:
            program = self.ctx.program(vertex_shader=vs.text, geometry_shader=gs.text,
                                       varyings=("o_index",))
        except Exception as exc:  # moderngl raises plain Exceptions with the driver's log
            raise ShaderError(f"gl41_cull.vert + gl41_cull.geom: {vs.explain(str(exc))}"
                              ) from exc
        bind_blocks(program)
        bind_samplers(program, UNITS)
        try:
            check_block(program, FRAME_PARAMS, "gl41_cull.vert")
        except ShaderError:
            program.release()
            raise
        return program

    def _install(self, built: dict[str, Any]) -> None:
        self._built = built
        self._fade_vao, self._lure_vao = built["fade_vao"], built["lure_vao"]
        self._make_list_vaos()

    def _make_list_vaos(self) -> None:
        """The vertex arrays that read the lists (remade with the lists and the programs)."""
        built = self._built
        for name in ("agent_vao", "agent_billboard_vao", "agent_points_vao",
                     "agent_points_billboard_vao", "counts_vao"):
            if name in built:
                built.pop(name).release()
        if self._near_list is None:
            return
        ctx, near, far = self.ctx, self._near_list, self._far_list
        built["agent_vao"] = ctx.vertex_array(built["agent"], [
            (self._mesh, "3f 3f", "in_position", "in_normal"), (near, "1u /i", "in_index")])
        built["agent_billboard_vao"] = ctx.vertex_array(built["agent_billboard"], [
            (self._mesh, "3f 12x", "in_position"), (near, "1u /i", "in_index")])
        for name in ("agent_points", "agent_points_billboard"):
            built[name + "_vao"] = ctx.vertex_array(built[name], [(far, "1u /i", "in_index")])
        built["counts_vao"] = ctx.vertex_array(built["counts"], [
            (near, "1u", "in_near"), (far, "1u", "in_far")])
        self._agent_vao, self._billboard_vao = built["agent_vao"], built["agent_billboard_vao"]
        self._points_vao = built["agent_points_vao"]
        self._points_billboard_vao = built["agent_points_billboard_vao"]

    def _set_shape(self, shape: str) -> None:
        if shape == self.shape:
            return
        super()._set_shape(shape)
        self._template_texture.write(self._draw_template.read())

    # ---- lists ----------------------------------------------------------------------------------

    def _ensure_capacity(self, count: int) -> None:
        if count > self._capacity:
            for buffer in (self._near_list, self._far_list, self._empty):
                if buffer is not None:
                    buffer.release()
            self._near_list = self.ctx.buffer(reserve=count * 4)
            self._far_list = self.ctx.buffer(reserve=count * 4)
            self._empty = self.ctx.buffer(np.full(count, EMPTY, np.uint32).tobytes())
            self._capacity = count
            self._make_list_vaos()
        self._far_base = 0  # the far list is a buffer of its own

    def read_visible_now(self) -> tuple[np.ndarray, np.ndarray]:
        """The last frame's (near, far) visible agent indices (waits: tests, debugging)."""
        counts = self.read_counts_now()
        near = np.frombuffer(self._near_list.read(), np.uint32)[:counts.near].copy()
        far = np.frombuffer(self._far_list.read(), np.uint32)[:counts.far].copy()
        return near, far

    # ---- the cull -------------------------------------------------------------------------------

    def _cull_agents(self, swarm: Any, count: int) -> None:
        """The lists, their counts and the draw state (see the module's comment)."""
        ctx, built = self.ctx, self._built
        ctx.disable(moderngl.BLEND | moderngl.DEPTH_TEST | moderngl.CULL_FACE)
        with self._cull_timer:
            ctx.copy_buffer(self._near_list, self._empty, size=count * 4)
            ctx.copy_buffer(self._far_list, self._empty, size=count * 4)
            swarm.positions.use(UNITS["agent_positions"])
            self._counts_target.use()  # a draw needs a complete framebuffer bound
            built["cull_near_vao"].transform(self._near_list, moderngl.POINTS, vertices=count)
            built["cull_far_vao"].transform(self._far_list, moderngl.POINTS, vertices=count)
            self._counts_target.clear(0.0, 0.0, 0.0, 0.0)
            ctx.enable(moderngl.BLEND)
            ctx.blend_func = moderngl.ONE, moderngl.ONE
            ctx.blend_equation = moderngl.FUNC_ADD
            built["counts_vao"].render(moderngl.POINTS, vertices=count)
            ctx.disable(moderngl.BLEND)
            self._count_textures[0].use(UNITS["cull_counts"])
            self._count_textures[1].use(UNITS["cull_offsets"])
            self._template_texture.use(UNITS["draw_template"])
            self._words_target.use()
            built["words_vao"].render(moderngl.TRIANGLES, vertices=3)
            self._words.read_into(self._draw_state)  # a pixel pack: stays on the GPU
        swarm.positions.use(UNITS["agent_positions"])  # for the draw
        swarm.velocities.use(UNITS["agent_velocities"])

    def release(self) -> None:
        super().release()
        for obj in (self._near_list, self._far_list, self._empty):
            if obj is not None:
                obj.release()
        self._near_list = self._far_list = self._empty = None
        for framebuffer in (self._words_target, self._counts_target):
            if self.ctx.fbo is framebuffer:
                (self.ctx.screen or self.ctx.detect_framebuffer(0)).use()
            framebuffer.release()
        for texture in (self._template_texture, self._words, *self._count_textures):
            texture.release()
