"""One video output: the show's frames, at the output's own size and rate, handed to a backend
(NDI, a stream, Syphon, Spout, a virtual camera) that sends them on a thread of its own.

    main thread     take(framebuffer, size, now) once a frame, after the draw: frames the GPU
                    has finished (visual/output/readback.py: a ring of pixel buffers read once their
                    fences signal, a frame or two late) go to the output's thread; this frame
                    is captured into the ring if the output's rate says it is due. Never waits.
    output thread   opens the backend (again and again while it fails: 0.5 s, doubling to
                    5 s), copies each frame out of its pixel buffer (giving the buffer back at
                    once) and sends it. At nice 19 on Linux (the threads libndi, x264 and
                    GStreamer start from it inherit that): on a machine short of cores the
                    output drops frames, the show keeps its CPU.

A frame is dropped, and counted, when the ring has no free buffer (the GPU or the output is
behind) or when a newer frame arrives before the thread took the last one (a slow receiver or
encoder): the output skips frames, the show never waits. While the backend is down (starting,
retrying, unavailable) nothing is captured. A failure is said once (the same reason again at
most every 30 s, and when it sends again) and retried; a backend that cannot exist here (a
platform-only one) says so once and stays off. Backends take plain RGBA pixels: they know
nothing of the show.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import moderngl
import numpy as np

from swarm_instrument.visual.output.readback import PixelReadback, ReadbackUnavailable

log = logging.getLogger(__name__)
RETRY_FIRST, RETRY_MOST = 0.5, 5.0  # seconds between attempts to open a failing backend
OUTPUT_NICE = 19  # the output threads' niceness (Linux): they take only the CPU the show leaves
RING_DEPTH = 3
SAY_AGAIN_AFTER = 30.0  # seconds before the same failure is said again


class OutputFailed(RuntimeError):
    """A backend could not open or send (port taken, receiver gone, library missing); the
    message says why, in words for the performer. The output tries again."""


class OutputUnavailable(OutputFailed):
    """A backend that cannot work on this machine at all (Syphon off macOS, Spout off
    Windows): said once, never retried."""


class Backend(Protocol):
    """Where an output's frames go. Every method runs on the output's own thread."""

    kind: str  # "ndi", "stream", "shm", "srt", "syphon", "spout", "virtualcam"
    target: str  # the name or URL the performer gave
    carries_alpha: bool
    even_size: bool  # 4:2:0 video needs even sides

    def open(self, size: tuple[int, int], rate: float) -> None:
        """Start sending `size` frames at about `rate` a second; OutputFailed if not."""

    def send(self, frame: np.ndarray, seconds: float) -> None:
        """One frame, (height, width, 4) RGBA uint8, top row first, `seconds` after the
        output started; OutputFailed (or any error) closes the backend and retries."""

    def close(self) -> None:
        """Stop; never raises."""

    def detail(self) -> str | None:
        """A few words for the HUD (receivers connected, the source's full name), or None."""


class RateGate:
    """Whether a frame at wall time `now` is due for an output of `rate` frames a second (None:
    every frame). A frame a quarter period early still counts, so a 60 fps show feeds a 30 fps
    output every other frame despite jitter; a gate that falls behind starts again from now."""

    def __init__(self, rate: float | None) -> None:
        self.period = 1.0 / rate if rate else 0.0
        self._next = -math.inf

    def due(self, now: float) -> bool:
        if self.period <= 0.0:
            return True
        if now + 0.25 * self.period < self._next:
            return False
        self._next = now + self.period if now - self._next > self.period else \
            self._next + self.period
        return True


def _nice_this_thread() -> None:
    """Lower this thread's priority where the system allows it per thread (Linux)."""
    if sys.platform.startswith("linux"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), OUTPUT_NICE)
        except (OSError, AttributeError):
            pass


class FrameOutput:
    """An output: a backend, the pixel buffers its frames come back through, the thread that
    sends them and what it counts (`sent`, `dropped`, `state`, `error`). `size` and `rate`
    None: the frame's size at the first frame, and every frame the show draws (`nominal_rate`
    is then the rate told to receivers)."""

    def __init__(self, backend: Backend, *, size: tuple[int, int] | None = None,
                 rate: float | None = None, nominal_rate: float = 60.0,
                 retry: tuple[float, float] = (RETRY_FIRST, RETRY_MOST),
                 clock: Callable[[], float] = time.perf_counter,
                 start: bool = True) -> None:
        self.backend = backend
        self.size = _even(size, backend.even_size) if size else None
        self.rate = float(rate) if rate else None
        self.nominal_rate = float(self.rate or nominal_rate)
        self.retry = retry
        self.clock = clock
        # A URL names itself (udp://, shm://); a name gets its kind (ndi Swarm).
        self.label = backend.target if "://" in backend.target else \
            f"{backend.kind} {backend.target}"
        self.sent = 0
        self.dropped = 0
        self.captured = 0
        self.state = "starting"
        self.live = True  # on air: off, frames are not captured (receivers keep the last)
        self.error: str | None = None
        self.failures = 0
        self._gate = RateGate(self.rate)
        self._readback: PixelReadback | None = None
        self._readback_problem: str | None = None
        self._open = False  # the backend is open: frames are worth capturing
        self._pending: int | None = None  # a finished slot the thread has not taken yet
        self._sending = False  # the thread is inside backend.send
        self._started_at: float | None = None
        self._condition = threading.Condition()
        self._stop = threading.Event()
        self._said: dict[str, float] = {}  # what was said, when
        self._last_reason: str | None = None  # why it last failed, until it sends again
        self._thread = threading.Thread(target=self._run, name=f"output {self.label}",
                                        daemon=True)
        if start:
            self._thread.start()

    # ---- main thread ------------------------------------------------------------------------

    def take(self, ctx: moderngl.Context, framebuffer: moderngl.Framebuffer,
             frame_size: tuple[int, int], now: float) -> None:
        """After a frame is drawn into `framebuffer` (`frame_size` pixels): hand finished
        frames on, capture this one if due. Never waits for the GPU or the thread."""
        if self.state == "unavailable":  # for good: its pixel buffers are not kept
            if self._readback is not None and not self._thread.is_alive():
                self._readback.release()
                self._readback = None
            return
        if self._readback is None:
            if self._readback_problem is not None:
                return
            if self.size is None:
                self.size = _even(frame_size, self.backend.even_size)
            try:
                self._readback = PixelReadback(ctx, self.size, RING_DEPTH)
            except ReadbackUnavailable as exc:  # said once; the output stays off
                self._readback_problem = f"cannot read frames back here ({exc})"
                self.stop()
                self._set_state("unavailable", self._readback_problem)
                return
        readback = self._readback
        for slot in readback.poll():
            self._hand_over(slot)
        if not self._open or not self.live:
            return
        if not self._gate.due(now):
            return
        self.captured += 1
        if not readback.capture(framebuffer, frame_size, tag=now):
            self.dropped += 1  # every buffer still in flight or being sent

    def _hand_over(self, slot: int) -> None:
        with self._condition:
            if not self._open or self._stop.is_set():
                self._readback.give_back(slot)  # the backend went down meanwhile
                return
            if self._pending is not None:  # the thread has not taken the last one: too slow
                self._readback.give_back(self._pending)
                self.dropped += 1
            self._pending = slot
            self._condition.notify()

    def state_record(self) -> dict[str, Any]:
        """For telemetry: what the output is and how it does."""
        return {"kind": self.backend.kind, "target": self.backend.target,
                "size": list(self.size) if self.size else None,
                "rate": self.rate or self.nominal_rate, "every_frame": self.rate is None,
                "state": self.state, "live": self.live, "sent": self.sent,
                "dropped": self.dropped,
                "error": self.error, "alpha": self.backend.carries_alpha,
                "detail": self.detail()}

    def detail(self) -> str | None:
        try:
            return self.backend.detail()
        except Exception:  # noqa: BLE001 - a report never fails the show
            return None

    def drain(self, seconds: float = 1.0) -> None:
        """At the end: let the frames already captured reach the backend (waits up to
        `seconds`: the show is over, a receiver should get its last frames)."""
        if self._readback is None:
            return
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self._open:
            for slot in self._readback.poll():
                self._hand_over(slot)
            busy = (self._pending is not None or self._sending
                    or self._readback.in_flight > 0)
            if not busy:
                return
            time.sleep(0.002)

    def stop(self) -> None:
        """Ask the thread to stop (it closes the backend); returns at once."""
        self._stop.set()
        with self._condition:
            self._condition.notify_all()

    def close(self, join_seconds: float = 2.0) -> None:
        """Stop the thread (it closes the backend) and free the pixel buffers (main thread,
        context current). A thread stuck in a send is left to finish on its own: it holds no
        pixel buffer."""
        self.stop()
        if self._thread.is_alive():
            self._thread.join(join_seconds)
        if self._readback is not None:
            self._readback.release()
            self._readback = None
        if self.state not in ("unavailable",):
            self.state = "closed"

    # ---- the output's thread ----------------------------------------------------------------

    def _run(self) -> None:
        _nice_this_thread()
        while self.size is None and not self._stop.is_set():  # it comes with the first frame
            self._stop.wait(0.01)
        delay = self.retry[0]
        frame: np.ndarray | None = None
        while not self._stop.is_set():
            try:
                self.backend.open(self.size, self.nominal_rate)
            except OutputUnavailable as exc:
                self._set_state("unavailable", str(exc))
                return
            except Exception as exc:  # noqa: BLE001 - said, then tried again
                self._close_backend()
                self._failed(exc)
                self._stop.wait(delay)
                delay = min(delay * 2.0, self.retry[1])
                continue
            if self._started_at is None:
                self._started_at = self.clock()
            if self._last_reason is not None:
                self._say(f"back from {self._last_reason}",
                          f"output {self.label}: sending again (after: {self._last_reason})")
                self._last_reason = None
            self._set_state("sending", None)
            delay = self.retry[0]
            with self._condition:
                self._open = True
            try:
                frame = self._send_loop(frame)
            except Exception as exc:  # noqa: BLE001 - the backend failed: close, say, retry
                self._go_down()
                self._close_backend()
                self._failed(exc)
                self._stop.wait(delay)
                delay = min(delay * 2.0, self.retry[1])
        self._go_down()
        self._close_backend()

    def _go_down(self) -> None:
        """No more frames for this backend: the one waiting goes back to the ring."""
        with self._condition:
            self._open = False
            if self._pending is not None and self._readback is not None:
                self._readback.give_back(self._pending)
            self._pending = None

    def _send_loop(self, frame: np.ndarray | None) -> np.ndarray | None:
        """Frames to the backend until stopped; an exception means the backend failed."""
        while not self._stop.is_set():
            with self._condition:
                while self._pending is None and not self._stop.is_set():
                    self._condition.wait(0.5)
                if self._stop.is_set():
                    break
                slot, self._pending = self._pending, None
                self._sending = True
            try:
                readback = self._readback
                seconds = readback.tag(slot) - self._started_at
                frame = readback.copy_out(slot, frame)
                self.backend.send(frame, max(seconds, 0.0))
                self.sent += 1
            finally:
                self._sending = False
        return frame

    def _close_backend(self) -> None:
        with contextlib.suppress(Exception):  # closing never fails the show
            self.backend.close()

    def _failed(self, exc: BaseException) -> None:
        reason = _reason(exc)
        self.failures += 1
        self._last_reason = reason
        self._set_state("retrying", reason)
        self._say(reason, f"output {self.label}: {reason}; trying again every few seconds, "
                          "the show goes on")

    def _say(self, key: str, text: str) -> None:
        """Say `text` once; the same again only after SAY_AGAIN_AFTER (a flapping receiver
        must not flood the console)."""
        now = time.monotonic()
        if now - self._said.get(key, -math.inf) >= SAY_AGAIN_AFTER:
            self._said[key] = now
            log.info(text)

    def _set_state(self, state: str, error: str | None) -> None:
        if self.state == "unavailable":  # for good
            return
        self.state, self.error = state, error
        if state == "unavailable":
            log.info(f"output {self.label}: {error}; the show goes on without it")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OutputFailed):
        return str(exc)
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return text[:200]


def _even(size: tuple[int, int], even: bool) -> tuple[int, int]:
    width, height = int(size[0]), int(size[1])
    if even:
        width, height = max(width - width % 2, 2), max(height - height % 2, 2)
    return width, height
