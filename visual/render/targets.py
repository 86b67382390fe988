"""The images the renderer draws into, one owner for them all: the accumulation image it keeps
between frames (so trails can fade) and the offscreen framebuffers a caller asks for by size (a
headless run, a render, a preview). Main thread only.
"""

from __future__ import annotations

from typing import Any

import moderngl


class Targets:
    """Framebuffers made on demand and kept until `release()`."""

    def __init__(self, ctx: moderngl.Context) -> None:
        self.ctx = ctx
        self._accumulation: moderngl.Framebuffer | None = None
        self._accumulation_parts: list[Any] = []
        self._offscreen: dict[tuple[int, int], tuple[moderngl.Framebuffer, list[Any]]] = {}

    def accumulation(self, size: tuple[int, int], background: tuple[float, float, float]
                     ) -> moderngl.Framebuffer:
        """A float colour image kept between frames (so a trail fades smoothly to the exact
        background instead of sticking at 8-bit rounding) and a depth buffer; a new size
        starts from `background`."""
        if self._accumulation is not None and self._accumulation.size == size:
            return self._accumulation
        self._release_parts(self._accumulation, self._accumulation_parts)
        color = self.ctx.texture(size, 4, dtype="f2")  # the post chain samples it
        depth = self.ctx.depth_renderbuffer(size)
        self._accumulation = self.ctx.framebuffer([color], depth)
        self._accumulation_parts = [color, depth]
        self._accumulation.use()
        self._accumulation.clear(*background, 1.0, depth=1.0)
        return self._accumulation

    def offscreen(self, size: tuple[int, int]) -> moderngl.Framebuffer:
        """An RGBA8 framebuffer with depth of `size`: one a size, kept until `release()`, so a
        caller may hold several (a preview and a full-size render). Its colour is a texture,
        so a render's frames can be turned into video on the GPU (visual/output/yuv.py)."""
        size = (int(size[0]), int(size[1]))
        if size not in self._offscreen:
            color = self.ctx.texture(size, 4)
            depth = self.ctx.depth_renderbuffer(size)
            self._offscreen[size] = (self.ctx.framebuffer([color], depth), [color, depth])
        return self._offscreen[size][0]

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

    def release(self) -> None:
        self._release_parts(self._accumulation, self._accumulation_parts)
        self._accumulation = None
        for framebuffer, parts in self._offscreen.values():
            self._release_parts(framebuffer, parts)
        self._offscreen.clear()
