"""A real JACK server for tests, with the dummy driver: real audio (and MIDI) ports, no card.

`jack_server()` starts `jackd -n NAME -d dummy`, points this process's JACK clients at it
(JACK_DEFAULT_SERVER) and stops it afterwards: the one way the tests start a server (the
`jack` fixture in tests/conftest.py uses it). `ToneBurstClient` is a second JACK client,
through libjack with ctypes, that plays tone bursts into other clients' input ports and notes
when each burst began; `SignalPlayer` plays whole recordings (click tracks, drum loops), one
an output port, and notes when each of its cycles ran. Both fail the test, never skip it, when
JACK is missing: CI installs Debian's jackd2.

Threads: the test's thread starts and stops things; JACK's process thread runs
`ToneBurstClient._process` and `SignalPlayer._process`.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

RATE = 48000
PERIOD = 256
_names = itertools.count()

JackNoStartServer, JackServerName = 0x01, 0x04
JackPortIsInput, JackPortIsOutput = 0x1, 0x2
AUDIO_TYPE = b"32 bit float mono audio"
PROCESS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)


def _libjack() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL("libjack.so.0")
    except OSError as exc:
        pytest.fail(f"libjack not found ({exc}): apt-get install jackd2")
    lib.jack_client_open.restype = ctypes.c_void_p
    lib.jack_port_register.restype = ctypes.c_void_p
    lib.jack_port_register.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                       ctypes.c_ulong, ctypes.c_ulong]
    lib.jack_port_get_buffer.restype = ctypes.c_void_p
    lib.jack_port_get_buffer.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.jack_get_ports.restype = ctypes.POINTER(ctypes.c_char_p)
    lib.jack_get_ports.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                   ctypes.c_ulong]
    lib.jack_free.argtypes = [ctypes.c_void_p]
    lib.jack_set_process_callback.argtypes = [ctypes.c_void_p, PROCESS, ctypes.c_void_p]
    for name in ("jack_activate", "jack_deactivate", "jack_client_close", "jack_get_sample_rate",
                 "jack_get_buffer_size"):
        getattr(lib, name).argtypes = [ctypes.c_void_p]
    lib.jack_connect.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    lib.jack_port_name.restype = ctypes.c_char_p
    lib.jack_port_name.argtypes = [ctypes.c_void_p]
    return lib


def _open_client(lib: ctypes.CDLL, server: str, name: str) -> int | None:
    status = ctypes.c_int(0)
    client = lib.jack_client_open(name.encode(), JackNoStartServer | JackServerName,
                                  ctypes.byref(status), server.encode())
    return client or None


_cleared = False


def clear_stale_jack_state() -> None:
    """JACK keeps a registry of servers in /dev/shm, eight at most; a server that died without
    cleaning up (killed, or stopped while clients hung on) keeps its place, and after eight of
    those every new jackd fails with "Too many servers already active". When no jackd runs,
    nothing there is in use: clear it, so the tests' first server starts from a clean slate.
    Once a run, before its first server: later, a client of a server the test stopped (a worker
    that outlives it, to be reconnected) still holds the registry, and clearing it under that
    client leaves the next server of the same name unable to take clients."""
    global _cleared
    if _cleared:
        return
    _cleared = True
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() in ("jackd", "jackdbus"):
                return
        except OSError:
            continue
    for path in Path("/dev/shm").glob("jack*"):
        try:
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        except OSError:
            pass


def start_jackd(name: str, rate: int = RATE, period: int = PERIOD,
                timeout: float = 10.0, attempts: int = 3) -> subprocess.Popen:
    """Start a dummy-driver jackd called `name` and wait until a client can connect. A server
    that exits at once is tried again (seen once on CI, among many servers started and
    stopped in a row); after `attempts` the test fails with jackd's own output."""
    jackd = shutil.which("jackd")
    if jackd is None:
        pytest.fail("jackd not found: these tests need a JACK server (apt-get install jackd2)")
    env = dict(os.environ, JACK_NO_AUDIO_RESERVATION="1", JACK_NO_START_SERVER="1")
    lib = _libjack()
    clear_stale_jack_state()
    output = ""
    for _ in range(attempts):
        log = tempfile.TemporaryFile()
        proc = subprocess.Popen([jackd, "-n", name, "-d", "dummy", "-r", str(rate), "-p",
                                 str(period)], stdout=log, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL)
        proc.log = log  # type: ignore[attr-defined]
        deadline = time.monotonic() + timeout
        while True:
            client = _open_client(lib, name, "pytest-probe")
            if client:
                lib.jack_client_close(client)
                return proc
            if proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        proc.log = None  # type: ignore[attr-defined]  # read it before stop_jackd closes it
        stop_jackd(proc)
        log.seek(0)
        output = log.read().decode(errors="replace")
        log.close()
        time.sleep(0.5)
    pytest.fail(f"jackd -n {name} did not start ({attempts} tries):\n{output}")


def stop_jackd(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    getattr(proc, "log", None) and proc.log.close()  # type: ignore[attr-defined]


@contextmanager
def jack_server(rate: int = RATE, period: int = PERIOD) -> Iterator[str]:
    """A JACK server with a unique name, the default for this process's clients meanwhile."""
    name = f"pytest-{os.getpid()}-{next(_names)}"
    saved = {key: os.environ.get(key) for key in ("JACK_DEFAULT_SERVER", "JACK_NO_START_SERVER")}
    os.environ["JACK_DEFAULT_SERVER"] = name
    os.environ["JACK_NO_START_SERVER"] = "1"  # a client must never spawn a stray server
    proc = start_jackd(name, rate, period)
    try:
        yield name
    finally:
        stop_jackd(proc)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _input_ports(lib: ctypes.CDLL, client: int, skip: tuple[str, ...]) -> list[str]:
    ports = lib.jack_get_ports(client, None, AUDIO_TYPE, JackPortIsInput)
    names = []
    if ports:
        for i in itertools.count():
            if not ports[i]:
                break
            names.append(ports[i].decode())
        lib.jack_free(ports)
    return [n for n in names if not n.startswith(skip)]


class ToneBurstClient:
    """A JACK client with one output port that plays a sine burst on request.

    `burst(seconds)` arms it; the next JACK cycle starts the burst at the first sample of its
    block and notes `started_at` (time.monotonic()) and `started_frame`.
    """

    def __init__(self, server: str, name: str = "burst", frequency: float = 1000.0,
                 amplitude: float = 0.5) -> None:
        self._lib = lib = _libjack()
        self._client = _open_client(lib, server, name)
        if not self._client:
            pytest.fail(f"cannot open a JACK client on server '{server}'")
        self._port = lib.jack_port_register(self._client, b"out", AUDIO_TYPE, JackPortIsOutput, 0)
        self.rate = lib.jack_get_sample_rate(self._client)
        self.period = lib.jack_get_buffer_size(self._client)
        self.frequency, self.amplitude = frequency, amplitude
        self._armed = 0  # samples still to play
        self._phase = 0
        self._frames = 0
        self.started_at: float | None = None
        self.started_frame: int | None = None
        self._callback = PROCESS(self._process)  # keep a reference while JACK may call it
        lib.jack_set_process_callback(self._client, self._callback, None)
        if lib.jack_activate(self._client):
            pytest.fail("cannot activate the JACK burst client")

    @property
    def port_name(self) -> str:
        return self._lib.jack_port_name(self._port).decode()

    def input_ports(self, skip: tuple[str, ...] = ("system:",)) -> list[str]:
        """Audio input ports of other clients (the instrument's), system ports left out."""
        return _input_ports(self._lib, self._client, skip)

    def connect(self, destination: str) -> None:
        if self._lib.jack_connect(self._client, self.port_name.encode(), destination.encode()):
            pytest.fail(f"cannot connect {self.port_name} to {destination}")

    def burst(self, seconds: float) -> None:
        self.started_at = self.started_frame = None
        self._armed = int(seconds * self.rate)

    def _process(self, nframes: int, arg: object) -> int:
        pointer = self._lib.jack_port_get_buffer(self._port, nframes)
        out = np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)),
                                    shape=(nframes,))
        if self._armed > 0:
            if self.started_at is None:
                self.started_at = time.monotonic()
                self.started_frame = self._frames
            n = np.arange(self._phase, self._phase + nframes)
            out[:] = self.amplitude * np.sin(2 * math.pi * self.frequency * n / self.rate)
            self._phase += nframes
            self._armed -= nframes
        else:
            out[:] = 0.0
        self._frames += nframes
        return 0

    def close(self) -> None:
        if self._client:
            self._lib.jack_deactivate(self._client)
            self._lib.jack_client_close(self._client)
            self._client = None

    def __enter__(self) -> ToneBurstClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SignalPlayer:
    """A JACK client that plays one mono recording on each of its output ports, all starting in
    the same cycle once `play()` is called, then silence.

    Each cycle's time.monotonic() at the start of its process callback is noted, so
    `time_of(sample)` says when a sample of the recordings went out: the cycles' nominal
    times (one period apart from the first played) are placed at the earliest any callback
    ran, since a callback can start late (the GIL, the scheduler) but never early.
    """

    def __init__(self, server: str, signals: list[np.ndarray], name: str = "player") -> None:
        self._lib = lib = _libjack()
        self._client = _open_client(lib, server, name)
        if not self._client:
            pytest.fail(f"cannot open a JACK client on server '{server}'")
        self.signals = [np.ascontiguousarray(s, np.float32) for s in signals]
        self._ports = [lib.jack_port_register(self._client, f"out_{i}".encode(), AUDIO_TYPE,
                                              JackPortIsOutput, 0)
                       for i in range(len(signals))]
        self.rate = lib.jack_get_sample_rate(self._client)
        self.period = lib.jack_get_buffer_size(self._client)
        self.length = max(len(s) for s in self.signals)
        cycles = self.length // self.period + 2
        self.cycle_times = np.full(cycles, np.nan)  # preallocated: the callback only stores
        self._armed = False
        self._played = -1  # samples played since play(); -1 = not started
        self._callback = PROCESS(self._process)  # keep a reference while JACK may call it
        lib.jack_set_process_callback(self._client, self._callback, None)
        if lib.jack_activate(self._client):
            pytest.fail("cannot activate the JACK player client")

    def port_name(self, index: int) -> str:
        return self._lib.jack_port_name(self._ports[index]).decode()

    def input_ports(self, skip: tuple[str, ...] = ("system:",)) -> list[str]:
        return _input_ports(self._lib, self._client, skip)

    def connect(self, index: int, destination: str) -> None:
        source = self.port_name(index)
        if self._lib.jack_connect(self._client, source.encode(), destination.encode()):
            pytest.fail(f"cannot connect {source} to {destination}")

    def play(self) -> None:
        self._armed = True

    @property
    def done(self) -> bool:
        return self._played >= self.length

    def time_of(self, sample: int | np.ndarray) -> float | np.ndarray:
        """When `sample` (an index into the recordings) went out, in time.monotonic()."""
        times = self.cycle_times
        played = np.flatnonzero(~np.isnan(times))
        if not len(played):
            raise ValueError("nothing played yet")
        start = np.min(times[played] - played * self.period / self.rate)
        return start + np.asarray(sample) / self.rate

    def heard_at(self, sample: int | np.ndarray) -> float | np.ndarray:
        """When an input connected to the player heard `sample`, as a capture device tells
        it: JACK hands a cycle's samples to the inputs in the same cycle they went out, as one
        block, and a capture device's block is delivered when its last sample was captured, so
        the block's samples were heard during the period before it: one period before
        `time_of`."""
        return self.time_of(sample) - self.period / self.rate

    def _process(self, nframes: int, arg: object) -> int:
        now = time.monotonic()
        if self._armed and self._played < 0:
            self._played = 0
        played = self._played
        if 0 <= played < self.length:
            cycle = played // self.period
            if cycle < len(self.cycle_times):
                self.cycle_times[cycle] = now
        for port, recording in zip(self._ports, self.signals):
            pointer = self._lib.jack_port_get_buffer(port, nframes)
            out = np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)),
                                        shape=(nframes,))
            part = recording[played:played + nframes] if played >= 0 else recording[:0]
            out[:len(part)] = part
            out[len(part):] = 0.0
        if played >= 0:
            self._played = played + nframes
        return 0

    def close(self) -> None:
        if self._client:
            self._lib.jack_deactivate(self._client)
            self._lib.jack_client_close(self._client)
            self._client = None

    def __enter__(self) -> SignalPlayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
