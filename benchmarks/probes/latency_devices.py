"""The latency rigs' stand-ins (benchmarks/bench_latency.py): for the GPU machine, which lacks
the devices (--offscreen), a sound card clocked as a real one delivers its blocks and a MIDI
port whose bytes arrive as rtmidi queues them; for both rigs, the web page's socket.
tests/test_latency.py has its own QueuedPort (tests do not import the benchmarks).
"""

from __future__ import annotations

import json
import os
import threading
import time
from types import SimpleNamespace

import numpy as np

RATE, BLOCK = 48000, 256


def osc_message(address: str, value: float) -> bytes:
    """One OSC message of one float, as a controller sends it."""
    def padded(data: bytes) -> bytes:
        return data + b"\0" * (4 - len(data) % 4)
    return padded(address.encode()) + padded(b",f") + np.float32(value).byteswap().tobytes()


class ClockedDevice:
    """sounddevice as the live input opens it in this process (audio/input/in_process.py):
    one input whose stream thread delivers a block every BLOCK / RATE seconds to the worker's
    callback, which writes it into the ring; `click()` makes the next block loud and stamps
    when that block was delivered, as does a byte written into `clicks` (a pipe's read end,
    non-blocking: another process's click, probes/latency_sender.py)."""

    class PortAudioError(Exception):
        pass

    def __init__(self, song: np.ndarray | None = None, clicks: int | None = None) -> None:
        self.default = SimpleNamespace(device=[0, -1])
        self._clicks = clicks
        self._armed = 0
        self.clicked_at: float | None = None
        self._stop = threading.Event()
        # `song` (mono float32 at RATE): played in a loop instead of silence (bench_frame --audio)
        self._song = None if song is None else np.ascontiguousarray(song, np.float32)

    def query_hostapis(self, index=None):
        apis = [{"name": "clocked"}]
        return apis if index is None else apis[index]

    def query_devices(self, index=None):
        devices = [{"name": "clocked input", "hostapi": 0, "max_input_channels": 1,
                    "max_output_channels": 0, "default_samplerate": float(RATE), "index": 0}]
        return devices if index is None else devices[index]

    def _terminate(self) -> None:
        pass

    def _initialize(self) -> None:
        pass

    def InputStream(self, **kwargs):  # noqa: N802 - sounddevice's name
        callback = kwargs["callback"]
        loud = np.full((BLOCK, 1), 0.5, np.float32)
        loud[::2] *= -1.0
        quiet = np.zeros((BLOCK, 1), np.float32)

        song, at = self._song, 0

        def deliver() -> None:
            nonlocal at
            due = time.perf_counter()
            while not self._stop.is_set():
                due += BLOCK / RATE
                wait = due - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                if self._clicks is not None and _take(self._clicks):
                    self.click()
                if self._armed:
                    if self.clicked_at is None:
                        self.clicked_at = time.perf_counter()
                    self._armed -= 1
                    callback(loud, BLOCK, None, None)
                elif song is not None:
                    if at + BLOCK > len(song):
                        at = 0
                    callback(song[at:at + BLOCK, None], BLOCK, None, None)
                    at += BLOCK
                else:
                    callback(quiet, BLOCK, None, None)

        thread = threading.Thread(target=deliver, name="clocked-audio", daemon=True)
        return SimpleNamespace(start=thread.start, abort=self._stop.set,
                               close=self._stop.set)

    def click(self, blocks: int = 19) -> None:
        """About 100 ms of sound from the next block on."""
        self.clicked_at = None
        self._armed = blocks


def _take(fd: int) -> bytes:
    """What a non-blocking pipe holds now (b"" when nothing)."""
    try:
        return os.read(fd, 4096)
    except BlockingIOError:
        return b""


class QueuedPort:
    """A MIDI input's side that Midi reads (control/midi/ports.py): bytes queued as rtmidi's
    callback queues them, drained once a frame. `pipe` (a pipe's read end, non-blocking): the
    three-byte messages another process writes there come too, as rtmidi's JACK thread
    queues them without the GIL (probes/latency_sender.py)."""

    def __init__(self, pipe: int | None = None) -> None:
        self.queue: list[tuple[bytes, float]] = []
        self.pipe = pipe

    def poll(self, now: float) -> None:
        pass

    def drain(self) -> list[tuple[bytes, float]]:
        taken, self.queue = self.queue, []
        if self.pipe is not None:
            data = _take(self.pipe)
            taken += [(data[i:i + 3], 0.0) for i in range(0, len(data) - 2, 3)]
        return taken

    def status(self) -> dict:
        return {"api": "bench", "ports_open": ["bench"], "waiting_for": [], "dropped": 0,
                "problem": None, "state": "bench"}

    def close(self) -> None:
        pass


class WebGesture:
    """The web remote's page, as far as latency goes: a WebSocket (the websockets library's
    client, the Origin a browser on the page would send) whose `move(value)` sends what the
    page's exposure slider sends and stamps when it went; the show's snapshots are read and
    dropped on a thread of its own, as a page reads them."""

    def __init__(self, port: int) -> None:
        from websockets.sync.client import connect  # noqa: PLC0415 - only for the web trials

        self.socket = connect(f"ws://127.0.0.1:{port}/ws", origin=f"http://127.0.0.1:{port}",
                              open_timeout=10)
        self._reader = threading.Thread(target=self._read, name="web-page", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for _message in self.socket:
                pass
        except Exception:  # noqa: BLE001 - the socket closed: the reader ends
            pass

    def move(self, address: str, value: float) -> float:
        sent = time.perf_counter()
        self.socket.send(json.dumps([address, value]))
        return sent

    def close(self) -> None:
        self.socket.close()
