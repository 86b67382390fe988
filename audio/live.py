"""Live audio input: a sounddevice InputStream feeding a ring buffer, with a watchdog.

Three threads touch it. PortAudio's callback thread only copies each block into the stream's
ring (ring.py) and never raises. The main thread runs `update` once a frame: the analysis,
and the watchdog that notices a stream which stopped delivering (unplugged, driver stall).
Reopening runs on a short-lived helper thread, because rescanning PortAudio takes ~100 ms
with JACK and may hang on a broken driver: the show must not stutter while audio is lost.
Only one of the main thread and a helper ever calls PortAudio at a time: the main thread
does not touch it while the stream is lost, and there is at most one helper.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from audio.base import DEFAULT_RATE, AudioSource
from audio.devices import (
    AudioProblem,
    close_in_background,
    default_input_index,
    input_devices,
    load_sounddevice,
    rescan,
    resolve_input_device,
    skip_portaudio_exit,
)
from audio.ring import Ring

LOST_AFTER_S = 0.5  # no block for this long = audio lost (blocks normally come every ~5 ms)
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 5.0
CLOSE_TIMEOUT_S = 1.0  # a lost stream not closed by then means PortAudio hangs on it


def _writer(ring: Ring) -> Callable[..., None]:
    """The PortAudio callback for one stream: copy into its own ring, count trouble, return.
    Each stream gets its own ring, so a stream that failed to close cannot write into the
    next one's."""

    def callback(indata: Any, frames: int, time: Any, status: Any) -> None:
        try:
            ring.write(indata)
            if status:
                ring.note_status(status)
        except Exception:  # noqa: BLE001 - never raise into PortAudio
            pass

    return callback


class _Attempt:
    """One reopening on a helper thread; the main thread reads the outcome when `done`."""

    def __init__(self, work: Callable[[], tuple[Any, Ring, dict]], started: float) -> None:
        self.started = started  # the `now` it began at: the back-off counts from here
        self.done = threading.Event()
        self.result: tuple[Any, Ring, dict] | None = None
        self.problem: AudioProblem | None = None

        def run() -> None:
            try:
                self.result = work()
            except AudioProblem as problem:
                self.problem = problem
            except Exception as exc:  # noqa: BLE001 - a bug here must not end the show
                self.problem = AudioProblem("device failed", f"reopening audio failed: {exc}")
            finally:
                self.done.set()

        self.thread = threading.Thread(target=run, name="audio-reopen", daemon=True)
        self.thread.start()


class AudioInput(AudioSource):
    """The instrument's microphone or line input. Never raises.

    `device` is an index, a name substring or None (the default input); `sd` stands in for
    the sounddevice module in tests.
    """

    def __init__(self, device: int | str | None = None, *, sd: Any = None,
                 lost_after_s: float = LOST_AFTER_S, retry_first_s: float = RETRY_FIRST_S,
                 retry_max_s: float = RETRY_MAX_S,
                 close_timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        super().__init__(DEFAULT_RATE, "" if device is None else str(device), "starting")
        self._spec: int | str | None = device
        self._sd = sd
        self.lost_after_s = lost_after_s
        self.close_timeout_s = close_timeout_s
        self._retry_first_s = retry_first_s
        self._retry_max_s = retry_max_s
        self._retry_delay = retry_first_s
        self._next_retry: float | None = None
        self._retryable = True
        self._attempt: _Attempt | None = None
        self._closing: threading.Event | None = None  # set when the lost stream has closed
        self._stream: Any = None
        self._ring = Ring()
        self._seen_blocks = 0
        self._last_block_at: float | None = None
        self._lost_at: float | None = None
        self._past = {"blocks": 0, "blocks_dropped": 0, "overflows": 0}  # of replaced rings
        self.opens = 0  # streams opened: 1 at start, +1 for each reopening
        self.attempts = 0  # tries to open, successful or not
        self.attempts_at: list[float] = []  # `now` of each reopening try, for the back-off
        self.attempts += 1
        try:  # at start-up the open is synchronous: the first frame already has audio
            self._adopt(self._connect(rescan_first=False))
        except AudioProblem as problem:
            self._failed(problem)

    # -- helper thread (or the constructor) -------------------------------------------------
    def _connect(self, rescan_first: bool) -> tuple[Any, Ring, dict]:
        """Find the device, open and start a stream on it. Raises AudioProblem."""
        if self._closing is not None and not self._closing.wait(self.close_timeout_s):
            raise AudioProblem("wedged", "PortAudio hangs")
        if self._sd is None:
            self._sd = load_sounddevice()
        sd = self._sd
        try:
            info = self._find(sd, rescan_first)
        except AudioProblem:
            raise
        except Exception as exc:  # noqa: BLE001 - PortAudio failing to list its devices
            raise AudioProblem("device failed", f"cannot list audio devices: {exc}; try "
                               "--list-devices, or --audio-file PATH.wav") from None
        name = info["name"]
        try:
            ring = Ring()
            stream = sd.InputStream(device=info["index"],
                                    channels=max(1, min(2, int(info["max_input_channels"]))),
                                    samplerate=float(info.get("default_samplerate")
                                                     or DEFAULT_RATE),
                                    dtype="float32", blocksize=0, latency="low",
                                    callback=_writer(ring))
            try:
                stream.start()
            except Exception:
                stream.close()
                raise
        except Exception as exc:  # noqa: BLE001 - PortAudioError and friends
            raise AudioProblem("device failed", f"cannot open audio input '{name}': {exc}; "
                               "try another --audio-device (see --list-devices) or "
                               "--audio-file PATH.wav") from None
        return stream, ring, info

    def _find(self, sd: Any, rescan_first: bool) -> dict[str, Any]:
        """The device to open; rescans PortAudio once if it is not in the current list."""
        if rescan_first:
            rescan(sd)
        try:
            return resolve_input_device(input_devices(sd), default_input_index(sd), self._spec)
        except AudioProblem:
            if rescan_first:
                raise
        rescan(sd)  # started before the device (or the JACK server) appeared
        return resolve_input_device(input_devices(sd), default_input_index(sd), self._spec)

    # -- main thread -------------------------------------------------------------------------
    def _adopt(self, connected: tuple[Any, Ring, dict]) -> None:
        stream, ring, info = connected
        for key, value in self.counters().items():  # counters carry over from the old ring
            self._past[key] = value
        self._stream, self._ring = stream, ring
        self._set_rate(float(info.get("default_samplerate") or DEFAULT_RATE))
        self.device = info["name"]
        self._spec = info["name"]  # reopen by name: indices shift when devices come and go
        self._seen_blocks = 0
        self._last_block_at = None
        self._retry_delay = self._retry_first_s
        self._next_retry = None
        self._closing = None
        self.opens += 1
        if self._lost_at is not None:
            self._say(f"audio back: '{self.device}' reopened")
            self._lost_at = None
        self.state = "ok"

    def _failed(self, problem: AudioProblem) -> None:
        if problem.state == "wedged":  # the lost stream never closed: PortAudio is stuck
            self._retryable = False
            skip_portaudio_exit(self._sd)
            self._say(f"audio lost for good: PortAudio hangs on '{self.device}' (did the JACK "
                      "server quit?); running silent: restart the instrument to get audio "
                      "back")
            return
        # nothing changes without a restart, or nothing was asked for and nothing is there
        if problem.state == "no PortAudio" or (
                self.opens == 0 and self._spec is None and problem.state == "no input device"):
            self._retryable = False
        if self._lost_at is not None:
            return  # the HUD keeps saying "audio lost"; the loss was already announced
        self.state = problem.state
        self._say(str(problem))

    def _lose(self, now: float) -> None:
        """The watchdog fired: drop the stream, fall to silence, plan the first reopen."""
        stream, self._stream = self._stream, None
        self._closing = close_in_background(stream)
        self._lost_at = now
        self.state = "audio lost"
        self._say(f"audio lost: no sound from '{self.device}' for {self.lost_after_s:g} s "
                  "(unplugged? driver stall?); reopening it by name until it returns")
        self._retry_delay = self._retry_first_s
        self._next_retry = now + self._retry_delay

    def _reconnect(self, now: float) -> None:
        """Start a reopening when one is due; take its outcome when it is done."""
        attempt = self._attempt
        if attempt is not None:
            if not attempt.done.is_set():
                return
            self._attempt = None
            if attempt.result is not None:
                self._adopt(attempt.result)
                return
            assert attempt.problem is not None
            self._failed(attempt.problem)
            self._retry_delay = min(self._retry_delay * 2.0, self._retry_max_s)
            self._next_retry = attempt.started + self._retry_delay
            return
        if not self._retryable:
            return
        if self._next_retry is None:
            self._next_retry = now + self._retry_delay
        elif now >= self._next_retry:
            self.attempts += 1
            self.attempts_at.append(now)
            self._attempt = _Attempt(lambda: self._connect(rescan_first=True), now)

    def _fill(self, now: float) -> bool:
        if self._stream is None:
            self._reconnect(now)
            return self._stream is not None and self._read()
        blocks = self._ring.blocks
        if blocks != self._seen_blocks or self._last_block_at is None:
            self._seen_blocks = blocks
            self._last_block_at = now
        elif now - self._last_block_at > self.lost_after_s:
            self._lose(now)
            return False
        return self._read()

    def _read(self) -> bool:
        self._has_data = self._ring.blocks > 0
        self._ring.read_newest(self._window)
        return True

    def wait_for_reopening(self, timeout: float = 5.0) -> bool:
        """Block until a reopening in flight has finished (tests, and a clean exit)."""
        attempt = self._attempt
        return attempt is None or attempt.done.wait(timeout)

    @property
    def ring(self) -> Ring:
        return self._ring

    def counters(self) -> dict[str, int]:
        ring, past = self._ring, self._past
        return {"blocks": past["blocks"] + ring.blocks,
                "blocks_dropped": past["blocks_dropped"] + ring.dropped,
                "overflows": past["overflows"] + ring.overflows}

    def close(self) -> None:
        """Stop the stream (waiting a moment at most) and read as silence from now on.
        If PortAudio hangs on a stream, the exit is kept from hanging on it too."""
        self._retryable = False
        attempt, self._attempt = self._attempt, None
        if attempt is not None:
            if not attempt.done.wait(self.close_timeout_s):
                skip_portaudio_exit(self._sd)  # the helper is stuck inside PortAudio
            elif attempt.result is not None:  # it reopened just as we quit: close that too
                self._stream = attempt.result[0]
            elif attempt.problem is not None and attempt.problem.state == "wedged":
                self._failed(attempt.problem)
        if self._closing is not None and not self._closing.is_set():
            skip_portaudio_exit(self._sd)  # the lost stream never closed
        stream, self._stream = self._stream, None
        if stream is not None and not close_in_background(stream).wait(self.close_timeout_s):
            skip_portaudio_exit(self._sd)
        self._has_data = False
        self.state = "closed"
