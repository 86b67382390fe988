"""What a frame costs the CPU, stage by stage: the main thread's own CPU time
(`time.thread_time`: the show's Python work and what the GL driver does in its calls, not the
time it waits for the GPU, nor other threads' work), so the figure means the same on a fast GPU
and on software GL. The loop stamps each stage; telemetry, the HUD and benchmarks/bench_frame.py
read the medians. Main thread only.

    update    inputs: audio analysis, MIDI, OSC, web, keys; the look; this frame's values
    advance   the simulation steps (their dispatches)
    latch     the late read of the inputs, just before the draw (show/show.py Show.latch)
    draw      cull, draw, post chain (their dispatches and uniform blocks); live on software
              GL, the inputs read once more before the post chain (Show.draw's `late`)
    after     video outputs, the frame clock, the governor, heartbeat and telemetry

and, outside the frame, `between`: from one frame's end to the next one's start (the HUD, the
swap, the idle's work: the web page's and the control window's state, telemetry files, the
garbage; the control window's drawing), so that work moved out of the frame stays counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import numpy.ma  # noqa: F401 - numpy imports it on the first median: 12 ms inside a frame

STAGES = ("update", "advance", "latch", "draw", "after")
KEEP = 600  # frames kept: ten seconds at 60 fps


class FrameCpu:
    """A ring of the last KEEP frames' CPU milliseconds per stage (preallocated: recording a
    frame allocates nothing lasting)."""

    def __init__(self, keep: int = KEEP,
                 clock: Callable[[], float] = time.thread_time) -> None:
        self.clock = clock
        self._ms = np.zeros((keep, len(STAGES)))
        self._row = 0
        self.frames = 0  # frames recorded so far
        self._between = np.zeros(keep)  # the main thread's CPU from a frame's end to the next's
        self._ended: float | None = None  # the last frame's end, by `clock`
        self._medians: tuple[int, dict[str, float] | None] = (-1, None)  # (frames, medians)

    def record(self, stamps: list[float]) -> None:
        """One frame: `stamps` holds len(STAGES) + 1 readings of `clock`, before each stage and
        after the last."""
        row = self._ms[self._row]
        for index in range(len(STAGES)):
            row[index] = (stamps[index + 1] - stamps[index]) * 1000.0
        if self._ended is not None:  # the first frame has no time before it
            self._between[(self.frames - 1) % len(self._between)] = \
                (stamps[0] - self._ended) * 1000.0
        self._ended = stamps[-1]
        self._row = (self._row + 1) % len(self._ms)
        self.frames += 1

    def recent(self) -> np.ndarray:
        """The kept frames' rows (oldest first is not promised), milliseconds by stage."""
        return self._ms[:min(self.frames, len(self._ms))]

    def medians(self) -> dict[str, float] | None:
        """Each stage's median and the whole frame's ("frame"), in ms; None before a frame.
        Worked out again only for new frames (a median of KEEP rows is not free)."""
        done, cached = self._medians
        if done >= 0 and self.frames == done:
            return cached
        rows = self.recent()
        if not len(rows):
            return None
        medians = np.median(rows, axis=0)
        result = {name: round(float(value), 4) for name, value in zip(STAGES, medians)}
        result["frame"] = round(float(np.median(rows.sum(axis=1))), 4)
        between = self._between[:min(self.frames - 1, len(self._between))]
        if len(between):
            result["between"] = round(float(np.median(between)), 4)
        self._medians = (self.frames, result)
        return result

    def last_ms(self) -> float | None:
        """The newest frame's CPU time, all stages, in ms."""
        if not self.frames:
            return None
        return float(self._ms[(self._row - 1) % len(self._ms)].sum())
