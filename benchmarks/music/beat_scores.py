"""Run beat trackers over a song and score them against its true beats.

The instrument's tracker is run as the show runs it, frame by frame at 60 fps:
- offline: `OfflineAudio` (the render path), `update(t)` at each frame's time;
- live: an `AudioFrameSource` whose ring is written in blocks of a JACK period (256 samples)
  as they fall due, read by the show's frames at a jittered 60 fps (the live input's path,
  `_track_ring`, less the worker process: the same `RingBeatFeed` and tracker).
Its beats are where the frames' beat count passed a whole number (the moment the show's
`beat` route pulses), placed in time by the frame's tempo: what a performer sees.

References: aubio's `tempo` alone at its defaults (hop 512, window 1024), its beats where it
says one fell; librosa's `beat_track` over the whole song (offline, not causal).

Scores: the F-measure of beats within +-70 ms (mir_eval, the MIREX rule: beats in the first
5 s are not judged), the tempo error (median over time after 5 s, percent) and the time to
lock (from the song's anchor, the drums coming in or a tempo change, to the first of 8
reference beats in a row that all have an estimated beat within 70 ms). Where a song accepts
half time (drum and bass at 87 for 174), each level and phase is scored and the best kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mir_eval
import numpy as np

from swarm_instrument.audio.base import AudioFrameSource, OfflineAudio
from swarm_instrument.audio.input.ring import Ring

FPS = 60.0
BLOCK = 256  # a JACK period
WINDOW = 0.07  # the MIREX rule
LOCK_RUN = 8  # reference beats in a row, all matched: locked


@dataclass
class Track:
    """A tracker's output: beat times (s) and its tempo over time ((t, bpm) rows)."""

    beats: np.ndarray
    tempo: np.ndarray


@dataclass
class Score:
    f: float
    tempo_error: float  # percent, median after 5 s
    lock: float  # seconds after the anchor; inf: never
    level: str  # the tempo level and phase scored ("1", "1/2 on 1", "1/2 on 2")


def beats_from_frames(frames: list[tuple[float, object]]) -> Track:
    """(now, BeatInfo or None) a frame -> the beats the show counted, and its tempo."""
    beats, tempo, previous = [], [], None
    for now, info in frames:
        if info is None:
            previous = None
            continue
        tempo.append((now, info.bpm))
        if previous is not None and math.floor(info.beat) > math.floor(previous.beat):
            beats.append(info.at - (info.beat % 1.0) * 60.0 / info.bpm)
        previous = info
    return Track(np.array(beats), np.array(tempo).reshape(-1, 2))


def run_offline(samples: np.ndarray, rate: int) -> Track:
    audio = OfflineAudio(samples, rate, "song")
    frames = []
    for index in range(int(len(samples) / rate * FPS)):
        t = index / FPS
        audio.update(t)
        frames.append((t, audio.beat_info))
    return beats_from_frames(frames)


class BlockSource(AudioFrameSource):
    """The live input without its device: a ring written block by block by the caller."""

    tracks_beats = True

    def __init__(self, rate: int) -> None:
        super().__init__(rate, "blocks", "ok")
        self.ring = Ring()

    def _fill(self, now: float) -> bool:
        self.ring.read_newest(self._window)
        return True

    def _track_beats(self, now: float):
        return self._track_ring(self.ring, now)


def run_live(samples: np.ndarray, rate: int, seed: int = 0) -> Track:
    """Blocks arrive when their last sample was played; frames come every 1/60 s, each a
    few milliseconds late (jitter), and read whatever has arrived."""
    rng = np.random.default_rng(seed)
    source = BlockSource(rate)
    written, frames = 0, []
    for index in range(int(len(samples) / rate * FPS)):
        now = index / FPS + rng.uniform(0.0, 0.004)
        due = min(int(now * rate) // BLOCK * BLOCK, len(samples) // BLOCK * BLOCK)
        while written < due:
            source.ring.write(samples[written:written + BLOCK, None])
            written += BLOCK
        source.update(now)
        frames.append((now, source.beat_info))
    return beats_from_frames(frames)


def run_aubio(samples: np.ndarray, rate: int, hop: int = 512, window: int = 1024) -> Track:
    import aubio  # noqa: PLC0415 - only this reference needs aubio's module itself

    tracker = aubio.tempo("default", window, hop, rate)
    beats, tempo = [], []
    samples = np.ascontiguousarray(samples, np.float32)
    for start in range(0, len(samples) - hop + 1, hop):
        if tracker(samples[start:start + hop])[0]:
            beats.append(tracker.get_last_s())
        bpm = tracker.get_bpm()
        if bpm > 0 and start % (hop * 8) == 0:
            tempo.append(((start + hop) / rate, bpm))
    return Track(np.array(beats), np.array(tempo).reshape(-1, 2))


def run_librosa(samples: np.ndarray, rate: int) -> Track:
    import librosa  # noqa: PLC0415 - the reference is optional (the bench extra)

    y = librosa.resample(samples.astype(np.float32), orig_sr=rate, target_sr=22050)
    _, frames = librosa.beat.beat_track(y=y, sr=22050)
    beats = librosa.frames_to_time(frames, sr=22050)
    return Track(beats, _tempo_from_beats(beats))


def _tempo_from_beats(beats: np.ndarray) -> np.ndarray:
    if len(beats) < 2:
        return np.zeros((0, 2))
    return np.stack([beats[1:], 60.0 / np.diff(beats)], axis=1)


def references(beat_times: np.ndarray, levels: tuple[int, ...]) -> dict[str, np.ndarray]:
    """The reference beats at each accepted level: every beat, or every other one (both
    phases) for half time."""
    out = {"1": beat_times}
    if 2 in levels:
        out["1/2 on 1"] = beat_times[0::2]
        out["1/2 on 2"] = beat_times[1::2]
    return out


def lock_time(reference: np.ndarray, estimated: np.ndarray, anchor: float) -> float:
    """From `anchor` to the first of LOCK_RUN reference beats in a row that each have an
    estimated beat within WINDOW; inf if that never happens."""
    if len(estimated) == 0:
        return math.inf
    hit = np.array([np.min(np.abs(estimated - r)) <= WINDOW for r in reference])
    for k in np.flatnonzero(reference >= anchor - 1e-6):
        if k + LOCK_RUN <= len(reference) and hit[k:k + LOCK_RUN].all():
            return float(reference[k] - anchor)
    return math.inf


def score(track: Track, beat_times: np.ndarray, tempo_at: np.ndarray, levels: tuple[int, ...],
          anchor: float) -> Score:
    """`tempo_at`: the true tempo at each of the track's tempo rows' times."""
    best: Score | None = None
    estimated = mir_eval.beat.trim_beats(np.sort(track.beats))
    for level, reference in references(beat_times, levels).items():
        f = float(mir_eval.beat.f_measure(mir_eval.beat.trim_beats(reference), estimated,
                                          f_measure_threshold=WINDOW))
        divisor = 1.0 if level == "1" else 2.0
        late = track.tempo[:, 0] >= 5.0 if len(track.tempo) else np.zeros(0, bool)
        errors = (np.abs(track.tempo[late, 1] - tempo_at[late] / divisor)
                  / (tempo_at[late] / divisor) * 100.0)
        error = float(np.median(errors)) if len(errors) else math.inf
        candidate = Score(f, error, lock_time(reference, track.beats, anchor), level)
        if best is None or (candidate.f, -candidate.tempo_error) > (best.f, -best.tempo_error):
            best = candidate
    assert best is not None
    return best
