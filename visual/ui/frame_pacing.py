"""When the window's next frame starts, and pyglet's clock asked to start it then. Pure
timing, testable without a display (tests/test_governor.py); the window (visual/ui/window.py)
reports each frame and schedules the next. Main thread only.
"""

from __future__ import annotations

import math
from collections import deque

import pyglet

# As late as its work allows before the display shows it, so what it reads of the inputs (sound,
# knobs, keys) is as new as it can be. A frame runs from `start` (the inputs read) to `worked`
# (its commands done on the GPU, before the swap) to `shown` (the swap done). Where the swap
# waits for the display's refresh (vsync: `LiveWindow.swap_waits`, measured once), the frame is
# aimed at a refresh: it starts its longest recent work (and a margin) before the refresh after
# the last one shown plus the period, so it is shown at that refresh and nothing it read waits
# a frame in a queue (the window waits for each swap to finish: frames never queue up in the
# driver). Where the swap does not wait (a virtual display, a compositor without vsync), frames
# start at an even pace, one period apart; one late by more than a period starts at once,
# without a burst of catching up.

MARGIN_S = 0.001  # aimed this much earlier than the longest recent work needs
WORKS_KEPT = 30  # the recent frames whose work sets how early a frame starts


class FramePacer:
    """When the window's next frame starts (see above). Pure timing: testable without a display."""

    def __init__(self, refresh_s: float, swap_waits: bool = False) -> None:
        self.refresh_s = refresh_s
        self.swap_waits = swap_waits
        self.works: deque[float] = deque(maxlen=WORKS_KEPT)
        self._start: float | None = None
        self._shown: float | None = None

    def frame(self, start: float, worked: float, shown: float) -> None:
        """A frame was drawn: its inputs read at `start`, its work done at `worked`, its swap
        done at `shown` (one monotonic clock)."""
        self.works.append(max(worked - start, 0.0))
        self._start, self._shown = start, shown

    def next_start(self, period: float, now: float) -> float:
        """When the next frame should start, for frames `period` seconds apart."""
        if self._start is None:
            return now
        if self.swap_waits and self._shown is not None:
            refreshes = max(1, math.ceil(period / self.refresh_s - 0.05))
            aim = self._shown + refreshes * self.refresh_s  # the refresh this frame is for
            start = aim - max(self.works) - MARGIN_S
            return max(start, now)
        start = self._start + period
        return now if start < now - period else start


def schedule_at(callback, due: float, clock: pyglet.clock.Clock | None = None) -> None:
    """Have pyglet's clock call `callback` at `due` (its own time: time.perf_counter). Its
    schedule_once counts a delay from its last tick where that is recent (it clusters items
    due together), not from now; inside a scheduled call (a frame) that tick is the frame's
    start, so a delay worked out from the frame's end came early by the frame's work and the
    frames ran back to back instead of at their pace."""
    clock = clock or pyglet.clock.get_default()
    base = getattr(clock, "_get_nearest_ts", clock.time)()  # where the delay counts from
    clock.schedule_once(callback, max(due - base, 0.0))
