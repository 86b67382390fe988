"""Beat accuracy on music whose beats are known: the instrument's tracker, live and offline,
against aubio alone and librosa.

    python -m benchmarks.bench_beat_accuracy [--songs rock-120,dnb-174] [--songs-dir DIR]
        [--methods ours,aubio,librosa] [--json out.json]

Needs Debian's fluidsynth and fluid-soundfont-gm, and the `bench` extra (mir_eval, librosa):
`pip install -e '.[bench]'`. The songs (benchmarks/music/gm_songs.py: hip-hop, house, techno, rock,
pop, drum and bass, swing, a ballad, punk, a tempo change, a quiet intro, a break) are written
as General MIDI and rendered by FluidSynth at 48 kHz into --songs-dir (kept between runs);
each is cut half a beat after its last beat. benchmarks/music/beat_scores.py says how each tracker
runs and how it is scored. Prints one row per song and tracker and checks the targets of
issue 30: F >= 0.95 on every song, the right tempo (error under 4 %), live within 0.05 of
offline, lock within 2 s of the anchor (the song's start, the drums entering, a tempo
change or the drums back after the break).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.music.beat_scores import Score, run_aubio, run_librosa, run_live, run_offline, score
from benchmarks.music.gm_songs import SONGS, Song
from swarm_instrument.audio.files.decode import read_audio

RATE = 48000
METHODS = ("ours offline", "ours live", "aubio", "librosa")
TEMPO_RIGHT = 4.0  # percent


def true_tempo(song: Song, times: np.ndarray) -> np.ndarray:
    """The written tempo at each time (s)."""
    starts = song.seconds(np.array([beat for beat, _ in song.tempo], float))
    index = np.searchsorted(starts, times, side="right") - 1
    return np.array([song.tempo[max(i, 0)][1] for i in index])


def run_song(song: Song, folder: Path, methods: tuple[str, ...]) -> dict[str, Score]:
    frames, rate = read_audio(song.render(folder, RATE))
    samples = np.ascontiguousarray(frames.mean(axis=1, dtype=np.float32))
    samples = samples[:int(song.seconds(song.beats - 0.5) * rate)]
    runners = {"ours offline": run_offline, "ours live": run_live, "aubio": run_aubio,
               "librosa": run_librosa}
    scores = {}
    for method in methods:
        track = runners[method](samples, int(rate))
        times = track.tempo[:, 0] if len(track.tempo) else np.zeros(0)
        scores[method] = score(track, song.beat_times, true_tempo(song, times), song.levels,
                               song.anchor)
    return scores


def row(song: Song, method: str, s: Score) -> str:
    lock = "never" if math.isinf(s.lock) else f"{s.lock:.1f}"
    return (f"| {song.name} | {song.style} | {method} | {s.f:.3f} | {s.tempo_error:.1f} | "
            f"{lock} | {s.level} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--songs", help="comma-separated song names (default: all)")
    parser.add_argument("--songs-dir", type=Path,
                        default=Path(tempfile.gettempdir()) / "swarm-beat-songs")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    songs = [make() for make in SONGS.values()]
    if args.songs:
        wanted = set(args.songs.split(","))
        songs = [s for s in songs if s.name in wanted or s.style in wanted]
        if not songs:
            parser.error(f"no song named {args.songs}; there are "
                         f"{', '.join(make().name for make in SONGS.values())}")
    methods = tuple(m.strip() for m in args.methods.split(","))
    unknown = set(methods) - set(METHODS)
    if unknown:
        parser.error(f"unknown method {', '.join(sorted(unknown))}; choose from "
                     f"{', '.join(METHODS)}")
    print("| song | style | tracker | F (±70 ms) | tempo error % | lock s | level |")
    print("|---|---|---|---|---|---|---|")
    results, missed = {}, []
    for song in songs:
        scores = run_song(song, args.songs_dir, methods)
        results[song.name] = {m: vars(s) | {"lock": None if math.isinf(s.lock) else s.lock}
                              for m, s in scores.items()}
        for method, s in scores.items():
            print(row(song, method, s), flush=True)
        for mode in ("ours offline", "ours live"):
            s = scores.get(mode)
            if s is None:
                continue
            if s.f < 0.95:
                missed.append(f"{song.name} {mode}: F {s.f:.3f} < 0.95")
            if not s.tempo_error <= TEMPO_RIGHT:
                missed.append(f"{song.name} {mode}: tempo off by {s.tempo_error:.1f} %")
            if not s.lock <= 2.0:
                missed.append(f"{song.name} {mode}: lock {s.lock:.1f} s after the anchor")
        if "ours offline" in scores and "ours live" in scores:
            gap = abs(scores["ours live"].f - scores["ours offline"].f)
            if gap > 0.05:
                missed.append(f"{song.name}: live F differs from offline by {gap:.3f}")
    print("\ntargets missed:" if missed else "\nevery target met", *missed, sep="\n  ")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
