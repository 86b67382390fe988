"""The other end of the video outputs, as separate processes (a receiver must not share the
show's interpreter: cyndilib's receiver holds the GIL while it waits, and a decoder on the
test's thread would steal the show's CPU in ways no performer's receiver does).

    python tests/outputs_peer.py ndi-receive NAME SECONDS OUT.npz
        an NDI receiver (cyndilib's Receiver and FrameSync, as its own viewer does) finds the
        source whose name contains NAME, polls it every 4 ms for SECONDS and saves each new
        frame (RGBA) with its arrival time
    python tests/outputs_peer.py ts-receive URL SECONDS OUT.npz
        PyAV reads MPEG-TS from URL (udp://127.0.0.1:PORT binds it; tcp://...?listen=1
        listens) and saves every decoded frame (RGB) with its arrival time
    python tests/outputs_peer.py ndi-show OUT_DIR
        inside a private network namespace: a live show (headless, in this process) with an
        NDI output, every frame it sends kept, and an ndi-receive process beside it; saves
        sent.npz and received.npz in OUT_DIR

NDI discovers sources by multicast: run these only in a network namespace with nothing but
loopback, with NDI_CONFIG_DIR pointing at a config that lists 127.0.0.1 and no discovery
server (`write_ndi_config`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def write_ndi_config(folder: Path) -> Path:
    """An NDI config that finds sources by asking 127.0.0.1 and sends no multicast."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"ndi": {"networks": {"ips": "127.0.0.1", "discovery": ""},
                      "multicast": {"send": {"enable": False}}}}
    (folder / "ndi-config.v1.json").write_text(json.dumps(config))
    return folder


def ndi_receive(name: str, seconds: float, out: Path) -> None:
    from cyndilib.finder import Finder
    from cyndilib.receiver import Receiver
    from cyndilib.video_frame import VideoFrameSync
    from cyndilib.wrapper.ndi_recv import RecvBandwidth, RecvColorFormat

    finder = Finder()  # not opened: its thread would hold the GIL in libndi's waits
    deadline = time.monotonic() + 10.0
    source = None
    while source is None and time.monotonic() < deadline:
        finder.wait_for_sources(0.2)
        source = next((s for s in finder if name in s.name), None)
    if source is None:
        raise SystemExit(f"no NDI source named like {name!r}: {finder.get_source_names()}")
    receiver = Receiver(color_format=RecvColorFormat.RGBX_RGBA,
                        bandwidth=RecvBandwidth.highest)
    video = VideoFrameSync()
    receiver.frame_sync.set_video_frame(video)
    receiver.set_source(source)
    frames, times, last = [], [], None
    started = time.monotonic()
    end = started + seconds
    while time.monotonic() < end:
        receiver.frame_sync.capture_video()
        if video.get_data_size() > 0 and min(video.get_resolution()) > 0:
            width, height = video.get_resolution()
            frame = video.get_array().reshape(height, width, 4)
            if last is None or not np.array_equal(frame, last):
                frames.append(frame.copy())
                times.append(time.monotonic() - started)
                last = frame
        time.sleep(0.004)
    np.savez(out, frames=np.stack(frames) if frames else np.zeros((0, 1, 1, 4), np.uint8),
             times=np.asarray(times), source=source.name)


def ts_receive(url: str, seconds: float, out: Path) -> None:
    import av

    frames, times = [], []
    started = time.monotonic()
    try:
        container = av.open(url, format="mpegts", timeout=(seconds + 5.0, 1.0),
                            options={"fifo_size": "1000000", "overrun_nonfatal": "1"}
                            if url.startswith("udp") else {})
        for frame in container.decode(video=0):
            frames.append(to_rgb(frame))
            times.append(time.monotonic() - started)
            if time.monotonic() - started > seconds:
                break
    except (av.error.ExitError, av.error.TimeoutError, OSError, EOFError):
        pass  # the sender stopped: keep what came
    np.savez(out, frames=np.stack(frames) if frames else np.zeros((0, 1, 1, 3), np.uint8),
             times=np.asarray(times))


def to_rgb(frame) -> np.ndarray:
    """A decoded frame as RGB, read with the colour matrix its stream is tagged with (BT.709:
    what players do; FFmpeg's converter would otherwise assume BT.601)."""
    return frame.to_ndarray(format="rgb24",
                            src_colorspace="ITU709" if frame.colorspace == 1 else None)


class Recorded:
    """A backend that keeps every frame it sends (a copy) and passes it on, with the CPU time
    the backend's send took on the output's thread."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.kind, self.target = backend.kind, backend.target
        self.carries_alpha, self.even_size = backend.carries_alpha, backend.even_size
        self.frames: list[np.ndarray] = []
        self.times: list[float] = []
        self.send_cpu: list[float] = []
        self.started = time.monotonic()

    def open(self, size, rate):
        self.backend.open(size, rate)

    def send(self, frame, seconds):
        cpu = time.thread_time()
        self.backend.send(frame, seconds)
        self.send_cpu.append(time.thread_time() - cpu)
        self.frames.append(frame.copy())
        self.times.append(time.monotonic() - self.started)

    def close(self):
        self.backend.close()

    def detail(self):
        return self.backend.detail()


def ndi_show(out_dir: Path) -> None:
    """A show sending NDI while a receiver process watches it (see the module's comment)."""
    from swarm_instrument.control.parameters.registry import Params
    from swarm_instrument.show.cli.options import ShowOptions
    from swarm_instrument.show.loop import Loop, Offscreen, WallClock
    from swarm_instrument.show.show import Show
    from swarm_instrument.show.video_outputs import Outputs
    from swarm_instrument.visual.gpu.context import create_headless_context
    from swarm_instrument.visual.output.frame_output import FrameOutput
    from swarm_instrument.visual.output.ndi import NdiBackend

    name = f"swarm-test-{os.getpid()}"
    seconds = float(os.environ.get("PEER_SECONDS", "2.5"))
    size = (256, 144)
    receiver = subprocess.Popen([sys.executable, __file__, "ndi-receive", name,
                                 str(seconds + 1.0), str(out_dir / "received.npz")])
    ctx = create_headless_context()
    show = Show(ctx, Params({"count": 2048, "trail": 0.0, "agent_size": 2.5}), ShowOptions())
    recorded = Recorded(NdiBackend(name))
    output = FrameOutput(recorded, nominal_rate=30.0)
    outputs = Outputs(ctx, [output])
    sink = Offscreen(show, size)
    loop = Loop(show, WallClock(), outputs=outputs)
    started = time.monotonic()
    frames = loop.run(sink, stop=lambda: time.monotonic() - started > seconds, cap=30.0)
    elapsed = time.monotonic() - started
    detail = str(output.detail())
    outputs.close()
    receiver.wait(30)
    np.savez(out_dir / "sent.npz", frames=np.stack(recorded.frames),
             times=np.asarray(recorded.times), show_frames=frames, elapsed=elapsed,
             sent=output.sent, dropped=output.dropped, captured=output.captured,
             send_cpu=np.asarray(recorded.send_cpu), detail=detail)
    show.release()
    ctx.release()
    if receiver.returncode:
        raise SystemExit(f"the receiver failed ({receiver.returncode})")


def only_loopback() -> None:
    """NDI multicasts: refuse to run it where another interface could carry that."""
    import socket

    interfaces = [name for _, name in socket.if_nameindex()]
    if interfaces != ["lo"]:
        raise SystemExit(f"refusing to run NDI with network interfaces {interfaces}: run it "
                         "inside `unshare -n` (only loopback)")


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    if command.startswith("ndi"):
        only_loopback()
    if command == "ndi-receive":
        ndi_receive(rest[0], float(rest[1]), Path(rest[2]))
    elif command == "ts-receive":
        ts_receive(rest[0], float(rest[1]), Path(rest[2]))
    elif command == "ndi-show":
        ndi_show(Path(rest[0]))
    else:
        raise SystemExit(f"unknown command {command!r}")
