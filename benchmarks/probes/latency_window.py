"""The running instrument for benchmarks/bench_latency.py: `instrument.py` full screen on an
Xvfb screen, its audio from a JACK server with the dummy driver, MIDI through a JACK MIDI port,
OSC over UDP, the web remote's socket; stimuli sent from this process and the screen read back
by XGetImage, every time stamped by time.perf_counter (CLOCK_MONOTONIC, the same clock in every
process here).

Threads: the benchmark's, and JACK's process thread for `BurstPlayer._process`.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import rtmidi
from probes.latency_devices import (  # run as a script: benchmarks/ on the path
    WebGesture,
    osc_message,
)

from swarm_instrument.control.looks.preset_bank import PresetBank
from swarm_instrument.show.cli.options import START_LOOK

ROOT = Path(__file__).resolve().parents[2]  # the clone: benchmarks/probes/ is two below it
DARK_EXPOSURE, BRIGHT_EXPOSURE, MIDI_CC = 0.15, 8.0, 20
# --post on: the look's bloom and feedback as a GPU shows them, held on by the governor
POST_ON = {"post": "on", "pin_post": True}
AUDIO_TYPE = b"32 bit float mono audio"
PROCESS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)


def wait_until(check, what: str, timeout: float, process: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what}: the instrument stopped (exit {process.returncode})")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


class BurstPlayer:
    """A JACK client (libjack through ctypes) with one output port: `burst()` makes the next
    cycles play 100 ms of a 1 kHz tone and stamps the start of the cycle that carried its
    first sample (the instrument's input gets that block in the same cycle)."""

    def __init__(self, server: str) -> None:
        lib = self._lib = ctypes.CDLL("libjack.so.0")
        lib.jack_client_open.restype = ctypes.c_void_p
        lib.jack_port_register.restype = ctypes.c_void_p
        lib.jack_port_register.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                           ctypes.c_ulong, ctypes.c_ulong]
        lib.jack_port_get_buffer.restype = ctypes.c_void_p
        lib.jack_port_get_buffer.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
        lib.jack_get_ports.restype = ctypes.POINTER(ctypes.c_char_p)
        lib.jack_get_ports.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                       ctypes.c_ulong]
        lib.jack_set_process_callback.argtypes = [ctypes.c_void_p, PROCESS, ctypes.c_void_p]
        for name in ("jack_activate", "jack_deactivate", "jack_client_close",
                     "jack_get_sample_rate"):
            getattr(lib, name).argtypes = [ctypes.c_void_p]
        lib.jack_connect.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
        lib.jack_port_name.restype = ctypes.c_char_p
        lib.jack_port_name.argtypes = [ctypes.c_void_p]
        status = ctypes.c_int(0)
        self._client = lib.jack_client_open(b"latency-burst", 0x05, ctypes.byref(status),
                                            server.encode())  # no start, server named
        if not self._client:
            raise RuntimeError(f"cannot open a JACK client on server {server}")
        self._port = lib.jack_port_register(self._client, b"out", AUDIO_TYPE, 0x2, 0)
        self.rate = lib.jack_get_sample_rate(self._client)
        self._armed = 0
        self._phase = 0
        self.started_at: float | None = None
        self._callback = PROCESS(self._process)  # kept while JACK may call it
        lib.jack_set_process_callback(self._client, self._callback, None)
        lib.jack_activate(self._client)

    def instrument_inputs(self) -> list[str]:
        ports = self._lib.jack_get_ports(self._client, None, AUDIO_TYPE, 0x1)
        names = []
        for i in range(64):
            if not ports or not ports[i]:
                break
            names.append(ports[i].decode())
        return [n for n in names if not n.startswith("system:")]

    def connect(self, destination: str) -> None:
        source = self._lib.jack_port_name(self._port)
        if self._lib.jack_connect(self._client, source, destination.encode()):
            raise RuntimeError(f"cannot connect {source.decode()} to {destination}")

    def burst(self) -> None:
        self.started_at = None
        self._armed = int(0.1 * self.rate)

    def _process(self, nframes: int, arg: object) -> int:
        now = time.perf_counter()
        pointer = self._lib.jack_port_get_buffer(self._port, nframes)
        out = np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)),
                                    shape=(nframes,))
        if self._armed > 0:
            if self.started_at is None:
                self.started_at = now
            n = np.arange(self._phase, self._phase + nframes)
            out[:] = 0.5 * np.sin(2 * np.pi * 1000.0 * n / self.rate)
            self._phase += nframes
            self._armed -= nframes
        else:
            out[:] = 0.0
        return 0

    def close(self) -> None:
        if self._client:
            self._lib.jack_deactivate(self._client)
            self._lib.jack_client_close(self._client)
            self._client = None


class XImage(ctypes.Structure):
    _fields_ = [("width", ctypes.c_int), ("height", ctypes.c_int), ("xoffset", ctypes.c_int),
                ("format", ctypes.c_int), ("data", ctypes.c_void_p),
                ("byte_order", ctypes.c_int), ("bitmap_unit", ctypes.c_int),
                ("bitmap_bit_order", ctypes.c_int), ("bitmap_pad", ctypes.c_int),
                ("depth", ctypes.c_int), ("bytes_per_line", ctypes.c_int),
                ("bits_per_pixel", ctypes.c_int)]


class Screen:
    """The X screen read back (XGetImage on the root window: what the display shows) and keys
    pressed (XTest), over one connection of this thread."""

    def __init__(self, display: str) -> None:
        x11 = self._x11 = ctypes.CDLL("libX11.so.6")
        self._xtst = ctypes.CDLL("libXtst.so.6")
        x11.XOpenDisplay.restype = ctypes.c_void_p
        x11.XDefaultRootWindow.restype = ctypes.c_ulong
        x11.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
        x11.XGetImage.restype = ctypes.POINTER(XImage)
        x11.XGetImage.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_uint, ctypes.c_uint, ctypes.c_ulong, ctypes.c_int]
        x11.XDestroyImage.argtypes = [ctypes.POINTER(XImage)]
        x11.XStringToKeysym.restype = ctypes.c_ulong
        x11.XKeysymToKeycode.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
        x11.XFlush.argtypes = [ctypes.c_void_p]
        self._xtst.XTestFakeKeyEvent.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                                                 ctypes.c_ulong]
        self._dpy = x11.XOpenDisplay(display.encode())
        if not self._dpy:
            raise RuntimeError(f"cannot open display {display}")
        self._root = x11.XDefaultRootWindow(self._dpy)
        self.region = (0, 0, 1, 1)

    def mean(self) -> float:
        """The mean of the watched region's RGB, 0-255."""
        x, y, w, h = self.region
        image = self._x11.XGetImage(self._dpy, self._root, x, y, w, h, 0xFFFFFFFF, 2)  # ZPixmap
        if not image:
            return float("nan")
        info = image.contents
        data = ctypes.string_at(info.data, info.bytes_per_line * h)
        self._x11.XDestroyImage(image)
        pixels = np.frombuffer(data, np.uint8).reshape(h, info.bytes_per_line)[:, :w * 4]
        return float(pixels.reshape(h, w, 4)[:, :, :3].mean())

    def press(self, keysym: str) -> float:
        """Press and release a key; returns when the press was sent."""
        code = self._x11.XKeysymToKeycode(self._dpy, self._x11.XStringToKeysym(keysym.encode()))
        self._xtst.XTestFakeKeyEvent(self._dpy, code, 1, 0)
        self._xtst.XTestFakeKeyEvent(self._dpy, code, 0, 0)
        sent = time.perf_counter()
        self._x11.XFlush(self._dpy)
        return sent

    def close(self) -> None:
        if self._dpy:
            self._x11.XCloseDisplay(ctypes.c_void_p(self._dpy))
            self._dpy = None


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class WindowRig:
    """Xvfb, jackd and the instrument started; `send(kind, on)` a stimulus, `brightness()`
    the watched region now, `sample(s)` its values for `s` seconds."""

    def __init__(self, args) -> None:
        self.size = args.size
        self.count = args.count
        self.post = args.post
        self.processes: list[subprocess.Popen] = []
        self.folder = Path(tempfile.mkdtemp(prefix="latency-"))
        self.records: list[dict] = []

    # ---- start and stop ---------------------------------------------------------------------

    def __enter__(self) -> WindowRig:
        try:
            self._start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _spawn(self, argv: list[str], **kwargs) -> subprocess.Popen:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, **kwargs)
        self.processes.append(process)
        return process

    def _start(self) -> None:
        for tool in ("Xvfb", "jackd", "xdotool"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"{tool} not found: the window mode needs Xvfb, jackd "
                                   "(jackd2) and xdotool; on a machine without them use "
                                   "--offscreen")
        number = next(n for n in range(150, 250) if not Path(f"/tmp/.X11-unix/X{n}").exists()
                      and not Path(f"/tmp/.X{n}-lock").exists())
        self.display = f":{number}"
        width, height = self.size
        self._spawn(["Xvfb", self.display, "-screen", "0", f"{width}x{height}x24", "-nolisten",
                     "tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: Path(f"/tmp/.X11-unix/X{number}").exists(), "Xvfb", 10)
        self.server = f"latency-{os.getpid()}"
        os.environ.update(JACK_DEFAULT_SERVER=self.server, JACK_NO_START_SERVER="1")
        self.jackd_log = (self.folder / "jackd.log").open("w")
        self._spawn(["jackd", "-n", self.server, "-d", "dummy", "-r", "48000", "-p", "256"],
                    stdout=self.jackd_log, stderr=subprocess.STDOUT,
                    env=dict(os.environ, JACK_NO_AUDIO_RESERVATION="1"))
        self.player = wait_until(self._open_player, "jackd to take clients", 15)
        self.midi = rtmidi.MidiOut(rtmidi.API_UNIX_JACK, name="latency-knob")
        self.midi.open_virtual_port("out")
        self.osc_port = free_udp_port()
        self.osc = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.web_port = free_tcp_port()
        look = json.loads(PresetBank().resolve(START_LOOK).read_text())
        look["name"] = "latency"
        look["params"]["exposure"] = DARK_EXPOSURE
        if self.count:
            look["params"]["count"] = self.count
        look["params"].update(POST_ON if self.post == "on" else {})
        look["routes"].append({"source": "level", "param": "exposure",
                               "amount": BRIGHT_EXPOSURE - 0.1})
        (self.folder / "latency.json").write_text(json.dumps(look))
        (self.folder / "midi.json").write_text(json.dumps({"bindings": [
            {"channel": 1, "controller": MIDI_CC, "param": "exposure", "lo": DARK_EXPOSURE,
             "hi": BRIGHT_EXPOSURE}]}))
        self.telemetry = self.folder / "telemetry.jsonl"
        env = dict(os.environ, DISPLAY=self.display,
                   SWARM_PRESETS_DIR=str(self.folder / "presets"),
                   SWARM_STATE_DIR=str(self.folder / "state"),
                   SWARM_RECOVERY_FILE=str(self.folder / "recovery.json"))
        self.instrument_log = (self.folder / "instrument.log").open("w")
        self.instrument = self._spawn(
            [sys.executable, str(ROOT / "instrument.py"), "--preset",
             str(self.folder / "latency.json"), "--midi-api", "jack", "--midi-port",
             "latency-knob", "--midi-map", str(self.folder / "midi.json"), "--osc",
             f"127.0.0.1:{self.osc_port}", "--web", f"127.0.0.1:{self.web_port}",
             "--telemetry", str(self.telemetry)],
            env=env, stdout=self.instrument_log, stderr=subprocess.STDOUT)
        wait_until(lambda: self._last() and self._last()["audio"]["state"] == "ok"
                   and self._last()["midi"]["ports_open"], "the show with audio and MIDI",
                   120, self.instrument)
        self.inputs = wait_until(self.player.instrument_inputs, "the show's audio inputs", 20)
        for port in self.inputs:
            self.player.connect(port)
        window = wait_until(lambda: subprocess.run(
            ["xdotool", "search", "--onlyvisible", "--name", "swarm instrument"],
            env=env, capture_output=True, text=True).stdout.split(), "the window", 30)
        subprocess.run(["xdotool", "windowfocus", "--sync", window[-1]], env=env, timeout=20)
        self.screen = Screen(self.display)
        self.web = WebGesture(self.web_port)
        self.send("midi", False)  # the knob at the exposure: picked up
        time.sleep(4.0)  # the governor finds its level
        self.first_frame = self._last()["frame"]

    def _open_player(self) -> BurstPlayer | None:
        try:
            return BurstPlayer(self.server)
        except RuntimeError:
            return None

    def _last(self) -> dict | None:
        try:
            lines = self.telemetry.read_text().splitlines()
        except OSError:
            return None
        for line in reversed(lines):
            try:
                return json.loads(line)
            except ValueError:
                continue  # a line being written
        return None

    def __exit__(self, *exc) -> None:
        for name in ("player", "screen", "web"):
            if hasattr(self, name):
                getattr(self, name).close()
        if hasattr(self, "midi"):
            self.midi.close_port()
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGINT if process is getattr(
                    self, "instrument", None) else signal.SIGTERM)
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(5)

    # ---- what the benchmark asks ------------------------------------------------------------

    def describe(self) -> str:
        last = self._last() or {}
        return (f"{last.get('backend', {}).get('context', '?')}; {last.get('agents')} agents; "
                f"the burst into {', '.join(self.inputs)}; logs in {self.folder}")

    def watch(self, kind: str) -> None:
        width, height = self.size
        self.screen.region = ((8, 8, 240, 40) if kind == "key"  # the HUD's first lines
                              else (width // 4, height // 2 - 24, width // 2, 48))

    def brightness(self) -> float:
        return self.screen.mean()

    def sample(self, seconds: float) -> list[float]:
        values, deadline = [], time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            values.append(self.screen.mean())
            time.sleep(0.0005)
        return values

    def trace(self, t0: float, seconds: float) -> list[tuple[float, float]]:
        """(seconds after `t0`, value) of every read of the screen until `seconds` after it
        (each stamped at the read's end: at most one read late)."""
        reads, deadline = [], t0 + seconds
        while time.perf_counter() < deadline:
            value = self.screen.mean()
            reads.append((time.perf_counter() - t0, value))
            time.sleep(0.0005)
        return reads

    def send(self, kind: str, on: bool) -> float:
        if kind == "sound":
            if not on:
                return time.perf_counter()
            self.player.burst()
            deadline = time.perf_counter() + 2.0  # the next JACK cycle: at most 5.3 ms here
            while self.player.started_at is None:  # (the picture cannot answer before it)
                if time.perf_counter() > deadline:
                    raise RuntimeError("the JACK burst never played: is jackd running?")
                time.sleep(0.0002)
            return self.player.started_at
        if kind == "key":
            return self.screen.press("h")
        sent = time.perf_counter()
        if kind == "midi":
            self.midi.send_message([0xB0, MIDI_CC, 127 if on else 0])
        elif kind == "osc":
            self.osc.sendto(osc_message("/swarm/exposure",
                                        BRIGHT_EXPOSURE if on else DARK_EXPOSURE),
                            ("127.0.0.1", self.osc_port))
        elif kind == "web":
            return self.web.move("/swarm/exposure", BRIGHT_EXPOSURE if on else DARK_EXPOSURE)
        return sent

    def frame_s(self) -> float:
        records = [json.loads(line) for line in self.telemetry.read_text().splitlines()[-30:]
                   if line.strip()]
        fps = [r["fps"] for r in records if r.get("fps")]
        return 1.0 / statistics.median(fps) if fps else float("nan")

    def state(self) -> dict:
        last = self._last() or {}
        return {"renderer": last.get("backend", {}).get("context"), "agents": last.get("agents"),
                "fps": last.get("fps"), "governor": last.get("governor"),
                "real_time": last.get("real_time"), "screen": list(self.size)}
