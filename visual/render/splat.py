"""Far agents splatted by compute passes instead of drawn as GL points (issue 17).

The H200's raster front end is modest: 4M far agents as points took 8 ms of a 13.4 ms frame
there, most of it spent rasterising. `FarSplat` draws the cull pass's far list into the HDR
accumulation image with shaders/splat.comp, before the near agents' meshes are rasterised over
it (a near agent is nearer than any far one on the same pixel), the same pixels and colours as
the points (tests/test_splat.py compares the two):

    args      splat_args.comp: the passes' dispatch sizes from the far count on the GPU (they
              run over the far list only, and not at all when it is empty)
    opaque    SPLAT_DEPTH: the nearest far agent of each pixel (an atomicMax on its inverted
              depth bits and low index bits), then SPLAT_COLOR: that agent writes its colour
              and empties the pixel for the next frame
    additive  SPLAT_ADD: every far agent adds its light in fixed point (the same sum in any
              order), then splat_resolve.comp adds the sums into the image and empties them

Owns its programs and its per-pixel buffer (three uints a pixel). Main thread only.
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
    storage_barrier,
)
from swarm_instrument.visual.gpu.shaders import resolve_shader_dir
from swarm_instrument.visual.gpu.uniforms import FRAME_PARAMS
from swarm_instrument.visual.sim.grid import zeroed

LOCAL_SIZE = 256
SPLAT_SCALE = 16384.0  # fixed point of added light: a pixel holds up to 262,144 (HDR) units
GL_FRAMEBUFFER_BARRIER_BIT = 0x00000400
GL_SHADER_IMAGE_ACCESS_BARRIER_BIT = 0x00000020
GL_TEXTURE_FETCH_BARRIER_BIT = 0x00000008
GL_COMMAND_BARRIER_BIT = 0x00000040
# After the splat: the rasteriser blends over the image, the post chain samples and loads it.
SPLAT_TO_DRAW_BARRIERS = (GL_FRAMEBUFFER_BARRIER_BIT | GL_SHADER_IMAGE_ACCESS_BARRIER_BIT
                          | GL_TEXTURE_FETCH_BARRIER_BIT)
PASSES = {"depth": {"SPLAT_DEPTH": 1, "SPLAT_COLOR": 0},
          "color": {"SPLAT_DEPTH": 0, "SPLAT_COLOR": 1},
          "add": {"SPLAT_DEPTH": 0, "SPLAT_COLOR": 0}}


class FarSplat(ProgramOwner):
    """The far agents' compute splat. `defines`: agent_color.glsl's (SPEED_RAMP,
    ADDITIVE_CROWD), the renderer's."""

    def __init__(self, ctx: moderngl.Context, defines: Mapping[str, Any], *,
                 shader_dir: Path | None = None) -> None:
        self.ctx = ctx
        self.defines = dict(defines)
        self.shader_dir = resolve_shader_dir(shader_dir)
        self._programs = ProgramSet(self._build_programs)
        self._buffer: moderngl.Buffer | None = None
        self._pixels = 0
        self._args = ctx.buffer(reserve=24)  # two dispatches' groups: splat, resolve

    def _build_programs(self, built: dict[str, Any]) -> None:
        scale = {"SPLAT_SCALE": f"{SPLAT_SCALE:.1f}"}
        for billboard in (0, 1):
            for name, switches in PASSES.items():
                built[f"{name}{billboard}"] = compute_program(
                    self.ctx, "splat.comp", {**self.defines, **scale, **switches,
                                             "LOCAL_SIZE": LOCAL_SIZE, "BILLBOARD": billboard},
                    self.shader_dir, FRAME_PARAMS)
        built["resolve"] = compute_program(self.ctx, "splat_resolve.comp", scale,
                                           self.shader_dir, FRAME_PARAMS)
        built["args"] = compute_program(self.ctx, "splat_args.comp",
                                        {"SPLAT_LOCAL_SIZE": LOCAL_SIZE}, self.shader_dir,
                                        FRAME_PARAMS)

    def _ensure(self, size: tuple[int, int]) -> None:
        pixels = size[0] * size[1]
        if pixels != self._pixels:
            if self._buffer is not None:
                self._buffer.release()
            self._buffer = zeroed(self.ctx, 3 * 4 * pixels)  # empty: zeros
            self._pixels = pixels

    def draw(self, image: moderngl.Texture, *, additive: bool, billboard: bool) -> None:
        """Splat the far list (its count in the draw state, on the GPU) into `image`, the
        accumulation image, which must be `frame.viewport` in size. FrameParams is bound, and
        the cull's buffers where the cull bound them (the renderer's `_cull_agents`): the
        agents at 0, the lists at 1, the draw state at 2 (bound again, they cost the CPU)."""
        ctx = self.ctx
        self._ensure(image.size)
        self._buffer.bind_to_storage_buffer(3)
        self._args.bind_to_storage_buffer(4)
        image.bind_to_image(0, read=True, write=True)
        self._programs["args"].run(1, 1, 1)
        ctx.memory_barrier(GL_COMMAND_BARRIER_BIT | moderngl.SHADER_STORAGE_BARRIER_BIT)
        shape = int(billboard)
        if additive:
            self._programs[f"add{shape}"].run_indirect(self._args, 0)
            ctx.memory_barrier(moderngl.SHADER_STORAGE_BARRIER_BIT)
            self._programs["resolve"].run_indirect(self._args, 12)
        else:
            self._programs[f"depth{shape}"].run_indirect(self._args, 0)
            storage_barrier(ctx)
            self._programs[f"color{shape}"].run_indirect(self._args, 0)
        ctx.memory_barrier(SPLAT_TO_DRAW_BARRIERS | moderngl.SHADER_STORAGE_BARRIER_BIT)

    def release(self) -> None:
        self._programs.release()
        self._args.release()
        if self._buffer is not None:
            self._buffer.release()
            self._buffer = None
