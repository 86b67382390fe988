"""Time one simulation step, uniform grid and the seed's brute force side by side, pass by pass.

    python benchmarks/bench_swarm.py 16384 65536 --json out.json

Each count runs at the seed's density (spawn_radius and contain_radius scale by
(N / 16384)^(1/3)) in two states: `spawn` (as spawned, the swarm spread uniformly through the
spawn sphere) and `settled` (after --settle simulated seconds of 1/30 s grid steps, crowding
towards the lure). Each path is timed on a fresh swarm made from that state, twice from it: whole
steps (one GL timer query around each) and pass by pass (a query around each pass: simulate,
scan, scatter, order), the queries read once every step is issued, so timing
never syncs the GPU step by step. "cpu ms" is
the wall time a step takes in that unsynced loop (the rate a show could step at: the larger of
the CPU's and the GPU's work). Software GL (no meaningful timer queries) falls back to wall time
around ctx.finish(). "candidates" are the agents in the 27 cells around an agent (the grid's
work an agent), mean and max. Prints a table and optionally writes JSON.

`--variant NAME:key=value,...` also times the grid with other settings from the same states:
simulate_grid.comp's (visual/sim/swarm.py TUNING: lanes, local_size) on the compute backend, the
GL 4.1 backend's (visual/sim/swarm41.py: brute_below=0 times its grid below BRUTE_BELOW too).

`--backend 4.3,4.1` times both backends side by side from the same states (default: both where
the driver has compute shaders, else 4.1), with a ratio line per count (4.1 / 4.3, same run).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.visual.backends import backend_classes
from swarm_instrument.visual.gpu.context import (
    BACKENDS,
    compute_missing,
    create_headless_context,
    is_software,
)
from swarm_instrument.visual.sim.agents import spawn_state
from swarm_instrument.visual.sim.swarm import CROWD_EVERY, TUNING, Swarm, cell_budget, grid_shape

SWARMS = {backend: backend_classes(backend)[0] for backend in BACKENDS}
# What --variant may set on each backend.
TUNING_KEYS = {"4.3": set(TUNING), "4.1": {"brute_below", "sort_stages"}}

SEED_COUNT = 16384
DENSITIES = ("spawn", "settled")


def scaled_params(count: int) -> Params:
    scale = (count / SEED_COUNT) ** (1 / 3)
    return Params({"count": count, "spawn_radius": 30 * scale, "contain_radius": 60 * scale})


def _window3(counts: np.ndarray, axis: int) -> np.ndarray:
    """Sum over each cell and its two neighbours along `axis` (zero beyond the grid)."""
    padded = np.pad(counts, [(1, 1) if a == axis else (0, 0) for a in range(counts.ndim)])
    total = np.cumsum(padded, axis=axis, dtype=np.int32)
    total = np.concatenate([np.zeros_like(np.take(total, [0], axis=axis)), total], axis=axis)
    n = counts.shape[axis]
    return np.take(total, np.arange(3, n + 3), axis=axis) - np.take(total, np.arange(n), axis=axis)


def candidates(position: np.ndarray, params: Params) -> dict:
    """Agents in the 27 cells around each agent (the grid the swarm uses): mean, 99th
    percentile and max."""
    shape = grid_shape(params, cell_budget(len(position)))
    cell = np.floor((position - shape.origin) / shape.cell).astype(np.int64)
    cell = np.clip(cell, 0, np.array(shape.dims) - 1)
    index = cell[:, 0] + shape.dims[0] * (cell[:, 1] + shape.dims[1] * cell[:, 2])
    block = np.bincount(index, minlength=shape.cells).astype(np.int32).reshape(shape.dims[::-1])
    for axis in range(3):
        block = _window3(block, axis)
    per_agent = block.reshape(-1)[index]
    return {"mean": float(per_agent.mean()), "p99": float(np.percentile(per_agent, 99)),
            "max": int(per_agent.max()), "cells": shape.cells, "cell": shape.cell}


class Timing:
    """Timer queries read at the end (GPU), or wall time around ctx.finish() (software GL)."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.gpu = not is_software(ctx)
        self._queries: list = []

    def _query(self):
        query = self.ctx.query(time=True)
        self._queries.append(query)
        return query

    @contextmanager
    def around(self, record: list):
        """Time the block into `record` (a list that gets one entry: a query or a float)."""
        if self.gpu:
            query = self._query()
            with query:
                yield
            record.append(query)
        else:
            self.ctx.finish()
            t0 = time.perf_counter()
            yield
            self.ctx.finish()
            record.append((time.perf_counter() - t0) * 1e3)

    @staticmethod
    def ms(record: list) -> list[float]:
        """Milliseconds of each entry (reading a query waits for the GPU)."""
        return [item.elapsed / 1e6 if not isinstance(item, float) else item for item in record]


def time_path(ctx, swarm: Swarm, state, args: argparse.Namespace, dt: float) -> dict:
    """Whole steps, then pass by pass, each from `state` (set again, then one untimed step that
    sorts it into the grid), so every path and variant is timed on the same swarm."""
    timing = Timing(ctx)

    def restart() -> None:
        # A new state forgets the crowd measured before it (visual/sim/swarm.py): its own is
        # measured in untimed steps, then the state is set again keeping that measurement, so
        # the timed steps run the lanes chosen for it, from the state itself.
        swarm.set_state(*state)
        for _ in range(2 * CROWD_EVERY):
            swarm.step(dt)
        ctx.finish()
        swarm.set_state(*state, same_crowd=True)
        swarm.step(dt)
        ctx.finish()

    # Whole steps: one query around each step, none read until every step is issued.
    restart()
    steps: list = []
    started = time.perf_counter()
    for _ in range(args.steps):
        with timing.around(steps):
            swarm.step(dt)
        if time.perf_counter() - started > args.budget:
            break
    issued = time.perf_counter() - started
    ctx.finish()
    cpu_ms = issued / len(steps) * 1e3 if timing.gpu else None
    step_ms = timing.ms(steps)
    # Pass by pass: a query around each pass of each step.
    restart()
    passes: dict[str, list] = {}
    swarm.pass_timer = lambda name: timing.around(passes.setdefault(name, []))
    started = time.perf_counter()
    for _ in range(len(steps)):
        swarm.step(dt)
        if time.perf_counter() - started > args.budget:
            break
    swarm.pass_timer = None
    ctx.finish()
    pass_ms = {name: statistics.median(Timing.ms(record)) for name, record in passes.items()}
    return {"median_ms": statistics.median(step_ms), "min_ms": min(step_ms),
            "steps": len(step_ms), "cpu_ms": cpu_ms, "passes_ms": pass_ms,
            "passes_sum_ms": sum(pass_ms.values()),
            "lanes": swarm.lanes if swarm.neighbors == "grid" else None,
            "measured_candidates": swarm.mean_candidates}


def parse_variant(text: str) -> tuple[str, dict]:
    name, _, settings = text.partition(":")
    tuning = {}
    for item in filter(None, settings.split(",")):
        key, _, value = item.partition("=")
        tuning[key] = int(value)
    return name, tuning


def timed_swarm(ctx, params: Params, state, path: str, tuning: dict | None,
                args: argparse.Namespace, dt: float, backend: str = "4.3") -> dict:
    """Time a fresh swarm made from `state` (the driver may leave a buffer the CPU has read back
    in system memory: the swarm that settled is never the one timed), after --warm-up seconds
    of untimed steps, issued back to back (the kernels' first runs, and the GPU's clocks up
    again after the CPU's work between runs: ten steps were not enough on the H200, where the
    same pass on the same state then ran up to 2x slower from one run to the next). The timed
    steps start from `state` again."""
    kwargs = {"tuning": tuning} if tuning else {}
    swarm = SWARMS[backend](ctx, params, neighbors=path, position=state[0], velocity=state[1],
                            **kwargs)
    try:
        started = time.perf_counter()
        steps = 0
        while steps < 10 or time.perf_counter() - started < args.warm_up:
            swarm.step(dt)
            steps += 1
            if steps % 10 == 0:
                ctx.finish()  # keep the queue short: the loop's clock is the GPU's
        ctx.finish()
        return time_path(ctx, swarm, state, args, dt)
    finally:
        swarm.release()


def bench_count(ctx, count: int, args: argparse.Namespace) -> list[dict]:
    params = scaled_params(count)
    dt = 1 / 60
    rows = []
    spawn = spawn_state(count, params, 1)
    for density in args.densities:
        base: dict = {"count": count, "density": density,
                      "contain_radius": params["contain_radius"]}
        state = spawn
        if density == "settled":  # settled once, by the first backend: both time that state
            swarm = SWARMS[args.backends[0]](ctx, params, neighbors="grid", position=spawn[0],
                                             velocity=spawn[1])
            t0 = time.perf_counter()
            for _ in range(round(args.settle * 30)):
                swarm.step(1 / 30)
            ctx.finish()
            base["settle_seconds"] = args.settle
            base["settle_wall_s"] = time.perf_counter() - t0
            state = swarm.read_state()
            swarm.release()
        base["candidates"] = candidates(state[0], params)
        for backend in args.backends:
            row = {**base, "backend": backend}
            for path in args.paths:
                if path == "brute" and (count > args.brute_max
                                        or density != args.densities[-1]):
                    continue
                row[path] = timed_swarm(ctx, params, state, path, None, args, dt, backend)
            for name, tuning in args.variants:
                if set(tuning) <= TUNING_KEYS[backend]:
                    row.setdefault("variants", {})[name] = timed_swarm(
                        ctx, params, state, "grid", tuning, args, dt, backend)
            if row.get("grid") and row.get("brute"):
                row["speedup"] = row["brute"]["median_ms"] / row["grid"]["median_ms"]
            rows.append(row)
    return rows


def ratios(rows: list[dict]) -> list[dict]:
    """4.1 / 4.3 step time of each count, density and path timed on both (same run)."""
    found = []
    by_key = {(r["count"], r["density"], r["backend"]): r for r in rows}
    for (count, density, backend), row in by_key.items():
        other = by_key.get((count, density, "4.3"))
        if backend != "4.1" or other is None:
            continue
        for path in ("grid", "brute"):
            if row.get(path) and other.get(path):
                found.append({"count": count, "density": density, "path": path,
                              "ratio": row[path]["median_ms"] / other[path]["median_ms"]})
    return found


def print_row(row: dict) -> None:
    grid, brute = row.get("grid"), row.get("brute")
    cand = row["candidates"]

    def line(label: str, timed: dict | None, extra: str = "") -> None:
        if not timed:
            return
        cpu = f"{timed['cpu_ms']:.3f}" if timed["cpu_ms"] is not None else "-"
        passes = " ".join(f"{k} {v:.3f}" for k, v in timed["passes_ms"].items())
        print(f"{row['count']:>10} {row['density']:>8} {row['backend']:>4} {label:>12} "
              f"{timed['median_ms']:>9.3f} "
              f"{timed['min_ms']:>9.3f} {cpu:>8} {cand['mean']:>7.0f} {cand['max']:>6} "
              f"{extra}  {passes}", flush=True)

    line("grid", grid, f"lanes {grid['lanes']}" if grid else "")
    line("brute", brute, f"{row['speedup']:.0f}x" if "speedup" in row else "")
    for name, timed in row.get("variants", {}).items():
        line(name, timed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("counts", nargs="*", type=int, default=[16384, 65536],
                        help="agent counts to time (default 16384 65536)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--settle", type=float, default=3.0,
                        help="simulated seconds of the settled state (default 3)")
    parser.add_argument("--densities", default="spawn,settled",
                        help="spawn,settled (default both)")
    parser.add_argument("--steps", type=int, default=20,
                        help="steps timed per path, whole and pass by pass (default 20)")
    parser.add_argument("--warm-up", type=float, default=0.5,
                        help="seconds of untimed steps before each path is timed (default 0.5)")
    parser.add_argument("--budget", type=float, default=20.0,
                        help="wall seconds at most per path and count (default 20)")
    parser.add_argument("--paths", default="grid,brute", help="grid,brute (default both)")
    parser.add_argument("--brute-max", type=int, default=1 << 20,
                        help="skip brute force above this count (default 1048576)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME:K=V,...",
                        help="also time the grid with these TUNING settings")
    parser.add_argument("--backend", default=None,
                        help="4.3,4.1: the backends to time (default: both where the driver "
                             "has compute shaders, else 4.1)")
    args = parser.parse_args(argv)
    args.paths = [p for p in args.paths.split(",") if p]
    given = [d for d in args.densities.split(",") if d]
    if not set(given) <= set(DENSITIES) or "spawn" not in given:
        parser.error("--densities: spawn, or spawn,settled")
    args.densities = [d for d in DENSITIES if d in given]  # spawn first: settled starts there
    args.variants = [parse_variant(v) for v in args.variant]

    ctx = create_headless_context("4.1")
    missing = compute_missing(ctx)
    available = ["4.1"] if missing else list(BACKENDS)
    args.backends = [b for b in (args.backend or ",".join(available)).split(",") if b]
    if not set(args.backends) <= set(available):
        parser.error(f"--backend {args.backend}: this context offers {', '.join(available)}"
                     + (f" ({missing})" if missing else ""))
    renderer = ctx.info["GL_RENDERER"]
    timing = "wall time around ctx.finish()" if is_software(ctx) else "GL timer queries"
    print(f"# {renderer}; {timing}; settled: {args.settle} s simulated; backends "
          f"{', '.join(args.backends)}", flush=True)
    print(f"{'agents':>10} {'density':>8} {'gl':>4} {'path':>12} {'median ms':>9} "
          f"{'min ms':>9} {'cpu ms':>8} {'cand':>7} {'max':>6}  passes (median ms)", flush=True)
    rows = []
    for count in args.counts:
        made = bench_count(ctx, count, args)
        for row in made:
            rows.append(row)
            print_row(row)
        for ratio in ratios(made):
            print(f"{ratio['count']:>10} {ratio['density']:>8}  4.1 / 4.3 {ratio['path']:>5}: "
                  f"{ratio['ratio']:.2f}x the step time", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "benchmark": "swarm step", "renderer": renderer, "timing": timing,
            "gl_version": ctx.version_code, "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"), "backends": args.backends,
            "results": rows, "ratios_41_over_43": ratios(rows)}, indent=2))
    ctx.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
