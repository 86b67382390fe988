"""Live audio input: a sounddevice InputStream feeding the ring buffer, with a watchdog.

Two threads touch it. PortAudio's callback thread runs `_callback`, which only copies the
block into the ring (ring.py) and never raises. The main thread runs everything else once a
frame in `update`: the analysis, the watchdog that notices a stream which stopped delivering
(unplugged, driver stall), and reopening the device by name with back-off. A stream is only
opened, closed or replaced on the main thread.
"""

from __future__ import annotations

from typing import Any

from audio.base import DEFAULT_RATE, AudioSource
from audio.devices import (
    AudioProblem,
    close_stream,
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


class AudioInput(AudioSource):
    """The instrument's microphone or line input. Never raises after construction.

    `device` is an index, a name substring or None (the default input); `sd` stands in for
    the sounddevice module in tests.
    """

    def __init__(self, device: int | str | None = None, *, sd: Any = None,
                 lost_after_s: float = LOST_AFTER_S, retry_first_s: float = RETRY_FIRST_S,
                 retry_max_s: float = RETRY_MAX_S) -> None:
        super().__init__(DEFAULT_RATE, "" if device is None else str(device), "starting")
        self._spec: int | str | None = device
        self._sd = sd
        self.lost_after_s = lost_after_s
        self._retry_first_s = retry_first_s
        self._retry_max_s = retry_max_s
        self._retry_delay = retry_first_s
        self._next_retry: float | None = None
        self._retryable = True
        self._wedged = False  # PortAudio hung closing a dead stream: never call it again
        self.close_timeout_s = 0.3
        self._stream: Any = None
        self._ring = Ring()
        self._seen_blocks = 0
        self._last_block_at: float | None = None
        self._lost_at: float | None = None
        self._past = {"blocks": 0, "blocks_dropped": 0, "overflows": 0}  # of replaced rings
        self.opens = 0  # streams opened: 1 at start, +1 for each reopening
        self.attempts = 0  # tries to open, successful or not
        self._open(rescan_first=False)

    # -- callback thread -------------------------------------------------------------------
    def _callback(self, indata: Any, frames: int, time: Any, status: Any) -> None:
        """PortAudio's thread: copy the block, count trouble, return. Never raises."""
        try:
            ring = self._ring
            ring.write(indata)
            if status:
                ring.note_status(status)
        except Exception:  # noqa: BLE001
            pass

    # -- main thread -----------------------------------------------------------------------
    def _backend(self) -> Any:
        if self._sd is None:
            self._sd = load_sounddevice()
        return self._sd

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

    def _open(self, rescan_first: bool) -> bool:
        """Try to open and start the stream; on failure set `state` and say why."""
        self.attempts += 1
        name = self.device or "the default input"
        try:
            sd = self._backend()
            info = self._find(sd, rescan_first)
            name = info["name"]
            rate = float(info.get("default_samplerate") or DEFAULT_RATE)
            channels = max(1, min(2, int(info["max_input_channels"])))
            self._set_rate(rate)
            self._new_ring()
            stream = sd.InputStream(device=info["index"], channels=channels, samplerate=rate,
                                    dtype="float32", blocksize=0, latency="low",
                                    callback=self._callback)
            try:
                stream.start()
            except Exception:
                stream.close()
                raise
        except AudioProblem as problem:
            # nothing changes without a restart, or nothing was asked for and nothing is there
            if problem.state == "no PortAudio" or (
                    self.opens == 0 and self._spec is None and problem.state == "no input device"):
                self._retryable = False
            self._fail(problem.state, str(problem))
            return False
        except Exception as exc:  # noqa: BLE001 - PortAudioError and friends
            self._fail("device failed", f"cannot open audio input '{name}': {exc}; try another "
                       "--audio-device (see --list-devices) or --audio-file PATH.wav")
            return False
        self._stream = stream
        self.device = name
        self._spec = name  # reopen by name: indices shift when devices come and go
        self._seen_blocks = 0
        self._last_block_at = None
        self._retry_delay = self._retry_first_s
        self._next_retry = None
        self.opens += 1
        if self._lost_at is not None:
            self._say(f"audio back: '{name}' reopened")
            self._lost_at = None
        else:
            self._say("")
        self.state = "ok"
        return True

    def _fail(self, state: str, message: str) -> None:
        # once lost, the HUD keeps saying "audio lost" until the stream is back
        self.state = "audio lost" if self._lost_at is not None else state
        if self._lost_at is None:
            self._say(message)

    def _new_ring(self) -> None:
        """A fresh ring per stream: no stale samples, and a stream that failed to close
        cannot write into the new one. The counters carry over."""
        for key, value in self.counters().items():
            self._past[key] = value
        self._ring = Ring()

    def _close_stream(self) -> bool:
        """Close the stream without hanging the show; False if PortAudio hung on it."""
        stream, self._stream = self._stream, None
        if stream is None or self._wedged:
            return True
        if close_stream(stream, self.close_timeout_s):
            return True
        self._wedged = True
        self._retryable = False
        skip_portaudio_exit(self._sd)
        return False

    def _lose(self, now: float) -> None:
        """The watchdog fired: drop the stream, fall to silence, plan the first reopen."""
        released = self._close_stream()
        self._lost_at = now
        self.state = "audio lost"
        if not released:
            self._say(f"audio lost: '{self.device}' stopped and PortAudio hangs on it (did the "
                      "JACK server quit?); running silent: restart the instrument to get audio "
                      "back")
            return
        self._say(f"audio lost: no sound from '{self.device}' for {self.lost_after_s:g} s "
                  "(unplugged? driver stall?); reopening it by name until it returns")
        self._retry_delay = self._retry_first_s
        self._next_retry = now + self._retry_delay

    def _fill(self, now: float) -> bool:
        if self._stream is None:
            if not self._retryable:
                return False
            if self._next_retry is None:
                self._next_retry = now + self._retry_delay
            elif now >= self._next_retry:
                if not self._open(rescan_first=True):
                    self._retry_delay = min(self._retry_delay * 2.0, self._retry_max_s)
                    self._next_retry = now + self._retry_delay
            return False
        blocks = self._ring.blocks
        if blocks != self._seen_blocks or self._last_block_at is None:
            self._seen_blocks = blocks
            self._last_block_at = now
        elif now - self._last_block_at > self.lost_after_s:
            self._lose(now)
            return False
        self._has_data = blocks > 0
        self._ring.read_newest(self._window)
        return True

    @property
    def ring(self) -> Ring:
        return self._ring

    def counters(self) -> dict[str, int]:
        ring, past = self._ring, self._past
        return {"blocks": past["blocks"] + ring.blocks,
                "blocks_dropped": past["blocks_dropped"] + ring.dropped,
                "overflows": past["overflows"] + ring.overflows}

    def close(self) -> None:
        self._close_stream()
        self._retryable = False
        self._has_data = False
        self.state = "closed"
