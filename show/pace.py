"""Whether the show keeps up with real time: telemetry's `real_time` object and, while it does
not, a line in the HUD. The loop ticks it after each frame's steps; main thread only.

The show moves on by its steps (`Show.show_time`: the sum of every frame's steps), the clock by
its `now`. Live, the clock is the wall clock and a frame steps the time since the last one, in
steps of at most the seed's 1/30 s (visual/sim/agents.py MAX_DT), at most show/loop.py's
MAX_STEPS of them (133 ms): a slow frame does not slow the show down, and the governor
(show/governor.py) lowers the render scale, the post chain and the count until frames come at
their rate again. Only frames slower than 133 ms still lose time: a machine that cannot draw
even the governor's lowest levels in time, or one whose levels the performer pinned; the
swarm then plays in slow motion while the sound goes on in real time, and this says so. With
--dt each frame steps exactly dt, however long it took.

- `lag_s`: the clock's time since the first frame minus the show's (what the clamp dropped;
  negative when --dt runs faster than real time);
- `speed`: the show's seconds per second of the clock over the last WINDOW_S of the clock
  (measured from the newest frame at least that old): 1.0 is real time; None until the show
  has run that long;
- `behind`: `speed` under BEHIND_SPEED, the show is behind real time: frames averaging over
  148 ms for two seconds; one 200 ms hitch among 60 fps frames (speed 0.97) is not, a lone
  slow frame being the FrameClock's to count.

A render's clock is the song's and its frames step exactly their time, as do fixed steps (the
benchmarks, the soak, tests): they never fall behind (speed 1, lag 0).
"""

from __future__ import annotations

from collections import deque
from typing import Any

WINDOW_S = 2.0
BEHIND_SPEED = 0.9


class Pace:
    """The show's time against the clock's, frame by frame."""

    def __init__(self) -> None:
        self._first: tuple[float, float] | None = None  # (clock, show) after the first frame
        self._recent: deque[tuple[float, float]] = deque()
        self.lag_s = 0.0

    def tick(self, now: float, show_time: float) -> None:
        """A frame: the clock's `now` and the show's time after its steps."""
        if self._first is None:
            self._first = (now, show_time)
        self.lag_s = (now - self._first[0]) - (show_time - self._first[1])
        recent = self._recent
        recent.append((now, show_time))
        while len(recent) > 2 and recent[1][0] <= now - WINDOW_S:
            recent.popleft()

    @property
    def speed(self) -> float | None:
        if len(self._recent) < 2:
            return None
        (start, show_start), (end, show_end) = self._recent[0], self._recent[-1]
        if end - start < WINDOW_S - 1e-9:
            return None
        return (show_end - show_start) / (end - start)

    @property
    def behind(self) -> bool:
        speed = self.speed
        return speed is not None and speed < BEHIND_SPEED

    def state(self) -> dict[str, Any]:
        """Telemetry's `real_time` object."""
        speed = self.speed
        return {"behind": self.behind, "speed": None if speed is None else round(speed, 3),
                "lag_s": round(self.lag_s, 3)}

    def hud_line(self) -> str | None:
        """A line for the HUD while the show is behind real time, else None."""
        if not self.behind:
            return None
        return f"behind real time: the swarm at {self.speed:.2f}x, {self.lag_s:.1f} s lost"
