"""Time whole frames: simulate + cull + draw + HUD, offscreen at 1920x1080 by default.

    python benchmarks/bench_frame.py 16384 262144 1048576 --json out.json

The post chain runs whole (bloom and feedback on; `--post off`: exposure and the tone map only).
Each count runs at the seed's density (spawn and contain radius scaled by (N / 16384)^(1/3)),
settles for a few simulated seconds, has the camera frame the swarm as the live window does,
then renders frames with a fixed 1/60 s step. Whole frames are timed by the wall clock up to
ctx.finish() (CPU work included), each pass by GL timer queries where the driver has them,
and the CPU time the main thread spends on each stage of the frame (`time.thread_time`: the
show's Python work and the driver's work inside its GL calls, never the wait for the GPU; the
loop's own stamps, show/frame_cpu.py), with the HUD's lines and drawing timed the same way.
The HUD is drawn with pyglet in a hidden headless window where pyglet can open one (else
left out, and said). `--profile N` prints cProfile's N costliest functions of the timed frames
of each count (CPU inside GL calls shows under the moderngl method that made them). `--audio
WAV`: the show live with its input playing the song in real time (a clocked stand-in for the
sound card), its frames paced at --fps (60) so that each hears a show's frame of sound: the
frame's CPU has the analysis and the beat tracker a performer's has; without it the input is
silence (`--pace`: silent frames paced the same way; back to back, a CPU that never idles
between frames may run them faster than a paced show's). `--split`
runs as many frames again with every moderngl call timed (probes/gl_calls.py): the frame's
CPU split into the driver's (inside GL calls, by method) and the show's own Python. Beside the
stages: `wait`, the main thread's CPU in the wait for the frame's end (paced: the live loop's,
which sleeps; back to back: ctx.finish(), which NVIDIA's driver spins through), and `process`,
every thread's CPU from the frame's start to that wait's end.
 `--backend 4.3,4.1` times both
backends' frames side by side (default: both where the driver has compute shaders, else 4.1),
with a ratio line per count and far draw (the 4.1 backend draws far agents as points only:
the splat is a compute pass; its row is timed once, and compared with each 4.3 far draw).

`--steady SECONDS --fps 60`: steady frames instead (the first count only): the show played
live for that long as a headless show plays it (show/cli/live_show.py): the wall clock, the
loop paced at --fps with the governor, each frame waited for on the GPU as a swap is, the
telemetry written once a second and the garbage collected after each frame (show/idle_gc.py);
the intervals between frames done, their percentiles (99.9th: the issue's target is within
1.5 times the period) and the frames over 1.5 periods.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import platform
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_swarm import scaled_params  # run as a script: benchmarks/ is on the path
from probes.gl_calls import GlCalls
from probes.latency_devices import RATE, ClockedDevice

from swarm_instrument.audio.files.decode import read_audio
from swarm_instrument.audio.input.live_input import AudioInput
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.frame_cpu import STAGES
from swarm_instrument.show.idle_gc import IdleCollector
from swarm_instrument.show.loop import FixedStep, Loop, Offscreen, WallClock
from swarm_instrument.show.show import Show
from swarm_instrument.show.telemetry_files import Telemetry
from swarm_instrument.visual.gpu.context import BACKENDS, compute_missing, is_software
from swarm_instrument.visual.gpu.fence import fences_for
from swarm_instrument.visual.ui.hud import headless_text_context


def make_context(size: tuple[int, int]):
    """(ctx, hud or None, note): a pyglet headless context with the HUD, else plain EGL."""
    ctx, hud, note = headless_text_context(size)
    return ctx, hud, note.replace("text drawn", "HUD drawn").replace("no text", "HUD left out")


def bench_count(ctx, hud, count: int, args: argparse.Namespace, far: str,
                backend: str = "4.3") -> dict:
    params = scaled_params(count)
    if args.post == "full":  # the whole post chain: bloom and feedback, on any GL
        params.update({"post": "on", "bloom": 0.8, "feedback": 0.85, "feedback_zoom": 0.01})
    else:
        params["post"] = "off"  # exposure and the tone map only
    audio = song_input(args.audio) if args.audio else None
    show = Show(ctx, params, ShowOptions(seed=1, fixed_dt=1 / 60, live=audio is not None,
                                         gl=backend), audio=audio)
    if backend == "4.3":
        show.renderer.far_draw = far
    sink = Offscreen(show, args.size)
    framebuffer = sink.framebuffer
    for _ in range(round(args.settle * 30)):
        show.swarm.step(1 / 30, target=show.lure_position())
    for _ in range(4):  # the renderer measures the swarm; the camera snaps to frame it
        show.draw(framebuffer)
    show.renderer.read_counts_now()
    show.camera.follow(show.renderer.swarm_radius, 1e6, show.renderer.swarm_center)

    loop = Loop(show, FixedStep(1 / 60))  # the show's one loop: update, step, draw
    # Each frame is waited for, as a live show's: what it reads back needs no GL fence
    # (show/loop.py Loop.run, visual/gpu/fence.py Fences.finishing).
    fences = fences_for(ctx)
    if fences is not None:
        fences.finishing = True
    for _ in range(10):  # first frames compile shader variants: not what a show's frame costs
        loop.frame(*sink.target())
    frames, passes = [], {"simulate": [], "cull": [], "draw": [], "post": []}
    hud_cpu = []
    profile = cProfile.Profile() if args.profile else None
    started = time.perf_counter()
    first_cpu = show.cpu.frames
    # With a song, frames come at --fps as a live show's do, so each hears the sound a frame
    # of the show brings (back to back, a frame would hear a fraction of it).
    period, due = (1.0 / args.fps if args.audio or args.pace else 0.0), time.perf_counter()
    # Paced, each frame's end is waited for as the live loop waits (Loop.end_wait: asleep; a
    # driver's glFinish may spin a core for the whole GPU frame); back to back, ctx.finish()
    # (the wall time exact). `wait`: the main thread's CPU in that wait; `process`: every
    # thread's, from the frame's start to the wait's end (the audio's stand-in sound card and
    # its block analysis, in a show another process's, are threads here).
    end = loop.end_wait.wait if period else ctx.finish
    wait_cpu, process_cpu = [], []
    for _ in range(args.frames):
        # The whole frame by the wall clock, CPU work included, waiting for the GPU at the end
        # as a swap would (timer queries cannot nest, and the passes own theirs).
        ctx.finish()
        if period:
            due += period
            time.sleep(max(due - time.perf_counter(), 0.0))
        t0, p0 = time.perf_counter(), time.process_time()
        if profile is not None:
            profile.enable()
        loop.frame(*sink.target())
        c0 = time.thread_time()
        lines = show.hud_lines()
        if hud is not None:
            framebuffer.use()
            hud.draw(lines)
        hud_cpu.append((time.thread_time() - c0) * 1e3)
        if profile is not None:
            profile.disable()
        c1 = time.thread_time()
        end()
        wait_cpu.append((time.thread_time() - c1) * 1e3)
        process_cpu.append((time.process_time() - p0) * 1e3)
        if fences is not None:
            fences.finished()
        frames.append((time.perf_counter() - t0) * 1e3)
        for name, value in show.gpu_ms.items():
            if value is not None:
                passes[name].append(value)
        if time.perf_counter() - started > args.budget:
            break
    timed = show.cpu.recent()[-(show.cpu.frames - first_cpu):]
    stages = {name: statistics.median(timed[:, k]) for k, name in enumerate(STAGES)}
    cpu = {**stages, "frame": statistics.median(timed.sum(axis=1)),
           "hud": statistics.median(hud_cpu), "wait": statistics.median(wait_cpu),
           "process": statistics.median(process_cpu)}
    if args.split:
        cpu["split"] = split_frames(ctx, loop, sink, len(frames))
    if fences is not None:
        fences.finishing = False
    counts = show.renderer.read_counts_now()
    if profile is not None:
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(args.profile)
        print(f"# cProfile of {len(frames)} frames at {count} agents (tottime: own time, "
              "GL calls' CPU under their method)\n" + text.getvalue(), flush=True)
    row = {
        "count": count, "backend": backend, "far_draw": show.renderer.far_draw,
        "frames": len(frames), "frame_ms": statistics.median(frames),
        "frame_ms_max": max(frames),
        "passes_ms": {k: statistics.median(v) if v else None for k, v in passes.items()},
        "cpu_ms": cpu,
        "visible": counts.visible, "near": counts.near, "far": counts.far,
        "camera_distance": show.camera.distance,
    }
    show.release()
    return row


def song_input(path: str) -> AudioInput:
    """The live input as a performer's show has it, fed `path` in real time: 256-sample
    blocks every 5.3 ms from a clocked stand-in for the sound card (probes/latency_devices.py),
    on its own thread, into the input's ring."""
    frames, rate = read_audio(path)
    if rate != RATE:
        raise SystemExit(f"--audio {path}: {rate:g} Hz; the stand-in sound card runs at {RATE}")
    return AudioInput(sd=ClockedDevice(frames.mean(axis=1)), start_wait_s=5.0)


class FramesDone(Offscreen):
    """The offscreen sink, noting when each frame was done (the loop waited for the GPU)."""

    def __init__(self, show: Show, size: tuple[int, int]) -> None:
        super().__init__(show, size)
        self.done: list[float] = []

    def after(self, show: Show, index: int) -> None:
        self.done.append(time.perf_counter())


def steady(ctx, count: int, args: argparse.Namespace) -> dict:
    """`args.steady` seconds of live frames at `args.fps`: their intervals."""
    params = scaled_params(count)
    if args.post == "full":
        params.update({"post": "on", "bloom": 0.8, "feedback": 0.85, "feedback_zoom": 0.01})
    show = Show(ctx, params, ShowOptions(seed=1))
    show.governor.display_fps = args.fps
    sink = FramesDone(show, args.size)
    telemetry = Telemetry(Path(tempfile.mkdtemp(prefix="steady-")) / "telemetry.jsonl")
    collector = IdleCollector()
    in_frames = []  # collections that ran anyway (none expected while the collector holds)
    gc.callbacks.append(lambda phase, info: phase == "start" and in_frames.append(info))

    def idle() -> None:
        telemetry.maybe_write(time.perf_counter(), show.telemetry)
        collector.idle()

    loop = Loop(show, WallClock(), idle=idle)
    for _ in range(30):  # shader variants compiled, the governor settled
        loop.frame(*sink.target())
    end = time.perf_counter() + args.steady
    collector.start()
    collections_before = len(in_frames)
    loop.run(sink, stop=lambda: time.perf_counter() > end, cap=args.fps, govern=True)
    collector.stop()
    gc.callbacks.pop()
    telemetry.close()
    period = 1e3 / args.fps
    intervals = np.diff(sink.done[1:]) * 1e3
    row = {"count": count, "fps": args.fps, "seconds": args.steady, "frames": len(sink.done),
           "period_ms": round(period, 3),
           **{f"p{q:g}_ms": round(float(np.percentile(intervals, q)), 3)
              for q in (50, 99, 99.9)},
           "max_ms": round(float(intervals.max()), 3),
           "over_1.5_periods": int((intervals > 1.5 * period).sum()),
           "collections_outside_idle": len(in_frames) - collections_before - collector.runs,
           "gc": collector.state(), "governor": show.governor.state(show.params),
           "cpu_ms": show.cpu.medians()}
    show.release()
    return row


def split_frames(ctx, loop: Loop, sink: Offscreen, frames: int) -> dict:
    """`frames` more frames with every GL call timed: CPU ms a frame inside GL calls (by
    method, the costliest first) and outside them (the show's Python)."""
    total = 0.0
    fences = fences_for(ctx)
    finish = ctx.finish  # bound before the wrapping: its wait is not counted as a GL call
    with GlCalls() as calls:
        for _ in range(frames):
            # Each frame starts with the GPU idle, as a paced show's does: frames run back to
            # back would fill the driver's queue and have it wait (spinning, on NVIDIA) inside
            # the first call that finds it full, which is the GPU's time, not the frame's work.
            finish()
            if fences is not None:
                fences.finished()
            start = time.thread_time()
            loop.frame(*sink.target())
            total += (time.thread_time() - start) * 1e3
    total /= frames
    gl = calls.total_ms() / frames
    methods = {name: (round(ms / frames, 4), round(calls.count[name] / frames, 2))
               for name, ms in calls.ms.most_common()}
    shown = ", ".join(f"{name} {ms:.3f} ({n:g})" for name, (ms, n) in list(methods.items())[:8])
    print(f"# split over {frames} frames: CPU {total:.3f} ms a frame = Python {total - gl:.3f} "
          f"+ inside GL calls {gl:.3f}: {shown}", flush=True)
    return {"frame": round(total, 4), "python": round(total - gl, 4), "gl_calls": round(gl, 4),
            "methods_ms_calls": methods}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("counts", nargs="*", type=int, default=[16384, 65536])
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--size", default="1920x1080", help="frame size (default 1920x1080)")
    parser.add_argument("--settle", type=float, default=3.0, help="simulated seconds first")
    parser.add_argument("--frames", type=int, default=60, help="frames timed per count")
    parser.add_argument("--budget", type=float, default=30.0, help="wall seconds per count")
    parser.add_argument("--post", choices=("full", "off"), default="full",
                        help="full: bloom and feedback on (default); off: tone map only")
    parser.add_argument("--far", default="splat",
                        help="how far agents are drawn: splat (compute, the default), points "
                             "(GL points), or both: splat,points (each count timed both ways)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="print cProfile's N costliest functions of each count's frames")
    parser.add_argument("--split", action="store_true",
                        help="time every GL call in as many frames again: the driver's CPU "
                             "against the show's Python")
    parser.add_argument("--steady", type=float, default=0.0, metavar="SECONDS",
                        help="steady frames: this long at --fps, live (the first count)")
    parser.add_argument("--fps", type=float, default=60.0,
                        help="--steady's pace, and --audio's and --pace's frames' (60)")
    parser.add_argument("--pace", action="store_true",
                        help="the timed frames at --fps, as a live show's (--audio: always)")
    parser.add_argument("--audio", metavar="WAV",
                        help="a live show's input playing this song (48 kHz) in real time: "
                             "the analysis and the beat tracker in the frame's CPU")
    parser.add_argument("--backend", default=None,
                        help="4.3,4.1: the backends to time (default: both where the driver "
                             "has compute shaders, else 4.1)")
    args = parser.parse_args(argv)
    args.size = tuple(int(v) for v in args.size.lower().split("x"))

    ctx, hud, note = make_context(args.size)

    missing = compute_missing(ctx)
    available = ["4.1"] if missing else list(BACKENDS)
    backends = [b for b in (args.backend or ",".join(available)).split(",") if b]
    if not set(backends) <= set(available):
        parser.error(f"--backend {args.backend}: this context offers {', '.join(available)}")
    renderer = ctx.info["GL_RENDERER"]
    timing = "frames: wall time to ctx.finish(); passes: " + (
        "n/a (software GL)" if is_software(ctx) else "GL timer queries")
    sound = f"the live input playing {args.audio}" if args.audio else "the input silent"
    print(f"# {renderer}; {timing}; {args.size[0]}x{args.size[1]}; {note}; {sound}", flush=True)
    if args.steady:
        row = steady(ctx, args.counts[0], args)
        print(f"steady: {row['frames']} frames of {row['count']} agents in {args.steady:g} s "
              f"at {args.fps:g} fps: interval median {row['p50_ms']:.2f} ms, p99 "
              f"{row['p99_ms']:.2f}, p99.9 {row['p99.9_ms']:.2f} "
              f"({row['p99.9_ms'] / row['period_ms']:.2f} periods), max {row['max_ms']:.2f}; "
              f"{row['over_1.5_periods']} over 1.5 periods; garbage: {row['gc']}, "
              f"{row['collections_outside_idle']} collections outside idle time; governor: "
              f"{row['governor']['lowered'] or 'nothing lowered'}", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps({
                "benchmark": "steady frames", "renderer": renderer, "size": args.size,
                "post": args.post, "python": platform.python_version(),
                "date": time.strftime("%Y-%m-%d %H:%M:%S"), **row}, indent=2))
        return 0
    fars = args.far.split(",")
    if not fars or any(far not in ("splat", "points") for far in fars):
        parser.error(f"--far: splat, points or splat,points, not {args.far!r}")
    print(f"{'agents':>10} {'gl':>4} {'far draw':>8} {'frame ms':>9} {'sim':>7} {'cull':>7} "
          f"{'draw':>7} {'post':>7} {'visible':>9} {'far':>9} | CPU ms: {'frame':>6} "
          + " ".join(f"{name:>7}" for name in (*STAGES, "hud", "wait", "process")), flush=True)
    rows, ratios = [], []

    def ms(v):
        return f"{v:7.3f}" if v is not None else "      -"

    for count in args.counts:
        made = []
        for backend in backends:
            for far in (fars if backend == "4.3" else ["points"]):
                row = bench_count(ctx, hud, count, args, far, backend)
                rows.append(row)
                made.append(row)
                p = row["passes_ms"]
                cpu = row["cpu_ms"]
                print(f"{count:>10} {backend:>4} {row['far_draw']:>8} {row['frame_ms']:9.3f} "
                      f"{ms(p['simulate'])} {ms(p['cull'])} {ms(p['draw'])} {ms(p['post'])} "
                      f"{row['visible']:>9} {row['far']:>9} |         {cpu['frame']:6.3f} "
                      + " ".join(ms(cpu[name]) for name in (*STAGES, "hud", "wait", "process")),
                      flush=True)
        for gl41 in (r for r in made if r["backend"] == "4.1"):
            for gl43 in (r for r in made if r["backend"] == "4.3"):
                ratio = gl41["frame_ms"] / gl43["frame_ms"]
                ratios.append({"count": count, "far_draw_43": gl43["far_draw"], "ratio": ratio})
                print(f"{count:>10} 4.1 / 4.3 ({gl43['far_draw']}): {ratio:.2f}x the frame time",
                      flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "benchmark": "whole frame", "renderer": renderer, "timing": timing,
            "size": args.size, "hud": note, "post": args.post, "backends": backends,
            "audio": args.audio,
            "ratios_41_over_43": ratios, "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"), "results": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
