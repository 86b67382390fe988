"""The swarm instrument: `python instrument.py --help`.

Parses the command line, builds the parameters (defaults, then a preset, then options), and
runs the swarm. Bad input ends with one line naming what was wrong, not a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

from control.files import FileProblem, load_state
from control.params import MAX_COUNT, ParamError, Params
from control.supervisor import StopSignals
from control.text import printable
from show.options import HEADLESS_SIZE
from visual.swarm import MAX_DT, NEIGHBOR_MODES
from visual.uniforms import MAX_OBSTACLES

NO_DISPLAY_SECONDS = 10.0
START_LOOK = "drift-trails"  # the most striking bundled look: a plain start opens on it
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


MAX_SEED = 2**32 - 1
OBSTACLE_REACH = 1e6  # farther than any containment radius a knob reaches


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected 0 to {MAX_SEED}, got {text}")
    return value


def _obstacle(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if (len(values) != 4 or not all(abs(v) <= OBSTACLE_REACH for v in values)
            or values[3] <= 0):  # NaN fails the comparison too
        raise argparse.ArgumentTypeError(
            f"an obstacle is X,Y,Z,RADIUS: four finite numbers within +-{OBSTACLE_REACH:g}, "
            f"RADIUS above 0; got {text!r}")
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


class Parser(argparse.ArgumentParser):
    """argparse, but a mistake is one line (the usage is for --help), with a suggestion for a
    near miss: `--cout 5` -> "unrecognized option --cout (did you mean --count?)"."""

    def error(self, message: str) -> NoReturn:
        words = message.split()
        if message.startswith("unrecognized arguments:"):
            unknown = [w for w in words[2:] if w.startswith("-")]
            if unknown:
                message = f"unrecognized option {unknown[0]}{self._near(unknown[0])}"
            else:
                message = f"unexpected argument {words[2]!r} (options start with --)"
        error(f"{message}; --help lists the options")
        sys.exit(2)

    def _near(self, option: str) -> str:
        import difflib

        known = [o for action in self._actions for o in action.option_strings
                 if action.help != argparse.SUPPRESS]
        close = difflib.get_close_matches(option.split("=")[0], known, n=1, cutoff=0.6)
        return f" (did you mean {close[0]}?)" if close else ""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="instrument.py",
        description="A live swarm of GPU boids driven by sound and MIDI.")
    run = parser.add_argument_group("running")
    run.add_argument("--headless", action="store_true",
                     help="render offscreen (EGL) without a window; no display needed")
    run.add_argument("--frames", type=_positive_int, metavar="N",
                     help="run N frames, then exit")
    run.add_argument("--dt", type=_time_step, metavar="SECONDS",
                     help="advance exactly this step each frame instead of following the clock")
    run.add_argument("--seed", type=_seed, metavar="S",
                     help="random seed of the spawn: same seed, same start (default 0, or the "
                          "control track's with --control)")
    view = parser.add_argument_group("window")
    view.add_argument("--screen", type=int, default=0, metavar="N",
                      help="screen to play on (default 0)")
    view.add_argument("--windowed", action="store_true", help="a window instead of full-screen")
    view.add_argument("--size", type=_size, metavar="WxH",
                      help="window size (implies --windowed); headless frame size "
                           f"(default {HEADLESS_SIZE[0]}x{HEADLESS_SIZE[1]}); with --render, "
                           "the video's (default 1920x1080)")
    view.add_argument("--fps", type=_rate, metavar="RATE",
                      help="frame-rate cap (default: the display's refresh rate); with "
                           "--render, the video's frame rate (default 60)")
    view.add_argument("--screenshot", metavar="PATH.png", help="save the last frame as a PNG")
    view.add_argument("--telemetry", metavar="PATH",
                      help="append one JSON object a second (and one at exit) to this file")
    swarm = parser.add_argument_group("swarm")
    swarm.add_argument("--count", type=_positive_int, metavar="N",
                       help=f"number of agents (1 to {MAX_COUNT}; default 16384)")
    swarm.add_argument("--neighbors", choices=NEIGHBOR_MODES, default="grid",
                       help="neighbour search: uniform grid, or the seed's all-pairs reference")
    swarm.add_argument("--preset", metavar="NAME|PATH",
                       help="start from a preset: a bundled or saved one by name or slot "
                            "number, or a .json file")
    swarm.add_argument("--obstacle", type=_obstacle, action="append", default=[],
                       metavar="X,Y,Z,R",
                       help=f"a sphere the swarm avoids (up to {MAX_OBSTACLES})")
    sound = parser.add_argument_group("audio")
    sound.add_argument("--audio-device", metavar="INDEX|NAME",
                       help="audio input by index or name substring (default: the system's)")
    sound.add_argument("--list-devices", action="store_true", help="list audio inputs and exit")
    sound.add_argument("--audio-file", metavar="PATH",
                       help="play a sound file (WAV, MP3, FLAC, OGG, M4A) through the analysis "
                            "instead of an input")
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
    network = parser.add_argument_group("OSC")
    network.add_argument("--osc", metavar="[HOST:]PORT", type=osc_endpoint,
                         help="listen for OSC on this UDP port (all interfaces, or HOST only, "
                              "e.g. 127.0.0.1:9000): /swarm/<param> value, /swarm/<param>/norm "
                              "0..1, /swarm/preset N, /swarm/respawn, /swarm/burst")
    safety = parser.add_argument_group("safety")
    safety.add_argument("--no-supervisor", action="store_true",
                        help="run the show in this process (default: a supervisor restarts it "
                             "if it dies or hangs; bounded runs such as --frames have none)")
    safety.add_argument("--resume", action="store_true",
                        help="start from the recovery file the last run saved every few seconds")
    safety.add_argument("--safe-mode", action="store_true",
                        help="start from the last state with no audio, no MIDI, no OSC and the "
                             "bundled shaders, for when something at start-up keeps failing")
    safety.add_argument("--fresh", action="store_true", help=argparse.SUPPRESS)  # supervisor:
    # the resumed state died again, so safe mode starts from the default look, not from it
    safety.add_argument("--heartbeat-fd", type=int, help=argparse.SUPPRESS)
    safety.add_argument("--last-telemetry", help=argparse.SUPPRESS)
    from show.render_job import add_render_arguments

    add_render_arguments(parser)
    state = parser.add_argument_group("state")
    state.add_argument("--state-in", metavar="PATH.npz",
                       help="start from this state (arrays position, velocity); sets the count")
    state.add_argument("--state-out", metavar="PATH.npz",
                       help="write the state after the last frame")
    return parser


def build_params(args: argparse.Namespace) -> tuple[Params, list, Any]:
    """The parameters (defaults, then --resume's recovery file or --preset, then --count), the
    audio modulation routes and the preset started from."""
    from control.preset_bank import PresetBank
    from control.presets import PresetError, apply_preset, load_preset
    from control.recovery import load_recovery

    params, routes, preset = Params(), [], None
    keep = ("count",) if args.count is not None else ()
    if args.resume or (args.safe_mode and not args.fresh):
        try:
            preset = load_recovery()
            routes = apply_preset(preset, params, keep=keep)
            if preset.state.get("modified"):  # changed since its recall: not the preset itself
                preset.name = f"{preset.name} (modified)"
            say(f"resuming from {preset.path} ({preset.name})")
        except PresetError as exc:
            say(f"cannot resume: {exc}; starting from "
                f"{'--preset ' + args.preset if args.preset else 'the defaults'}")
            preset = None
    if preset is None and args.preset:
        preset = load_preset(PresetBank().resolve(args.preset))
        routes = apply_preset(preset, params, keep=keep)
    if args.count is not None:
        params["count"] = args.count
    return params, routes, preset


def osc_endpoint(text: str) -> tuple[str, int]:
    """--osc's value, checked while the command line is parsed."""
    from control.osc import parse_endpoint

    try:
        return parse_endpoint(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--osc {text!r}: ")) from None


STOP = StopSignals()  # installed by main() for the live show (a render handles Ctrl+C itself)


log = logging.getLogger("instrument")
say = log.info  # the console (show/console.py) prints it as "instrument: ...", made printable


def error(message: object) -> None:
    """The one line a refused start ends with, on stderr."""
    print(f"instrument: error: {printable(message)}", file=sys.stderr, flush=True)


def no_display_screenshot() -> str:
    """Where the no-display run saves its picture: the current folder, else (read-only, as
    an installed copy's can be) the system's temporary folder."""
    for folder in (Path.cwd(), Path(tempfile.gettempdir())):
        if os.access(folder, os.W_OK | os.X_OK):
            return str(folder / NO_DISPLAY_SCREENSHOT)
    return NO_DISPLAY_SCREENSHOT


def has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def check_args(args: argparse.Namespace) -> None:
    """What the parser cannot see option by option, checked before anything starts: raises
    FileProblem with one line naming the option (exit 2), so a show never fails after its last
    frame, or at its first, for a bad path."""
    if len(args.obstacle) > MAX_OBSTACLES:
        raise FileProblem(f"--obstacle: at most {MAX_OBSTACLES} spheres, got "
                          f"{len(args.obstacle)}")
    outputs = [("--screenshot", args.screenshot, ".png"), ("--state-out", args.state_out, ".npz"),
               ("--telemetry", args.telemetry, None),
               ("--record-control", getattr(args, "record_control", None), None)]
    for option, path, suffix in outputs:
        if path:
            check_output_path(option, path, suffix)
    if args.state_in:
        load_state(args.state_in)  # a bad state file ends the start here, named
    if args.midi_map and not args.no_midi and not args.safe_mode:
        from control.midi_map_file import load_mapping

        load_mapping(args.midi_map)  # MappingError names the file and the line or key
    if args.audio_file and not args.safe_mode:
        from audio.decode import check_audio_file
        from audio.wavfile import AudioFileError

        try:
            check_audio_file(args.audio_file)
        except AudioFileError as exc:
            raise FileProblem(f"--audio-file {exc}") from None


def check_output_path(option: str, path: str, suffix: str | None) -> None:
    """A file the run will write: not a folder or a device, in a folder that exists and can be
    written, writable itself if it exists, and named for what it holds."""
    target = Path(path)
    if target.is_dir():
        raise FileProblem(f"{option} {path}: is a folder; give a file name in it, e.g. "
                          f"{target / ('out' + (suffix or '.jsonl'))}")
    if suffix and target.suffix.lower() != suffix:
        raise FileProblem(f"{option} {path}: expected a {suffix} file name")
    if target.exists() or target.is_symlink():
        if not target.is_file():
            raise FileProblem(f"{option} {path}: not a regular file (a device, a FIFO or a "
                              "broken link); give a file name")
        if not os.access(target, os.W_OK):
            raise FileProblem(f"{option} {path}: the file cannot be written (read-only)")
    folder = target.resolve().parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise FileProblem(f"{option} {path}: cannot write into {folder}")
    if not target.exists():  # access() says yes to root everywhere (/proc): really try
        try:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except OSError as exc:
            raise FileProblem(f"{option} {path}: cannot write it ({exc.strerror})") from None
        os.unlink(target)


def supervised(args: argparse.Namespace) -> bool:
    """Open-ended shows get a supervisor; bounded runs (--frames, the no-display ten seconds)
    and the child itself do not."""
    if args.no_supervisor or args.heartbeat_fd is not None or args.frames is not None:
        return False
    return args.headless or has_display()


def main(argv: list[str] | None = None) -> int:
    from show.console import install

    install()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list_devices:
        from audio.source import list_input_devices

        print(printable(list_input_devices()))
        return 0
    if args.list_midi:
        from control.midi_system import list_midi_ports

        print(printable(list_midi_ports(args.midi_api)))
        return 0
    try:
        check_args(args)
    except (FileProblem, ParamError) as exc:
        error(exc)
        return 2
    if supervised(args) and args.render is None:
        from control.supervisor import Supervisor

        say("supervisor: the show runs in a child process and comes back if it dies or hangs "
            "(--no-supervisor to run it here)")
        return Supervisor(list(argv if argv is not None else sys.argv[1:])).run()
    if args.render is None:
        STOP.install()  # from here on, Ctrl+C asks the show to stop after its frame
        if not (args.headless or args.preset or args.resume or args.safe_mode or args.state_in):
            args.preset = START_LOOK
            say(f"opening on the bundled look '{START_LOOK}' (--preset chooses another)")
    try:
        params, routes, preset = build_params(args)
        if args.render is not None:
            from show.render import run_render

            return run_render(args, params, routes)
        from show.live import LiveShow, run_headless, run_window

        live = LiveShow(args, params, routes, preset, STOP)
        if args.headless:
            run_headless(live)
        elif not has_display():
            args.screenshot = args.screenshot or no_display_screenshot()
            args.dt = args.dt or MAX_DT
            args.frames = args.frames or round(NO_DISPLAY_SECONDS / args.dt)
            say(f"no display found (DISPLAY is not set): rendering {args.frames * args.dt:.0f} "
                f"s of the show headless ({args.frames} frames of {args.dt * 1000:.1f} ms) "
                "instead of opening a window")
            run_headless(live)
        else:
            from visual.window import WindowError

            try:
                run_window(live)
            except WindowError as exc:
                error(exc)
                return 1
    except (FileProblem, ParamError) as exc:
        error(exc)
        return 2
    except RuntimeError as exc:
        error(exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
