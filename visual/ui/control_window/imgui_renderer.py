"""Dear ImGui's draw lists drawn with moderngl: the control window's renderer.

imgui-bundle's own OpenGL backends need PyOpenGL, and moderngl-window's ImGui renderer (3.1)
predates imgui 1.92's texture protocol (`ImGuiBackendFlags_RendererHasTextures`: the font
atlas grows as new sizes and glyphs are drawn, and the renderer creates, updates and destroys
its textures when asked). This one speaks that protocol, in about a hundred lines over one
moderngl context: a program (shaders/imgui.*), a vertex and an index buffer grown as needed,
one vertex array.

Textures are looked up by GL name: the font atlas's pages are this renderer's own (released
here); the preview and the slots' thumbnails are the output context's (preview.py),
borrowed by name (`borrow`) and never deleted here (moderngl does not delete an external
texture's name when the wrapper is released). Main thread only, with the control window's
context current.
"""

from __future__ import annotations

import ctypes
from typing import Any

import moderngl
from imgui_bundle import imgui

from swarm_instrument.visual.gpu.programs import ProgramOwner, ProgramSet, render_program
from swarm_instrument.visual.gpu.shaders import GLSL_410


class ImguiRenderer(ProgramOwner):
    """Draws imgui's frames into a framebuffer of `ctx` (which must be current when called)."""

    def _build_programs(self, built: dict[str, Any]) -> None:
        """shaders/imgui.vert + .frag as GLSL 4.10 (the window may be a 4.1 context), and the
        vertex array over the buffers (grown by orphaning: the same buffers, so it stays)."""
        built["program"] = render_program(self.ctx, "imgui.vert", "imgui.frag",
                                          version=GLSL_410, units={"image": 0})
        # ImDrawVert: position (2 floats), uv (2 floats), colour (4 bytes, 0..255 -> 0..1)
        built["vao"] = self.ctx.vertex_array(
            built["program"], [(self.vertices, "2f 2f 4f1", "position", "uv", "color")],
            index_buffer=self.indices, index_element_size=imgui.INDEX_SIZE)

    def __init__(self, ctx: moderngl.Context) -> None:
        self.ctx = ctx
        self.vertices = ctx.buffer(reserve=imgui.VERTEX_SIZE * 8192, dynamic=True)
        self.indices = ctx.buffer(reserve=imgui.INDEX_SIZE * 16384, dynamic=True)
        self._programs = ProgramSet(self._build_programs)
        self.textures: dict[int, moderngl.Texture] = {}  # GL name -> texture drawn with it
        self._own: set[int] = set()  # the names this renderer made (the font atlas's)
        io = imgui.get_io()
        io.backend_flags |= imgui.BackendFlags_.renderer_has_textures
        platform = imgui.get_platform_io()
        largest = int(ctx.info["GL_MAX_TEXTURE_SIZE"])
        platform.renderer_texture_max_width = platform.renderer_texture_max_height = largest

    # ---- textures ---------------------------------------------------------------------------

    def borrow(self, glo: int, size: tuple[int, int]) -> imgui.ImTextureRef:
        """A texture of another context of the share group (RGBA8, `size`), drawable here by
        the reference returned; the name stays its owner's."""
        texture = self.textures.get(glo)
        if texture is None or texture.size != tuple(size):
            if texture is not None and glo not in self._own:
                texture.release()  # the wrapper only: an external name is never deleted
            self.textures[glo] = self.ctx.external_texture(glo, tuple(size), 4, 0, "f1")
        return imgui.ImTextureRef(glo)

    def forget(self, glo: int) -> None:
        """A borrowed texture no longer shown (its owner may delete the name now)."""
        if glo not in self._own and glo in self.textures:
            self.textures.pop(glo).release()

    def _update_textures(self) -> None:
        """Create, fill and destroy the textures imgui asks for (the font atlas's pages)."""
        for data in imgui.get_platform_io().textures:
            status = data.status
            if status == imgui.ImTextureStatus.want_create:
                pixels = data.get_pixels_array()
                texture = self.ctx.texture((data.width, data.height), 4, data=pixels.tobytes())
                # Glyphs are drawn texel for pixel: nearest is exact and, on software GL,
                # cheaper than linear (the atlas bakes no lines that would need it)
                texture.filter = (moderngl.NEAREST, moderngl.NEAREST)
                self.textures[texture.glo] = texture
                self._own.add(texture.glo)
                data.set_tex_id(texture.glo)
                data.set_status(imgui.ImTextureStatus.ok)
            elif status == imgui.ImTextureStatus.want_updates:
                texture = self.textures[data.tex_id]
                pixels = data.get_pixels_array().reshape(data.height, data.width, 4)
                for rect in data.updates:
                    block = pixels[rect.y:rect.y + rect.h, rect.x:rect.x + rect.w]
                    texture.write(block.tobytes(), viewport=(rect.x, rect.y, rect.w, rect.h))
                data.set_status(imgui.ImTextureStatus.ok)
            elif status == imgui.ImTextureStatus.want_destroy and data.unused_frames > 0:
                self._destroy(data)

    def _destroy(self, data) -> None:
        texture = self.textures.pop(data.tex_id, None)
        if texture is not None:
            self._own.discard(texture.glo)
            texture.release()
        data.set_tex_id(0)
        data.set_status(imgui.ImTextureStatus.destroyed)

    # ---- drawing ----------------------------------------------------------------------------

    def render(self, draw_data: imgui.ImDrawData, framebuffer: moderngl.Framebuffer) -> None:
        """Draw one frame's draw data into `framebuffer` (its whole viewport)."""
        self._update_textures()
        scale_x, scale_y = draw_data.framebuffer_scale.x, draw_data.framebuffer_scale.y
        left, top = draw_data.display_pos.x, draw_data.display_pos.y
        width, height = draw_data.display_size.x, draw_data.display_size.y
        fb_width, fb_height = int(width * scale_x), int(height * scale_y)
        if fb_width <= 0 or fb_height <= 0:
            return
        ctx = self.ctx
        framebuffer.use()
        framebuffer.viewport = (0, 0, fb_width, fb_height)
        ctx.enable_only(moderngl.BLEND)
        ctx.blend_equation = moderngl.FUNC_ADD
        ctx.blend_func = (moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA,
                          moderngl.ONE, moderngl.ONE_MINUS_SRC_ALPHA)
        right, bottom = left + width, top + height
        # column-major: window units -> clip space
        self._programs["program"]["projection"].value = (
            2.0 / (right - left), 0.0, 0.0, 0.0,
            0.0, 2.0 / (top - bottom), 0.0, 0.0,
            0.0, 0.0, -1.0, 0.0,
            (right + left) / (left - right), (top + bottom) / (bottom - top), 0.0, 1.0)
        for commands in draw_data.cmd_lists:
            self._upload(self.vertices, commands.vtx_buffer, imgui.VERTEX_SIZE)
            self._upload(self.indices, commands.idx_buffer, imgui.INDEX_SIZE)
            for command in commands.cmd_buffer:
                clip = command.clip_rect
                x0, y0 = (clip.x - left) * scale_x, (clip.y - top) * scale_y
                x1, y1 = (clip.z - left) * scale_x, (clip.w - top) * scale_y
                if x1 <= x0 or y1 <= y0:
                    continue
                texture = self.textures.get(command.get_tex_id())
                if texture is None:  # a picture given back since the frame was built
                    continue
                framebuffer.scissor = (int(x0), int(fb_height - y1), int(x1 - x0), int(y1 - y0))
                texture.use(0)
                self._programs["vao"].render(moderngl.TRIANGLES, vertices=command.elem_count,
                                first=command.idx_offset)
        framebuffer.scissor = None

    @staticmethod
    def _upload(buffer: moderngl.Buffer, items, item_size: int) -> None:
        """imgui's vertex or index array into `buffer`, grown (orphaned) when too small."""
        size = items.size() * item_size
        if size > buffer.size:
            buffer.orphan(max(size, buffer.size * 2))
        if size:
            buffer.write((ctypes.c_byte * size).from_address(items.data_address()))

    def release(self) -> None:
        """Every texture made here, the wrappers of those borrowed, and the buffers."""
        for data in imgui.get_platform_io().textures:
            if data.tex_id in self._own:
                self._destroy(data)
        for texture in self.textures.values():
            texture.release()
        self.textures.clear()
        self._own.clear()
        self._programs.release()
        self.vertices.release()
        self.indices.release()
