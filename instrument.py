"""The swarm instrument: `python instrument.py --help`.

Parses the command line, builds the parameters (defaults, then a preset, then options), and
runs the swarm. Bad input ends with one line naming what was wrong, not a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from control.files import FileProblem, load_preset_params, load_state, save_state
from control.params import MAX_COUNT, ParamError, Params
from visual.swarm import MAX_DT, NEIGHBOR_MODES

NO_DISPLAY_SECONDS = 10.0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value


def _time_step(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 < value <= MAX_DT + 1e-9:
        raise argparse.ArgumentTypeError(
            f"{value} s is outside (0, {MAX_DT:.4f}]: the seed clamps a step to 1/30 s; "
            "take a smaller step")
    return value


def _obstacle(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 4 or values[3] <= 0:
        raise argparse.ArgumentTypeError(f"an obstacle is X,Y,Z,RADIUS with RADIUS > 0, got "
                                         f"{text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="instrument.py",
        description="A live swarm of GPU boids driven by sound and MIDI.")
    run = parser.add_argument_group("running")
    run.add_argument("--headless", action="store_true",
                     help="simulate without a window (EGL); no display needed")
    run.add_argument("--frames", type=_positive_int, metavar="N",
                     help="run N frames, then exit")
    run.add_argument("--dt", type=_time_step, metavar="SECONDS",
                     help="advance exactly this step each frame instead of following the clock")
    run.add_argument("--seed", type=int, default=0, metavar="S",
                     help="random seed of the spawn: same seed, same start (default 0)")
    swarm = parser.add_argument_group("swarm")
    swarm.add_argument("--count", type=_positive_int, metavar="N",
                       help=f"number of agents (1 to {MAX_COUNT}; default 16384)")
    swarm.add_argument("--neighbors", choices=NEIGHBOR_MODES, default="grid",
                       help="neighbour search: uniform grid, or the seed's all-pairs reference")
    swarm.add_argument("--preset", metavar="PATH",
                       help="a preset JSON file; its \"params\" set parameters by name")
    swarm.add_argument("--obstacle", type=_obstacle, action="append", default=[],
                       metavar="X,Y,Z,R", help="a sphere the swarm avoids (up to 8)")
    state = parser.add_argument_group("state")
    state.add_argument("--state-in", metavar="PATH.npz",
                       help="start from this state (arrays position, velocity); sets the count")
    state.add_argument("--state-out", metavar="PATH.npz",
                       help="write the state after the last frame")
    return parser


def build_params(args: argparse.Namespace) -> Params:
    params = Params()
    if args.preset:
        load_preset_params(args.preset, params)
    if args.count is not None:
        params["count"] = args.count
    return params


def say(message: str) -> None:
    print(f"instrument: {message}", flush=True)


def has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def run_headless(args: argparse.Namespace, params: Params, *, seconds: float | None = None) -> None:
    """Simulate without a window until --frames, `seconds` of wall time, or Ctrl+C."""
    from visual.gl import GpuTimer, create_headless_context
    from visual.lure import Lure
    from visual.swarm import Swarm

    position = velocity = None
    if args.state_in:
        position, velocity = load_state(args.state_in)
        if args.count is not None and args.count != len(position):
            raise FileProblem(f"{args.state_in}: holds {len(position)} agents but --count is "
                              f"{args.count}; drop --count (the state sets it)")
        params["count"] = len(position)
    if args.state_out:
        folder = Path(args.state_out).resolve().parent
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            raise FileProblem(f"{args.state_out}: cannot write into {folder}")

    ctx = create_headless_context()
    swarm = Swarm(ctx, params, neighbors=args.neighbors, seed=args.seed,
                  position=position, velocity=velocity)
    if args.obstacle:
        swarm.set_obstacles(args.obstacle)
    lure = Lure(params["contain_radius"], flat=params["dimensions"] == 2)
    timer = GpuTimer(ctx)
    say(f"headless: {swarm.count} agents, {args.neighbors} neighbours, "
        f"{ctx.info['GL_RENDERER']}")

    sim_time = 0.0
    frame = 0
    started = last = last_report = time.perf_counter()
    try:
        while True:
            now = time.perf_counter()
            dt = args.dt if args.dt is not None else min(now - last, MAX_DT)
            last = now
            with timer:
                swarm.step(dt, target=lure.position(sim_time))
            sim_time += min(dt, MAX_DT)
            frame += 1
            if args.frames is not None and frame >= args.frames:
                break
            if seconds is not None and now - started >= seconds:
                break
            if now - last_report >= 1.0 and args.frames is None:
                last_report = now
                gpu = f", simulate {timer.last_ms:.2f} ms GPU" if timer.last_ms else ""
                say(f"frame {frame}, {frame / (now - started):.1f} fps{gpu}")
    except KeyboardInterrupt:
        say("stopped (Ctrl+C)")
    ctx.finish()
    elapsed = time.perf_counter() - started
    gpu_ms = timer.flush()
    gpu = f", last step {gpu_ms:.2f} ms on the GPU" if gpu_ms is not None else ""
    say(f"{frame} frames, {sim_time:.2f} s simulated in {elapsed:.2f} s "
        f"({elapsed / max(frame, 1) * 1000:.1f} ms a frame){gpu}")
    guarded = swarm.read_guarded()
    if guarded:
        say(f"the guard put back {guarded} agents whose state became NaN or infinite")
    if args.state_out:
        position, velocity = swarm.read_state()
        save_state(args.state_out, position, velocity)
        say(f"state of {len(position)} agents written to {args.state_out}")
    timer.release()
    swarm.release()
    ctx.release()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        params = build_params(args)
        if args.headless:
            run_headless(args, params)
        elif not has_display():
            say(f"no display found (DISPLAY is not set): running headless for "
                f"{NO_DISPLAY_SECONDS:.0f} s instead of opening a window")
            run_headless(args, params, seconds=NO_DISPLAY_SECONDS)
        else:
            say("the live window is not built yet: running headless (use --headless)")
            run_headless(args, params, seconds=None if args.frames else NO_DISPLAY_SECONDS)
    except (FileProblem, ParamError) as exc:
        print(f"instrument: error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"instrument: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
