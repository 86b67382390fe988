"""The one loop: every way the show runs (the window, headless runs, an offline render, the
benchmarks, the soak) plays the same frame, with a clock and a sink given to it.

    clock    when this frame is and how far to step: the wall clock (live), a fixed step
             (--dt, benchmarks, the soak), the song's frames (a render)
    frame    show.update(now); show.advance(dt) (steps times); show.latch(late); show.draw(target)
    sink     where the frame goes: an offscreen framebuffer (headless, screenshots) or a video
             encoder; the window's swap is pyglet's, which calls `Loop.frame` from on_draw
    outputs  video out (show/video_outputs.py): every drawn frame too, read back a frame or two late
             and sent on the outputs' own threads (NDI, streams, Syphon, Spout, a camera)

The show never reads a clock; the loop does (and times the frames for the HUD). Main thread.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import moderngl

from swarm_instrument.show.show import Show
from swarm_instrument.visual.gpu.fence import GpuWait, fences_for
from swarm_instrument.visual.sim.agents import MAX_DT

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tick:
    """One frame's time: `now` for the update, `steps` simulation steps of `dt` each."""

    now: float
    dt: float
    steps: int = 1


class Clock(Protocol):
    """`next()` gives each frame's Tick; a clock may have `late(tick)`, the time of the frame's
    late read of its inputs (show/show.py Show.latch; without it, the tick's own time)."""

    def next(self) -> Tick: ...


MAX_STEPS = 4  # a live frame catches up at most this many steps of at most 1/30 s (133 ms)


class WallClock:
    """A live show's time: the wall clock, the time since the last frame in equal steps of at
    most the seed's 1/30 s clamp (a slow frame takes as many as it needs, up to MAX_STEPS: the
    show never plays in slow motion because frames are slow; the governor, show/governor.py,
    brings the frames back to their rate), or exactly `fixed_dt` (--dt)."""

    def __init__(self, fixed_dt: float | None = None,
                 time_source: Callable[[], float] = time.perf_counter) -> None:
        self.fixed_dt = fixed_dt
        self.time_source = time_source
        self._last: float | None = None

    def next(self) -> Tick:
        now = self.time_source()
        elapsed = 0.0 if self._last is None else max(now - self._last, 0.0)
        self._last = now
        if self.fixed_dt is not None:
            return Tick(now, self.fixed_dt)
        steps = min(max(math.ceil(elapsed / MAX_DT - 1e-9), 1), MAX_STEPS)
        return Tick(now, min(elapsed / steps, MAX_DT), steps)

    def late(self, tick: Tick) -> float:
        """Live, the wall clock again (the inputs are read as late as they can be); with --dt,
        the frame's own time."""
        return tick.now if self.fixed_dt is not None else self.time_source()


def latches_twice(show: Show) -> bool:
    """Whether a frame's inputs are read once more, after its scene's passes and their bloom
    and feedback, for its display pass (Show.draw's `late`): live, so that from the latch to
    the picture is that one pass (on the H200, paced at 60 fps, the whole frame's passes took
    6 ms after a latch before them: a 90th percentile of 1.35 frames). The frame sleeps
    meanwhile (visual/gpu/fence.py GpuWait), as it waits at its end anyway. Not while
    recording a control track (its replay follows one late read a frame), nor in a render."""
    return show.options.live and show.recorder is None


class FixedStep:
    """Time that moves exactly `dt` a frame from `start` (benchmarks, the soak, tests):
    the same frames on every machine, however long each takes."""

    def __init__(self, dt: float, start: float = 0.0) -> None:
        self.dt = dt
        self.frames = 0
        self.start = start

    def next(self) -> Tick:
        tick = Tick(self.start + self.frames * self.dt, self.dt)
        self.frames += 1
        return tick

    def late(self, tick: Tick) -> float:
        return tick.now


class SongClock:
    """An offline render's time: frame i is at i / fps, simulated in `substeps` equal steps
    (at most 1/30 s each), so a video shows the song's time whatever the render's speed."""

    def __init__(self, fps: float, substeps: int = 1) -> None:
        self.fps = fps
        self.substeps = substeps
        self.index = 0

    def next(self) -> Tick:
        tick = Tick(self.index / self.fps, 1.0 / self.fps / self.substeps, self.substeps)
        self.index += 1
        return tick

    def late(self, tick: Tick) -> float:
        return tick.now


class Sink(Protocol):
    def target(self) -> tuple[moderngl.Framebuffer, tuple[int, int]]:
        """Where the next frame is drawn, and its size in pixels."""
    def after(self, show: Show, index: int) -> None:
        """The frame `index` is drawn: take it (encode it, keep it)."""


class FrameTaker(Protocol):
    def take(self, framebuffer: moderngl.Framebuffer, size: tuple[int, int],
             now: float) -> None:
        """The frame just drawn into `framebuffer` (`size` pixels), at wall time `now`."""


class Offscreen:
    """An offscreen framebuffer of `size` (the renderer's): headless runs and screenshots."""

    def __init__(self, show: Show, size: tuple[int, int]) -> None:
        self.size = (int(size[0]), int(size[1]))
        self.framebuffer = show.renderer.offscreen_framebuffer(self.size)

    def target(self) -> tuple[moderngl.Framebuffer, tuple[int, int]]:
        return self.framebuffer, self.size

    def after(self, show: Show, index: int) -> None:
        pass

    def pixels(self) -> bytes:
        """The last frame, RGB rows bottom first (waits for the GPU: at the end only)."""
        return self.framebuffer.read(components=3, alignment=1)


class Loop:
    """Plays frames of `show` by `clock`: `frame(target, size)` is one of them (the window
    calls it from on_draw), `run(sink, ...)` repeats it into a sink. `before(tick)` runs
    before the update (a render's recorded events), `after()` after the draw (heartbeat,
    telemetry). The wall clock times each frame for the HUD and notes slow ones (live); the
    thread's CPU clock times each stage (`show.cpu`). `idle()` runs once a frame is done and
    taken, outside it (`run` calls it; the window after its swap): files written, the garbage
    collected (show/idle_gc.py).
    `outputs` (show/video_outputs.py) take every drawn frame too, before anything is drawn over
    it."""

    def __init__(self, show: Show, clock: Clock, *, before: Callable[[Tick], None] | None = None,
                 after: Callable[[], None] | None = None,
                 wall: Callable[[], float] = time.perf_counter,
                 outputs: FrameTaker | None = None,
                 idle: Callable[[], None] | None = None) -> None:
        self.show = show
        self.idle = idle
        self.clock = clock
        self.before = before
        self.after = after
        self.wall = wall
        self.outputs = outputs
        self.cpu = show.cpu  # the main thread's CPU time, stage by stage (show/frame_cpu.py)
        self._next_slow_note = 0.0
        # A live frame's end, waited for (run): sleeping, where NVIDIA's glFinish spun a core
        # for the whole of the GPU's frame (5.3-5.8 ms of CPU a frame on the H100's host)
        self.end_wait = GpuWait(show.ctx, software=show.renderer.software)

    def frame(self, target: moderngl.Framebuffer, size: tuple[int, int] | None = None) -> None:
        show = self.show
        cpu = self.cpu.clock
        stamps = [cpu()]
        tick = self.clock.next()
        recorder = show.recorder  # --record-control: each frame's clock, each input's phase
        if recorder is not None:
            recorder.begin_frame(show, tick)
        if self.before is not None:
            self.before(tick)
        show.update(tick.now)
        stamps.append(cpu())
        for _ in range(tick.steps):
            show.advance(tick.dt)
        show.pace.tick(tick.now, show.show_time)  # behind real time?
        stamps.append(cpu())
        late = getattr(self.clock, "late", None)  # the inputs read again, just before the draw
        if recorder is not None:
            recorder.latching(show)
        show.latch(late(tick) if late is not None else tick.now)
        stamps.append(cpu())
        show.draw(target, size, (lambda: late(tick)) if late is not None
                  and latches_twice(show) else None)
        stamps.append(cpu())
        wall = self.wall()
        if self.outputs is not None:  # video out: never waits (visual/output/readback.py)
            self.outputs.take(target, tuple(size or target.size), wall)
        if recorder is not None:
            recorder.end_frame(show)
        if show.clock.tick(wall) and show.options.live and wall >= self._next_slow_note:
            self._next_slow_note = wall + 10.0  # at most a line every 10 s
            log.info(f"slow frame: {show.clock.last_slow_ms:.0f} ms at frame {show.frame} "
                     f"({show.clock.slow_frames} so far)")
        if self.after is not None:
            self.after()
        stamps.append(cpu())
        self.cpu.record(stamps)

    def run(self, sink: Sink, *, frames: int | None = None,
            stop: Callable[[], bool] = lambda: False, cap: float | None = None,
            govern: bool = False) -> int:
        """Frames into `sink` until `frames` are drawn or `stop()`; returns frames drawn.
        `cap`: at most this many frames a second, as a window's refresh rate paces it (a
        headless show feeding video outputs plays in real time); late frames are not made up
        for with a burst. `govern`: the governor (show/governor.py) holds that rate (or the
        registry's target_fps), watching each frame's work up to the GPU's finish."""
        show = self.show
        drawn = 0
        period = 1.0 / cap if cap else 0.0
        due = last = self.wall()
        finishing = govern or show.options.live
        # Live frames are waited for on the GPU (below): results read back need no GL fence.
        fences = fences_for(show.ctx) if finishing else None
        if fences is not None:
            fences.finishing = True
        try:
            while (frames is None or drawn < frames) and not stop():
                if period:
                    wait = due - self.wall()
                    if wait > 0:
                        time.sleep(wait)
                    due = max(due + period, self.wall() - period)
                start = self.wall()
                self.frame(*sink.target())
                if finishing:
                    # A live frame is done on the GPU before the next begins, as a swap would
                    # have it: unpaced, the CPU ran ahead of the GPU by as much work as the
                    # driver would queue (its inputs shown that late, and a killed show's
                    # teardown waiting for all of it). A render keeps its CPU and GPU
                    # overlapping.
                    self.end_wait.wait()  # asleep, the GIL released: other threads run
                if govern:
                    worked = self.wall()
                    show.governor.observe(worked, worked - last, worked - start, show.params,
                                          show.renderer.post_active(show.values or show.params))
                    period, last = 1.0 / show.governor.target_fps(show.params), worked
                sink.after(show, drawn)
                if self.idle is not None:
                    self.idle()
                drawn += 1
        finally:
            if fences is not None:
                fences.finishing = False
        return drawn


def run(show: Show, clock: Clock, sink: Sink, *, frames: int | None = None,
        stop: Callable[[], bool] = lambda: False, **hooks: Any) -> int:
    """The loop in one call: `Loop(show, clock, **hooks).run(sink, frames=, stop=)`."""
    return Loop(show, clock, **hooks).run(sink, frames=frames, stop=stop)
