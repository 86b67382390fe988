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
from typing import Any

from swarm_instrument.audio.files.decode import AudioFileError, check_audio_file
from swarm_instrument.audio.files.playback import clock_text
from swarm_instrument.audio.source import list_input_devices
from swarm_instrument.control.looks.files import FileProblem
from swarm_instrument.control.looks.preset_bank import PresetBank
from swarm_instrument.control.looks.presets import PresetError, apply_preset, load_preset
from swarm_instrument.control.looks.recovery import load_recovery
from swarm_instrument.control.looks.swarm_state import load_state
from swarm_instrument.control.midi.mapping_file import load_mapping
from swarm_instrument.control.midi.systems import list_midi_ports
from swarm_instrument.control.parameters.registry import ParamError, Params
from swarm_instrument.control.text import printable
from swarm_instrument.show.cli.arguments import build_parser
from swarm_instrument.show.cli.console import error, install
from swarm_instrument.show.cli.live_show import LiveShow, run_headless
from swarm_instrument.show.cli.live_window import run_window
from swarm_instrument.show.cli.options import START_LOOK
from swarm_instrument.show.offline.contact_sheet import SheetSettings, write_contact_sheet
from swarm_instrument.show.offline.offline_render import run_render
from swarm_instrument.show.offline.progress import RunProgress
from swarm_instrument.show.supervision.spare import SPARE_FLAG, wait_for_command
from swarm_instrument.show.supervision.start_trace import mark
from swarm_instrument.show.supervision.supervisor import StopSignals, Supervisor
from swarm_instrument.visual.gpu.context import prepare_headless_context
from swarm_instrument.visual.gpu.uniforms import MAX_OBSTACLES
from swarm_instrument.visual.sim.agents import MAX_DT
from swarm_instrument.visual.ui.window import WindowError

NO_DISPLAY_SECONDS = 10.0
NO_DISPLAY_SCREENSHOT = "swarm-screenshot.png"


def build_params(args: argparse.Namespace) -> tuple[Params, list, Any]:
    """The parameters (defaults, then --resume's recovery file or --preset, then --count), the
    audio modulation routes and the preset started from."""
    params, routes, preset = Params(), [], None
    keep = ("count",) if args.count is not None else ()
    if args.preset is None and opens_on_start_look(args):
        args.start_look = True  # not args.preset: a render's recorded control track still wins
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
    name = args.preset or (START_LOOK if getattr(args, "start_look", False) else None)
    if preset is None and name:
        preset = load_preset(PresetBank().resolve(name))
        routes = apply_preset(preset, params, keep=keep)
    if args.count is not None:
        params["count"] = args.count
    if getattr(args, "post", None):
        params["post"] = args.post
    return params, routes, preset


def opens_on_start_look(args: argparse.Namespace) -> bool:
    """A start that chooses no look (no --preset, --resume, --safe-mode or --state-in) opens
    on START_LOOK, in a window, headless, with no display and in a render alike."""
    return not (args.preset or args.resume or args.safe_mode or args.state_in)


STOP = StopSignals()  # installed by main() for the live show (a render handles Ctrl+C itself)


log = logging.getLogger("instrument")
say = log.info  # the console (show/cli/console.py) prints it as "instrument: ...", made printable




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
               ("--contact-sheet", getattr(args, "contact_sheet", None), ".png"),
               ("--telemetry", args.telemetry, None),
               ("--record-control", getattr(args, "record_control", None), None)]
    for option, path, suffix in outputs:
        if path:
            check_output_path(option, path, suffix)
    if args.state_in:
        load_state(args.state_in)  # a bad state file ends the start here, named
    if args.midi_map and not args.no_midi and not args.safe_mode:
        load_mapping(args.midi_map)  # MappingError names the file and the line or key
    for option, given in (("--mute", args.mute), ("--audio-start", args.audio_start)):
        if given and not args.audio_file:
            raise FileProblem(f"{option}: only with --audio-file (it says how the file plays); "
                              f"add --audio-file PATH, or leave {option} out")
    if args.audio_file and not args.safe_mode:
        try:
            info = check_audio_file(args.audio_file)
        except AudioFileError as exc:
            raise FileProblem(f"--audio-file {exc}") from None
        # (a supervisor's restart may land past the end: the file loops, and so does its time)
        if info.duration and args.audio_start >= info.duration \
                and args.audio_start_clock is None:
            raise FileProblem(f"--audio-start {clock_text(args.audio_start)}: past the end of "
                              f"{info.path.name} ({clock_text(info.duration)} long); give a "
                              "time inside it")


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


UNSUPERVISED_ON_WINDOWS = ("supervisor: not on Windows (it needs POSIX pipes and process "
                           "groups); the show runs in this process, and --resume brings its "
                           "look back after a crash")


def supervision(args: argparse.Namespace, platform: str = sys.platform
                ) -> tuple[bool, str | None]:
    """Whether this run gets a supervisor, and a line to say when an open-ended show cannot
    have one. Open-ended shows get one; bounded runs (--frames, the no-display ten seconds, a
    render) and the child itself do not."""
    if (args.no_supervisor or args.heartbeat_fd is not None or args.frames is not None
            or args.render is not None or not (args.headless or has_display())):
        return False, None
    if platform == "win32":
        return False, UNSUPERVISED_ON_WINDOWS
    return True, None


def main(argv: list[str] | None = None) -> int:
    install()
    mark("main")
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list_devices:
        print(printable(list_input_devices()))
        return 0
    if args.list_midi:
        print(printable(list_midi_ports(args.midi_api)))
        return 0
    try:
        check_args(args)
    except (FileProblem, ParamError) as exc:
        error(exc)
        return 2
    if args.contact_sheet:
        try:
            write_contact_sheet(args.contact_sheet, SheetSettings(
                size=args.size or SheetSettings.size,
                seed=SheetSettings.seed if args.seed is None else args.seed))
        except (FileProblem, ParamError) as exc:
            error(exc)
            return 2
        return 0
    supervise, note = supervision(args)
    if note:
        say(note)
    if supervise:
        return Supervisor(list(argv if argv is not None else sys.argv[1:]), playing_note=(
            "supervisor: the show runs in a child process and comes back if it dies or hangs "
            "(--no-supervisor to run it here)"), spare=True,
            spare_prepare=("headless-gl",) if args.headless else ()).run()
    if args.render is None:
        STOP.install()  # from here on, Ctrl+C asks the show to stop after its frame
    try:
        params, routes, preset = build_params(args)
        if args.render is not None:
            return run_render(args, params, routes)

        live = LiveShow(args, params, routes, preset, STOP)
        if args.headless:
            run_headless(live)
        elif not has_display():
            args.screenshot = args.screenshot or no_display_screenshot()
            args.dt = args.dt or MAX_DT
            args.frames = args.frames or round(NO_DISPLAY_SECONDS / args.dt)
            say(f"no display found (DISPLAY is not set): rendering {args.frames * args.dt:.0f} "
                f"s of the show headless ({args.frames} frames of {args.dt * 1000:.1f} ms) "
                "instead of opening a window; how long that takes here is said once the "
                "first frames are timed")
            live.progress = RunProgress(args.frames, "no display")
            run_headless(live)
        else:
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


def spare(prepare: list[str]) -> int:
    """The supervisor's spare (show/supervision/spare.py): everything imported (and, for a
    headless show, its GL context made), it waits for the command line of the show it is to
    play."""
    if "headless-gl" in prepare:
        prepare_headless_context()
    argv = wait_for_command()
    mark("spare: command taken")
    return 0 if argv is None else main(argv)


if __name__ == "__main__":
    sys.exit(spare(sys.argv[2:]) if sys.argv[1:2] == [SPARE_FLAG] else main())
