"""A spare show process, started ahead of need, so that a show that dies is back within a
second.

A new Python process spends most of a restart importing the show (0.9 s on the H200's host,
more on a laptop) before it can open GL and draw. The supervisor starts the next show's process
as soon as the current one plays its first frame: it imports everything, then waits, reading
one line from its stdin. When the show dies, the supervisor writes the new show's command line
there (with --resume, --fresh or --safe-mode as the crash decided), and the spare plays it;
the supervisor's heartbeat pipe was handed to it when it started. A spare that died meanwhile
is replaced by a plain start. Closing its stdin (the supervisor ending, or gone) ends it.

Supervisor process (`Spare`) and the spare's own (`wait_for_command`, run by instrument.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Sequence

SPARE_FLAG = "--spare-for-supervisor"  # instrument.py's internal mode: wait for a command
DROP_WAIT_S = 2.0  # a dropped spare reads its EOF and ends; killed if it takes longer


class Spare:
    """The supervisor's side: the waiting process, its heartbeat pipe and its stderr.
    `prepare`: what the spare makes ready beyond its imports (instrument.py's spare():
    "headless-gl", the GL context of a headless show, which on the H200's host waits 1-1.9 s
    for a killed show's teardown when made after it)."""

    def __init__(self, program: Sequence[str], prepare: Sequence[str] = ()) -> None:
        self.heartbeat, write_fd = os.pipe()
        self.write_fd = write_fd  # the same number in the spare (pass_fds keeps numbers)
        # A process group of its own, as the show's: a Ctrl+C at the terminal is the
        # supervisor's to pass on.
        self.process = subprocess.Popen([*program, SPARE_FLAG, *prepare], stdin=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, errors="replace",
                                        pass_fds=(write_fd,), process_group=0)
        os.close(write_fd)

    @property
    def pid(self) -> int:
        return self.process.pid

    def take(self, argv: Sequence[str]) -> subprocess.Popen | None:
        """Hand it the show's command line (its arguments, without the program): the
        process, now the show's; None if the spare died meanwhile (dropped then)."""
        if self.process.poll() is None:
            try:
                self.process.stdin.write(json.dumps(list(argv)) + "\n")
                self.process.stdin.close()
                return self.process
            except (BrokenPipeError, OSError):
                pass
        self.drop()
        return None

    def drop(self) -> None:
        """No longer needed: it ends on its stdin's end, or is killed."""
        try:
            self.process.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.process.wait(timeout=DROP_WAIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        try:
            os.close(self.heartbeat)
        except OSError:
            pass


def wait_for_command() -> list[str] | None:
    """The spare's side: the show's command line from stdin, once the supervisor needs it;
    None when stdin ends first (no show to play) or holds something else than a list of
    strings (not a supervisor's: said on stderr)."""
    line = sys.stdin.readline()
    if not line:
        return None
    try:
        argv = json.loads(line)
    except json.JSONDecodeError:
        argv = None
    if not isinstance(argv, list) or not all(isinstance(arg, str) for arg in argv):
        print(f"instrument: {SPARE_FLAG} is the supervisor's own mode: it reads the show's "
              "arguments as a JSON list on stdin; run instrument.py without it",
              file=sys.stderr)
        return None
    return argv
