"""GL fence syncs through ctypes: moderngl has none, and without them reading a result back
(a counter buffer, a timer query) waits for the GPU whenever it is behind.

    fences = Fences.for_current_context()   # None where the driver's entry points are missing
    token = fences.insert()                 # after the commands whose results we want
    if fences.signalled(token): ...         # never waits: glClientWaitSync with a zero timeout
    fences.delete(token)
    finish(ctx)                             # ctx.finish(), the GIL released while it waits
    GpuWait(ctx).wait()                     # the same, sleeping instead of spinning a core

The entry points come from the window system that made the current context: EGL
(`eglGetProcAddress`, headless and on the H200) or GLX (`glXGetProcAddressARB`, the pyglet
window). Main thread only, with the context current.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time
import weakref
from collections import deque
from typing import Any

import moderngl

GL_SYNC_GPU_COMMANDS_COMPLETE = 0x9117
GL_SYNC_FLUSH_COMMANDS_BIT = 0x00000001
GL_ALREADY_SIGNALED = 0x911A
GL_TIMEOUT_EXPIRED = 0x911B
GL_CONDITION_SATISFIED = 0x911C
GL_WAIT_FAILED = 0x911D


def _library(name: str, fallback: str) -> ctypes.CDLL | None:
    for candidate in (ctypes.util.find_library(name), fallback):
        if candidate:
            try:
                return ctypes.CDLL(candidate)
            except OSError:
                continue
    return None


def _proc_loader():
    """The current context's GetProcAddress, or None when no EGL or GLX context is current."""
    for name, fallback, current, loader in (
            ("EGL", "libEGL.so.1", "eglGetCurrentContext", "eglGetProcAddress"),
            ("GL", "libGL.so.1", "glXGetCurrentContext", "glXGetProcAddressARB")):
        library = _library(name, fallback)
        if library is None or not hasattr(library, current):
            continue
        getattr(library, current).restype = ctypes.c_void_p
        if getattr(library, current)():
            get_proc = getattr(library, loader)
            get_proc.restype = ctypes.c_void_p
            get_proc.argtypes = [ctypes.c_char_p]
            return get_proc
    return None


class Fences:
    """glFenceSync / glClientWaitSync(timeout 0) / glDeleteSync of the current context.

    Fences of one context signal in order, so each fence inserted here gets a serial and a
    signalled one tells that the GPU has passed every earlier serial too (`passed`): whoever
    only needs to know when earlier work is done (a GPU timer) waits for the next fence anyone
    inserts (`issued + 1`) instead of inserting one of its own (`cover`)."""

    def __init__(self, fence_sync, client_wait_sync, delete_sync, gl_finish=None) -> None:
        self._fence_sync = fence_sync
        self.gl_finish = gl_finish  # glFinish through ctypes (None: the driver gave none)
        self._client_wait_sync = client_wait_sync
        self._delete_sync = delete_sync
        self.issued = 0  # fences inserted so far
        self.passed = 0  # the newest serial the GPU is known to have passed
        self._serials: dict[int, int] = {}  # live token -> its serial
        self._tokens: dict[int, int] = {}  # live serial -> its token, oldest first
        self._own: deque[tuple[int, int]] = deque()  # (serial, token) inserted by `cover`
        self.finishing = False  # the caller waits for the GPU after each frame (`finished`)
        self.gl_fences = 0  # GL fences made (the rest, while `finishing`, are serials alone)

    @classmethod
    def for_current_context(cls) -> "Fences | None":
        """None where no EGL/GLX context is current or the driver lacks GL 3.2 syncs; callers
        then fall back to reading results a few frames late (which can wait)."""
        try:
            loader = _proc_loader()
        except (OSError, AttributeError):
            return None
        if loader is None:
            return None
        pointers = [loader(name) for name in (b"glFenceSync", b"glClientWaitSync",
                                              b"glDeleteSync")]
        if not all(pointers):
            return None
        fence_sync = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint)(pointers[0])
        client_wait_sync = ctypes.CFUNCTYPE(ctypes.c_uint, ctypes.c_void_p, ctypes.c_uint,
                                            ctypes.c_uint64)(pointers[1])
        delete_sync = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(pointers[2])
        gl_finish = loader(b"glFinish")
        fences = cls(fence_sync, client_wait_sync, delete_sync,
                     ctypes.CFUNCTYPE(None)(gl_finish) if gl_finish else None)
        # A fence on an idle context signals at once; one that does not, or fails, means the
        # entry points do not belong to this context.
        probe = fences.insert()
        status = client_wait_sync(probe, GL_SYNC_FLUSH_COMMANDS_BIT, 1_000_000_000)
        fences.delete(probe)
        if not probe or status not in (GL_ALREADY_SIGNALED, GL_CONDITION_SATISFIED):
            return None
        return fences

    def insert(self) -> int:
        """A fence after every command issued so far (while `finishing`: its serial alone)."""
        self.issued += 1
        if self.finishing:
            token = -self.issued
        else:
            token = self._fence_sync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0) or 0
            self.gl_fences += 1
        if token:
            self._serials[token] = self.issued
            self._tokens[self.issued] = token
        return token

    def gl_fence(self) -> int:
        """A GL fence after every command issued so far, even while `finishing` (no serial:
        its owner waits on it and deletes it)."""
        return self._fence_sync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0) or 0

    def signalled(self, token: int) -> bool:
        """Whether the GPU has finished everything before `token`. Never waits; flushes, so a
        fence that is only queued gets to the GPU."""
        # No fence (glFenceSync failed) or GL_WAIT_FAILED, both driver errors, count as done:
        # the read then waits as it did before fences, rather than the counts freezing for the
        # rest of the show.
        if not token:
            return True
        if token < 0:  # a serial alone: passed once the caller has waited for the GPU
            return -token <= self.passed
        status = self._client_wait_sync(token, GL_SYNC_FLUSH_COMMANDS_BIT, 0)
        done = status in (GL_ALREADY_SIGNALED, GL_CONDITION_SATISFIED, GL_WAIT_FAILED)
        if done:
            self.passed = max(self.passed, self._serials.get(token, 0))
        return done

    def delete(self, token: int) -> None:
        if token:
            self._tokens.pop(self._serials.pop(token, 0), None)
            if token > 0:
                self._delete_sync(token)

    def finished(self) -> None:
        """The caller has waited for the GPU (ctx.finish()): every serial so far is passed."""
        self.passed = self.issued

    def has_passed(self, serial: int) -> bool:
        """Whether the GPU has passed the fence of `serial`: asks the oldest live fence at or
        after it (whoever owns it), and frees the fences `cover` made once they signal."""
        while self._own and self.signalled(self._own[0][1]):
            self.delete(self._own.popleft()[1])
        if serial <= self.passed:
            return True
        for later, token in self._tokens.items():
            if later >= serial:
                return self.signalled(token)
        return False

    def cover(self, serial: int) -> None:
        """Make sure a fence of `serial` or later exists: inserted here only when nobody has
        inserted one since (a frame's own fence, the renderer's counts, usually has)."""
        if self.issued < serial:
            self._own.append((self.issued + 1, self.insert()))


_BY_CONTEXT: "weakref.WeakKeyDictionary[moderngl.Context, Fences | None]" = \
    weakref.WeakKeyDictionary()


def fences_for(ctx: moderngl.Context) -> Fences | None:
    """The Fences of `ctx` (which must be current), looked up once per context."""
    if ctx not in _BY_CONTEXT:
        _BY_CONTEXT[ctx] = Fences.for_current_context()
    return _BY_CONTEXT[ctx]


def finish(ctx: moderngl.Context) -> None:
    """Wait for everything issued to `ctx` (current) to be done on the GPU, as ctx.finish()
    does, but with the GIL released meanwhile: moderngl holds it through the whole wait, so
    the show's other threads (the web remote's sessions, the beat tracker, video outputs) sat
    still while a frame waited; on software GL that is most of a frame, and a web gesture that
    came then missed the frame's late latch (issue 31). glFinish is called through ctypes,
    which releases the GIL; where the driver gave no entry point, ctx.finish()."""
    fences = fences_for(ctx)
    gl_finish = None if fences is None else fences.gl_finish
    if gl_finish is None:
        ctx.finish()
    else:
        gl_finish()


class GpuWait:
    """Waits until the GPU has done everything issued so far, as `finish` does, without
    spinning a core: NVIDIA's glFinish (and glClientWaitSync with a timeout) spin or yield in a
    loop by default, which the frame's CPU would count for as long as the GPU draws. The wait
    sleeps for about as long as the last ones took, then looks at a fence every `POLL_S`.
    Where fences are missing, and on software GL (its glFinish sleeps, and the GPU is this
    CPU: a poll's wake-ups would take from its raster threads), `finish`.

    The show's frame waits so for its scene's passes before reading its inputs again for the
    display pass (Show.draw's late latch). `learns=False`: no nap, a look every POLL_S from
    the start, for a wait whose length changes from one frame to the next (a window's swap,
    which with vsync lasts until the display's refresh): a nap learnt from the last could
    oversleep this one by most of a refresh."""

    POLL_S = 0.00025  # between looks at the fence once the expected time is slept

    def __init__(self, ctx: moderngl.Context, *, software: bool = False, learns: bool = True,
                 sleep=time.sleep, clock=time.perf_counter) -> None:
        self.ctx = ctx
        self.fences = fences_for(ctx)
        self.polls = not software and self.fences is not None
        self._sleep, self._clock = sleep, clock
        self.expected = 0.0  # seconds the GPU took after the call, a little under: learnt
        self.learns = learns
        self.looks = 0  # fences looked at, all waits (the tests count them)

    def wait(self, limit_s: float = 0.25) -> float:
        """Returns once the GPU is done (past `limit_s` of polling: `finish`, which blocks),
        every serial of the context's Fences passed; the seconds waited."""
        start = self._clock()
        token = self.fences.gl_fence() if self.polls else 0
        if token:
            self._poll(token, start, limit_s)
        else:  # software GL, no fences, or a fence the driver did not make: block
            finish(self.ctx)
        if self.fences is not None:
            self.fences.finished()  # every serial issued before the wait is passed
        return self._clock() - start

    def _poll(self, token: int, start: float, limit_s: float) -> None:
        """Nap for the expected time, then look at `token` every POLL_S until it signals."""
        fences, sleep, clock, poll = self.fences, self._sleep, self._clock, self.POLL_S
        looks, done = 1, fences.signalled(token)  # flushes: the GPU has the work
        if not done and self.expected > poll:
            sleep(self.expected - poll)
        while not done:
            looks += 1
            done = fences.signalled(token)
            if not done:
                if clock() - start > limit_s:
                    finish(self.ctx)
                    break
                sleep(poll)
        fences.delete(token)
        self.looks += looks
        if not self.learns:
            return
        # Found at the first look after the nap: it may have been done earlier; shorten the
        # nap. Found by polling: nap until a poll or so before that, next time.
        if looks <= 2:
            self.expected *= 0.8
        else:
            self.expected = max(0.0, clock() - start - 1.5 * poll)


class ReadbackRing:
    """Copies of a small GPU buffer, one a frame, read back once the GPU has finished them.

    `push(source, tag)` copies `source` into the next slot (on the GPU) and fences it; `poll()`
    returns (bytes, tag) of the newest copy whose fence has signalled, or None, without ever
    waiting. Where fences are missing, or with `fixed_lag` (the same frames every run), it reads
    the copy `depth - 1` frames old instead, which waits when the GPU is further behind. If the
    GPU falls a whole ring behind, the oldest copies are overwritten unread (the GPU orders the
    copies; nothing waits).
    """

    def __init__(self, ctx: moderngl.Context, size: int, depth: int = 3) -> None:
        self.ctx = ctx
        self.depth = depth
        self.fences = fences_for(ctx)
        self._slots = [ctx.buffer(reserve=size) for _ in range(depth)]
        self._pending: deque[tuple[int, int, Any]] = deque()  # (slot, fence, tag), oldest first
        self._next = 0
        self.overwritten = 0  # copies dropped unread: the GPU was a whole ring behind
        self.fixed_lag = False  # True: always the copy depth - 1 frames old (may wait)

    def push(self, source: moderngl.Buffer, tag: Any = None) -> None:
        slot, self._next = self._next, (self._next + 1) % self.depth
        for entry in [e for e in self._pending if e[0] == slot]:
            self._pending.remove(entry)
            self._delete(entry[1])
            self.overwritten += 1
        self.ctx.copy_buffer(self._slots[slot], source)
        self._pending.append((slot, self.fences.insert() if self.fences else 0, tag))

    def poll(self) -> tuple[bytes, Any] | None:
        ready = None
        if self.fences is None or self.fixed_lag:
            if len(self._pending) == self.depth:
                ready = self._pending.popleft()
                self._delete(ready[1])
        else:
            # Fences of one context signal in order: stop at the first that has not.
            while self._pending and self.fences.signalled(self._pending[0][1]):
                ready = self._pending.popleft()
                self._delete(ready[1])
        if ready is None:
            return None
        return self._slots[ready[0]].read(), ready[2]

    def drop(self) -> None:
        """Forget every copy not read yet (what they measured no longer holds)."""
        for _, token, _ in self._pending:
            self._delete(token)
        self._pending.clear()

    def _delete(self, token: int) -> None:
        if self.fences is not None:
            self.fences.delete(token)

    def release(self) -> None:
        self.drop()
        for buffer in self._slots:
            buffer.release()
        self._slots = []
