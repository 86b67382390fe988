"""The supervisor: runs the show in a child process and brings it back if it dies or hangs.

`instrument.py` (unless --no-supervisor, or a bounded run) starts itself again as the child
with `--no-supervisor --heartbeat-fd N`. The child writes a heartbeat to that pipe about once a
second from its frame loop (with --audio-file, the song's position: heartbeat.py). When the
child exits non-zero, is killed, or sends no heartbeat for `hang_seconds`, the supervisor
writes a crash report (the child's last stderr lines, a traceback among them, and its last
telemetry record) to a rotating log, and starts it again with `--resume` (and the song where
it was): at once the first time (and after a show that played a while), then after a delay
that doubles while crashes follow each other quickly. A resumed show that dies again within
`QUICK_S` starts fresh (the default look): a state that keeps killing it is not resumed.
Three crashes within a minute and the next start is in `--safe-mode` (no audio, no MIDI, the
bundled shaders). Exit code 0 from the child (Esc twice, Ctrl+C) ends the supervisor too.

Signals: the child runs in a process group of its own, so a Ctrl+C at the terminal reaches the
supervisor only, which passes it on to the child once; the child (`StopSignals`) finishes its
frame and ends cleanly (screenshot, telemetry, files), exit 0. A second Ctrl+C is passed on
too and forces the child's end. SIGTERM the same. The child ends when the supervisor dies
(Linux: a parent-death signal; anywhere: a heartbeat pipe with no reader left).
Supervisor process only, one thread reading the child's stderr.
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

from swarm_instrument.control.looks.user_folders import state_dir
from swarm_instrument.show.supervision.child_exit import exiting
from swarm_instrument.show.supervision.heartbeat import SongPosition
from swarm_instrument.show.supervision.spare import Spare
from swarm_instrument.show.supervision.start_trace import mark

CRASH_LOG = "crash.log"
START_GRACE_S = 90.0  # software GL can take a while to compile and draw the first frame
HANG_S = 5.0
QUICK_CRASHES = 3  # this many within CRASH_WINDOW_S: start the next one in safe mode
CRASH_WINDOW_S = 60.0
QUICK_S = 20.0  # a show that dies sooner than this after its start died "quickly"
# A show that died is started again at once (the picture back as soon as a new process can
# draw: bench_start.py measures it); only when it dies quickly again does the next start wait,
# 0.5 s, doubling while such crashes follow each other, at most 30 s.
FIRST_DELAY_S = 0.5
MAX_DELAY_S = 30.0
STOP_GRACE_S = 30.0  # after a stop was passed on, the child is killed if still there
WATCH_S = 0.05  # how often the child is looked at between heartbeats (a death seen this soon)


def default_state_dir() -> Path:
    """Where crash reports and the show's latest telemetry live (the user's state folder:
    control/looks/user_folders.py)."""
    return state_dir()


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


def reap_later(child: subprocess.Popen) -> None:
    """Reap a dying child on a thread of its own, once its teardown is done."""
    threading.Thread(target=child.wait, name="reap-show", daemon=True).start()


def wait_exiting(child: subprocess.Popen, timeout: float = 10.0) -> None:
    """After a kill: until the child has begun to exit (then reaped later) or is gone."""
    deadline = time.monotonic() + timeout
    while child.poll() is None and time.monotonic() < deadline:
        if exiting(child.pid) is not None:
            reap_later(child)
            return
        time.sleep(0.005)
    if child.poll() is None:
        child.wait()


class BadStart(Exception):
    """The child refused its input (exit code 2 before any frame): restarting cannot help."""


class Supervisor:
    def __init__(self, child_args: Sequence[str], *, state_dir: Path | None = None,
                 hang_seconds: float = HANG_S, say: Callable[[str], None] | None = None,
                 program: Sequence[str] | None = None, playing_note: str | None = None,
                 spare: bool = False, spare_prepare: Sequence[str] = ()) -> None:
        """`playing_note`: said once the first child plays its first frame, so that a start
        the child refuses (bad input, exit 2) says that one line and nothing before it.
        `spare`: keep the next show's process started ahead of need (show/supervision/spare.py; the
        program must know its SPARE_FLAG, as instrument.py does)."""
        state_dir = state_dir or default_state_dir()
        self.program = list(program or [sys.executable, "-m", "swarm_instrument.instrument"])
        self.child_args = list(child_args)
        self.state_dir = state_dir
        self.telemetry = state_dir / LAST_RECORD  # the child keeps its latest record there
        self.hang_seconds = hang_seconds
        self.say = say or logging.getLogger(__name__).info
        self.log = crash_logger(state_dir)
        self.crashes: deque[float] = deque(maxlen=QUICK_CRASHES)
        self.restarts = 0
        self._stderr_tail: deque[str] = deque(maxlen=80)
        self._stop = False
        self._stops = 0  # signals received: each is passed on to the child once
        self._child: subprocess.Popen | None = None
        self._beaten = False  # the current child has sent a heartbeat: it is playing
        self._held: int | None = None  # a stop that came before that, passed on then
        self._stopped_at: float | None = None
        self._playing_note = playing_note
        self._use_spare = spare
        self._spare_prepare = tuple(spare_prepare)
        self._spare: Spare | None = None
        self.spares_taken = 0  # restarts played by a spare process
        self.song = SongPosition()  # where --audio-file was, by the last heartbeat

    # ---- one child ------------------------------------------------------------------------------

    def _args(self, write_fd: int, resume: bool, safe: bool, fresh: bool) -> list[str]:
        """The show's arguments (without the program)."""
        args = [*self.child_args, "--no-supervisor", "--heartbeat-fd", str(write_fd),
                "--last-telemetry", str(self.telemetry)]
        return (args + ["--resume"] * resume + ["--safe-mode"] * safe + ["--fresh"] * fresh
                + self.song.restart_args())

    def _start(self, resume: bool, safe: bool, fresh: bool) -> tuple[subprocess.Popen, int]:
        self._stderr_tail.clear()
        spare, self._spare = self._spare, None
        child = None
        if spare is not None:
            child = spare.take(self._args(spare.write_fd, resume, safe, fresh))
        mark("supervisor: show started" + (" (the spare)" if child is not None else ""))
        if child is not None:
            read_fd = spare.heartbeat
            self.spares_taken += 1
        else:
            read_fd, write_fd = os.pipe()
            # A process group of its own: a Ctrl+C at the terminal reaches the supervisor,
            # which passes it on once (a second copy would force the child's end mid-shutdown).
            child = subprocess.Popen([*self.program, *self._args(write_fd, resume, safe, fresh)],
                                     pass_fds=(write_fd,), stderr=subprocess.PIPE, text=True,
                                     errors="replace", process_group=0)
            os.close(write_fd)
        self._child = child
        self._beaten = False
        if self._stops:  # a stop came in while this child was starting
            self._held = signal.SIGINT
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
        beaten = self._beaten = False
        while True:
            if self._stopped_at is not None and child.poll() is None and \
                    time.monotonic() - self._stopped_at > STOP_GRACE_S:
                child.kill()  # a stop passed on long ago and still no end: it hangs
            ready, _, _ = select.select([heartbeat], [], [], WATCH_S)
            now = time.monotonic()
            if ready:
                data = os.read(heartbeat, 4096)
                if data:
                    last_beat, beaten = now, True
                    self.song.heard(data)
                    if not self._beaten:  # playing: its own stop handling is in place now
                        self._beaten = True
                        if self._use_spare and self._spare is None and not self._stop:
                            # the next show, ahead of need
                            self._spare = Spare(self.program, self._spare_prepare)
                        if self._playing_note:
                            self.say(self._playing_note)
                            self._playing_note = None
                        if self._held is not None:
                            self._pass_on(self._held)
            code = child.poll()
            if code is None and not self._stop:
                code = exiting(child.pid)  # dying: the next show need not wait for its teardown
                if code is not None:
                    reap_later(child)
            if code is not None:
                mark(f"supervisor: the show ended ({code})")
                if code == 0 or self._stop:
                    return None
                if code == 2 and not beaten:
                    raise BadStart  # bad input (a usage or file error): it would fail again
                how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
                return f"the show {how}"
            limit = self.hang_seconds if beaten else START_GRACE_S
            if now - last_beat > limit and not self._stop:
                child.kill()
                wait_exiting(child)
                return (f"the show stopped answering ({now - last_beat:.1f} s without a frame)"
                        if beaten else f"the show did not start within {limit:.0f} s")

    def _report(self, why: str) -> None:
        record = last_telemetry(self.telemetry)
        self.log.info("CRASH: %s\n--- last stderr lines ---\n%s\n--- last telemetry ---\n%s\n",
                      why, "\n".join(self._stderr_tail) or "(none)",
                      json.dumps(record) if record else "(none)")

    # ---- the loop -------------------------------------------------------------------------------

    def _pass_on(self, signum: int) -> None:
        """Give the child one stop signal (its first ends it cleanly, a second forces it).
        Before its first frame the child may not have its handlers yet (a signal would land
        in its imports as a traceback): the first stop is held until it beats, a second one
        ends it at once."""
        child = self._child
        if child is None or child.poll() is not None:
            return
        if not self._beaten:
            if self._held is not None or self._stops > 1:
                child.kill()
            self._held = signum
            return
        self._held = None
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    def run(self) -> int:
        def stop(signum, frame):
            self._stop = True
            self._stops += 1
            self._stopped_at = self._stopped_at or time.monotonic()
            self._pass_on(signum)

        previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        resume = safe = fresh = False
        delay = FIRST_DELAY_S
        try:
            while True:
                started = time.monotonic()
                child, heartbeat = self._start(resume, safe, fresh)
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
                quick = now - started < QUICK_S
                self.crashes.append(now)
                self.restarts += 1
                self._report(why)
                safe = len(self.crashes) == QUICK_CRASHES and now - self.crashes[0] < CRASH_WINDOW_S
                if quick and resume:  # the resumed state may be what kills it: start fresh
                    resume, fresh = False, True
                elif not fresh:
                    resume = True
                if not quick or self.restarts == 1:
                    delay = 0.0
                else:
                    delay = min(delay * 2.0, MAX_DELAY_S) if delay else FIRST_DELAY_S
                how = (" in --safe-mode" if safe else "") + \
                      (" from the default look (the resumed state died again)"
                       if fresh and not resume else "")
                self.say(f"supervisor: {why}; report in {self.state_dir / CRASH_LOG}; "
                         f"restarting in {delay:.1f} s{how}")
                deadline = time.monotonic() + delay
                while time.monotonic() < deadline and not self._stop:
                    time.sleep(0.05)
                if self._stop:
                    return 0
        finally:
            if self._spare is not None:
                self._spare.drop()
                self._spare = None
            for sig, handler in previous.items():
                signal.signal(sig, handler)


class StopSignals:
    """Ctrl+C (SIGINT) and SIGTERM ask the show to stop at the end of its frame instead of
    raising KeyboardInterrupt wherever the main thread happens to be (inside MIDI port deletion
    or PortAudio's exit handler, which then broke the shutdown). The show ends cleanly: the
    screenshot, the last telemetry record, the files. A second signal while it stops forces
    the end at once (exit code 130). Main thread only (Python runs signal handlers there)."""

    def __init__(self) -> None:
        self.requested: str | None = None  # "Ctrl+C" or "SIGTERM" once asked
        self._previous: dict[int, object] = {}

    def install(self) -> "StopSignals":
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread: leave the defaults
                pass
        return self

    def _handle(self, signum: int, frame: object) -> None:
        if self.requested is not None:
            os.write(2, b"instrument: stopping at once (second stop signal)\n")
            os._exit(130)
        self.requested = "Ctrl+C" if signum == signal.SIGINT else "SIGTERM"

    def request(self, why: str) -> None:
        """Stop for another reason (the supervisor is gone)."""
        self.requested = self.requested or why

    def uninstall(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
