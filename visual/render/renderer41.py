"""The renderer on OpenGL 4.1 core (macOS): `visual.render.renderer.Renderer`'s frame, look and
counts with a cull that needs no compute shader and no storage buffer. It draws a `Swarm41` (the
agents in its state textures). Its cull (`_cull_agents`), every frame:

    clear    the near and far lists filled with 0xffffffff (a GPU copy from a buffer of them)
    lists    shaders/gl41_cull.vert + .geom, one point an agent, twice (near, far): the geometry
             shader passes on the points of that list and transform feedback appends their
             indices, in agent order (the order is the GL's: the same frame, the same lists)
    counts   shaders/gl41_counts.vert: one point an agent blended (ONE, ONE) into one of
             COUNT_LANES texels of two RGBA32F targets: the lists' lengths (their entries that are
             not 0xffffffff), the agents near the lure and the sums that frame the camera
    words    shaders/gl41_words.frag: the 16 words of cull.comp's draw state, from the template
             and the counts, into a 16x1 R32UI texture copied into the draw state buffer on the
             GPU (a pixel pack), where the indirect draw and the counts' readback find them

Nothing waits for the GPU: the indirect commands are filled on the GPU, and the counts are read
back a few frames late as on the compute backend (visual/render/counts.py). The draw is the compute
backend's: shaders/agent.vert (GL41: the agent from the textures, the list's entry as a
per-instance attribute, divisor 1), one render_indirect a list; far agents are GL points (the
compute backend's splat, visual/render/splat.py, is a compute pass). The post chain is
visual/post/post_chain41.py's. Main thread only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import moderngl
import numpy as np

from swarm_instrument.visual.gpu.programs import render_program
from swarm_instrument.visual.gpu.shaders import GLSL_410
from swarm_instrument.visual.gpu.uniforms import FRAME_PARAMS
from swarm_instrument.visual.post.post_chain41 import PostChain41
from swarm_instrument.visual.render.counts import DRAW_STATE_UINTS
from swarm_instrument.visual.render.frame_values import LURE_COLOR, agent_defines, glsl_vec
from swarm_instrument.visual.render.renderer import AGENT_PROGRAMS, Renderer
from swarm_instrument.visual.sim.state41 import STATE_WIDTH

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

    def _build_programs(self, built: dict[str, Any]) -> None:
        ctx, folder = self.ctx, self.shader_dir
        state = {"STATE_WIDTH": STATE_WIDTH, "COUNT_LANES": COUNT_LANES}
        gl41 = {"version": GLSL_410, "block": FRAME_PARAMS, "units": UNITS}
        for name, near in (("cull_near", 1), ("cull_far", 0)):
            # One list's cull: vertex + geometry shader, the agents' indices captured.
            built[name] = render_program(ctx, "gl41_cull.vert", None,
                                         {"STATE_WIDTH": STATE_WIDTH, "NEAR": near}, folder,
                                         geometry="gl41_cull.geom", varyings=("o_index",),
                                         **gl41)
        built["counts"] = render_program(ctx, "gl41_counts.vert", "gl41_counts.frag", state,
                                         folder, **gl41)
        built["words"] = render_program(ctx, "gl41_pass.vert", "gl41_words.frag", state,
                                        folder, **gl41)
        for name, billboard, points in AGENT_PROGRAMS:
            built[name] = render_program(ctx, "agent.vert", "agent.frag", {
                **state, **agent_defines(), "BILLBOARD": billboard, "POINTS": points},
                folder, **gl41)
        built["fade"] = render_program(ctx, "fade.vert", "fade.frag", None, folder, **gl41)
        built["lure"] = render_program(ctx, "lure.vert", "lure.frag",
                                       {"LURE_COLOR": glsl_vec(LURE_COLOR)}, folder, **gl41)
        for name in ("cull_near", "cull_far", "words", "fade", "lure"):
            built[name + "_vao"] = ctx.vertex_array(built[name], [])
        if self._near_list is not None:
            built.update(self._list_vaos(built))

    def _list_vaos(self, programs: Mapping[str, Any]) -> dict[str, Any]:
        """The vertex arrays that read the lists (made again with the lists or the programs)."""
        ctx, near, far = self.ctx, self._near_list, self._far_list
        vaos = {
            "agent_vao": ctx.vertex_array(programs["agent"], [
                (self._mesh, "3f 3f", "in_position", "in_normal"), (near, "1u /i", "in_index")]),
            "agent_billboard_vao": ctx.vertex_array(programs["agent_billboard"], [
                (self._mesh, "3f 12x", "in_position"), (near, "1u /i", "in_index")]),
            "counts_vao": ctx.vertex_array(programs["counts"], [
                (near, "1u", "in_near"), (far, "1u", "in_far")]),
        }
        for name in ("agent_points", "agent_points_billboard"):
            vaos[name + "_vao"] = ctx.vertex_array(programs[name], [(far, "1u /i", "in_index")])
        return vaos

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
            for name, vao in self._list_vaos(self._programs).items():
                self._programs.put(name, vao)
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
        ctx, built = self.ctx, self._programs
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
