"""Where the next beat falls, given the beat period: a comb over the recent onset strength.
Pure numpy, main thread; the beat tracker (beats.py) asks once a hop.

Every place in the last period is tried as a beat: its score is the onset strength there and
a period, two periods ... before (COMB beats back, each older one weighing DECAY as much),
so the place the onsets keep coming back to wins, and the newest beats count most (a drummer
coming in after a piano intro takes the grid within a few beats). The next beat is the
winner plus whole periods, the first one ahead. A grid already running keeps its place
unless another scores clearly more (STAY), and the next beat is asked again each hop until
it comes (`BeatTracker` keeps it between half a period and one and a half after the last).
This replaced a cumulative score after Stark, Davies and Plumbley (BTrack) that, once on the
off-beat, stayed there: it is asked half a period after a beat, which on the off-beat is
just when the true beat's onset is half heard.
"""

from __future__ import annotations

import math

import numpy as np

COMB = 8  # beats back
DECAY = 0.8  # each older beat's weight
STAY = 1.15  # the running grid's advantage
HISTORY = 1024  # hops kept (11 s at 94 hops a second)


class History:
    """The last `size` values of a stream, readable as one contiguous array (written twice)."""

    def __init__(self, size: int = HISTORY) -> None:
        self.size = size
        self._data = np.zeros(2 * size, np.float32)
        self.count = 0  # values written so far

    def push(self, value: float) -> None:
        at = self.count % self.size
        self._data[at] = self._data[at + self.size] = value
        self.count += 1

    def rewrite(self, values: np.ndarray) -> None:
        """Replace the newest len(values) values (oldest first)."""
        for offset, value in enumerate(values[::-1]):
            at = (self.count - 1 - offset) % self.size
            self._data[at] = self._data[at + self.size] = value

    def last(self, count: int) -> np.ndarray:
        """The newest `count` values, oldest first (zeros before the stream began)."""
        end = (self.count - 1) % self.size + self.size + 1
        return self._data[end - count:end]

    def at(self, index: int) -> float:
        """The value written as number `index` (0 if older than the history)."""
        if index < 0 or index >= self.count or self.count - index > self.size:
            return 0.0
        return float(self._data[index % self.size])


class BeatPhase:
    """The recent onset strength and the next beat's prediction for a period set by the
    caller."""

    def __init__(self) -> None:
        self.onsets = History()
        self.period = 0.0  # hops; 0: none yet

    def set_period(self, period: float) -> None:
        self.period = period

    def push(self, onset: float) -> None:
        """One hop's onset strength."""
        self.onsets.push(onset)

    def predict(self, grid: float | None) -> float | None:
        """The hop index of the next beat after the newest hop, or None with no period. `grid`:
        the hop of the last beat of the grid running, if any."""
        period = self.period
        if period <= 0.0:
            return None
        now = self.onsets.count - 1
        span = int(math.ceil(period))
        skip = int(math.ceil(period / 4))  # the newest quarter period is not all heard yet
        # as many beats back as the stream has (zeros before it began: the first seconds use
        # every beat heard) and the history holds
        beats = min(COMB, int((HISTORY - span - skip - 2) // period),
                    int(math.ceil((self.onsets.count - skip) / period)))
        if beats < 1:
            return None
        recent = self.onsets.last(int(beats * period) + span + skip + 2)
        smoothed = np.maximum(recent[1:-1], np.maximum(recent[:-2], recent[2:]))
        newest = len(smoothed) - 1  # hop `now - 1`
        offsets = skip + np.arange(span)  # places tried: `now - 1 - offset`
        back = offsets[:, None] + np.round(period * np.arange(beats))[None, :]
        weights = DECAY ** np.arange(beats)
        scores = smoothed[newest - back.astype(int)] @ weights
        if grid is not None:
            kept = (now - 1 - grid) % period  # hops since the grid's place
            near = np.abs((offsets - kept + period / 2) % period - period / 2)
            scores = scores * np.where(near <= max(1.0, period / 8), STAY, 1.0)
        if not np.any(scores > 0):
            return None
        place = now - 1 - int(offsets[int(np.argmax(scores))])  # a beat of the winner
        return place + period * math.floor((now - place) / period + 1)
