"""Time the beat tracker as the frame pays for it: a frame's new samples fed, its view read.

    python benchmarks/bench_beats.py [--seconds 60] [--fps 60] [--rate 48000] [--json out.json]

A synthetic drum loop at 128 BPM with noise under it goes through a ring (audio/input/ring.py) in
10 ms blocks, as the audio callback writes it, and once a frame `RingBeatFeed.update` feeds
the tracker every sample since the last frame and reads the BeatInfo: the whole of the tracker's
work on the main thread. Reports the median, 99th percentile and maximum per frame, in wall
time and in the thread's CPU time (what the tracker costs, whatever else the machine runs;
the tempo is estimated every 0.17 s, the heavier frames), and the tempo it found.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

from swarm_instrument.audio.analysis.beat_feed import RingBeatFeed
from swarm_instrument.audio.analysis.beats import BeatTracker
from swarm_instrument.audio.input.ring import Ring
from swarm_instrument.audio.synth import drum_loop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--fps", type=float, default=60.0)
    parser.add_argument("--rate", type=int, default=48000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    samples = drum_loop(128.0, args.seconds, args.rate)
    ring = Ring()
    feed = RingBeatFeed(BeatTracker(args.rate))
    block = args.rate // 100
    per_frame = args.rate / args.fps
    costs, cpu, info, written, due = [], [], None, 0, per_frame
    while written + block <= len(samples):
        ring.write(samples[written:written + block, None])
        written += block
        if written >= due:  # a frame: the show's update reads what arrived
            due += per_frame
            began, began_cpu = time.perf_counter(), time.thread_time()
            info = feed.update(ring, written / args.rate)
            costs.append(time.perf_counter() - began)
            cpu.append(time.thread_time() - began_cpu)
    ms = sorted(c * 1000.0 for c in costs)
    cpu_ms = sorted(c * 1000.0 for c in cpu)
    result = {
        "frames": len(ms), "fps": args.fps, "rate": args.rate,
        "median_ms": statistics.median(ms), "p99_ms": ms[int(0.99 * (len(ms) - 1))],
        "max_ms": ms[-1], "bpm": info.bpm if info else None,
        "cpu_median_ms": statistics.median(cpu_ms),
        "cpu_p99_ms": cpu_ms[int(0.99 * (len(cpu_ms) - 1))],
        "cpu_max_ms": cpu_ms[-1], "cpu_mean_ms": statistics.fmean(cpu_ms),
        "machine": platform.processor() or platform.machine(),
    }
    print(f"beat tracking, {args.seconds:g} s at {args.rate} Hz read at {args.fps:g} fps: "
          f"median {result['median_ms']:.3f} ms, p99 {result['p99_ms']:.3f} ms, max "
          f"{result['max_ms']:.3f} ms a frame (wall); CPU median {result['cpu_median_ms']:.3f}, "
          f"mean {result['cpu_mean_ms']:.3f}, p99 {result['cpu_p99_ms']:.3f}, max "
          f"{result['cpu_max_ms']:.3f} ms; tempo found {result['bpm'] or 0:.2f} BPM "
          "(played at 128)")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
