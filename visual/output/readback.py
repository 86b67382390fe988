"""Frames brought back from the GPU for the video outputs without the frame ever waiting: a
ring of pixel buffers, each filled by the GPU and read once a GL fence says it is done, a frame
or two later.

    capture(framebuffer, size, tag)   main thread, after the frame is drawn: the frame is
                                      scaled (and turned top row first) into this ring's own
                                      framebuffer by glBlitFramebuffer, then glReadPixels into
                                      a free pixel buffer (asynchronous: the copy is queued on
                                      the GPU) and a fence after it. False when no buffer is
                                      free: the caller counts a dropped frame.
    poll()                            main thread, each frame: the slots whose fences have
                                      signalled, oldest first. Never waits.
    pixels(slot)                      any thread: the slot's frame, (height, width, 4) RGBA,
                                      top row first
    give_back(slot)                   any thread: done with it, the slot may be filled again

Where the driver has glBufferStorage (GL 4.4, or ARB_buffer_storage: Mesa, NVIDIA) the buffers
are mapped once, persistently and coherently, so `pixels` is a view of memory the GPU wrote
and no copy happens on the frame thread: the output's own thread copies the frame out. Without
it, `poll` copies a finished buffer into an array (glGetBufferSubData) on the main thread.
Without fences, a buffer is read `depth - 1` captures later, which waits if the GPU is further
behind. moderngl has no fences, pixel pack buffers or scaled blits, so those calls go through
ctypes, as visual/gpu/fence.py does; the framebuffer moderngl had bound is bound again after each.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import moderngl
import numpy as np

from swarm_instrument.visual.gpu.fence import Fences, _proc_loader, fences_for

GL_PIXEL_PACK_BUFFER = 0x88EB
GL_READ_FRAMEBUFFER = 0x8CA8
GL_DRAW_FRAMEBUFFER = 0x8CA9
GL_COLOR_BUFFER_BIT = 0x4000
GL_NEAREST = 0x2600
GL_LINEAR = 0x2601
GL_RGBA = 0x1908
GL_UNSIGNED_BYTE = 0x1401
GL_BACK = 0x0405
GL_COLOR_ATTACHMENT0 = 0x8CE0
GL_SCISSOR_TEST = 0x0C11
GL_STREAM_READ = 0x88E1
GL_MAP_READ_BIT = 0x0001
GL_MAP_PERSISTENT_BIT = 0x0040
GL_MAP_COHERENT_BIT = 0x0080
GL_CLIENT_STORAGE_BIT = 0x0200
PERSISTENT_READ = GL_MAP_READ_BIT | GL_MAP_PERSISTENT_BIT | GL_MAP_COHERENT_BIT

_uint, _int, _sizeiptr, _void_p = ctypes.c_uint, ctypes.c_int, ctypes.c_ssize_t, ctypes.c_void_p
# name: (restype, argtypes); the optional ones may be missing (GL 4.4's buffer storage).
_SIGNATURES: dict[str, tuple[Any, tuple]] = {
    "glGenBuffers": (None, (_int, ctypes.POINTER(_uint))),
    "glDeleteBuffers": (None, (_int, ctypes.POINTER(_uint))),
    "glBindBuffer": (None, (_uint, _uint)),
    "glBufferData": (None, (_uint, _sizeiptr, _void_p, _uint)),
    "glGetBufferSubData": (None, (_uint, _sizeiptr, _sizeiptr, _void_p)),
    "glUnmapBuffer": (ctypes.c_ubyte, (_uint,)),
    "glBindFramebuffer": (None, (_uint, _uint)),
    "glReadBuffer": (None, (_uint,)),
    "glBlitFramebuffer": (None, (_int,) * 8 + (_uint, _uint)),
    "glReadPixels": (None, (_int, _int, _int, _int, _uint, _uint, _void_p)),
    "glIsEnabled": (ctypes.c_ubyte, (_uint,)),
    "glEnable": (None, (_uint,)),
    "glDisable": (None, (_uint,)),
}
_OPTIONAL: dict[str, tuple[Any, tuple]] = {
    "glBufferStorage": (None, (_uint, _sizeiptr, _void_p, _uint)),
    "glMapBufferRange": (_void_p, (_uint, _sizeiptr, _sizeiptr, _uint)),
    # visual/gpu/fence.py finds these through EGL or GLX; a WGL context (Windows) gets them here
    "glFenceSync": (_void_p, (_uint, _uint)),
    "glClientWaitSync": (_uint, (_void_p, _uint, ctypes.c_uint64)),
    "glDeleteSync": (None, (_void_p,)),
}


def _wgl_loader() -> Any:
    """Windows: wglGetProcAddress for what came after GL 1.1, opengl32's own exports for the
    rest; None when no WGL context is current. (Written for Spout; exercised only on Linux's
    EGL and GLX here.)"""
    if sys.platform != "win32":
        return None
    try:
        opengl32 = ctypes.WinDLL("opengl32")
    except OSError:
        return None
    opengl32.wglGetCurrentContext.restype = _void_p
    if not opengl32.wglGetCurrentContext():
        return None
    get_proc = opengl32.wglGetProcAddress
    get_proc.restype, get_proc.argtypes = _void_p, [ctypes.c_char_p]

    def load(name: bytes) -> int | None:
        address = get_proc(name)
        if address in (None, 1, 2, 3, -1):  # what some drivers return for "no such function"
            address = None
        if not address and hasattr(opengl32, name.decode()):
            address = ctypes.cast(getattr(opengl32, name.decode()), _void_p).value
        return address

    return load


class ReadbackUnavailable(RuntimeError):
    """The current context lacks what a readback needs (no GL entry points reachable)."""


class _Gl:
    """The GL calls a readback makes, looked up once per context (which must be current)."""

    def __init__(self) -> None:
        loader = _proc_loader()
        self.wgl = loader is None
        loader = loader or _wgl_loader()
        if loader is None:
            raise ReadbackUnavailable("no EGL, GLX or WGL context is current")
        library = None
        for name in ("OpenGL", "GL"):  # core entry points some loaders do not hand out
            found = ctypes.util.find_library(name)
            if found:
                try:
                    library = ctypes.CDLL(found)
                    break
                except OSError:
                    continue
        for table, required in ((_SIGNATURES, True), (_OPTIONAL, False)):
            for name, (restype, argtypes) in table.items():
                address = loader(name.encode())
                if not address and library is not None and hasattr(library, name):
                    address = ctypes.cast(getattr(library, name), _void_p).value
                if not address:
                    if required:
                        raise ReadbackUnavailable(f"{name} is not reachable")
                    setattr(self, name, None)
                    continue
                setattr(self, name, ctypes.CFUNCTYPE(restype, *argtypes)(address))

    @property
    def persistent(self) -> bool:
        return self.glBufferStorage is not None and self.glMapBufferRange is not None

    def fences(self) -> Fences | None:
        """Fences from these entry points (where visual/gpu/fence.py found none: WGL)."""
        if not self.wgl or None in (self.glFenceSync, self.glClientWaitSync,
                                    self.glDeleteSync):
            return None
        return Fences(self.glFenceSync, self.glClientWaitSync, self.glDeleteSync)


_GL_BY_CONTEXT: weakref.WeakKeyDictionary[moderngl.Context, _Gl] = weakref.WeakKeyDictionary()


def _gl_for(ctx: moderngl.Context) -> _Gl:
    """The calls of `ctx` (which must be current), looked up once per context."""
    if ctx not in _GL_BY_CONTEXT:
        _GL_BY_CONTEXT[ctx] = _Gl()
    return _GL_BY_CONTEXT[ctx]


FREE, IN_FLIGHT, READY = "free", "in flight", "ready"


@dataclass
class _Slot:
    buffer: int  # the GL buffer's name
    pointer: int | None  # where it is mapped (persistent), else None
    state: str = FREE
    fence: int = 0
    tag: Any = None
    copy: np.ndarray | None = None  # without persistent mapping: the frame, copied at poll
    order: int = 0  # capture number, to hand frames over oldest first


class PixelReadback:
    """A ring of `depth` pixel buffers of `size` (width, height): RGBA frames, top row first.
    One owner (an output) releases it once, on the thread that owns the context."""

    def __init__(self, ctx: moderngl.Context, size: tuple[int, int], depth: int = 3, *,
                 persistent: bool | None = None) -> None:
        self.ctx = ctx
        self.size = (int(size[0]), int(size[1]))
        self.depth = int(depth)
        self.gl = _gl_for(ctx)
        self.fences: Fences | None = fences_for(ctx) or self.gl.fences()
        wanted = self.gl.persistent if persistent is None else persistent
        self.persistent = bool(wanted and self.gl.persistent and self.fences is not None)
        self.nbytes = self.size[0] * self.size[1] * 4
        self._color = ctx.renderbuffer(self.size, 4)
        self._framebuffer = ctx.framebuffer([self._color])
        self._lock = threading.Lock()  # pixels() and release() never overlap
        self._slots = [self._new_slot() for _ in range(self.depth)]
        self._captures = 0
        self._released = False

    # ---- set-up -----------------------------------------------------------------------------

    def _new_slot(self) -> _Slot:
        gl = self.gl
        name = _uint(0)
        gl.glGenBuffers(1, ctypes.byref(name))
        gl.glBindBuffer(GL_PIXEL_PACK_BUFFER, name.value)
        pointer = None
        if self.persistent:
            gl.glBufferStorage(GL_PIXEL_PACK_BUFFER, self.nbytes, None,
                               PERSISTENT_READ | GL_CLIENT_STORAGE_BIT)
            pointer = gl.glMapBufferRange(GL_PIXEL_PACK_BUFFER, 0, self.nbytes, PERSISTENT_READ)
            if not pointer:  # the driver refused the mapping: copy at poll instead
                gl.glBindBuffer(GL_PIXEL_PACK_BUFFER, 0)
                gl.glDeleteBuffers(1, ctypes.byref(name))
                self.persistent = False
                return self._new_slot()
        else:
            gl.glBufferData(GL_PIXEL_PACK_BUFFER, self.nbytes, None, GL_STREAM_READ)
        gl.glBindBuffer(GL_PIXEL_PACK_BUFFER, 0)
        return _Slot(name.value, pointer)

    # ---- main thread ------------------------------------------------------------------------

    @property
    def free_slots(self) -> int:
        return sum(slot.state == FREE for slot in self._slots)

    @property
    def in_flight(self) -> int:
        """Captures the GPU has not finished (or poll has not seen finished) yet."""
        return sum(slot.state == IN_FLIGHT for slot in self._slots)

    def capture(self, source: moderngl.Framebuffer, source_size: tuple[int, int],
                tag: Any = None) -> bool:
        """Queue a copy of `source`'s first `source_size` pixels into a free buffer; False
        (nothing queued) when every buffer is still in flight or being read."""
        slot = next((s for s in self._slots if s.state == FREE), None)
        if slot is None:
            return False
        gl = self.gl
        width, height = self.size
        source_width, source_height = int(source_size[0]), int(source_size[1])
        scissor = gl.glIsEnabled(GL_SCISSOR_TEST)
        if scissor:
            gl.glDisable(GL_SCISSOR_TEST)  # a blit honours the scissor box
        gl.glBindFramebuffer(GL_READ_FRAMEBUFFER, source.glo)
        gl.glReadBuffer(GL_BACK if source.glo == 0 else GL_COLOR_ATTACHMENT0)
        gl.glBindFramebuffer(GL_DRAW_FRAMEBUFFER, self._framebuffer.glo)
        same = (source_width, source_height) == (width, height)
        # Destination rows reversed: the ring holds frames top row first, as every receiver
        # wants them, and no one flips them on the CPU.
        gl.glBlitFramebuffer(0, 0, source_width, source_height, 0, height, width, 0,
                             GL_COLOR_BUFFER_BIT, GL_NEAREST if same else GL_LINEAR)
        gl.glBindFramebuffer(GL_READ_FRAMEBUFFER, self._framebuffer.glo)
        gl.glReadBuffer(GL_COLOR_ATTACHMENT0)
        gl.glBindBuffer(GL_PIXEL_PACK_BUFFER, slot.buffer)
        gl.glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, None)  # offset 0
        gl.glBindBuffer(GL_PIXEL_PACK_BUFFER, 0)
        if scissor:
            gl.glEnable(GL_SCISSOR_TEST)
        source.use()  # moderngl's bound framebuffer, bound again
        slot.fence = self.fences.insert() if self.fences is not None else 0
        slot.state, slot.tag, slot.copy = IN_FLIGHT, tag, None
        slot.order = self._captures
        self._captures += 1
        return True

    def poll(self) -> list[int]:
        """Slots whose frames the GPU has finished since the last poll, oldest first; each is
        READY until `give_back`. Never waits (without fences: a slot `depth - 1` captures old,
        whose read may wait)."""
        flying = sorted((s for s in self._slots if s.state == IN_FLIGHT), key=lambda s: s.order)
        done: list[_Slot] = []
        if self.fences is None:
            newest = self._captures - 1
            done = [s for s in flying if newest - s.order >= self.depth - 1]
        else:
            for slot in flying:  # fences of one context signal in order
                if not self.fences.signalled(slot.fence):
                    break
                done.append(slot)
        ready = []
        for slot in done:
            if self.fences is not None:
                self.fences.delete(slot.fence)
            slot.fence = 0
            if not self.persistent:
                slot.copy = np.empty((self.size[1], self.size[0], 4), np.uint8)
                self.gl.glBindBuffer(GL_PIXEL_PACK_BUFFER, slot.buffer)
                self.gl.glGetBufferSubData(GL_PIXEL_PACK_BUFFER, 0, self.nbytes,
                                           slot.copy.ctypes.data)
                self.gl.glBindBuffer(GL_PIXEL_PACK_BUFFER, 0)
            slot.state = READY
            ready.append(self._slots.index(slot))
        return ready

    def tag(self, slot: int) -> Any:
        return self._slots[slot].tag

    # ---- any thread -------------------------------------------------------------------------

    def copy_out(self, slot: int, into: np.ndarray | None = None) -> np.ndarray:
        """The slot's frame copied into `into` (or a new array) and the slot given back: what
        an output's thread does first, so no buffer is held while it sends."""
        with self._lock:
            if self._released:
                raise ReadbackUnavailable("the readback was released")
            frame = self._view(self._slots[slot])
            if into is None or into.shape != frame.shape:
                into = np.empty(frame.shape, np.uint8)
            np.copyto(into, frame)
            self._slots[slot].state = FREE
            self._slots[slot].copy = None
        return into

    def pixels(self, slot: int) -> np.ndarray:
        """A READY slot's frame: (height, width, 4) uint8, RGBA, top row first. Persistent
        buffers: a view of the mapped memory, valid until `give_back`."""
        return self._view(self._slots[slot])

    def give_back(self, slot: int) -> None:
        self._slots[slot].state = FREE
        self._slots[slot].copy = None

    def _view(self, slot: _Slot) -> np.ndarray:
        shape = (self.size[1], self.size[0], 4)
        if slot.pointer is None:
            if slot.copy is None:
                raise ReadbackUnavailable("the slot holds no finished frame")
            return slot.copy
        memory = (ctypes.c_uint8 * self.nbytes).from_address(slot.pointer)
        return np.frombuffer(memory, np.uint8).reshape(shape)

    # ---- the end ----------------------------------------------------------------------------

    def release(self) -> None:
        """Free the buffers and the framebuffer (main thread, context current). Waits for an
        output thread's copy in progress, never for a send."""
        with self._lock:
            if self._released:
                return
            self._released = True
            gl = self.gl
            for slot in self._slots:
                if slot.fence and self.fences is not None:
                    self.fences.delete(slot.fence)
                name = _uint(slot.buffer)
                if slot.pointer is not None:
                    gl.glBindBuffer(GL_PIXEL_PACK_BUFFER, slot.buffer)
                    gl.glUnmapBuffer(GL_PIXEL_PACK_BUFFER)
                    gl.glBindBuffer(GL_PIXEL_PACK_BUFFER, 0)
                gl.glDeleteBuffers(1, ctypes.byref(name))
            self._slots = []
            self._framebuffer.release()
            self._color.release()
