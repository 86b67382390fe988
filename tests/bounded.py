"""A call bounded in time and memory, as far as the platform allows: for the hostile-file tests
(tests/test_hostile_files.py), where a hang (a FIFO opened for reading) or an endless read
(/dev/zero) must fail the test instead of stopping the run or eating the machine's memory.

Linux: both bounds (SIGALRM, and RLIMIT_AS over the address space /proc tells). macOS: the
time bound (it does not enforce RLIMIT_AS). Windows: neither; the FIFO and device cases are
POSIX's anyway (marked `posix`), and CI runs every case with both bounds. Main thread only.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

TIME_LIMIT = 5.0  # seconds any one read or write may take
MEMORY_LIMIT = 512 << 20  # bytes of address space any one read or write may add


class Hang(BaseException):
    """Raised by `bounded` when time is up; not an Exception (nor an OSError, as TimeoutError
    is), so no `except OSError` in the code under test can turn it into a FileProblem."""


def _address_space() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize in /proc/self/status")


@contextmanager
def _memory_bound(memory: int) -> Iterator[None]:
    """RLIMIT_AS turns an endless read into a MemoryError (Linux)."""
    if not sys.platform.startswith("linux"):
        yield
        return
    import resource  # POSIX only: not on Windows

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _address_space() + memory
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextmanager
def _time_bound(seconds: float) -> Iterator[None]:
    """SIGALRM interrupts even a blocking open() of a FIFO (PEP 475: a handler that raises
    stops the retry). POSIX only."""
    if not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise Hang(f"still running after {seconds} s: it hangs")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def bounded(seconds: float = TIME_LIMIT, memory: int = MEMORY_LIMIT) -> Iterator[None]:
    """Fail (Hang, MemoryError) instead of hanging or eating the machine's memory."""
    with _memory_bound(memory), _time_bound(seconds):
        yield
