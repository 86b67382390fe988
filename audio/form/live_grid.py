"""The live form's beat grid: a flywheel on the beat tracker's beats, steady over a build.

Main thread only; pure Python and numpy. The form reads a song bar by bar, so its grid must
hold through what throws the tracker for a few beats: a build's snare roll doubling to 32nd
notes, the drop's new drums (measured on benchmarks/music/form_songs.py: the tracker's tempo
went 138 -> 100 -> 79 -> 100 -> 138 BPM from three beats before trance's drop to six after
it; at each drop of house, trance and drum and bass its beats were up to half a beat off
the music for 6-8 beats). The show's pulse follows every move of the
tracker; the form's grid does not:

- until the tracker has placed FIRST_LOCK beats in a row that it heard clearly (salience at
  least CLEAR) on one line, there is no grid to hold: its beats are handed out as they come
  (a gap longer than FILL periods filled at its period), as in a pad's intro;
- then the grid is a straight line, time = origin + index * period, fitted to the last
  FIT_BEATS tracker beats that fell on it (within AGREE of a period of one of its beats, at
  the tracker's tempo within AGREE), its beats handed out as their time comes whether the
  tracker reports one or not (a break without drums, a stall);
- a clear tracker beat off the line is left out; RELOCK of them in a row on a line of their
  own (a beat or more apart, at the tracker's tempo) move the grid to them: the tracker has
  found another phase or tempo and kept it. Beats it did not hear clearly (a break's piano)
  neither hold nor move the grid.

Each beat goes out as (time, count): the tracker's count for it (on the grid: the latest
tracker beat on it, carried along the grid), by which its place in the bar is read from the
tracker's downbeat.
"""

from __future__ import annotations

import numpy as np

AGREE = 0.15  # of a period: a tracker beat this close to a grid beat falls on it
FIT_BEATS = 16  # the grid is the line through this many of the latest beats on it
FIRST_LOCK = 4  # clear beats in a row on one line: the first grid
RELOCK = 8  # clear beats in a row off the grid, on a line of their own: the grid moves
# The tracker's salience (beats.py) reads 0.5 where beats fall anywhere (a pad), near 0.8
# for drums: a beat at least this is one it heard clearly.
CLEAR = 0.6
FILL = 2.0  # periods without a beat before there is a grid: one is filled in
CLOSEST = 0.5  # of a period: no beat handed out closer than this after the one before


def line(times: np.ndarray, step: float) -> tuple[np.ndarray, float, float] | None:
    """The beats `times` (rising) on one line at about `step` s a beat (a beat or more
    apart, each within AGREE of a step of it): (their indices, period, origin) of the line
    fitted through them; None where they are not."""
    if step <= 0.0:
        return None
    index = np.round((times - times[0]) / step)
    if np.any(np.diff(index) < 1) or np.any(
            np.abs(times - times[0] - index * step) >= AGREE * step):
        return None
    period, origin = np.polyfit(index, times, 1)
    return index.astype(int), float(period), float(origin)


class LiveGrid:
    """The flywheel grid (see the module's docstring). `ticks(now, reported, period)` takes
    the tracker's beats reported since the last call as (time s, its count, its salience)
    and its period (s, 0 while it has none) and hands out each beat whose time has come by
    `now`, in order, as (time, count)."""

    def __init__(self) -> None:
        self.origin: float | None = None  # the time of grid beat 0, once there is a grid
        self.period: float | None = None
        self._on: list[tuple[int, float]] = []  # (index, time) of the latest beats on the grid
        self._run: list[tuple[float, int]] = []  # clear beats off the grid (or before it)
        self._offset = 0  # the tracker's count minus the grid's index
        self._next = 0  # the index of the next grid beat to hand out
        self._last: float | None = None  # the time of the last beat handed out
        self._count = 0  # its count
        self._out: list[tuple[float, int]] = []

    def ticks(self, now: float, reported: list[tuple[float, int, float]],
              period: float = 0.0) -> list[tuple[float, int]]:
        if period > 0.0 and self.origin is None:
            self.period = period
        for beat, count, salience in sorted(reported):
            self._hear(beat, count, salience, period)
        if self.origin is None:  # no grid: a gap is filled at the tracker's period
            while self._last is not None and self.period and \
                    now - self._last > FILL * self.period:
                self._hand_out(self._last + self.period, self._count + 1)
        else:
            while self.origin + self._next * self.period <= now:
                self._hand_out(self.origin + self._next * self.period,
                               self._next + self._offset)
                self._next += 1
        out, self._out = self._out, []
        return out

    def _hand_out(self, time: float, count: int) -> None:
        if self._last is not None and time < self._last + CLOSEST * (self.period or 0.0):
            return
        self._last, self._count = time, count
        self._out.append((time, count))

    def _hear(self, beat: float, count: int, salience: float, period: float) -> None:
        clear = salience >= CLEAR
        if self.origin is None:
            self._hand_out(beat, count)
            self._run = [*self._run, (beat, count)][-FIRST_LOCK:] if clear else []
            if len(self._run) == FIRST_LOCK:
                self._lock(period)
            return
        assert self.period is not None
        index = round((beat - self.origin) / self.period)
        same_tempo = period <= 0.0 or abs(period / self.period - 1.0) < AGREE
        if same_tempo and abs(beat - self.origin - index * self.period) < AGREE * self.period:
            self._run.clear()
            self._offset = count - index
            if not self._on or index > self._on[-1][0]:
                self._on = [*self._on, (index, beat)][-FIT_BEATS:]
                self._fit()
        elif clear:
            self._run = [*self._run, (beat, count)][-RELOCK:]
            if len(self._run) == RELOCK:
                self._lock(period)

    def _fit(self) -> None:
        """The line through the beats on the grid (two or more), numbered as they are."""
        if len(self._on) < 2:
            return
        index = np.array([i for i, _ in self._on], float)
        times = np.array([t for _, t in self._on])
        slope, start = np.polyfit(index, times, 1)
        if slope > 0.0:
            self.period, self.origin = float(slope), float(start)

    def _lock(self, period: float) -> None:
        """The grid on the beats of the run, where they are on one line (at the tracker's
        period, or their own before it has one); its next beat the first not too close to
        the last one handed out."""
        times = np.array([t for t, _ in self._run])
        found = line(times, period if period > 0.0 else float(np.median(np.diff(times))))
        if found is None:
            return  # the tracker itself is not steady: nothing changes
        index, self.period, self.origin = found
        self._on = [(int(i), float(t)) for i, t in zip(index, times)]
        self._offset = self._run[-1][1] - int(index[-1])
        self._run.clear()
        last = self._last if self._last is not None else -np.inf
        self._next = max(0, int(np.ceil((last + CLOSEST * self.period - self.origin)
                                        / self.period)))
