"""Live audio input: the performer's input, read once a frame, that comes back on its own.

The stream itself (PortAudio, through sounddevice) runs in a worker process of its own
(audio/input/worker.py, started by audio/input/process.py), which writes mono samples into a ring in
shared memory. PortAudio 19.6 hangs for good inside any process whose JACK server quit (in
abort, close and terminate alike); a worker is simply killed and a fresh one started, while
the picture plays on.

Main thread only: `update(now)` once a frame reads the newest samples and runs the analysis
(tracking what the worker's block analysis measured of each block, block_analysis.py), and
is the watchdog: no new block for `lost_after_s` and the input is lost (said once), its
worker killed and a fresh one started with back-off (0.5 s doubling to 5 s) until one
delivers blocks again (said once). Nothing in a frame waits: workers are spawned on a helper
thread, their reports and library noise read through non-blocking pipes, and SIGKILL returns
at once. `close()` must be called at the end: it stops the worker and unlinks the memory.

Given `sd`, a stand-in for the sounddevice module (tests), the same watchdog drives streams
opened in this process instead, each on a helper thread (`InProcessAttempt`): that is the
worker's logic without a process, so the reconnection runs without a device.
"""

from __future__ import annotations

import weakref
from typing import Any

from swarm_instrument.audio.analysis.beats import BeatInfo
from swarm_instrument.audio.analysis.window_measure import Measures
from swarm_instrument.audio.base import DEFAULT_RATE, AudioFrameSource
from swarm_instrument.audio.input.block_analysis import LatchedMeasures
from swarm_instrument.audio.input.devices import AudioProblem
from swarm_instrument.audio.input.in_process import InProcessAttempt
from swarm_instrument.audio.input.process import LibraryLines, SharedRing, WorkerProcess
from swarm_instrument.audio.input.ring import Ring

LOST_AFTER_S = 0.5  # no block for this long = audio lost (blocks normally come every ~5 ms)
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 5.0
CLOSE_TIMEOUT_S = 1.0  # a stream (or worker) not stopped by then is stuck for good
START_TIMEOUT_S = 10.0  # a worker that has not reported by then is killed and tried again
START_WAIT_S = 5.0  # at start-up the first report is awaited, so the first frame has audio
ANALYSIS_WAIT_S = 0.003  # the latch waits this long at most for a block's measures
LIBRARY_LOG_LINES = 500
TELEMETRY_LINES = 8


def _abandon(attempts: list[Any], shared: SharedRing | None) -> None:
    """An AudioInput collected (or the interpreter leaving) without close(): kill its workers
    and unlink its memory. SIGKILL never waits; a killed worker left unreaped here is reaped
    by subprocess's own bookkeeping."""
    for attempt in attempts:
        attempt.stop()
    attempts.clear()
    if shared is not None:
        shared.close()


class AudioInput(AudioFrameSource):
    """The instrument's microphone or line input. Never raises.

    `device` is an index, a name substring or None (the default input). It is reopened by
    name after a loss, since indices shift when devices come and go.

    Its beats (`beat_info`) come from every sample the worker wrote into the ring since the
    last frame, read here on the main thread and fed to the tracker there, or on a thread of
    its own in a live show (`beats_on_thread`); None while no stream delivers.
    """

    tracks_beats = True
    threads_beats = True  # a live show feeds its beat tracker on a thread (beat_thread.py)
    refreshes = True

    def __init__(self, device: int | str | None = None, *, sd: Any = None,
                 lost_after_s: float = LOST_AFTER_S, retry_first_s: float = RETRY_FIRST_S,
                 retry_max_s: float = RETRY_MAX_S, close_timeout_s: float = CLOSE_TIMEOUT_S,
                 start_timeout_s: float = START_TIMEOUT_S,
                 start_wait_s: float = START_WAIT_S,
                 analysis_wait_s: float = ANALYSIS_WAIT_S) -> None:
        super().__init__(DEFAULT_RATE, "" if device is None else str(device), "starting")
        self._spec: int | str | None = device
        self._sd = sd
        self.lost_after_s = lost_after_s
        self.close_timeout_s = close_timeout_s
        self.start_timeout_s = start_timeout_s
        self._retry_first_s = retry_first_s
        self._retry_max_s = retry_max_s
        self._retry_delay = retry_first_s
        self._next_retry: float | None = None
        self._retryable = True
        self._shared: SharedRing | None = None
        self._attempt: Any = None  # the worker (or in-process opening) in use or starting
        self._waiting_since: float | None = None  # `now` the attempt in use was started at
        self._opened = False  # _attempt reported its stream open and was adopted
        self._delivering = False  # ... and blocks came from it
        self._stopping: list[Any] = []  # killed ones, until they are reaped
        self._unreaped: list[Any] = []  # every attempt not yet reaped, for the finalizer
        self._last: Any = None  # the latest one stopped: the next waits for it to be gone
        self._ring: Ring = Ring()
        self._seen_blocks = 0
        self._read_end = 0  # the ring's `written` when the frame last read it
        self.latch = LatchedMeasures(analysis_wait_s)  # the block analysis' measures, taken
        self._last_block_at: float | None = None
        self._lost_at: float | None = None
        self._past = {"blocks": 0, "blocks_dropped": 0, "overflows": 0}  # of replaced rings
        self.library = LibraryLines(LIBRARY_LOG_LINES)  # what the workers' libraries print
        self.opens = 0  # streams opened: 1 at start, +1 for each reopening
        self.attempts = 0  # tries to open, successful or not
        self.attempts_at: list[float] = []  # `now` of each reopening try, for the back-off
        self.closed = False
        self._finalizer = weakref.finalize(self, _abandon, self._unreaped, None)
        if sd is None:
            try:
                self._shared = SharedRing()
            except Exception as exc:  # noqa: BLE001 - no /dev/shm: say it, run silent
                self._retryable = False
                self.state = "audio failed"
                self._say(f"audio input cannot start: no shared memory for its worker "
                          f"process ({type(exc).__name__}: {exc}); running without audio")
                return
            self._ring = self._shared.ring
        # forgotten without close(): the worker still dies and the memory is still unlinked
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _abandon, self._unreaped, self._shared)
        self._start(None)
        # at start-up the first report is awaited: the first frame already has audio, and a
        # missing device is said before the show starts
        self._attempt.wait(start_wait_s)
        self._check_attempt(None)

    # -- attempts ------------------------------------------------------------------------------
    def _start(self, now: float | None) -> None:
        self.attempts += 1
        if now is not None:
            self.attempts_at.append(now)
        previous, self._last = self._last, None
        if self._shared is not None:
            self._attempt = WorkerProcess(self._shared, self._spec, now, previous,
                                          self.close_timeout_s)
        else:
            self._attempt = InProcessAttempt(self._sd, self._spec, now, previous,
                                              self.close_timeout_s,
                                              rescan_first=self.attempts > 1)
        self._unreaped.append(self._attempt)
        self._waiting_since = now
        self._opened = self._delivering = False

    def _drop(self) -> Any:
        """Stop the attempt in use (never blocks) and keep it until it is reaped."""
        attempt, self._attempt = self._attempt, None
        self._opened = self._delivering = False
        if attempt is not None:
            attempt.stop()
            self._stopping.append(attempt)
            self._last = attempt
        return attempt

    def _reap(self) -> None:
        for attempt in list(self._stopping):
            if attempt.stopped():
                self._listen(attempt)
                attempt.release()
                self._stopping.remove(attempt)
                self._unreaped.remove(attempt)

    def _listen(self, attempt: Any) -> None:
        self.library.hear(attempt.take_lines())

    def _say_library(self) -> None:
        """After an event's message: one line saying what the libraries printed since the last
        event (never the lines themselves: those stay in `library.log` and telemetry)."""
        text = self.library.summary()
        if text:
            self._pending.append(text)  # printed once; `message` keeps the event's own line

    # -- the watchdog --------------------------------------------------------------------------
    def _check_attempt(self, now: float | None) -> None:
        """Take the starting attempt's report when it has come."""
        attempt = self._attempt
        if attempt is None or self._opened:
            return
        self._listen(attempt)
        outcome = attempt.outcome()
        if outcome is None:
            if now is None:
                return
            if self._waiting_since is None:
                self._waiting_since = now  # the constructor's attempt: counted from here
            if now - self._waiting_since > self.start_timeout_s:
                self._drop()
                self._failed(AudioProblem("device failed", f"the audio input did not open "
                                          f"within {self.start_timeout_s:g} s"), attempt)
            return
        kind, value = outcome
        if kind == "opened":
            self._adopt(attempt, value, now)
        else:
            self._drop()
            self._failed(value, attempt)

    def _adopt(self, attempt: Any, info: dict[str, Any], now: float | None) -> None:
        if attempt.ring is not self._ring:  # counters carry over from the old ring
            for key, value in self.counters().items():
                self._past[key] = value
            self._ring = attempt.ring
        self._opened = True
        self._set_rate(float(info.get("rate") or DEFAULT_RATE))
        self.device = str(info["name"])
        self._spec = self.device  # reopen by name: indices shift when devices come and go
        self._seen_blocks = self._ring.blocks
        self._last_block_at = now
        self.opens += 1
        if self._lost_at is None:
            self.state = "ok"
            if self.library.unsaid:
                self._say(f"listening to '{self.device}'")
                self._say_library()

    def _delivered(self) -> None:
        """The first block from the attempt in use: after a loss, audio is back."""
        self._delivering = True
        self._retry_delay = self._retry_first_s
        self._next_retry = None
        if self._lost_at is not None:
            self._lost_at = None
            self.state = "ok"
            self._say(f"audio back: '{self.device}' reopened")
            self._say_library()

    def _failed(self, problem: AudioProblem, attempt: Any) -> None:
        """An attempt that did not open: plan the next one, say why unless already lost."""
        self._retry_delay = (self._retry_first_s if attempt.started is None else
                             min(self._retry_delay * 2.0, self._retry_max_s))
        self._next_retry = (None if attempt.started is None else
                            attempt.started + self._retry_delay)
        if problem.state == "wedged":  # the last one never stopped: nothing may follow it
            self._retryable = False
            what = ("PortAudio hangs on" if self._shared is None else
                    "its worker process will not die for")
            self.state = "audio lost"
            self._say(f"audio lost for good: {what} '{self.device}' (did the JACK server "
                      "quit?); running silent: restart the instrument to get audio back")
            return
        # nothing changes without a restart, or nothing was asked for and nothing is there
        if problem.state == "no PortAudio" or (
                self.opens == 0 and self._spec is None and problem.state == "no input device"):
            self._retryable = False
        if self._lost_at is not None:
            self.library.forget()  # the loss was said: retries stay quiet (telemetry counts)
            return
        self.state = problem.state
        self._say(str(problem))
        self._say_library()

    def _lose(self, now: float) -> None:
        """The watchdog fired: kill the stream's worker, fall to silence, plan the reopening."""
        attempt = self._drop()
        if self._lost_at is not None:  # a reopened worker that never delivered: try again
            self._retry_delay = min(self._retry_delay * 2.0, self._retry_max_s)
            self._next_retry = (now if attempt.started is None else
                                attempt.started) + self._retry_delay
            self.library.forget()
            return
        self._lost_at = now
        self.state = "audio lost"
        self._say(f"audio lost: no sound from '{self.device}' for {self.lost_after_s:g} s "
                  "(unplugged? driver stall? JACK server quit?); reopening it by name until "
                  "it returns")
        self._say_library()
        self._retry_delay = self._retry_first_s
        self._next_retry = now + self._retry_delay

    def _fill(self, now: float) -> bool:
        if self.closed:
            return False
        self._reap()
        attempt = self._attempt
        if attempt is None:
            if self._retryable:
                if self._next_retry is None:
                    self._next_retry = now + self._retry_delay
                elif now >= self._next_retry:
                    self._start(now)
            return False
        if not self._opened:
            self._check_attempt(now)
            if not self._opened:
                return False
        self._listen(attempt)
        if self._last_block_at is None:
            self._last_block_at = now
        blocks = self._ring.blocks
        if blocks != self._seen_blocks:
            self._seen_blocks = blocks
            self._last_block_at = now
            if not self._delivering:
                self._delivered()
        elif now - self._last_block_at > self.lost_after_s or not attempt.alive():
            self._lose(now)
            return False
        if not self._delivering:
            return False  # opened again, but nothing new yet: the ring holds silence
        return self._read()

    def _track_beats(self, now: float) -> BeatInfo | None:
        if self.closed or self._attempt is None or not self._delivering:
            return None
        return self._track_ring(self._ring, now)

    def _read(self) -> bool:
        self._has_data = self._ring.blocks > 0
        self._read_end = self._ring.written  # the window is read where it is measured
        self._silent = False
        return True

    def _measured(self) -> Measures | None:
        """The block analysis' measures of the newest window (audio/input/block_analysis.py);
        with no analysis running (none yet, or it failed), the window read to be measured
        here."""
        measures = self.latch.measures(self._ring.features, self.analyzer, self._read_end)
        if measures is None:
            self._ring.read_newest(self._window)
        return measures

    def refresh(self, now: float) -> bool:
        """The blocks the worker wrote since `update` read and analysed (late latching); with
        `analysis_at_latch`, the frame's one analysis even without new blocks."""
        fresh = (not self.closed and self._delivering
                 and self._ring.blocks != self._seen_blocks)
        if fresh:
            self._seen_blocks = self._ring.blocks
            self._last_block_at = now
            self._read()
        if not (fresh or self._analysis_due):
            return False
        self._analyse_again(now)
        return True

    # -- the rest of the interface ---------------------------------------------------------------
    def wait_for_reopening(self, timeout: float = 5.0) -> bool:
        """Block until an opening in flight has reported (tests, and a clean exit)."""
        attempt = self._attempt
        return attempt is None or self._opened or attempt.wait(timeout)

    @property
    def ring(self) -> Ring:
        return self._ring

    @property
    def worker_pid(self) -> int | None:
        """The worker process in use, if any (None in this process or between workers)."""
        return None if self._attempt is None else self._attempt.pid

    @property
    def segment_name(self) -> str | None:
        """The shared memory the workers write (None when streams run in this process)."""
        return None if self._shared is None else self._shared.name

    def counters(self) -> dict[str, int]:
        ring, past = self._ring, self._past
        return {"blocks": past["blocks"] + ring.blocks,
                "blocks_dropped": past["blocks_dropped"] + ring.dropped,
                "overflows": past["overflows"] + ring.overflows}

    def telemetry(self) -> dict[str, Any]:
        record = super().telemetry()
        record.update({
            "worker_restarts": max(0, self.attempts - 1),
            "worker_pid": self.worker_pid,
            "library_lines": self.library.total,
            "library_tail": list(self.library.log)[-TELEMETRY_LINES:],
        })
        return record

    def close(self) -> None:
        """Stop the worker (end of its stdin, then SIGKILL after `close_timeout_s`), reap it
        and unlink the shared memory; read as silence from then on. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self._retryable = False
        self._stop_feed()
        if self._attempt is not None:
            self._stopping.append(self._attempt)
            self._attempt = None
        self._opened = self._delivering = False
        for attempt in self._stopping:
            attempt.close(self.close_timeout_s)  # False: stuck for good, and left behind
            self._listen(attempt)
        self._stopping = []
        self._unreaped.clear()
        self._finalizer()  # unlinks the shared memory
        self._has_data = False
        self.state = "closed"
