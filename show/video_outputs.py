"""The show's video outputs: the command line's --out-* options, the outputs they open, and
what the HUD and telemetry say of them. One more sink of the one loop: after each frame is
drawn, `Outputs.take` hands it to every output (visual/output/frame_output.py), before the HUD is
drawn over a window's picture, so receivers get the picture alone.

    --out-ndi NAME          an NDI source (cyndilib), RGBA with alpha
    --out-stream URL        H.264 in MPEG-TS over udp:// or tcp:// (PyAV), srt:// (GStreamer's
                            srtsink), or raw RGBA into GStreamer's shared memory (shm:///PATH)
    --out-syphon NAME       Syphon (macOS), --out-spout NAME: Spout (Windows)
    --out-virtualcam [DEV]  a virtual camera (pyvirtualcam)

Each takes `,size=WxH` and `,fps=RATE` after its value (default: the frame's size, and every
frame the show draws), streams also `,bitrate=BITS`. Every option is repeatable and any mix
runs at once. Main thread only; the outputs' own threads live in visual/output/frame_output.py.
"""

from __future__ import annotations

import argparse
import logging
import re
import time
from dataclasses import dataclass
from typing import Any

import moderngl

from swarm_instrument.control.text import printable
from swarm_instrument.show.cli.option_values import rate as frame_rate
from swarm_instrument.show.cli.option_values import size as frame_size
from swarm_instrument.visual.output.frame_output import FrameOutput
from swarm_instrument.visual.output.ndi import NdiBackend
from swarm_instrument.visual.output.platform_outputs import (
    SpoutBackend,
    SyphonBackend,
    VirtualCamBackend,
)
from swarm_instrument.visual.output.stream import check_stream_url, stream_backend

log = logging.getLogger(__name__)
SETTINGS = ("size", "fps", "bitrate")
DEFAULT_RATE = 60.0  # told to receivers when neither --fps nor a window gives one
OPTIONS = {"ndi": "--out-ndi", "stream": "--out-stream", "syphon": "--out-syphon",
           "spout": "--out-spout", "virtualcam": "--out-virtualcam"}


@dataclass(frozen=True)
class OutputSpec:
    """One output as the command line asked for it."""

    kind: str  # a key of OPTIONS
    target: str  # the NDI/Syphon/Spout name, the stream URL, the camera device ("": any)
    size: tuple[int, int] | None = None
    rate: float | None = None
    bitrate: int | None = None

    @property
    def option(self) -> str:
        return OPTIONS[self.kind]


def parse_output(kind: str, text: str) -> OutputSpec:
    """`NAME[,size=WxH][,fps=RATE]` (streams: `,bitrate=BITS` too) -> OutputSpec; raises
    argparse.ArgumentTypeError with what to write instead."""
    parts = text.split(",")
    settings: dict[str, str] = {}
    while parts:
        key, equals, value = parts[-1].partition("=")
        if not equals or key.strip().lower() not in SETTINGS:
            break
        settings[key.strip().lower()] = value.strip()
        parts.pop()
    target = ",".join(parts).strip()
    size = _size(settings["size"]) if "size" in settings else None
    rate = _rate(settings["fps"]) if "fps" in settings else None
    bitrate = _bitrate(settings["bitrate"]) if "bitrate" in settings else None
    if bitrate is not None and kind != "stream":
        raise argparse.ArgumentTypeError("bitrate= is for --out-stream only")
    if kind == "stream":
        problem = check_stream_url(target)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        if size and urlscheme(target) != "shm" and (size[0] % 2 or size[1] % 2):
            raise argparse.ArgumentTypeError(
                f"size={size[0]}x{size[1]}: H.264 (4:2:0) needs an even width and height; "
                f"try size={size[0] - size[0] % 2}x{size[1] - size[1] % 2}")
    elif kind in ("ndi", "syphon", "spout"):
        if not target:
            raise argparse.ArgumentTypeError("give the source's name, e.g. Swarm")
        if len(target) > 200 or any(ord(c) < 32 or ord(c) == 127 for c in target):
            raise argparse.ArgumentTypeError(
                f"{printable(target, 60)}: a name of at most 200 printable characters")
    elif kind == "virtualcam" and target and any(ord(c) < 32 for c in target):
        raise argparse.ArgumentTypeError("the camera device is a path or name, e.g. "
                                         "/dev/video2")
    return OutputSpec(kind, target, size, rate, bitrate)


def urlscheme(url: str) -> str:
    return url.split(":", 1)[0].lower() if ":" in url else ""


def _size(text: str) -> tuple[int, int]:
    """`size=` as --size takes it (show/cli/option_values.py), the message naming the setting."""
    try:
        return frame_size(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"size={text}: {exc}") from None


def _rate(text: str) -> float:
    """`fps=` as --fps takes it (show/cli/option_values.py), the message naming the setting."""
    try:
        return frame_rate(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"fps={text}: {exc}") from None


def _bitrate(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*", text)
    scale = {"": 1, "k": 1_000, "m": 1_000_000}
    value = float(match.group(1)) * scale[match.group(2).lower()] if match else 0.0
    if not 100_000 <= value <= 200_000_000:
        raise argparse.ArgumentTypeError(f"bitrate={text}: expected 100k to 200M bits a second")
    return int(value)


def _type(kind: str):
    def parse(text: str) -> OutputSpec:
        return parse_output(kind, text)
    parse.__name__ = OPTIONS[kind]  # argparse names the option's type in its messages
    return parse


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "video out", "send the picture (without the HUD) to other programs and machines, "
                     "several at once; each takes ,size=WxH and ,fps=RATE (default: the "
                     "frame's size, every frame)")
    group.add_argument("--out-ndi", type=_type("ndi"), action="append", default=[],
                       metavar="NAME", help="an NDI source of this name (RGBA, alpha kept)")
    group.add_argument("--out-stream", type=_type("stream"), action="append", default=[],
                       metavar="URL",
                       help="H.264 in MPEG-TS to udp://HOST:PORT or tcp://HOST:PORT "
                            "(?listen=1: wait for a receiver), srt://HOST:PORT (GStreamer), "
                            "or raw RGBA into GStreamer's shared memory: shm:///PATH; "
                            ",bitrate=BITS")
    group.add_argument("--out-syphon", type=_type("syphon"), action="append", default=[],
                       metavar="NAME", help="a Syphon server (macOS)")
    group.add_argument("--out-spout", type=_type("spout"), action="append", default=[],
                       metavar="NAME", help="a Spout sender (Windows)")
    group.add_argument("--out-virtualcam", type=_type("virtualcam"), action="append",
                       default=[], nargs="?", const=OutputSpec("virtualcam", ""),
                       metavar="DEVICE",
                       help="a virtual camera (pyvirtualcam; Linux: v4l2loopback), DEVICE "
                            "e.g. /dev/video2 (default: the first there is)")


def requested(args: argparse.Namespace) -> list[OutputSpec]:
    """Every --out-* the command line gave: NDI first, then streams, Syphon, Spout, cameras."""
    specs: list[OutputSpec] = []
    for kind in OPTIONS:
        specs += [s for s in getattr(args, f"out_{kind}", None) or [] if s is not None]
    return specs


def render_refusal(args: argparse.Namespace) -> str | None:
    """Why a render does not take the --out-* options (None: none given): a render is no
    live picture (frames come as fast as they render, not in time)."""
    specs = requested(args)
    if not specs:
        return None
    return (f"{specs[0].option} sends a live show's picture; a render writes its frames to "
            "--out at the song's time, not in real time (drop the --out-* options, or play "
            "the show live: --headless --audio-file SONG)")


# ---- opening ----------------------------------------------------------------------------------


def backend_for(spec: OutputSpec) -> Any:
    if spec.kind == "ndi":
        return NdiBackend(spec.target)
    if spec.kind == "stream":
        return stream_backend(spec.target, spec.bitrate)

    if spec.kind == "syphon":
        return SyphonBackend(spec.target)
    if spec.kind == "spout":
        return SpoutBackend(spec.target)
    return VirtualCamBackend(spec.target or None)


class Outputs:
    """The show's outputs on one GL context: each frame goes to all of them (`take`), the HUD
    and telemetry read them, `close` ends them (their last frames sent first)."""

    def __init__(self, ctx: moderngl.Context, outputs: list[FrameOutput]) -> None:
        self.ctx = ctx
        self.outputs = outputs

    def __len__(self) -> int:
        return len(self.outputs)

    def take(self, framebuffer: moderngl.Framebuffer, size: tuple[int, int],
             now: float) -> None:
        for output in self.outputs:
            output.take(self.ctx, framebuffer, size, now)

    def switch(self, number: int | None, on: bool | None) -> str:
        """Outputs on air (True), off (False) or the other way (None): all, or the `number`-th
        (from 1, as the HUD lists them). Off, an output captures nothing (its receivers keep
        its last frame); back on, it sends from the next frame. What was done, in a line."""
        if number is not None and not 1 <= number <= len(self.outputs):
            return f"no output {number} (there are {len(self.outputs)})"
        chosen = self.outputs if number is None else [self.outputs[number - 1]]
        if on is None:  # all the other way: on air if any is off
            on = not all(output.live for output in chosen)
        for output in chosen:
            output.live = on
        names = "all" if number is None else chosen[0].label
        return f"{names} {'on air' if on else 'off air'}"

    def telemetry(self) -> dict[str, Any]:
        return {output.label: output.state_record() for output in self.outputs}

    def hud_line(self) -> str:
        return "  |  ".join(output_line(output) for output in self.outputs)

    def close(self) -> None:
        """Drain (the frames already captured reach their receivers), stop, free."""
        if not self.outputs:
            return
        self.ctx.finish()
        for output in self.outputs:
            output.drain(1.0)
        for output in self.outputs:
            output.stop()  # all at once: a thread stuck in a send costs the wait once
        deadline = time.monotonic() + 2.0
        for output in self.outputs:
            output.close(max(deadline - time.monotonic(), 0.0))
        for output in self.outputs:
            log.info(f"output {output.label}: {output.sent:,} frames sent, {output.dropped:,} "
                     "dropped")


def output_line(output: FrameOutput) -> str:
    """`ndi Swarm: sending, 1,234 sent, 2 dropped (HOST (Swarm), 1 receiver)`; a failing
    one says why (its start: the console had the whole reason once)."""
    state = output.state if not output.error else f"{output.state}: {output.error}"
    if len(state) > 70:
        state = state[:67] + "..."
    if not output.live:
        state = f"OFF AIR ({state})"
    line = f"{output.label}: {state}, {output.sent:,} sent, {output.dropped:,} dropped"
    detail = output.detail() if output.state == "sending" else None
    return f"{line} ({detail})" if detail else line


def open_outputs(args: argparse.Namespace, ctx: moderngl.Context,
                 rate: float | None = None) -> Outputs | None:
    """The outputs the command line asks for, on `ctx`; None without any. None fails here:
    each opens on its own thread and says (once) why it cannot, and the show goes on.
    `rate`: the window's rate, told to receivers of outputs that send every frame."""
    specs = requested(args)
    if not specs:
        return None
    nominal = float(rate or getattr(args, "fps", None) or DEFAULT_RATE)
    outputs = []
    for spec in specs:
        output = FrameOutput(backend_for(spec), size=spec.size, rate=spec.rate,
                             nominal_rate=nominal)
        taken = sum(o.label == output.label or o.label.startswith(f"{output.label} #")
                    for o in outputs)
        if taken:  # the same target twice: telemetry and the HUD tell them apart
            output.label = f"{output.label} #{taken + 1}"
        size = f"{spec.size[0]}x{spec.size[1]}" if spec.size else "the frame's size"
        rate_text = f"{spec.rate:g} fps" if spec.rate else f"every frame ({nominal:g} fps told)"
        alpha = "with alpha" if output.backend.carries_alpha else "no alpha"
        log.info(f"output {printable(output.label, 120)}: {size}, {rate_text}, {alpha}")
        outputs.append(output)
    return Outputs(ctx, outputs)


def switch_outputs(outputs: Outputs | None, action: Any, status: dict[str, str]) -> None:
    """O, OSC /swarm/outputs: the video outputs (all, or one) off air and back; with none
    opened, the HUD's `outputs` line says how to add them."""
    if not outputs:
        status["outputs"] = "none: --out-ndi, --out-stream ... add them at start"
        return
    on = None if action.value is None else bool(action.value)
    said = outputs.switch(action.values.get("output"), on)
    status.pop("outputs", None)
    log.info(f"outputs: {said}")
