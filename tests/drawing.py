"""Drawing for the renderer's tests: a renderer that keeps the parameters a test draws with
(the show hands the renderer its values each frame; these tests set them once), and one frame
read back as an image."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import moderngl
import numpy as np

from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.visual.render.camera import OrbitCamera
from swarm_instrument.visual.render.renderer import Renderer
from swarm_instrument.visual.render.renderer41 import Renderer41


class _Drawing:
    """A renderer drawing with `params`, a frame's `values` on top where a test gives them."""

    def __init__(self, ctx: moderngl.Context, params: Params | None = None, **kwargs: Any):
        super().__init__(ctx, **kwargs)
        self.params = params if params is not None else Params()

    def render(self, swarm: Any, camera: OrbitCamera, framebuffer: moderngl.Framebuffer,
               values: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().render(swarm, camera, framebuffer, {**self.params.as_dict(), **(values or {})},
                       **kwargs)


class Drawn(_Drawing, Renderer):
    """`Renderer` (compute) drawing with `params`."""


class Drawn41(_Drawing, Renderer41):
    """`Renderer41` (GL 4.1) drawing with `params`."""


def render_offscreen(ctx: moderngl.Context, renderer: Drawn, swarm: Any, camera: OrbitCamera,
                     size: Sequence[int], *, lure: Sequence[float] = (0.0, 0.0, 0.0),
                     time: float | None = None,
                     values: Mapping[str, Any] | None = None) -> np.ndarray:
    """One frame as an (height, width, 3) uint8 RGB image, top row first (waits for the GPU)."""
    framebuffer = renderer.offscreen_framebuffer((int(size[0]), int(size[1])))
    renderer.render(swarm, camera, framebuffer, values, lure=lure, time=time)
    pixels = framebuffer.read(components=3, alignment=1)
    image = np.frombuffer(pixels, np.uint8).reshape(size[1], size[0], 3)
    return image[::-1].copy()
