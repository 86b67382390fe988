"""An opening of the live input in this process, on helper threads, with the interface of a
worker process (audio/input/process.py's WorkerProcess): what `AudioInput` runs when given a
stand-in sounddevice (tests), so that its watchdog and reconnection run without a device. A
real PortAudio may hang closing a stream whose JACK server quit: the helper is left behind.
"""

from __future__ import annotations

import threading
from typing import Any

from swarm_instrument.audio.input.devices import AudioProblem, skip_portaudio_exit
from swarm_instrument.audio.input.ring import Ring
from swarm_instrument.audio.input.worker import InputWorker


def _close_on_helper(worker: InputWorker) -> threading.Event:
    """Close a stream on a helper thread; the event is set once it has closed. With a JACK
    server that quit, PortAudio 19.6 never returns from that: the helper is left behind."""
    done = threading.Event()

    def close() -> None:
        worker.close()
        done.set()

    threading.Thread(target=close, name="audio-stream-close", daemon=True).start()
    return done


class InProcessAttempt:
    """One opening in this process, on a helper thread: for a stand-in sounddevice (tests).

    Same interface as audio/input/process.py's WorkerProcess. Stopping closes the stream on another
    helper thread; a real PortAudio may hang there, and then nothing may call it again."""

    def __init__(self, sd: Any, spec: int | str | None, started: float | None,
                 previous: Any, close_timeout_s: float, rescan_first: bool) -> None:
        self.started = started
        self.pid: int | None = None
        self.ring = Ring()  # its own: a stream that failed to close cannot write the next's
        self.worker = InputWorker(spec, self.ring, sd)
        self._outcome: tuple[str, Any] | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._stop_asked = False
        self._closed: threading.Event | None = None

        def run() -> None:
            try:
                if previous is not None and not previous.wait_stopped(close_timeout_s):
                    raise AudioProblem("wedged", "PortAudio hangs")
                self._outcome = ("opened", self.worker.open(rescan_first))
            except AudioProblem as problem:
                self._outcome = ("failed", problem)
            except Exception as exc:  # noqa: BLE001 - a bug here must not end the show
                self._outcome = ("failed", AudioProblem("device failed",
                                                        f"reopening audio failed: {exc}"))
            with self._lock:
                self._done.set()
                if self._stop_asked:
                    self._closed = _close_on_helper(self.worker)

        threading.Thread(target=run, name="audio-reopen", daemon=True).start()

    def outcome(self) -> tuple[str, Any] | None:
        return self._outcome if self._done.is_set() else None

    def wait(self, timeout: float) -> bool:
        return self._done.wait(timeout)

    def alive(self) -> bool:
        return True  # a stream in this process cannot exit; only the watchdog sees it stop

    def stop(self) -> None:
        with self._lock:
            self._stop_asked = True
            if self._done.is_set() and self._closed is None:
                self._closed = _close_on_helper(self.worker)

    def stopped(self) -> bool:
        return self._closed is not None and self._closed.is_set()

    def wait_stopped(self, timeout: float) -> bool:
        if not self._done.wait(timeout):
            return False
        closed = self._closed
        return closed is None or closed.wait(timeout)

    def close(self, timeout: float) -> bool:
        self.stop()
        if self.wait_stopped(timeout):
            return True
        skip_portaudio_exit(self.worker.sd)  # PortAudio hangs on it: do not hang the exit too
        return False

    def release(self) -> None:
        pass

    def take_lines(self) -> list[str]:
        return []  # this process's own stderr is not captured
