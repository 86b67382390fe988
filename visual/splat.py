"""Far agents splatted by compute passes instead of drawn as GL points (issue 17).

The H200's raster front end is modest: 4M far agents as points took 8 ms of a 13.4 ms frame
there, most of it spent rasterising. `FarSplat` draws the cull pass's far list into the HDR
accumulation image with shaders/splat.comp, before the near agents' meshes are rasterised over
it (a near agent is nearer than any far one on the same pixel), the same pixels and colours as
the points (tests/test_splat.py compares the two):

    opaque    SPLAT_DEPTH: the nearest far agent of each pixel (an atomicMax on its inverted
              depth bits and low index bits), then SPLAT_COLOR: that agent writes its colour
    additive  SPLAT_ADD: every far agent adds its light in fixed point (the same sum in any
              order), then splat_resolve.comp adds the sums into the image
    resolve   every pixel's splat state back to empty for the next frame

Owns its programs and its per-pixel buffer (three uints a pixel). Main thread only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import moderngl

from visual.gl import compute_program, dispatch_1d, resolve_shader_dir, storage_barrier
from visual.grid import zeroed
from visual.uniforms import FRAME_PARAMS

LOCAL_SIZE = 256
RESOLVE_TILE = 16  # splat_resolve.comp's 16x16 workgroups
SPLAT_SCALE = 16384.0  # fixed point of added light: a pixel holds up to 262,144 (HDR) units
GL_FRAMEBUFFER_BARRIER_BIT = 0x00000400
GL_SHADER_IMAGE_ACCESS_BARRIER_BIT = 0x00000020
GL_TEXTURE_FETCH_BARRIER_BIT = 0x00000008
# After the splat: the rasteriser blends over the image, the post chain samples and loads it.
SPLAT_TO_DRAW_BARRIERS = (GL_FRAMEBUFFER_BARRIER_BIT | GL_SHADER_IMAGE_ACCESS_BARRIER_BIT
                          | GL_TEXTURE_FETCH_BARRIER_BIT)
PASSES = {"depth": {"SPLAT_DEPTH": 1, "SPLAT_COLOR": 0},
          "color": {"SPLAT_DEPTH": 0, "SPLAT_COLOR": 1},
          "add": {"SPLAT_DEPTH": 0, "SPLAT_COLOR": 0}}


class FarSplat:
    """The far agents' compute splat. `defines`: agent_color.glsl's (SPEED_RAMP,
    ADDITIVE_CROWD), the renderer's."""

    def __init__(self, ctx: moderngl.Context, defines: Mapping[str, Any], *,
                 shader_dir: Path | None = None) -> None:
        self.ctx = ctx
        self.defines = dict(defines)
        self.shader_dir = resolve_shader_dir(shader_dir)
        self._programs = self._build_programs()
        self._buffer: moderngl.Buffer | None = None
        self._pixels = 0

    def _build_programs(self) -> dict[str, moderngl.ComputeShader]:
        built: dict[str, moderngl.ComputeShader] = {}
        scale = {"SPLAT_SCALE": f"{SPLAT_SCALE:.1f}"}
        try:
            for billboard in (0, 1):
                for name, switches in PASSES.items():
                    built[f"{name}{billboard}"] = compute_program(
                        self.ctx, "splat.comp", {**self.defines, **scale, **switches,
                                                 "LOCAL_SIZE": LOCAL_SIZE,
                                                 "BILLBOARD": billboard},
                        self.shader_dir, FRAME_PARAMS)
            for additive in (0, 1):
                built[f"resolve{additive}"] = compute_program(
                    self.ctx, "splat_resolve.comp", {**scale, "SPLAT_ADDITIVE": additive},
                    self.shader_dir, FRAME_PARAMS)
        except Exception:
            for program in built.values():
                program.release()
            raise
        return built

    def reload_shaders(self) -> None:
        """Recompile; on an error (ShaderError, raised) the running programs stay."""
        programs = self._build_programs()
        for program in self._programs.values():
            program.release()
        self._programs = programs

    def _ensure(self, size: tuple[int, int]) -> None:
        pixels = size[0] * size[1]
        if pixels != self._pixels:
            if self._buffer is not None:
                self._buffer.release()
            self._buffer = zeroed(self.ctx, 3 * 4 * pixels)  # empty: zeros
            self._pixels = pixels

    def draw(self, agents: moderngl.Buffer, visible: moderngl.Buffer,
             draw_state: moderngl.Buffer, image: moderngl.Texture, capacity: int, *,
             additive: bool, billboard: bool) -> None:
        """Splat the far list (its count in `draw_state`, on the GPU) into `image`, the
        accumulation image, which must be `frame.viewport` in size. FrameParams is bound."""
        ctx = self.ctx
        self._ensure(image.size)
        agents.bind_to_storage_buffer(0)
        visible.bind_to_storage_buffer(1)
        draw_state.bind_to_storage_buffer(2)
        self._buffer.bind_to_storage_buffer(3)
        image.bind_to_image(0, read=True, write=True)
        shape = int(billboard)
        if additive:
            dispatch_1d(self._programs[f"add{shape}"], capacity, LOCAL_SIZE)
        else:
            dispatch_1d(self._programs[f"depth{shape}"], capacity, LOCAL_SIZE)
            storage_barrier(ctx)
            dispatch_1d(self._programs[f"color{shape}"], capacity, LOCAL_SIZE)
        ctx.memory_barrier(moderngl.SHADER_STORAGE_BARRIER_BIT
                           | GL_SHADER_IMAGE_ACCESS_BARRIER_BIT)
        width, height = image.size
        self._programs[f"resolve{int(additive)}"].run(-(-width // RESOLVE_TILE),
                                                      -(-height // RESOLVE_TILE), 1)
        ctx.memory_barrier(SPLAT_TO_DRAW_BARRIERS | moderngl.SHADER_STORAGE_BARRIER_BIT)

    def release(self) -> None:
        for program in self._programs.values():
            program.release()
        self._programs = {}
        if self._buffer is not None:
            self._buffer.release()
            self._buffer = None
