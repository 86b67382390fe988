"""How well the show finds a song's sections, offline and live, on songs of known form.

    python -m benchmarks.bench_form [--songs house-124,rock-120] [--songs-dir DIR] [--json F]

Needs Debian's fluidsynth and fluid-soundfont-gm. The songs (benchmarks/music/form_songs.py: house,
trance, hip-hop, rock and drum and bass with intros, grooves, builds, drops, breaks and outros
at known bars) are rendered at 48 kHz into --songs-dir (kept between runs) and cut at their
written end.

Offline (what a render uses, audio/form/sections.py): the beat tracker's beats made a steady
grid, the features a beat, the sections. Scored against the written section starts (the
song's start left out, as mir_eval's segment detection trims it): F-measure with a found
start matched one to one to a written start within one beat; the matched starts' error (ms);
how far every start found is from the song's nearest downbeat (ms); spurious starts a minute;
and the share of the song's time labelled as written.

Live (audio/form/form_live.py's LiveForm, what `--autopilot` runs live): the song fed in
blocks of 1024 samples, as a show's audio source does, to a beat tracker and to the form's
frames; the form reads that tracker's beats (the show's own: it runs no tracker of its own),
makes them a causal grid (audio/form/live_grid.py) and hands each beat to the follower once it
has ended and its frames exist; with --tracker-bar the bar's first beat is the tracker's
downbeat (`bar_start`), else the follower counts bars from its latest change. The CPU time
(process time) of the form, and of the tracker it shares, is timed per second of song.
Scored: for each
written start, the time from it to the first change announced (within one phrase of four
bars, else missed), how far a change's downbeat is from the song's nearest downbeat, and
spurious changes a minute (changes not within a beat before to a phrase after a written
start), and the share of the song's time whose label, as heard (from the change on), is the
written one (live cannot know an outro). Prints a table and checks issue 29's targets.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.music.form_songs import SONGS, Song
from swarm_instrument.audio.analysis.beats import BeatTracker
from swarm_instrument.audio.files.decode import read_audio
from swarm_instrument.audio.form.beat_features import (
    beat_features,
    frame_features,
    steady_grid,
    tracker_beats,
)
from swarm_instrument.audio.form.form_live import LiveForm
from swarm_instrument.audio.form.sections import find_sections

RATE = 48000
BLOCK = 1024


def match(reference: np.ndarray, found: np.ndarray, window: float) -> list[tuple[int, int]]:
    """One-to-one pairs (reference index, found index) within `window` s, nearest first."""
    pairs = sorted((abs(r - f), i, j) for i, r in enumerate(reference)
                   for j, f in enumerate(found) if abs(r - f) <= window)
    used_r, used_f, out = set(), set(), []
    for _, i, j in pairs:
        if i not in used_r and j not in used_f:
            used_r.add(i)
            used_f.add(j)
            out.append((i, j))
    return out


def f_measure(reference: np.ndarray, found: np.ndarray, window: float) -> float:
    hits = len(match(reference, found, window))
    if hits == 0:
        return 0.0
    precision, recall = hits / len(found), hits / len(reference)
    return 2 * precision * recall / (precision + recall)


def offline(song: Song, samples: np.ndarray) -> dict:
    duration = len(samples) / RATE
    grid = steady_grid(tracker_beats(samples, RATE), duration)
    times, frames = frame_features(samples, RATE)
    sections = find_sections(grid, beat_features(times, frames, grid), duration)
    beat = 60.0 / song.bpm
    reference, found = song.starts[1:], np.array([s.start for s in sections[1:]])
    pairs = match(reference, found, beat)
    errors = [abs(reference[i] - found[j]) * 1000 for i, j in pairs]
    on_time = np.arange(0.0, duration, 0.05)
    written = np.searchsorted(song.starts, on_time, side="right") - 1
    ours = np.searchsorted([s.start for s in sections], on_time, side="right") - 1
    same = np.mean([song.labels[w] == sections[o].label for w, o in zip(written, ours)])
    off = [float(np.min(np.abs(song.downbeats - f))) * 1000 for f in found]
    return {"f": f_measure(reference, found, beat), "error_ms": max(errors, default=None),
            "downbeat_ms": max(off, default=0.0),
            "spurious_per_min": (len(found) - len(pairs)) / (duration / 60.0),
            "labels": float(same), "sections": [(round(s.start, 2), s.label) for s in sections]}


def live(song: Song, samples: np.ndarray, tracker_bar: bool = False) -> dict:
    """The follower as a live show runs it: the source's tracker and LiveForm
    (audio/form/form_live.py) fed the song in blocks, the form read after each (a frame),
    each change with the time it became known."""
    tracker = BeatTracker(RATE)
    form, changes = LiveForm(RATE, tracker, tracker_bar), []
    form_cpu = tracker_cpu = 0.0
    for begin in range(0, len(samples), BLOCK):
        block = samples[begin:begin + BLOCK]
        started = time.process_time()
        tracker.feed(block)
        fed = time.process_time()
        form.feed(block)
        changes += [(change, form.heard / RATE) for change in form.update()]
        form_cpu += time.process_time() - fed
        tracker_cpu += fed - started
    starts, beat = song.starts, 60.0 / song.bpm
    phrase = 16 * beat
    news = [(c, known) for c, known in changes if not c.relabel]
    latency, late = [], []
    for start in starts[1:]:
        first = [c.at for c, _ in news if start - beat <= c.at <= start + phrase]
        latency.append(min(first) - start if first else None)
    for c, known in news:
        late.append(max(known - c.at, 0.0) * 1000)
    spurious = [c for c, _ in news
                if not any(s - beat <= c.at <= s + phrase for s in starts[1:])]
    downbeats = song.downbeats
    seconds = len(samples) / RATE
    off = [float(np.min(np.abs(downbeats - c.at))) * 1000 for c, _ in news]
    on_time = np.arange(0.0, len(samples) / RATE, 0.05)  # the label in effect, as heard
    written = np.searchsorted(song.starts, on_time, side="right") - 1
    heard = np.searchsorted([c.at for c, _ in changes], on_time, side="right") - 1
    labels = ["intro"] + [c.label for c, _ in changes]
    same = np.mean([song.labels[w] == labels[h + 1] for w, h in zip(written, heard)])
    return {"latency_s": latency, "missed": sum(x is None for x in latency),
            "spurious_per_min": len(spurious) / (len(samples) / RATE / 60.0),
            "late_ms": max(late, default=0.0), "downbeat_ms": max(off, default=0.0),
            "labels": float(same), "form_ms_per_s": form_cpu * 1000 / seconds,
            "tracker_ms_per_s": tracker_cpu * 1000 / seconds,
            "changes": [(round(c.at, 2), c.label) for c, _ in changes]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--songs", help="comma-separated song names (default: all)")
    parser.add_argument("--songs-dir", type=Path,
                        default=Path(tempfile.gettempdir()) / "swarm-form-songs")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--tracker-bar", action="store_true",
                        help="live, the bar's first beat from the tracker's downbeat")
    args = parser.parse_args(argv)
    names = args.songs.split(",") if args.songs else list(SONGS)
    unknown = [n for n in names if n not in SONGS]
    if unknown:
        parser.error(f"no song named {', '.join(unknown)}; there are {', '.join(SONGS)}")
    print("| song | offline F (±1 beat) | worst start error ms | worst ms off a downbeat | "
          "spurious/min | labels right | live: mean / worst s to a change | missed | "
          "spurious/min | worst ms off a downbeat | labels right |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    results, missed = {}, []
    for name in names:
        song = SONGS[name]()
        frames, rate = read_audio(song.render(args.songs_dir, RATE))
        samples = np.ascontiguousarray(frames.mean(axis=1, dtype=np.float32))
        samples = samples[:int(song.duration * rate)]
        off, on = offline(song, samples), live(song, samples, args.tracker_bar)
        results[name] = {"offline": off, "live": on}
        found = [x for x in on["latency_s"] if x is not None]
        mean = f"{np.mean(found):.2f} / {max(found):.2f}" if found else "-"
        error = "-" if off["error_ms"] is None else f"{off['error_ms']:.0f}"
        print(f"| {name} | {off['f']:.3f} | {error} | {off['downbeat_ms']:.0f} | "
              f"{off['spurious_per_min']:.2f} | "
              f"{off['labels']:.0%} | {mean} | {on['missed']} | {on['spurious_per_min']:.2f} | "
              f"{on['downbeat_ms']:.0f} | {on['labels']:.0%} |", flush=True)
        if off["f"] < 0.9:
            missed.append(f"{name} offline: F {off['f']:.3f} < 0.9")
        if off["downbeat_ms"] > 30:
            missed.append(f"{name} offline: a change {off['downbeat_ms']:.0f} ms off a downbeat "
                          "(> 30)")
        if on["missed"]:
            missed.append(f"{name} live: {on['missed']} section(s) without a change within "
                          "a phrase")
        if on["spurious_per_min"] > 1.0:
            missed.append(f"{name} live: {on['spurious_per_min']:.2f} spurious changes a minute")
    form_cpu = np.mean([r["live"]["form_ms_per_s"] for r in results.values()])
    tracker_cpu = np.mean([r["live"]["tracker_ms_per_s"] for r in results.values()])
    print(f"\nlive CPU a second of song: the form {form_cpu:.1f} ms, the tracker it shares "
          f"{tracker_cpu:.1f} ms")
    print("\ntargets missed:" if missed else "\nevery target met", *missed, sep="\n  ")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
