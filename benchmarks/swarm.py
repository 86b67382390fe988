"""Time one simulation step, uniform grid and the seed's brute force side by side.

    python benchmarks/swarm.py 16384 65536 --json out.json

For each count the swarm first settles for a few simulated seconds (grid path, 1/30 s steps)
at the seed's density: spawn_radius and contain_radius scale by (N / 16384)^(1/3). Both paths
are then timed from that same settled state: GL timer queries where the driver has them, else
wall time around ctx.finish() (software GL). Prints a table and optionally writes JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from numpy.lib.stride_tricks import sliding_window_view  # noqa: E402

from control.params import Params  # noqa: E402
from visual.gl import create_headless_context, is_software  # noqa: E402
from visual.swarm import Swarm, grid_shape  # noqa: E402

SEED_COUNT = 16384


def scaled_params(count: int) -> Params:
    scale = (count / SEED_COUNT) ** (1 / 3)
    return Params({"count": count, "spawn_radius": 30 * scale, "contain_radius": 60 * scale})


def candidates_per_agent(position: np.ndarray, params: Params) -> float:
    """Mean agents in the 27 cells around each agent: the work of one grid step per agent."""
    shape = grid_shape(params)
    cell = np.floor((position - shape.origin) / shape.cell).astype(np.int64)
    cell = np.clip(cell, 0, np.array(shape.dims) - 1)
    index = cell[:, 0] + shape.dims[0] * (cell[:, 1] + shape.dims[1] * cell[:, 2])
    counts = np.bincount(index, minlength=shape.cells).reshape(shape.dims[::-1])
    block = sliding_window_view(np.pad(counts, 1), (3, 3, 3)).sum(axis=(-1, -2, -3))
    return float(block.reshape(-1)[index].mean())


def time_steps(ctx, swarm: Swarm, steps: int, budget_s: float, dt: float) -> list[float]:
    """Milliseconds for each of up to `steps` steps (fewer if `budget_s` runs out)."""
    use_queries = not is_software(ctx)
    times: list[float] = []
    started = time.perf_counter()
    for _ in range(steps):
        if use_queries:
            query = ctx.query(time=True)
            with query:
                swarm.step(dt)
            times.append(query.elapsed / 1e6)
        else:
            ctx.finish()
            t0 = time.perf_counter()
            swarm.step(dt)
            ctx.finish()
            times.append((time.perf_counter() - t0) * 1e3)
        if time.perf_counter() - started > budget_s:
            break
    return times


def bench_count(ctx, count: int, args: argparse.Namespace) -> dict:
    params = scaled_params(count)
    swarm = Swarm(ctx, params, neighbors="grid", seed=1)
    dt = 1 / 60
    settle_steps = round(args.settle * 30)
    t0 = time.perf_counter()
    for _ in range(settle_steps):
        swarm.step(1 / 30)
    ctx.finish()
    settle_wall = time.perf_counter() - t0
    position, velocity = swarm.read_state()
    row: dict = {"count": count, "settle_seconds": args.settle,
                 "contain_radius": params["contain_radius"], "settle_wall_s": settle_wall,
                 "candidates_per_agent": candidates_per_agent(position, params)}
    for path in args.paths:
        if path == "brute" and count > args.brute_max:
            row[path] = None
            continue
        swarm.set_state(position, velocity)
        swarm.neighbors = path
        swarm.step(dt)  # warm up (and re-sort into cell order for the grid)
        times = time_steps(ctx, swarm, args.steps, args.budget, dt)
        row[path] = {"median_ms": statistics.median(times), "min_ms": min(times),
                     "steps": len(times)}
    swarm.release()
    if row.get("grid") and row.get("brute"):
        row["speedup"] = row["brute"]["median_ms"] / row["grid"]["median_ms"]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("counts", nargs="*", type=int, default=[16384, 65536],
                        help="agent counts to time (default 16384 65536)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--settle", type=float, default=3.0,
                        help="simulated seconds to settle before timing (default 3)")
    parser.add_argument("--steps", type=int, default=30, help="steps timed per path")
    parser.add_argument("--budget", type=float, default=20.0,
                        help="wall seconds at most per path and count (default 20)")
    parser.add_argument("--paths", default="grid,brute", help="grid,brute (default both)")
    parser.add_argument("--brute-max", type=int, default=1 << 20,
                        help="skip brute force above this count (default 1048576)")
    args = parser.parse_args(argv)
    args.paths = [p for p in args.paths.split(",") if p]

    ctx = create_headless_context()
    renderer = ctx.info["GL_RENDERER"]
    timing = "wall time around ctx.finish()" if is_software(ctx) else "GL timer queries"
    print(f"# {renderer}; {timing}; settle {args.settle} s simulated", flush=True)
    print(f"{'agents':>10} {'grid ms':>10} {'brute ms':>10} {'brute/grid':>11} "
          f"{'candidates':>11}", flush=True)
    rows = []
    for count in args.counts:
        row = bench_count(ctx, count, args)
        rows.append(row)
        grid = f"{row['grid']['median_ms']:.3f}" if row.get("grid") else "-"
        brute = f"{row['brute']['median_ms']:.3f}" if row.get("brute") else "-"
        ratio = f"{row['speedup']:.1f}x" if "speedup" in row else "-"
        print(f"{count:>10} {grid:>10} {brute:>10} {ratio:>11} "
              f"{row['candidates_per_agent']:>11.0f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "benchmark": "swarm step", "renderer": renderer, "timing": timing,
            "gl_version": ctx.version_code, "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"), "results": rows}, indent=2))
    ctx.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
