"""Stamps of a show's start on one clock, across processes, for benchmarks/bench_start.py
--trace: where a start or a supervisor's restart spends its time (the spare taking its command,
the GL context, the inputs, the show built, the first frame). Off unless the environment names
a file in SWARM_START_TRACE; then each mark appends one line `MONOTONIC PID WHAT` to it
(CLOCK_MONOTONIC is the same in every process of the machine). A mark costs nothing when off
and is never called inside a frame.
"""

from __future__ import annotations

import os
import time

TRACE_ENV = "SWARM_START_TRACE"


def mark(what: str) -> None:
    """Append `what`, stamped, to the trace file, if one is asked for (failures ignored: a
    benchmark's trace must never cost the show)."""
    path = os.environ.get(TRACE_ENV)
    if not path:
        return
    line = f"{time.monotonic():.4f} {os.getpid()} {what}\n"
    try:
        with open(path, "a", encoding="utf-8") as trace:
            trace.write(line)
    except OSError:
        pass
