"""The supervisor: runs the show in a child process and brings it back if it dies or hangs.

`instrument.py` (unless --no-supervisor, or a bounded run) starts itself again as the child
with `--no-supervisor --heartbeat-fd N`. The child writes one byte to that pipe about once a
second from its frame loop. When the child exits non-zero, is killed, or sends no heartbeat
for `hang_seconds`, the supervisor writes a crash report (the child's last stderr lines, a
traceback among them, and its last telemetry record) to a rotating log, and starts it again
with `--resume` within a few seconds. Three crashes within a minute and the next start is in
`--safe-mode` (no audio, no MIDI, the bundled shaders). Exit code 0 from the child (Esc twice,
Ctrl+C) ends the supervisor too. Supervisor process only, one thread reading the child's stderr.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Callable, Sequence

STATE_DIR = Path(os.environ.get("SWARM_STATE_DIR")
                 or Path.home() / ".local" / "state" / "swarm-instrument")
CRASH_LOG = "crash.log"
START_GRACE_S = 90.0  # software GL can take a while to compile and draw the first frame
HANG_S = 5.0
QUICK_CRASHES = 3  # this many within CRASH_WINDOW_S: start the next one in safe mode
CRASH_WINDOW_S = 60.0


def crash_logger(folder: Path) -> logging.Logger:
    """A logger appending to folder/crash.log, rotated at 1 MB, five old files kept."""
    folder.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger(f"swarm.crash.{folder}")
    if not logger.handlers:
        handler = logging.handlers.RotatingFileHandler(folder / CRASH_LOG, maxBytes=1_000_000,
                                                       backupCount=5, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


LAST_RECORD = "last-telemetry.json"


def last_telemetry(path: Path | None) -> dict | None:
    """The last whole JSON line of a telemetry file (or the one record of LAST_RECORD)."""
    if path is None:
        return None
    try:
        with open(path, "rb") as stream:
            stream.seek(0, os.SEEK_END)
            stream.seek(max(0, stream.tell() - 65536))
            lines = stream.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            continue
    return None


class BadStart(Exception):
    """The child refused its input (exit code 2 before any frame): restarting cannot help."""


class Supervisor:
    def __init__(self, child_args: Sequence[str], *, state_dir: Path | None = None,
                 hang_seconds: float = HANG_S, say: Callable[[str], None] = print,
                 program: Sequence[str] | None = None) -> None:
        state_dir = state_dir or STATE_DIR
        self.program = list(program or [
            sys.executable, str(Path(__file__).resolve().parent.parent / "instrument.py")])
        self.child_args = list(child_args)
        self.state_dir = state_dir
        self.telemetry = state_dir / LAST_RECORD  # the child keeps its latest record there
        self.hang_seconds = hang_seconds
        self.say = say
        self.log = crash_logger(state_dir)
        self.crashes: deque[float] = deque(maxlen=QUICK_CRASHES)
        self.restarts = 0
        self._stderr_tail: deque[str] = deque(maxlen=80)
        self._stop = False

    # ---- one child ------------------------------------------------------------------------------

    def _start(self, resume: bool, safe: bool) -> tuple[subprocess.Popen, int]:
        read_fd, write_fd = os.pipe()
        args = [*self.program, *self.child_args, "--no-supervisor", "--heartbeat-fd", str(write_fd),
                "--last-telemetry", str(self.telemetry)]
        if resume:
            args.append("--resume")
        if safe:
            args.append("--safe-mode")
        self._stderr_tail.clear()
        child = subprocess.Popen(args, pass_fds=(write_fd,), stderr=subprocess.PIPE,
                                 text=True, errors="replace")
        os.close(write_fd)
        threading.Thread(target=self._pump_stderr, args=(child,), daemon=True).start()
        return child, read_fd

    def _pump_stderr(self, child: subprocess.Popen) -> None:
        """Echo the child's stderr and keep its last lines for a crash report."""
        for line in child.stderr:
            self._stderr_tail.append(line.rstrip("\n"))
            sys.stderr.write(line)
            sys.stderr.flush()

    def _watch(self, child: subprocess.Popen, heartbeat: int) -> str | None:
        """Wait until the child ends (None: it ended cleanly) or why it must be restarted."""
        last_beat = time.monotonic()
        beaten = False
        while True:
            if self._stop and child.poll() is None:
                child.send_signal(signal.SIGINT)
            ready, _, _ = select.select([heartbeat], [], [], 0.25)
            now = time.monotonic()
            if ready:
                data = os.read(heartbeat, 4096)
                if data:
                    last_beat, beaten = now, True
            code = child.poll()
            if code is not None:
                if code == 0 or self._stop:
                    return None
                if code == 2 and not beaten:
                    raise BadStart  # bad input (a usage or file error): it would fail again
                how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
                return f"the show {how}"
            limit = self.hang_seconds if beaten else START_GRACE_S
            if now - last_beat > limit and not self._stop:
                child.kill()
                child.wait()
                return (f"the show stopped answering ({now - last_beat:.1f} s without a frame)"
                        if beaten else f"the show did not start within {limit:.0f} s")

    def _report(self, why: str) -> None:
        record = last_telemetry(self.telemetry)
        self.log.info("CRASH: %s\n--- last stderr lines ---\n%s\n--- last telemetry ---\n%s\n",
                      why, "\n".join(self._stderr_tail) or "(none)",
                      json.dumps(record) if record else "(none)")

    # ---- the loop -------------------------------------------------------------------------------

    def run(self) -> int:
        def stop(signum, frame):  # Ctrl+C reaches the child too; end after it ends
            self._stop = True

        previous = signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        resume = safe = False
        try:
            while True:
                child, heartbeat = self._start(resume, safe)
                try:
                    why = self._watch(child, heartbeat)
                except BadStart:
                    child.wait()
                    return 2
                finally:
                    os.close(heartbeat)
                if why is None or self._stop:
                    if child.poll() is None:
                        child.wait()
                    return 0
                now = time.monotonic()
                self.crashes.append(now)
                self.restarts += 1
                self._report(why)
                safe = len(self.crashes) == QUICK_CRASHES and now - self.crashes[0] < CRASH_WINDOW_S
                resume = True
                delay = min(0.5 * self.restarts, 3.0)
                self.say(f"supervisor: {why}; report in {self.state_dir / CRASH_LOG}; "
                         f"restarting in {delay:.1f} s{' in --safe-mode' if safe else ''}")
                time.sleep(delay)
        finally:
            signal.signal(signal.SIGINT, previous)


class Heartbeat:
    """The child's side: one byte down the pipe at most once a second, never blocking."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd
        self._next = 0.0
        if fd is not None:
            os.set_blocking(fd, False)

    def beat(self, now: float) -> None:
        if self.fd is None or now < self._next:
            return
        self._next = now + 1.0
        try:
            os.write(self.fd, b".")
        except (BlockingIOError, BrokenPipeError, OSError):
            pass
