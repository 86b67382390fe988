"""The post chain on OpenGL 4.1 core (macOS): the same bloom, feedback and tone mapping as
`visual.post.post_chain.PostChain`, the same PostParams block and settings, with the HDR passes as
full-screen fragment passes (no compute shaders or image stores in 4.1): each draws into its
level's framebuffer, and the upsample mixes into the finer level by blending (ONE,
ONE_MINUS_SRC_ALPHA) where the compute pass reads and writes the image. The display pass is
the compute chain's own (shaders/post_display.frag), compiled as GLSL 4.10. Main thread only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import moderngl

from swarm_instrument.visual.gpu.programs import render_program
from swarm_instrument.visual.gpu.shaders import GLSL_410
from swarm_instrument.visual.gpu.uniforms import POST_PARAMS
from swarm_instrument.visual.post.post_chain import PostChain, _Image

SAMPLER_UNITS = {"u_source": 0, "u_scene": 0, "u_bloom": 1, "u_history": 2}
NO_PARAMS_41 = frozenset({"gl41_post_downsample.frag", "post_upscale.frag"})


class PostChain41(PostChain):
    """`PostChain` in fragment passes (see the module's comment)."""

    PASS_FILES = {"prefilter": "gl41_post_prefilter.frag",
                  "downsample": "gl41_post_downsample.frag",
                  "upsample": "gl41_post_upsample.frag", "composite": "gl41_post_composite.frag",
                  "display": "post_display.frag", "upscale": "post_upscale.frag"}

    @staticmethod
    def _compile(ctx: moderngl.Context, fragment: str, folder: Path,
                 defines: Mapping[str, Any]) -> Any:
        block = None if fragment in NO_PARAMS_41 else POST_PARAMS
        return render_program(ctx, "post_triangle.vert", fragment, defines, folder,
                              version=GLSL_410, block=block, units=SAMPLER_UNITS)

    def _dispatch(self, name: str, out: _Image, read: bool = False) -> None:
        """A full-screen pass into `out`; `read` (the upsample): mixed into what `out` holds
        by blending, as the fragment chain did."""
        ctx = self.ctx
        out.framebuffer.use()
        if read:
            ctx.enable(moderngl.BLEND)
            ctx.blend_func = moderngl.ONE, moderngl.ONE_MINUS_SRC_ALPHA
            ctx.blend_equation = moderngl.FUNC_ADD
        self._draw(name)
        if read:
            ctx.disable(moderngl.BLEND)
