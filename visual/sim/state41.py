"""The GL 4.1 swarm's textures and the shapes of its passes: the agents' state textures (agent k
at texel (k % STATE_WIDTH, k // STATE_WIDTH)), the bitonic sort's network as fragment passes,
and its GLSL 4.10 programs (visual/sim/swarm41.py runs them; the renderer's 4.1 twin reads the
state textures). Main thread only for the GL parts; the network's shapes are pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import moderngl

from swarm_instrument.visual.gpu.programs import render_program
from swarm_instrument.visual.gpu.shaders import GLSL_410
from swarm_instrument.visual.gpu.uniforms import SWARM_PARAMS

STATE_WIDTH = 1024  # texels a row of the state and pair textures: 16,384 rows hold MAX_COUNT
STATE_UNITS = {"agent_positions": 0, "agent_velocities": 1, "pairs": 2, "cell_table": 3}


def state_rows(count: int) -> int:
    return -(-count // STATE_WIDTH)


def sort_rows(count: int) -> int:
    """Rows of the pair textures: a power of two, so that the entries are too."""
    return 1 << max(0, math.ceil(math.log2(state_rows(count))))


def sort_stages(entries: int) -> list[tuple[int, int]]:
    """(block, stride) of each stage of the bitonic network over `entries` (a power of two)."""
    stages = []
    block = 2
    while block <= entries:
        stride = block // 2
        while stride >= 1:
            stages.append((block, stride))
            stride //= 2
        block *= 2
    return stages


def sort_passes(entries: int, most: int = 3) -> list[tuple[int, int, int]]:
    """(block, first stride, stages) of each fragment pass: a block's stages, `most` at a time
    (shaders/gl41_sort.frag runs up to three in one pass: 77 passes at 2^20 entries where one
    a stage would be 210)."""
    passes = []
    block = 2
    while block <= entries:
        stride = block // 2
        while stride >= 1:
            stages = min(most, stride.bit_length())  # strides stride .. 1 remain
            passes.append((block, stride, stages))
            stride >>= stages
        block *= 2
    return passes


def program_410(ctx: moderngl.Context, vertex: str, fragment: str | None, folder: Path,
                defines: Mapping[str, Any] | None = None, *, varyings: Sequence[str] = (),
                separate: bool = False, block: Any = SWARM_PARAMS) -> moderngl.Program:
    """One of this backend's GLSL 4.10 programs (visual/gpu/programs.py `render_program`):
    SwarmParams and the state's samplers bound unless said otherwise."""
    return render_program(ctx, vertex, fragment, defines, folder, version=GLSL_410,
                          varyings=varyings, separate=separate, block=block, units=STATE_UNITS)


def release_framebuffer(framebuffer: moderngl.Framebuffer) -> None:
    """Release a framebuffer, first binding another where it is moderngl's current one
    (moderngl binds its current framebuffer again after making another: a deleted one is
    GL_INVALID_OPERATION). Standalone contexts have no screen."""
    ctx = framebuffer.ctx
    if ctx.fbo is framebuffer:
        (ctx.screen or ctx.detect_framebuffer(0)).use()
    framebuffer.release()


class StateTextures:
    """Position and velocity textures for `count` agents, and a framebuffer drawing both."""

    def __init__(self, ctx: moderngl.Context, count: int) -> None:
        size = (STATE_WIDTH, state_rows(count))
        self.positions = ctx.texture(size, 4, dtype="f4")
        self.velocities = ctx.texture(size, 4, dtype="f4")
        for texture in (self.positions, self.velocities):
            texture.filter = (moderngl.NEAREST, moderngl.NEAREST)
        self.framebuffer = ctx.framebuffer([self.positions, self.velocities])

    def use(self, first_unit: int = 0) -> None:
        self.positions.use(first_unit)
        self.velocities.use(first_unit + 1)

    def release(self) -> None:
        release_framebuffer(self.framebuffer)
        self.positions.release()
        self.velocities.release()
