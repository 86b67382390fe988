"""What a song sounds like beat by beat: the features the form is read from (audio/form/).

Main thread only; pure numpy, no device. A song (or a live stream, from its first sample) is
cut into frames of FRAME samples every HOP; each frame gives the loudness and four band
energies in dBFS, the spectral flux (how much new sound arrived: onset density) and the
"punch" (the frame's energy over its neighbours': drums read high, a pad low). A beat's
features are the mean over the frames whose centre falls inside it.

Frames are cut from sample 0 in both cases, so a live stream (`FrameStream`, fed block by
block) gives exactly the frames the whole song gives (`frame_features`): live and offline
read the same numbers. The scales are fixed (decibels over `SCALES`), never the song's own
spread, so a song without sections reads as one, and live needs no look-ahead to normalise.
"""

from __future__ import annotations

import numpy as np

from swarm_instrument.audio.analysis.beats import BeatTracker

FRAME = 2048
HOP = 1024
BAND_EDGES_HZ = ((20.0, 150.0), (150.0, 800.0), (800.0, 4000.0), (4000.0, 16000.0))
NAMES = ("loud", "low", "mid", "high", "air", "flux", "punch")
# One unit of each feature, for distances: 3 dB for the levels and the flux (in dB too), 1 dB
# for the punch (a groove's drums read about 2 dB of punch, a pad 0.1).
SCALES = np.array([3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 1.0])
FLOOR_DB = -70.0  # quieter than this is no sound to tell sections by (a band's noise floor)
GRID_FIRST_BEATS = 8  # steady_grid's first window: this many beats either side
COMPRESSION = 1000.0  # log(1 + c * magnitude): detail 40-60 dB down still counts in the flux


def frame_features(samples: np.ndarray, rate: float, first_frame: int = 0
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(centre times in s, features a frame: len(NAMES) columns) of every whole frame of
    `samples` (mono), frame k starting at sample k * HOP. `first_frame` numbers the first
    frame when `samples` starts at sample first_frame * HOP of a stream (its times follow).
    The flux of a stream's first frame compares with silence."""
    samples = np.asarray(samples, np.float64)
    count = (len(samples) - FRAME) // HOP + 1 if len(samples) >= FRAME else 0
    if count <= 0:
        return np.zeros(0), np.zeros((0, len(NAMES)))
    index = np.arange(FRAME)[None, :] + HOP * np.arange(count)[:, None]
    window = np.hanning(FRAME)
    spectrum = np.abs(np.fft.rfft(samples[index] * window, axis=1)) * (2.0 / window.sum())
    power = spectrum ** 2 / 2.0  # a full-scale sine's bin: its mean square, 0.5
    freqs = np.fft.rfftfreq(FRAME, 1.0 / rate)
    columns = [_db(power.sum(axis=1))]
    for low, high in BAND_EDGES_HZ:
        inside = (freqs >= low) & (freqs < min(high, rate / 2))
        columns.append(_db(power[:, inside].sum(axis=1)))
    compressed = np.log1p(COMPRESSION * spectrum)
    return _finish(compressed, columns, first_frame, rate)


def _finish(compressed: np.ndarray, columns: list[np.ndarray], first_frame: int,
            rate: float) -> tuple[np.ndarray, np.ndarray]:
    previous = np.vstack([np.zeros_like(compressed[:1]), compressed[:-1]])
    flux = _db(np.maximum(compressed - previous, 0.0).mean(axis=1))
    loud = columns[0]
    before = np.concatenate([loud[:1], loud[:-1]])
    punch = np.maximum(loud - before, 0.0)  # a hit's rise over the frame before it
    frames = np.column_stack([*columns, flux, punch])
    numbers = first_frame + np.arange(len(loud))
    times = (numbers * HOP + FRAME / 2) / rate
    return times, frames


def _db(power: np.ndarray) -> np.ndarray:
    return np.maximum(10.0 * np.log10(np.maximum(power, 1e-30)), FLOOR_DB)


class FrameStream:
    """A live stream's frames: feed every sample in order (any block size); `take()` hands
    out the frames made since the last call, the same as `frame_features` of the whole.
    One frame is kept back to give the next frame's flux and punch their predecessor."""

    def __init__(self, rate: float) -> None:
        self.rate = float(rate)
        self._buffer = np.zeros(0)  # from the start of frame max(_next - 1, 0) on
        self._next = 0  # the number of the next frame to make
        self._times: list[np.ndarray] = []
        self._frames: list[np.ndarray] = []

    def feed(self, samples: np.ndarray) -> None:
        self._buffer = np.concatenate([self._buffer, np.asarray(samples, np.float64)])
        first = max(self._next - 1, 0)  # the frame the buffer starts with
        times, frames = frame_features(self._buffer, self.rate, first)
        new = first + len(times) - self._next
        if new <= 0:
            return
        self._times.append(times[-new:])
        self._frames.append(frames[-new:])
        self._next += new
        self._buffer = self._buffer[(self._next - 1 - first) * HOP:]

    def take(self) -> tuple[np.ndarray, np.ndarray]:
        if not self._times:
            return np.zeros(0), np.zeros((0, len(NAMES)))
        times, frames = np.concatenate(self._times), np.vstack(self._frames)
        self._times, self._frames = [], []
        return times, frames


def beat_features(times: np.ndarray, frames: np.ndarray, beats: np.ndarray) -> np.ndarray:
    """Each beat's features (one row a beat: beat i spans beats[i]..beats[i+1], the last one
    a period long): the mean of the frames whose centre falls in it; a beat without a frame
    takes the one nearest its middle."""
    beats = np.asarray(beats, float)
    if len(beats) == 0 or len(times) == 0:
        return np.zeros((len(beats), frames.shape[1] if frames.ndim == 2 else len(NAMES)))
    period = float(np.median(np.diff(beats))) if len(beats) > 1 else 0.5
    ends = np.append(beats[1:], beats[-1] + period)
    first = np.searchsorted(times, beats)
    last = np.searchsorted(times, ends)
    sums = np.vstack([np.zeros(frames.shape[1]), np.cumsum(frames, axis=0)])
    counts = (last - first)[:, None]
    means = (sums[last] - sums[first]) / np.maximum(counts, 1)
    empty = counts[:, 0] == 0
    if empty.any():
        middle = np.clip(np.searchsorted(times, (beats + ends)[empty] / 2), 0, len(times) - 1)
        means[empty] = frames[middle]
    return means


def steady_grid(beats: np.ndarray, duration: float) -> np.ndarray:
    """A tracker's beats made one steady grid over the whole song (offline: it sees it all):
    the period starts as the commonest interval between beats (1 % bins), then the straight
    line through the beats that fall on it (within 15 % of a period) is fitted over a window
    around the middle beat that doubles each time (8 beats either side, 16, ...) until it
    holds every beat, and carried from the song's start to its end. The commonest interval
    alone is not the period: the tracker places each beat on its hop (10.7 ms at 48 kHz), so
    its intervals alternate between two values a hop apart and the commonest can be 0.8 %
    off, which over a song's 350 beats moved the grid's ends by half a beat. A line fitted
    on a window where that error is a fraction of a beat is right to a fraction of a hop,
    and the next window, twice as long, adds no beat it could number wrong. A tracker's
    stray, a stretch on the off-beat, a gap in a break, a stretch at another tempo in a pad
    do not move it. One tempo a song: a song that changes tempo is the tracker's to follow
    (the live path)."""
    beats = np.unique(np.asarray(beats, float))
    if len(beats) < 4:
        return beats
    intervals = np.diff(beats)
    usable = intervals[(intervals > 0.2) & (intervals < 2.0)]
    if len(usable) == 0:
        return beats
    bins = np.exp(np.arange(np.log(0.2), np.log(2.0), 0.01))
    counts, edges = np.histogram(usable, bins)
    peak = int(np.argmax(counts))
    near = usable[(usable >= edges[max(peak - 1, 0)]) & (usable <= edges[min(peak + 2,
                                                                            len(edges) - 1)])]
    period = float(np.median(near))
    origin = float(beats[np.argmin(np.abs(beats - np.median(beats)))])
    reach = max(origin - beats[0], beats[-1] - origin)
    half = GRID_FIRST_BEATS
    for _ in range(32):  # doublings: far more than a song's beats need
        inside = np.abs(beats - origin) <= half * period
        for _ in range(2):  # the line through the window's beats on the grid, then again
            index = np.round((beats - origin) / period)
            on = inside & (np.abs(beats - origin - index * period) < 0.15 * period)
            if on.sum() < 4 or np.ptp(index[on]) == 0:
                break
            fitted, start = (float(x) for x in np.polyfit(index[on], beats[on], 1))
            if fitted <= 0.0:
                break
            period, origin = fitted, start
        if half * period >= reach:
            break
        half *= 2
    first = -np.floor(origin / period + 0.25)  # a beat a little before 0 is the song's first
    last = np.floor((duration - origin) / period - 0.25)
    return np.maximum(origin + period * np.arange(first, last + 1), 0.0)


def tracker_beats(samples: np.ndarray, rate: float, block: int = 1024) -> np.ndarray:
    """The instrument's beat tracker (audio/analysis/beats.py) over a whole song, fed in
    blocks as a live stream would be: the time (s) of each beat it reports. Causal: a beat
    reported here is one a live show would have had (some milliseconds later)."""
    tracker = BeatTracker(rate)
    samples = np.ascontiguousarray(samples, np.float32)
    found, counted = [], 0
    for start in range(0, len(samples), block):
        tracker.feed(samples[start:start + block])
        if tracker.beats != counted and tracker.last_beat is not None:
            counted = tracker.beats
            found.append(tracker.last_beat / rate)
    return np.array(found)
