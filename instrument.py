"""The swarm instrument: `python instrument.py --help`.

Parses the command line, builds the parameters (defaults, then a preset, then options), and
runs the swarm. Bad input ends with one line naming what was wrong, not a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from control.files import FileProblem, load_preset_params, load_state, save_state
from control.params import MAX_COUNT, ParamError, Params
from visual.swarm import MAX_DT, NEIGHBOR_MODES

NO_DISPLAY_SECONDS = 10.0
HEADLESS_SIZE = (1280, 720)
NO_DISPLAY_SCREENSHOT = "swarm-screenshot.png"


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value


def _time_step(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 < value <= MAX_DT + 1e-9:
        raise argparse.ArgumentTypeError(
            f"{value} s is outside (0, {MAX_DT:.4f}]: the seed clamps a step to 1/30 s; "
            "take a smaller step")
    return value


def _obstacle(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 4 or values[3] <= 0:
        raise argparse.ArgumentTypeError(f"an obstacle is X,Y,Z,RADIUS with RADIUS > 0, got "
                                         f"{text!r}")
    return values


def _size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, e.g. 1920x1080, got {text!r}") \
            from None
    if not (16 <= width <= 16384 and 16 <= height <= 16384):
        raise argparse.ArgumentTypeError(f"{text}: each side must be 16 to 16384 pixels")
    return width, height


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"expected 1 to 1000 frames a second, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="instrument.py",
        description="A live swarm of GPU boids driven by sound and MIDI.")
    run = parser.add_argument_group("running")
    run.add_argument("--headless", action="store_true",
                     help="render offscreen (EGL) without a window; no display needed")
    run.add_argument("--frames", type=_positive_int, metavar="N",
                     help="run N frames, then exit")
    run.add_argument("--dt", type=_time_step, metavar="SECONDS",
                     help="advance exactly this step each frame instead of following the clock")
    run.add_argument("--seed", type=int, default=0, metavar="S",
                     help="random seed of the spawn: same seed, same start (default 0)")
    view = parser.add_argument_group("window")
    view.add_argument("--screen", type=int, default=0, metavar="N",
                      help="screen to play on (default 0)")
    view.add_argument("--windowed", action="store_true", help="a window instead of full-screen")
    view.add_argument("--size", type=_size, metavar="WxH",
                      help="window size (implies --windowed); headless frame size "
                           f"(default {HEADLESS_SIZE[0]}x{HEADLESS_SIZE[1]})")
    view.add_argument("--fps", type=_rate, metavar="RATE",
                      help="frame-rate cap (default: the display's refresh rate)")
    view.add_argument("--screenshot", metavar="PATH.png", help="save the last frame as a PNG")
    view.add_argument("--telemetry", metavar="PATH",
                      help="append one JSON object a second (and one at exit) to this file")
    swarm = parser.add_argument_group("swarm")
    swarm.add_argument("--count", type=_positive_int, metavar="N",
                       help=f"number of agents (1 to {MAX_COUNT}; default 16384)")
    swarm.add_argument("--neighbors", choices=NEIGHBOR_MODES, default="grid",
                       help="neighbour search: uniform grid, or the seed's all-pairs reference")
    swarm.add_argument("--preset", metavar="PATH",
                       help="a preset JSON file; its \"params\" set parameters by name")
    swarm.add_argument("--obstacle", type=_obstacle, action="append", default=[],
                       metavar="X,Y,Z,R", help="a sphere the swarm avoids (up to 8)")
    sound = parser.add_argument_group("audio")
    sound.add_argument("--audio-device", metavar="INDEX|NAME",
                       help="audio input by index or name substring (default: the system's)")
    sound.add_argument("--list-devices", action="store_true", help="list audio inputs and exit")
    sound.add_argument("--audio-file", metavar="PATH.wav",
                       help="play a sound file through the analysis instead of an input")
    sound.add_argument("--mute", action="store_true",
                       help="with --audio-file: analyse it without playing it out loud")
    midi = parser.add_argument_group("MIDI")
    midi.add_argument("--midi-port", action="append", metavar="INDEX|NAME",
                      help="MIDI input by index or name substring, repeatable "
                           "(default: every input)")
    midi.add_argument("--list-midi", action="store_true", help="list MIDI inputs and exit")
    midi.add_argument("--midi-virtual", metavar="NAME",
                      help="also open a virtual input port NAME for a DAW or another program")
    midi.add_argument("--midi-api", choices=("alsa", "jack"), help="MIDI system (default: any)")
    midi.add_argument("--midi-map", metavar="PATH",
                      help="MIDI mapping file (default: the learned one, else the shipped one)")
    midi.add_argument("--no-midi", action="store_true", help="do not open MIDI at all")
    state = parser.add_argument_group("state")
    state.add_argument("--state-in", metavar="PATH.npz",
                       help="start from this state (arrays position, velocity); sets the count")
    state.add_argument("--state-out", metavar="PATH.npz",
                       help="write the state after the last frame")
    return parser


def build_params(args: argparse.Namespace) -> tuple[Params, list]:
    """The parameters (defaults, the preset, then options) and the audio modulation routes."""
    params = Params()
    routes = []
    if args.preset:
        routes = load_preset_params(args.preset, params)
    if args.count is not None:
        params["count"] = args.count
    return params, routes


def open_inputs(args: argparse.Namespace, params: Params) -> dict:
    """The audio source and MIDI the command line asks for; neither fails (each says why and
    the show runs without it)."""
    from audio.source import open_audio
    from control.midi import Midi

    audio = open_audio(args.audio_device, args.audio_file, args.mute)
    midi = None
    if not args.no_midi:
        midi = Midi.open(params, ports=args.midi_port or None, virtual=args.midi_virtual,
                         api=args.midi_api, mapping_path=args.midi_map,
                         report=lambda text: say(f"midi: {text}"))
    return {"audio": audio, "midi": midi}


def say(message: str) -> None:
    print(f"instrument: {message}", flush=True)


def has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def show_options(args: argparse.Namespace, params: Params):
    """ShowOptions from the command line, reading --state-in (which sets the count)."""
    from visual.app import ShowOptions

    position = velocity = None
    if args.state_in:
        position, velocity = load_state(args.state_in)
        if args.count is not None and args.count != len(position):
            raise FileProblem(f"{args.state_in}: holds {len(position)} agents but --count is "
                              f"{args.count}; drop --count (the state sets it)")
        params["count"] = len(position)
    for path, what in ((args.state_out, "state"), (args.screenshot, "screenshot"),
                       (args.telemetry, "telemetry")):
        if path:
            folder = Path(path).resolve().parent
            if not folder.is_dir() or not os.access(folder, os.W_OK):
                raise FileProblem(f"{path}: cannot write into {folder} (the {what} file)")
    return ShowOptions(neighbors=args.neighbors, seed=args.seed, fixed_dt=args.dt,
                       obstacles=args.obstacle, position=position, velocity=velocity)


class Run:
    """What every way of running shares: the telemetry file, the status line, the ending."""

    def __init__(self, args: argparse.Namespace) -> None:
        from visual.app import Telemetry

        self.args = args
        self.telemetry = None
        if args.telemetry:
            try:
                self.telemetry = Telemetry(args.telemetry)
            except OSError as exc:
                raise FileProblem(str(exc)) from None
        self.started = time.perf_counter()
        self._last_report = self.started
        self.show = None

    def each_frame(self) -> None:
        now = time.perf_counter()
        if self.telemetry is not None:
            self.telemetry.maybe_write(now, self.show.telemetry())
            if self.telemetry.error:
                say(self.telemetry.error)
                self.telemetry = None
        if self.args.frames is None and now - self._last_report >= 5.0:
            self._last_report = now
            say(" | ".join(self.show.hud_lines()[:3]))

    def finish(self, image: tuple[bytes, tuple[int, int]] | None) -> None:
        """Write the screenshot, state and last telemetry; report; release the show."""
        import numpy as np

        from visual.png import write_png

        show = self.show
        show.ctx.finish()
        elapsed = time.perf_counter() - self.started
        say(f"{show.frame} frames, {show.sim_time:.2f} s simulated in {elapsed:.2f} s "
            f"({elapsed / max(show.frame, 1) * 1000:.1f} ms a frame)")
        guarded = show.swarm.read_guarded()
        if guarded:
            say(f"the guard put back {guarded} agents whose state became NaN or infinite")
        if self.args.screenshot and image is not None:
            pixels, (width, height) = image
            array = np.frombuffer(pixels, np.uint8).reshape(height, width, 3)[::-1]
            write_png(self.args.screenshot, array)
            say(f"screenshot ({width}x{height}) saved to {Path(self.args.screenshot).resolve()}")
        if self.args.state_out:
            position, velocity = show.swarm.read_state()
            save_state(self.args.state_out, position, velocity)
            say(f"state of {len(position)} agents written to {self.args.state_out}")
        if self.telemetry is not None:
            self.telemetry.write(show.telemetry())
            self.telemetry.close()
        show.release()


def run_headless(args: argparse.Namespace, params: Params, routes: list, *,
                 seconds: float | None = None) -> None:
    """Render offscreen (EGL) until --frames, `seconds` of wall time, or Ctrl+C."""
    from visual.app import Show
    from visual.gl import create_headless_context

    options = show_options(args, params)
    run = Run(args)
    ctx = create_headless_context()
    show = run.show = Show(ctx, params, options, routes=routes, say=say,
                           **open_inputs(args, params))
    width, height = args.size or HEADLESS_SIZE
    framebuffer = show.renderer.offscreen_framebuffer((width, height))
    say(f"headless: {show.swarm.count} agents, {args.neighbors} neighbours, {width}x{height}, "
        f"{ctx.info['GL_RENDERER']}")
    last = time.perf_counter()
    try:
        while True:
            now = time.perf_counter()
            show.update(now)
            show.advance(show.frame_dt(now - last))
            last = now
            show.draw(framebuffer)
            run.each_frame()
            if args.frames is not None and show.frame >= args.frames:
                break
            if seconds is not None and now - run.started >= seconds:
                break
    except KeyboardInterrupt:
        say("stopped (Ctrl+C)")
    image = None
    if args.screenshot:
        image = framebuffer.read(components=3, alignment=1), (width, height)
    run.finish(image)
    ctx.release()


def run_window(args: argparse.Namespace, params: Params, routes: list) -> None:
    from visual.app import Show
    from visual.window import LiveWindow, open_window

    options = show_options(args, params)
    run = Run(args)
    window = open_window(args.screen, fullscreen=not args.windowed and args.size is None,
                         size=args.size)

    def make_show(ctx):
        run.show = Show(ctx, params, options, routes=routes, say=say, **open_inputs(args, params))
        return run.show

    live = LiveWindow(window, make_show, fps=args.fps, frames=args.frames,
                      on_frame=run.each_frame, say=say)
    width, height = window.get_framebuffer_size()
    say(f"window: {run.show.swarm.count} agents on screen {args.screen}, {width}x{height}"
        f"{' full-screen' if window.fullscreen else ''}, {live.fps:g} fps cap, "
        f"{live.ctx.info['GL_RENDERER']}. Keys: F full-screen, H HUD, Space pause, R respawn, "
        "Esc twice to quit")
    try:
        live.run()
    except KeyboardInterrupt:
        say("stopped (Ctrl+C)")
    image = live.last_image
    if args.screenshot and image is None:
        image = live.read_screen()
    run.finish(image)
    window.close()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list_devices:
        from audio.source import list_input_devices

        print(list_input_devices())
        return 0
    if args.list_midi:
        from control.midi_input import list_midi_ports

        print(list_midi_ports(args.midi_api))
        return 0
    try:
        params, routes = build_params(args)
        if args.headless:
            run_headless(args, params, routes)
        elif not has_display():
            args.screenshot = args.screenshot or NO_DISPLAY_SCREENSHOT
            say(f"no display found (DISPLAY is not set): rendering {NO_DISPLAY_SECONDS:.0f} s "
                "headless instead of opening a window")
            run_headless(args, params, routes, seconds=NO_DISPLAY_SECONDS)
        else:
            from visual.window import WindowError

            try:
                run_window(args, params, routes)
            except WindowError as exc:
                print(f"instrument: error: {exc}", file=sys.stderr)
                return 1
    except (FileProblem, ParamError) as exc:
        print(f"instrument: error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"instrument: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
