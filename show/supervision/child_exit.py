"""A child's death seen as it begins, not once the kernel has finished it.

A show killed on the H200's host is reaped 1.5-1.9 s after its SIGKILL (bench_start.py
--trace): the kernel tears the process down first, and a GL process's teardown (the GPU
driver closing its channels and unmapping its memory) takes that long; its pipes close and
waitpid answers only at the end. The supervisor need not wait for it: on Linux the kernel marks
a task PF_EXITING the moment it starts to exit and stores the status waitpid will give
(/proc/PID/stat, fields 9 and 52), so the next show can start beside the old one's teardown.
Elsewhere (no /proc) this says nothing and the supervisor waits as before. Supervisor only.
"""

from __future__ import annotations

PF_EXITING = 0x4  # include/linux/sched.h: getting shut down


def exiting(pid: int) -> int | None:
    """The return code (Popen's convention: -N for signal N) of a child that has begun to
    exit, or None while it lives, once reaped, or where /proc cannot say."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
    except OSError:
        return None
    # "pid (comm) state ..." where comm may hold spaces and parentheses: the fields after
    # the last ')'
    fields = text[text.rfind(b")") + 2:].split()
    try:
        flags, status = int(fields[6]), int(fields[49])  # fields 9 and 52 of proc(5)
    except (IndexError, ValueError):
        return None  # a kernel older than 3.5 has no exit_code field
    if not flags & PF_EXITING:
        return None
    signal_number = status & 0x7F
    return -signal_number if signal_number else (status >> 8) & 0xFF
