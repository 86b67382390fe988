"""A fast start (issue 31): time to the first frame, and the supervisor's restart to a picture.

    python benchmarks/bench_start.py --count 16384 --size 1920x1080 --runs 3 --json start.json

`instrument.py --headless` as a performer starts it (the supervisor, then the show in its
child), with --telemetry: the show writes its first record right after its first frame is
drawn and taken (show/cli/live_show.py idle()), so the time from launching the command to that
record's line is the time to the first frame. Each run is a new process; the first with the
driver's shader caches off (Mesa's and NVIDIA's, by their environment variables) is the cold
start, the others warm. Then, in each warm run, after the show played --played seconds (3),
its process is killed (SIGKILL, as a crash) and the time from the kill to the first record of
the new child is the restart to a picture (the supervisor starts it at once, in the spare
process it made while the show played: show/supervision/spare.py). Reported in seconds.
`--trace`: each restart's timeline from the kill, by the stamps the processes write
(show/supervision/start_trace.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from swarm_instrument.show.supervision.start_trace import TRACE_ENV

ROOT = Path(__file__).resolve().parents[1]
NO_SHADER_CACHE = {"MESA_SHADER_CACHE_DISABLE": "true", "__GL_SHADER_DISK_CACHE": "0"}


def records(path: Path) -> list[dict]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        try:
            found.append(json.loads(line))
        except ValueError:
            pass  # a line being written
    return found


def wait_for(check, process: subprocess.Popen, timeout: float, what: str):
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        value = check()
        if value:
            return value
        if process.poll() is not None:
            raise RuntimeError(f"{what}: the instrument exited ({process.returncode})")
        time.sleep(0.002)
    raise RuntimeError(f"timed out waiting for {what}")


def one_run(args: argparse.Namespace, folder: Path, index: int, cold: bool,
            restart: bool) -> dict:
    telemetry = folder / f"run{index}.jsonl"
    env = dict(os.environ, SWARM_PRESETS_DIR=str(folder / "presets"),
               SWARM_STATE_DIR=str(folder / "state"),
               SWARM_RECOVERY_FILE=str(folder / "recovery.json"))
    if cold:
        env.update(NO_SHADER_CACHE)
    trace = folder / f"run{index}.trace"
    if args.trace:
        env[TRACE_ENV] = str(trace)
    argv = [sys.executable, str(ROOT / "instrument.py"), "--headless", "--no-midi",
            "--count", str(args.count), "--size", args.size, "--telemetry", str(telemetry)]
    with (folder / f"run{index}.log").open("w") as log:
        launched = time.perf_counter()
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
        try:
            first = wait_for(lambda: records(telemetry), process, args.timeout, "a first frame")
            row = {"cold": cold, "first_frame_s": round(time.perf_counter() - launched, 3),
                   "agents": first[0]["agents"]}
            if restart:
                child = first[0]["pid"]
                # a crash on stage comes after the show has played a while: the supervisor's
                # spare (show/supervision/spare.py) has had the time to import the show by then
                time.sleep(args.played)
                killed = time.perf_counter()
                killed_at = time.monotonic()
                os.kill(child, signal.SIGKILL)
                wait_for(lambda: any(r["pid"] != child for r in records(telemetry)), process,
                         args.timeout, "the restarted show's first frame")
                row["restart_to_picture_s"] = round(time.perf_counter() - killed, 3)
                if args.trace:
                    row["restart_trace"] = timeline(trace, killed_at)
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
    return row


def timeline(trace: Path, killed_at: float) -> list[str]:
    """The trace's marks from the kill on: `+SECONDS pid what`."""
    marks = []
    try:
        lines = trace.read_text().splitlines()
    except OSError:
        return marks
    for line in lines:
        stamp, pid, what = line.split(" ", 2)
        if float(stamp) >= killed_at:
            marks.append(f"+{float(stamp) - killed_at:.3f} {pid} {what}")
    return marks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=16384)
    parser.add_argument("--size", default="1920x1080")
    parser.add_argument("--runs", type=int, default=3, help="starts (the first cold)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds for each wait")
    parser.add_argument("--played", type=float, default=3.0,
                        help="seconds the show plays before it is killed (a restart each warm run)")
    parser.add_argument("--trace", action="store_true",
                        help="print each restart's timeline from the kill (the processes' marks)")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    if args.runs < 2:
        parser.error("--runs: at least 2 (one cold, one warm)")
    folder = Path(tempfile.mkdtemp(prefix="bench-start-"))
    rows = []
    for index in range(args.runs):
        row = one_run(args, folder, index, cold=index == 0, restart=index > 0)
        rows.append(row)
        extra = (f", restart to a picture {row['restart_to_picture_s']:.2f} s"
                 if "restart_to_picture_s" in row else "")
        print(f"run {index + 1} ({'cold' if row['cold'] else 'warm'}): first frame "
              f"{row['first_frame_s']:.2f} s at {row['agents']} agents{extra}", flush=True)
        for line in row.get("restart_trace", []):
            print(f"    {line}", flush=True)
    warm = [r["first_frame_s"] for r in rows if not r["cold"]]
    restarts = [r["restart_to_picture_s"] for r in rows if "restart_to_picture_s" in r]
    summary = {"cold_first_frame_s": rows[0]["first_frame_s"],
               "warm_first_frame_s": statistics.median(warm),
               "restart_to_picture_s": statistics.median(restarts),
               "restart_worst_s": max(restarts)}
    print(f"first frame: cold {summary['cold_first_frame_s']:.2f} s, warm (median) "
          f"{summary['warm_first_frame_s']:.2f} s; restart to a picture (median of "
          f"{len(restarts)}) {summary['restart_to_picture_s']:.2f} s, worst "
          f"{summary['restart_worst_s']:.2f} s (logs in {folder})", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "benchmark": "start", "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "python": platform.python_version(), "count": args.count, "size": args.size,
            **summary, "runs": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
