"""A tempo that moves, found beat by beat: the strongest onset near each beat comes later (or
earlier) beat after beat, by more each time. Pure numpy; the beat tracker (beats.py) asks once
a beat, when the beat before has been heard whole.

The tempogram looks back WINDOW_S (6 s) and would take 3 s to follow a change; the onsets'
drift against the beats says it within DRIFT_BEATS beats (the benchmark's 120 to 132: locked
1.8 s after the change, from 3.6 s). The offsets are judged on one tempo's beats only: the
tracker clears them when another tempo is taken.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from swarm_instrument.audio.analysis.beat_phase import History

DRIFT_BEATS = 3  # beats whose onsets drift the same way, more each time: the tempo moved
DRIFT_STEP = 0.03  # ... by at least this share of the period a beat (less: the tempogram's)
DRIFT_ONSET = 0.5  # ... each an onset at least this share of the usual one on the beat


class TempoDrift:
    """The offsets of the last DRIFT_BEATS beats' strongest onsets (hops)."""

    def __init__(self) -> None:
        self._drifts: deque[float] = deque(maxlen=DRIFT_BEATS)

    def clear(self) -> None:
        self._drifts.clear()

    def step(self, onsets: History, beat: float, period: float, usual: float) -> float | None:
        """The step (hops) the period takes at once, or None: the strongest onset within a
        quarter period of `beat` (a hop index) and of the beats before drifts steadily one
        way, more each time. `usual`: the onset strength usual on a beat."""
        low, high = int(round(beat - period / 4)), int(round(beat + period / 4))
        values = [onsets.at(i) for i in range(low, high + 1)]
        strongest = int(np.argmax(values))
        drifts = self._drifts
        if values[strongest] < DRIFT_ONSET * usual:  # no onset to follow: start over
            drifts.clear()
            return None
        drifts.append(low + strongest - beat)
        if len(drifts) < DRIFT_BEATS:
            return None
        signs = {np.sign(d) for d in drifts}
        steps = np.diff(list(drifts))
        step = float(np.mean(steps))
        even = np.all(np.abs(steps - step) <= 0.5 * abs(step) + 1.0)  # a steady drift
        if len(signs) == 1 and abs(drifts[-1]) >= 2 and np.all(steps * drifts[-1] > 0) and even \
                and abs(step) >= DRIFT_STEP * period:
            drifts.clear()
            return step
        return None
