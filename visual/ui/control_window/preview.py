"""Pictures for the control window, copied on the GPU, never read back: the live preview of
the output (each frame scaled into a small texture) and the preset slots' thumbnails.

Both live in the output window's context and are shown by the control window's, which pyglet
makes in the same share group: textures are shared between the two contexts (framebuffers and
vertex arrays are not, so every framebuffer here is the output context's own). The owner of
each texture is the class here, which releases it once; the control window only borrows the
texture's GL name (control_window.py). Main thread only.
"""

from __future__ import annotations

import moderngl

from swarm_instrument.visual.output.readback import (
    GL_BACK,
    GL_COLOR_ATTACHMENT0,
    GL_COLOR_BUFFER_BIT,
    GL_DRAW_FRAMEBUFFER,
    GL_LINEAR,
    GL_READ_FRAMEBUFFER,
    GL_SCISSOR_TEST,
    _gl_for,
)


def blit(ctx: moderngl.Context, source: moderngl.Framebuffer, source_size: tuple[int, int],
         target: moderngl.Framebuffer, target_size: tuple[int, int]) -> None:
    """Scale `source`'s first `source_size` pixels into the whole of `target`
    (glBlitFramebuffer, linear filter; moderngl's copy_framebuffer does not scale); the
    framebuffer moderngl had bound is bound again."""
    gl = _gl_for(ctx)
    scissor = gl.glIsEnabled(GL_SCISSOR_TEST)
    if scissor:
        gl.glDisable(GL_SCISSOR_TEST)  # a blit honours the scissor box
    bound = ctx.fbo
    gl.glBindFramebuffer(GL_READ_FRAMEBUFFER, source.glo)
    gl.glReadBuffer(GL_BACK if source.glo == 0 else GL_COLOR_ATTACHMENT0)
    gl.glBindFramebuffer(GL_DRAW_FRAMEBUFFER, target.glo)
    gl.glBlitFramebuffer(0, 0, int(source_size[0]), int(source_size[1]), 0, 0,
                         int(target_size[0]), int(target_size[1]), GL_COLOR_BUFFER_BIT,
                         GL_LINEAR)
    if scissor:
        gl.glEnable(GL_SCISSOR_TEST)
    (bound or source).use()


class SharedImage:
    """An RGBA8 texture with a framebuffer on it, in the output context: what a blit fills and
    the control window draws."""

    def __init__(self, ctx: moderngl.Context, size: tuple[int, int]) -> None:
        self.ctx = ctx
        self.size = (int(size[0]), int(size[1]))
        self.texture = ctx.texture(self.size, 4)
        self.texture.filter = (moderngl.LINEAR, moderngl.LINEAR)
        self.framebuffer = ctx.framebuffer([self.texture])
        self.framebuffer.use()
        self.framebuffer.clear(0.0, 0.0, 0.0, 1.0)
        self.filled = False

    @property
    def glo(self) -> int:
        return self.texture.glo

    def fill(self, source: moderngl.Framebuffer, source_size: tuple[int, int]) -> None:
        blit(self.ctx, source, source_size, self.framebuffer, self.size)
        self.filled = True

    def release(self) -> None:
        if self.ctx.fbo is self.framebuffer:
            (self.ctx.screen or self.ctx.detect_framebuffer(0)).use()
        self.framebuffer.release()
        self.texture.release()


class Preview:
    """The output's picture, scaled into a texture `width` pixels wide each frame, before the
    HUD (a frame taker of the one loop, as the video outputs are: show/loop.py). Its height
    follows the output's shape at the first frame; a later change of shape is stretched."""

    def __init__(self, ctx: moderngl.Context, width: int = 480) -> None:
        self.ctx = ctx
        self.width = int(width)
        self.image: SharedImage | None = None
        self.frames = 0

    def take(self, framebuffer: moderngl.Framebuffer, size: tuple[int, int],
             now: float) -> None:
        if self.image is None:
            height = max(2, round(self.width * size[1] / max(size[0], 1)))
            self.image = SharedImage(self.ctx, (self.width, height))
        self.image.fill(framebuffer, size)
        self.frames += 1

    def release(self) -> None:
        if self.image is not None:
            self.image.release()
            self.image = None


class Thumbnails:
    """One texture per preset slot (1-9), filled by copying a finished offscreen render."""

    def __init__(self, ctx: moderngl.Context, size: tuple[int, int], slots: int = 9) -> None:
        self.size = (int(size[0]), int(size[1]))
        self.images = {slot: SharedImage(ctx, self.size) for slot in range(1, slots + 1)}

    def fill(self, slot: int, source: moderngl.Framebuffer) -> None:
        self.images[slot].fill(source, source.size)

    def release(self) -> None:
        for image in self.images.values():
            image.release()
        self.images.clear()
