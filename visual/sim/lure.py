"""The lure: the point the swarm seeks (seed 000's target), and seed 002's influencer.

Anything may move the lure (the mouse, later MIDI or audio) with `move_to`. When nothing has
moved it for `idle_seconds`, it wanders on its own along a smooth path through the volume,
blending in (over `_BLEND_SECONDS`) from where it was left so it never jumps.

Two times: the idle wait and the blend count on the caller's clock, the one the show is
played by (the wall clock live: three seconds the performer can count, however slow the
frames; the song's time in a render), and the wander path on simulated time, so the
influencer keeps pace with the swarm it leads and a run the mouse never touched repeats
exactly. Main thread only.
"""

from __future__ import annotations

import math

import numpy as np

# Incommensurate frequencies (rad/s) give a path that does not repeat for a long time.
_FREQUENCIES = ((0.31, 0.17), (0.23, 0.41), (0.19, 0.29))
_BLEND_SECONDS = 2.0


def wander_point(t: float, radius: float, flat: bool = False) -> tuple[float, float, float]:
    """Where the influencer is at time `t`: inside a sphere of 0.6 * radius (a disc in 2D).
    Plain floats (asked for twice a frame; numpy on three numbers costs more than the maths)."""
    root = math.sqrt(3 if not flat else 2)
    (a, b), (c, d), (e, f) = _FREQUENCIES
    sin = math.sin
    x = (0.7 * sin(a * t + 1.3 * b) + 0.3 * sin(b * t)) * 0.6 * radius / root
    y = (0.7 * sin(c * t + 1.3 * d) + 0.3 * sin(d * t)) * 0.6 * radius / root
    z = (0.7 * sin(e * t + 1.3 * f) + 0.3 * sin(f * t)) * 0.6 * radius / root
    return (x, y, 0.0 if flat else z)


class Lure:
    def __init__(self, radius: float, flat: bool = False, idle_seconds: float = 3.0) -> None:
        self.radius = radius
        self.flat = flat
        self.idle_seconds = idle_seconds
        self._held: np.ndarray | None = None
        self._held_at = -math.inf

    def move_to(self, point, now: float) -> None:
        """Place the lure at `point` (x, y, z) at the clock's time `now`."""
        self._held = np.array(point, dtype=float)
        if self.flat:
            self._held[2] = 0.0
        self._held_at = now

    @property
    def wandering(self) -> bool:
        return self._held is None

    def position(self, now: float, wander_time: float | None = None
                 ) -> tuple[float, float, float] | np.ndarray:
        """Where the lure is at the clock's time `now`, wandering (if it does) where the
        path is at simulated time `wander_time` (default: `now`)."""
        wander = wander_point(now if wander_time is None else wander_time, self.radius,
                              self.flat)
        if self._held is None:
            return wander
        idle = now - self._held_at
        if idle < self.idle_seconds:
            return self._held.copy()
        blend = min((idle - self.idle_seconds) / _BLEND_SECONDS, 1.0)
        blend = blend * blend * (3 - 2 * blend)  # smoothstep
        if blend >= 1.0:
            self._held = None
        if self._held is None:
            return wander
        return self._held * (1 - blend) + np.asarray(wander) * blend
