"""Sound and touch to light, end to end in the running show (issue 31): a stimulus sent at a
known time, and the first picture that shows it, both stamped with one monotonic clock.

    python benchmarks/bench_latency.py --trials 20 --json latency.json            # the window
    python benchmarks/bench_latency.py --offscreen --fps 60 --trials 30 --json out.json

The look is the default one (aurora) made dark (exposure 0.15) with the level routed to the
exposure (+7.9), so a sound, a MIDI knob (CC 20 on channel 1, mapped to the exposure 0.15..8)
or an OSC message or the web page's slider (/swarm/exposure) turns the picture bright; a key
(H) shows the HUD. A trial
waits until the picture is dark again, then a random 50-250 ms (so the stimulus falls anywhere
in a frame), sends the stimulus and watches the picture for half a second: the latency is the
time to the first picture past half-way from the one before the stimulus to the trial's own
peak (the band's brightness drifts as the swarm moves; a trial that rises less than a quarter
of the calibrated change is counted missed). Latency is reported in milliseconds and in
frames of the show's own pace (the median interval between the frames it drew while
measuring).

The window (the default; probes/latency_window.py): `instrument.py` as a performer runs it, full
screen on an Xvfb screen, audio from a JACK server with the dummy driver (a JACK client here
plays a 1 kHz burst into the instrument's input ports; the stimulus time is the JACK cycle
that carried its first sample), MIDI through a JACK MIDI port, OSC over UDP, the web page's
message over its WebSocket (`--web` on loopback), keys through XTest; the screen read back
(XGetImage, a band across its middle, or the HUD's corner) every half millisecond. Needs
jackd, Xvfb and a display-capable GL: this machine, not the GPU one.

`--offscreen` (the GPU machine: no audio, no display, EGL): the show in this process, its
frames paced by the loop at --fps with the governor, each frame's picture read back (a band
across its middle) once its work is done on the GPU, as a swap would be. The sound is a click
written by the live input's own worker callback (audio/input/worker.py) into its ring, from a
thread that delivers a 256-sample block every 5.33 ms as a 48 kHz sound card does; MIDI bytes
are queued at the port as rtmidi's callback queues them; OSC comes over UDP to the real input,
the web page's message over a WebSocket to the real web remote. The stimuli are sent by a
process of their own (probes/latency_sender.py: a random 0-2 frames after each trial's wait,
so they fall anywhere in a frame): sent from a thread here, each went only when the frame let
go of the GIL, at the pacer's sleep just after a frame, and waited about one whole frame
every time (`--stimuli thread` measures that way, as rounds one to seven did).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from probes.latency_devices import ClockedDevice, QueuedPort, WebGesture, osc_message
from probes.latency_window import (  # run as a script: benchmarks/ is on the path
    BRIGHT_EXPOSURE,
    DARK_EXPOSURE,
    MIDI_CC,
    POST_ON,
    WindowRig,
)

from swarm_instrument.audio.input.live_input import AudioInput
from swarm_instrument.control.looks.preset_bank import PresetBank
from swarm_instrument.control.looks.presets import load_preset
from swarm_instrument.control.midi.midi_in import Midi
from swarm_instrument.control.osc.osc_input import OscInput
from swarm_instrument.control.parameters.modulation import Route
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.control.web.web_remote import WebRemote
from swarm_instrument.show.cli.options import START_LOOK, ShowOptions
from swarm_instrument.show.inputs.web_input import WebInput
from swarm_instrument.show.loop import Loop, Offscreen, WallClock
from swarm_instrument.show.show import Show
from swarm_instrument.visual.gpu.context import create_headless_context

WATCH_S = 0.5  # a trial's reads: its rise and peak come well within this


def latency_look() -> tuple[dict, list[Route]]:
    """The default look, dark, with the level routed to the exposure."""
    preset = load_preset(PresetBank().resolve(START_LOOK))
    values = {**preset.values, "exposure": DARK_EXPOSURE}
    return values, [*preset.routes, Route("level", "exposure", BRIGHT_EXPOSURE - 0.1)]


def midi_mapping(path: Path) -> Path:
    path.write_text(json.dumps({"bindings": [{"channel": 1, "controller": MIDI_CC,
                                              "param": "exposure", "lo": DARK_EXPOSURE,
                                              "hi": BRIGHT_EXPOSURE}]}))
    return path


def summary(latencies_s: list[float], frame_s: float, missed: int) -> dict:
    ms = sorted(v * 1e3 for v in latencies_s)
    if not ms:
        return {"trials": 0, "missed": missed}
    p90 = float(np.percentile(ms, 90))
    frame_ms = frame_s * 1e3
    return {"trials": len(ms), "missed": missed, "median_ms": round(statistics.median(ms), 2),
            "p90_ms": round(p90, 2), "worst_ms": round(ms[-1], 2),
            "median_frames": round(statistics.median(ms) / frame_ms, 2),
            "p90_frames": round(p90 / frame_ms, 2), "worst_frames": round(ms[-1] / frame_ms, 2),
            "frame_ms": round(frame_ms, 2), "all_ms": [round(v, 2) for v in ms]}


def print_row(name: str, row: dict) -> None:
    if not row.get("trials"):
        print(f"{name:>6}: no trial saw the picture change ({row.get('missed')} missed)")
        return
    print(f"{name:>6}: {row['trials']:3d} trials ({row['missed']} missed), frame "
          f"{row['frame_ms']:.1f} ms: median {row['median_ms']:6.1f} ms "
          f"({row['median_frames']:.2f} frames), p90 {row['p90_ms']:6.1f} "
          f"({row['p90_frames']:.2f}), worst {row['worst_ms']:6.1f} ({row['worst_frames']:.2f})",
          flush=True)


# ---- offscreen: the show in this process ------------------------------------------------------

class OffscreenRig:
    """The show in this process, paced at `fps` with the governor; each frame's band read
    back after its work is done. `frames` holds (done time, brightness) of every frame."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.size = args.size
        values, routes = latency_look()
        if args.count:
            values["count"] = args.count
        self.params = Params({**values, **(POST_ON if args.post == "on" else {})})
        # --stimuli process (the default): sent by a process of their own (probes/
        # latency_sender.py), at times that do not wait for this one's GIL; thread: from the
        # trials' thread here, as rounds one to seven did (each went at the pacer's sleep)
        self.apart = args.stimuli == "process"
        midi_read, self._midi_write = os.pipe() if self.apart else (None, None)
        click_read, self._click_write = os.pipe() if self.apart else (None, None)
        for fd in (midi_read, click_read) if self.apart else ():
            os.set_blocking(fd, False)
        self.device = ClockedDevice(clicks=click_read)
        self.port = QueuedPort(midi_read)
        self.ctx = create_headless_context()
        mapping = midi_mapping(Path(args.workdir) / "latency-midi.json")
        midi = Midi(self.params, self.port, mapping_path=mapping, save_path=None,
                    report=lambda text: None)
        self.osc = OscInput("127.0.0.1", 0)
        self.sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        audio = AudioInput(sd=self.device, start_wait_s=5.0)
        remote = WebRemote("127.0.0.1", 0)
        self.show = Show(self.ctx, self.params, ShowOptions(seed=1), audio=audio,
                         routes=routes, midi=midi, osc=self.osc, web=WebInput(remote))
        self.fps = args.fps
        if self.apart:
            self.web = None
            self.performer = subprocess.Popen(
                [sys.executable, str(Path(__file__).parent / "probes" / "latency_sender.py"),
                 "--osc-port", str(self.osc.port), "--web-port", str(remote.port),
                 "--midi-fd", str(self._midi_write), "--click-fd", str(self._click_write),
                 "--spread", str(2.0 / self.fps)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                pass_fds=(self._midi_write, self._click_write))
            self._performer_ready = False
        else:
            self.web = WebGesture(remote.port)
            self.performer = None
        self.frames: list[tuple[float, float]] = []
        self.done = threading.Event()
        self.port.queue.append((bytes([0xB0, MIDI_CC, 0]), 0.0))  # the knob picked up

    # the Sink protocol (show/loop.py): the frame's band read once its work is done
    def target(self):
        return self.sink.target()

    def after(self, show: Show, index: int) -> None:
        width, height = self.size
        band = self.sink.framebuffer.read(viewport=(0, height // 2 - 24, width, 48),
                                          components=3, alignment=1)
        self.frames.append((time.perf_counter(), float(np.frombuffer(band, np.uint8).mean())))

    def run(self, stimuli) -> None:
        """Frames until the stimuli thread is done."""
        self.sink = Offscreen(self.show, self.size)
        self.show.params["target_fps"] = self.fps
        worker = threading.Thread(target=stimuli, daemon=True)
        worker.start()
        Loop(self.show, WallClock()).run(self, stop=self.done.is_set, cap=self.fps, govern=True)
        worker.join()

    def watch(self, kind: str) -> None:
        pass  # the band across the middle, for every kind

    def brightness(self) -> float:
        return self.frames[-1][1] if self.frames else 0.0

    def sample(self, seconds: float) -> list[float]:
        since = time.perf_counter()
        time.sleep(seconds)
        return [value for done, value in self.frames if done > since]

    def trace(self, t0: float, seconds: float) -> list[tuple[float, float]]:
        """(seconds after `t0`, value) of every frame done until `seconds` after it."""
        time.sleep(max(0.0, t0 + seconds - time.perf_counter()))
        return [(done - t0, value) for done, value in list(self.frames) if done > t0]

    def send(self, kind: str, on: bool) -> float:
        """Sends one stimulus (or its undoing); returns its time."""
        value = BRIGHT_EXPOSURE if on else DARK_EXPOSURE
        if self.performer is not None:
            return self._send_apart(kind, on, value)
        if kind == "sound":
            if not on:
                return time.perf_counter()
            self.device.click()
            while self.device.clicked_at is None:
                time.sleep(0.0002)
            return self.device.clicked_at
        now = time.perf_counter()
        if kind == "midi":
            self.port.queue.append((bytes([0xB0, MIDI_CC, 127 if on else 0]), 0.0))
        elif kind == "osc":
            self.sender.sendto(osc_message("/swarm/exposure", value), ("127.0.0.1", self.osc.port))
        elif kind == "web":
            return self.web.move("/swarm/exposure", value)
        return now

    def _send_apart(self, kind: str, on: bool, value: float) -> float:
        """The stimulus sent by the performer's process; its time (the sound's: when the card
        delivered the loud block)."""
        performer = self.performer
        if not self._performer_ready:  # the page's WebSocket open
            if performer.stdout.readline().strip() != "ready":
                raise RuntimeError("the latency sender did not start (its stderr says why)")
            self._performer_ready = True
        if kind == "sound":
            if not on:
                return time.perf_counter()
            self.device.clicked_at = None
            line = "click"
        elif kind == "midi":
            line = f"midi {0xB0} {MIDI_CC} {127 if on else 0}"
        else:
            line = f"{kind} {value}"
        performer.stdin.write(line + "\n")
        performer.stdin.flush()
        sent = float(performer.stdout.readline())
        if kind == "sound":
            while self.device.clicked_at is None:
                time.sleep(0.0002)
            return self.device.clicked_at
        return sent

    def frame_s(self) -> float:
        times = [done for done, _ in self.frames]
        return statistics.median(np.diff(times)) if len(times) > 2 else float("nan")

    def close(self) -> None:
        self.sender.close()
        if self.web is not None:
            self.web.close()
        if self.performer is not None:
            self.performer.stdin.close()
            self.performer.wait(10)  # its stdin closed: it ends
            for fd in (self._midi_write, self._click_write):
                os.close(fd)
        self.show.release()


def calibrate(rig, kind: str) -> tuple[float, float]:
    """The watched region's value with the stimulus off, and at its strongest on."""
    rig.watch(kind)
    rig.send(kind, False)
    off = statistics.median(rig.sample(1.0)[-20:])
    rig.send(kind, True)
    on = max(rig.sample(0.6), key=lambda value: abs(value - off))
    rig.send(kind, False)
    time.sleep(0.8)
    return off, on


def half_rise(reads: list[tuple[float, float]], before: float, least: float) -> float | None:
    """Seconds to the first read past half-way from `before` (the picture just before the
    stimulus) to this trial's own peak; None if the trial rose less than `least`. Each trial
    against its own rise: the band's brightness drifts as the swarm moves (with one
    calibration for all, a third of the sound trials of a long run stayed under half-way)."""
    if not reads:
        return None
    peak = max(reads, key=lambda read: abs(read[1] - before))[1]
    if abs(peak - before) < least:
        return None
    for seconds, value in reads:
        if (value - before) / (peak - before) > 0.5:
            return seconds
    return None


def trials(rig, kinds: list[str], count: int, results: dict) -> None:
    """`count` trials of each kind: each waits for the picture to be back (at most 3 s), then
    a random 50-250 ms, sends the stimulus and times the first picture past half-way to the
    trial's own peak (within WATCH_S; a trial rising less than a quarter of the calibrated
    change is missed)."""
    for kind in kinds:
        off, on = calibrate(rig, kind)
        print(f"# {kind}: the watched pixels' mean {off:.1f} off, {on:.1f} on", flush=True)
        if abs(on - off) < 3.0:
            results[kind] = {"trials": 0, "missed": count,
                             "problem": f"the picture did not change ({off:.1f} -> {on:.1f})"}
            print_row(kind, results[kind])
            continue

        def fraction(value: float) -> float:
            return (value - off) / (on - off)

        latencies, missed = [], 0
        for _ in range(count):
            deadline = time.perf_counter() + 3.0
            while fraction(rig.brightness()) > 0.2 and time.perf_counter() < deadline:
                time.sleep(0.005)
            time.sleep(random.uniform(0.05, 0.25))
            before = rig.brightness()
            t0 = rig.send(kind, True)
            latency = half_rise(rig.trace(t0, WATCH_S), before, 0.25 * abs(on - off))
            if latency is None:
                missed += 1
            else:
                latencies.append(latency)
            rig.send(kind, False)
        results[kind] = summary(latencies, rig.frame_s(), missed)
        print_row(kind, results[kind])


def run_offscreen(args: argparse.Namespace) -> dict:
    rig = OffscreenRig(args)
    results: dict = {}

    def stimuli() -> None:
        try:
            time.sleep(1.0)  # the governor and the level settle
            kinds = [k for k in args.inputs.split(",") if k in ("sound", "midi", "osc", "web")]
            trials(rig, kinds, args.trials, results)
        finally:
            rig.done.set()

    try:
        rig.run(stimuli)
        renderer = rig.ctx.info["GL_RENDERER"]
        governor = rig.show.governor.state(rig.params)
    finally:
        rig.close()
    return {"mode": "offscreen", "stimuli": args.stimuli, "renderer": renderer,
            "governor": governor, **results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--offscreen", action="store_true",
                        help="the show in this process, offscreen (EGL): the GPU machine")
    parser.add_argument("--trials", type=int, default=20, help="trials of each input")
    parser.add_argument("--fps", type=float, default=60.0,
                        help="--offscreen: the frames' pace (default 60)")
    parser.add_argument("--size", default=None,
                        help="--offscreen: frame size (1920x1080); the window: the screen's "
                             "(1280x720)")
    parser.add_argument("--count", type=int, default=0, help="agents (default: the look's)")
    parser.add_argument("--post", choices=("auto", "on"), default="auto", help="on: bloom "
                        "and feedback on and pinned, on any GL (auto: off on software GL)")
    parser.add_argument("--inputs", default="sound,midi,osc,web,key",
                        help="the inputs to time (default all five; offscreen has no key)")
    parser.add_argument("--stimuli", choices=("process", "thread"), default="process",
                        help="--offscreen: sent by a process of their own (default), or from "
                             "a thread of the show's process (before 2026-12-07: each went "
                             "when the frame let go of the GIL, at the pacer's sleep)")
    parser.add_argument("--workdir", default="/tmp", help="where the MIDI mapping is written")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    default_size = "1920x1080" if args.offscreen else "1280x720"
    args.size = tuple(int(v) for v in (args.size or default_size).lower().split("x"))
    if args.trials < 1:
        parser.error("--trials: at least 1")
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    if args.offscreen:
        print(f"# offscreen at {args.fps:g} fps, {args.size[0]}x{args.size[1]}", flush=True)
        report = run_offscreen(args)
    else:
        kinds = [k for k in args.inputs.split(",") if k]
        with WindowRig(args) as rig:
            print(f"# the window on Xvfb {args.size[0]}x{args.size[1]}: {rig.describe()}",
                  flush=True)
            results: dict = {}
            trials(rig, kinds, args.trials, results)
            report = {"mode": "window", **rig.state(), **results}
    if args.json:
        Path(args.json).write_text(json.dumps({
            "benchmark": "latency", "date": started, "python": platform.python_version(),
            "trials_asked": args.trials, "size": args.size, **report}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
