"""The heartbeat: the show's sign of life to its supervisor (show/supervision/supervisor.py), down
a pipe about once a second, and where a played song is, so that after a restart `--audio-file`
goes on where it was.

With --audio-file the heartbeat carries the file's position, `@93.250.` instead of `.`; the
supervisor keeps the last one and when it read it (`SongPosition.heard`), and a restart asks
the next show for `--audio-start` that position and `--audio-start-clock` that moment on
CLOCK_MONOTONIC (the same clock in every process), so the new show starts the song where it
would have been by the time its audio opens, however long the restart took.
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import re
import signal
import sys
import time

_POSITION = re.compile(rb"@(\d{1,9}(?:\.\d{1,6})?)\.")


def beat_bytes(position: float | None) -> bytes:
    """One heartbeat: `.`, or `@SECONDS.` with the song's position."""
    if position is None or not math.isfinite(position) or position < 0:
        return b"."
    return b"@%.3f." % position


class SongPosition:
    """The supervisor's side: the last position a show's heartbeat said, and when."""

    def __init__(self, clock=time.monotonic) -> None:
        self.clock = clock
        self.seconds: float | None = None
        self.heard_at: float | None = None

    def heard(self, data: bytes) -> None:
        """Bytes read from the heartbeat pipe: the last whole position in them, if any."""
        found = _POSITION.findall(data)
        if found:
            self.seconds, self.heard_at = float(found[-1]), self.clock()

    def restart_args(self) -> list[str]:
        """What the next show is asked for (after the first show's own arguments, so these
        win): nothing when no position was heard."""
        if self.seconds is None or self.heard_at is None:
            return []
        return ["--audio-start", f"{self.seconds:.3f}", "--audio-start-clock",
                repr(self.heard_at)]


def audio_start(args: argparse.Namespace) -> float:
    """Where --audio-file starts: --audio-start, plus after a supervisor's restart the time
    since the song was there (--audio-start-clock)."""
    start = getattr(args, "audio_start", 0.0) or 0.0
    clock = getattr(args, "audio_start_clock", None)
    return start + (max(time.monotonic() - clock, 0.0) if clock is not None else 0.0)


class Heartbeat:
    """The show's side: a heartbeat down the pipe at most once a second, never blocking. A pipe
    with no reader left means the supervisor is gone: `orphaned` turns True and the show
    ends (on Linux the parent-death signal usually says it first)."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd
        self._next = 0.0
        self.orphaned = False
        if fd is not None:
            os.set_blocking(fd, False)
            die_with_parent()

    def beat(self, now: float, position: float | None = None) -> None:
        """`position`: seconds into the --audio-file playing, for a restart to go on from."""
        if self.fd is None or now < self._next:
            return
        self._next = now + 1.0
        try:
            os.write(self.fd, beat_bytes(position))
        except BrokenPipeError:
            self.orphaned = True
        except (BlockingIOError, OSError):
            pass


def die_with_parent(signum: int = signal.SIGTERM) -> bool:
    """Ask Linux to send `signum` to this process when its parent dies (prctl
    PR_SET_PDEATHSIG), so a supervisor killed with SIGKILL leaves no show rendering on its own
    and holding the OSC port. False where the system has no such call."""
    if not sys.platform.startswith("linux"):
        return False

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(1, signum, 0, 0, 0) != 0:  # PR_SET_PDEATHSIG = 1
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() == 1:  # the parent died before the call: nobody will signal us
        os.kill(os.getpid(), signum)
    return True
