"""The show's side of the audio worker process (audio/input/worker.py): start it, hear from it, end
it.

Main thread only, except where a method says otherwise; nothing here may make the show's
frame wait. `SharedRing` is the shared-memory ring the workers write and the show reads, made
once and unlinked at the end. A `WorkerProcess` is one worker: it is spawned on a short-lived
helper thread (a fork and exec of a process holding a GL context is quick, but not quick
enough to sit in a frame), its report and its stderr are read through non-blocking pipes, and
it is ended by SIGKILL, which unlike a call into a wedged PortAudio always returns at once.
`summarize_library_lines` turns what ALSA and JACK print into one line for the performer
(`LibraryLines` keeps them).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from multiprocessing import shared_memory
from typing import Any

from swarm_instrument.audio.input.devices import AudioProblem
from swarm_instrument.audio.input.ring import Ring

READ_CHUNK = 65536
MAX_READS_A_FRAME = 16  # 1 MiB a frame at most, however much a worker prints
_segments = itertools.count()


class SharedRing:
    """The ring in shared memory (`multiprocessing.shared_memory`), owned by the show.

    One segment serves every worker in turn, so the counters carry on across restarts. The
    segment is registered with Python's resource tracker, which unlinks it should the show
    die without `close()` (SIGKILL); `close()` unlinks it itself.
    """

    def __init__(self) -> None:
        name = f"swarm-audio-{os.getpid()}-{next(_segments)}"
        self.segment = shared_memory.SharedMemory(name, create=True, size=Ring.nbytes())
        self.name = self.segment.name
        self.ring = Ring.create_in(self.segment.buf)
        # a worker's spawning thread clears the ring while the show may be closing it (a show
        # that fails to build ends at once, its first worker still being spawned)
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Silence the ring for a new worker (any thread); nothing once closed."""
        with self._lock:
            if self.segment is not None:
                self.ring.clear()

    def close(self) -> None:
        """Unlink the segment; the ring keeps private copies of what it held."""
        with self._lock:
            segment, self.segment = self.segment, None
            if segment is None:
                return
            self.ring.release()
        try:
            segment.close()
        except BufferError:  # a view still held somewhere: the mapping goes with the last one
            segment._buf = segment._mmap = None  # not closed again (and raising) when collected
        try:
            segment.unlink()
        except FileNotFoundError:
            pass


class WorkerProcess:
    """One audio worker process. `outcome()` is None until it reports; then ("opened",
    info) or ("failed", AudioProblem).

    `started` is the show's `now` when it was asked for (the back-off counts from there).
    `previous` is the worker before it: this one is spawned only once that one has gone,
    so two never write the ring at once.
    """

    def __init__(self, shared: SharedRing, spec: int | str | None, started: float | None,
                 previous: Any = None, close_timeout_s: float = 1.0) -> None:
        self.shared = shared
        self.ring = shared.ring
        self.spec = spec
        self.started = started
        self.pid: int | None = None
        self._previous = previous
        self._close_timeout_s = close_timeout_s
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()  # between the helper handing over the process and stop()
        self._stop_asked = False
        self._spawned = threading.Event()
        self._problem: AudioProblem | None = None  # the spawn itself failed
        self._outcome: tuple[str, Any] | None = None
        self._out = bytearray()  # report bytes not yet a whole line
        self._err = bytearray()  # stderr bytes not yet a whole line
        self._lines: list[str] = []  # library lines not yet taken
        self.spawn_seconds: float | None = None
        threading.Thread(target=self._spawn, name="audio-worker-spawn", daemon=True).start()

    # -- the helper thread -------------------------------------------------------------------
    def _spawn(self) -> None:
        try:
            previous = self._previous
            self._previous = None
            if previous is not None and not previous.wait_stopped(self._close_timeout_s):
                self._problem = AudioProblem(
                    "wedged", f"the audio worker process {previous.pid} does not end even "
                    "when killed")
                return
            self.shared.clear()  # nobody writes it now: the last worker's sound must not replay
            env = dict(os.environ)
            env.setdefault("JACK_NO_START_SERVER", "1")  # never a surprise server on stage
            began = time.monotonic()
            proc = subprocess.Popen(
                [sys.executable, "-m", "swarm_instrument.audio.input.worker",
                 "--segment", self.shared.name,
                 "--device", json.dumps(self.spec), "--parent", str(os.getpid())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=env, close_fds=True)
            self.spawn_seconds = time.monotonic() - began
            for pipe in (proc.stdout, proc.stderr):
                os.set_blocking(pipe.fileno(), False)
            with self._lock:
                self._proc = proc
                self.pid = proc.pid
                if self._stop_asked:
                    proc.kill()
        except Exception as exc:  # noqa: BLE001 - no Python, no fork: say it, never raise
            self._problem = AudioProblem("audio failed", f"cannot start the audio worker "
                                         f"process ({type(exc).__name__}: {exc})")
        finally:
            self._spawned.set()

    # -- main thread -------------------------------------------------------------------------
    def outcome(self) -> tuple[str, Any] | None:
        """The worker's report, or None while it has not reported. Never blocks."""
        if self._outcome is not None or not self._spawned.is_set():
            return self._outcome
        if self._problem is not None:
            self._outcome = ("failed", self._problem)
            return self._outcome
        self._read()
        if self._outcome is None and self._proc is not None and self._proc.poll() is not None:
            self._read()  # it may have reported just before it exited
            if self._outcome is None:
                code = self._proc.returncode
                how = f"was killed by signal {-code}" if code < 0 else f"exited ({code})"
                self._outcome = ("failed", AudioProblem(
                    "audio failed", f"the audio worker process {how} before opening the "
                    "input"))
        return self._outcome

    def wait(self, timeout: float) -> bool:
        """Block until the worker has reported or gone, at most `timeout` seconds (start-up,
        tests, never a frame)."""
        deadline = time.monotonic() + timeout
        while self.outcome() is None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def alive(self) -> bool:
        """The process runs (or is being started). Never blocks."""
        if not self._spawned.is_set():
            return True
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """SIGKILL, at once: the worker may be stuck inside PortAudio. Never blocks."""
        with self._lock:
            self._stop_asked = True
            proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                proc.kill()
            except OSError:
                pass

    def stopped(self) -> bool:
        """Gone and reaped (no zombie left). Never blocks."""
        if not self._spawned.is_set():
            return False
        return self._proc is None or self._proc.poll() is not None

    def wait_stopped(self, timeout: float) -> bool:
        """Block until stopped, at most `timeout` seconds (helper threads and close() only)."""
        deadline = time.monotonic() + timeout
        if not self._spawned.wait(timeout):
            return False
        if self._proc is None:
            return True
        try:
            self._proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return False
        return True

    def close(self, timeout: float) -> bool:
        """End it for good (the show is closing): ask (end of its stdin), then SIGKILL after
        `timeout`; reap it and close the pipes. False if it would not die. Blocks up to about
        twice `timeout`."""
        if not self._spawned.wait(timeout):
            self.stop()  # the helper kills it the moment it has spawned it
            if not self._spawned.wait(timeout):
                return False
        proc = self._proc
        if proc is None:
            return True
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                return False
        self.release()
        return True

    def release(self) -> None:
        """After it stopped: read what is left in its pipes and close them."""
        proc = self._proc
        if proc is None or proc.poll() is None:
            return
        self._read()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            try:
                pipe.close()
            except OSError:
                pass

    def take_lines(self) -> list[str]:
        """What its libraries printed since the last call, a line each. Never blocks."""
        if self._proc is not None:
            self._read()
        lines, self._lines = self._lines, []
        return lines

    def _read(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if not proc.stdout.closed:
            for line in self._drain(proc.stdout.fileno(), self._out):
                self._parse(line)
        if not proc.stderr.closed:
            self._lines.extend(self._drain(proc.stderr.fileno(), self._err))

    @staticmethod
    def _drain(fd: int, pending: bytearray) -> list[str]:
        """Whole lines readable now from a non-blocking pipe; at its end, the unfinished
        last line too."""
        ended = False
        for _ in range(MAX_READS_A_FRAME):
            try:
                chunk = os.read(fd, READ_CHUNK)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                ended = True
                break
            if not chunk:
                ended = True
                break
            pending += chunk
        if b"\n" not in pending and not (ended and pending):
            return []
        text = bytes(pending)
        cut = len(text) if ended else text.rfind(b"\n") + 1
        del pending[:cut]
        return [line.rstrip("\r") for line in
                text[:cut].decode("utf-8", "replace").split("\n") if line.strip()]

    def _parse(self, line: str) -> None:
        try:
            report = json.loads(line)
        except ValueError:
            report = None
        if not isinstance(report, dict) or "event" not in report:
            self._lines.append(line)  # a library that wrote to stdout after all
            return
        if self._outcome is not None:
            return
        if report["event"] == "opened":
            self._outcome = ("opened", report)
        else:
            self._outcome = ("failed", AudioProblem(str(report.get("state", "audio failed")),
                                                    str(report.get("message", ""))))


# ----- what the libraries print ----------------------------------------------------------------

_KNOWN = (
    (re.compile(r"jack server is not running|cannot connect to server", re.IGNORECASE),
     "JACK server not running"),
    (re.compile(r"JackSocketClientChannel|Cannot read socket|server is exiting|zombified|"
                r"JACK server has been closed|CheckRes error", re.IGNORECASE),
     "JACK server went away"),
    (re.compile(r"Cannot lock down|mlock", re.IGNORECASE), "JACK could not lock memory"),
    (re.compile(r"^ALSA lib .*(cannot find card|Unknown PCM|No such file)", re.IGNORECASE),
     "ALSA found no sound card"),
    (re.compile(r"^ALSA lib", re.IGNORECASE), "ALSA warnings"),
    (re.compile(r"^Traceback \(most recent call last\)"), "the audio worker crashed"),
)


class LibraryLines:
    """What the workers' libraries printed: the newest `keep` lines, their count, and those
    since the last event for its one-line summary."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.log: deque[str] = deque(maxlen=keep)
        self.total = 0
        self.forget()

    def hear(self, lines: list[str]) -> None:
        if lines:
            self.total += len(lines)
            self.log.extend(lines)
            self._unsaid.extend(lines[:self.keep - len(self._unsaid)])
            self._unsaid_count += len(lines)

    def summary(self) -> str:
        """One line for what was printed since the last event ('' for nothing); forgets it."""
        text = summarize_library_lines(self._unsaid, self._unsaid_count)
        self.forget()
        return text

    @property
    def unsaid(self) -> int:
        """Lines printed since the last event."""
        return self._unsaid_count

    def forget(self) -> None:
        self._unsaid: list[str] = []
        self._unsaid_count = 0


def summarize_library_lines(lines: Sequence[str], total: int | None = None) -> str:
    """One short line for many lines printed by ALSA, JACK or PortAudio: what they mean, and
    how many were hidden, e.g. "JACK server not running (6 library lines hidden)". `total`
    counts lines beyond those kept in `lines`."""
    if not lines:
        return ""
    count = max(total or 0, len(lines))
    hidden = f"{count} library line{'s' if count != 1 else ''} hidden"
    meanings: list[str] = []
    for line in lines:
        for pattern, meaning in _KNOWN:
            if pattern.search(line):
                if meaning not in meanings:
                    meanings.append(meaning)
                break
    if "the audio worker crashed" in meanings:  # a traceback's last line says what it was
        last = next((line.strip() for line in reversed(lines) if line.strip()), "")
        meanings[meanings.index("the audio worker crashed")] += f": {last[:120]}"
    if not meanings:
        first = lines[0].strip()
        return f"{hidden}, the first: '{first[:80]}{'...' if len(first) > 80 else ''}'"
    return f"{'; '.join(meanings)} ({hidden})"
