"""The command line's options: each value checked as it is parsed (one line naming the option and
the allowed range, exit 2, with a suggestion for a near miss); the render's options come from
show/offline/render_job.py. Pure: nothing is opened here."""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import NoReturn

from swarm_instrument.control.osc.osc_input import parse_endpoint
from swarm_instrument.control.parameters.registry import MAX_COUNT
from swarm_instrument.control.web.web_address import resolve_endpoint
from swarm_instrument.show.autopilot.choreography import RATES
from swarm_instrument.show.cli.console import error
from swarm_instrument.show.cli.option_values import (
    obstacle,
    positive_int,
    rate,
    screen_index,
    seconds,
    seed,
    size,
    song_time,
    time_step,
    whole,
)
from swarm_instrument.show.cli.options import HEADLESS_SIZE
from swarm_instrument.show.offline.render_job import add_render_arguments
from swarm_instrument.show.video_outputs import add_output_arguments
from swarm_instrument.visual.gpu.context import GL_CHOICES
from swarm_instrument.visual.gpu.uniforms import MAX_OBSTACLES
from swarm_instrument.visual.sim.agents import NEIGHBOR_MODES


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
        known = [o for action in self._actions for o in action.option_strings
                 if action.help != argparse.SUPPRESS]
        close = difflib.get_close_matches(option.split("=")[0], known, n=1, cutoff=0.6)
        return f" (did you mean {close[0]}?)" if close else ""


GL_NOTES = (
    "GPU backends (--gl): 4.3 runs the simulation and the cull in compute shaders; 4.1 "
    "(macOS stops at OpenGL 4.1 core) in transform feedback and float textures. auto, the "
    "default, takes 4.3 where the driver has compute shaders (asked of the context's version "
    "and extensions, never by compiling one) and 4.1 otherwise; the HUD and telemetry say "
    "which runs. The look, the parameters, presets and every input are the same on both.")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="instrument.py",
        description="A live swarm of GPU boids driven by sound and MIDI.",
        epilog=GL_NOTES)
    run = parser.add_argument_group("running")
    run.add_argument("--headless", action="store_true",
                     help="render offscreen (EGL) without a window; no display needed")
    run.add_argument("--frames", type=positive_int, metavar="N",
                     help="run N frames, then exit")
    run.add_argument("--dt", type=time_step, metavar="SECONDS",
                     help="advance exactly this step each frame instead of following the clock")
    run.add_argument("--gl", choices=GL_CHOICES, default="auto",
                     help="GPU backend: 4.3 (compute shaders), 4.1 (transform feedback: macOS) "
                          "or auto (default: 4.3 where the driver has compute)")
    run.add_argument("--seed", type=seed, metavar="S",
                     help="random seed of the spawn: same seed, same start (default 0, or the "
                          "control track's with --control)")
    view = parser.add_argument_group("window")
    view.add_argument("--screen", type=screen_index, default=0, metavar="N",
                      help="screen to play on (default 0)")
    view.add_argument("--output-screen", type=screen_index, metavar="N",
                      help="two screens: the picture full-screen on screen N (the projector) "
                           "with nothing over it, the control window on the other screen")
    view.add_argument("--control-screen", type=screen_index, metavar="M",
                      help="the control window (preview, every parameter, the preset slots, "
                           "meters) on screen M; with one screen it opens as a window and the "
                           "picture keeps its HUD")
    view.add_argument("--windowed", action="store_true", help="a window instead of full-screen")
    view.add_argument("--size", type=size, metavar="WxH",
                      help="window size (implies --windowed); headless frame size "
                           f"(default {HEADLESS_SIZE[0]}x{HEADLESS_SIZE[1]}); with --render, "
                           "the video's (default 1920x1080)")
    view.add_argument("--fps", type=rate, metavar="RATE",
                      help="frame-rate cap (default: the display's refresh rate); with "
                           "--render, the video's frame rate (default 60)")
    view.add_argument("--screenshot", metavar="PATH.png", help="save the last frame as a PNG")
    view.add_argument("--post", choices=("auto", "on", "off"),
                      help="the post chain (bloom, feedback): auto, the default, runs it on a "
                           "GPU and not on software GL; exposure and the tone map always run")
    view.add_argument("--contact-sheet", metavar="PATH.png",
                      help="render every bundled look (8 s of a 120 BPM drum loop, seed 1, "
                           "the post chain on) into one PNG grid, and exit; --size sets a "
                           "thumbnail's size (default 480x270)")
    view.add_argument("--telemetry", metavar="PATH",
                      help="append one JSON object a second (and one at exit) to this file")
    swarm = parser.add_argument_group("swarm")
    swarm.add_argument("--count", type=whole("agents", 1, MAX_COUNT), metavar="N",
                       help=f"number of agents (1 to {MAX_COUNT}; default 16384)")
    swarm.add_argument("--neighbors", choices=NEIGHBOR_MODES, default="grid",
                       help="neighbour search: uniform grid, or the seed's all-pairs reference")
    swarm.add_argument("--preset", metavar="NAME|PATH",
                       help="start from a preset: a bundled or saved one by name or slot "
                            "number, or a .json file")
    swarm.add_argument("--autopilot", action="store_true",
                       help="the looks follow the music's form (intro, groove, build, drop, "
                            "break, outro), chosen from the tagged presets; A or "
                            "/swarm/autopilot switches it off and on")
    swarm.add_argument("--autopilot-rate", choices=RATES, default="section",
                       help="how often the autopilot changes the look: rarely (only for "
                            "another kind of section), section (each one, the default), "
                            "phrase (every four bars as well)")
    swarm.add_argument("--autopilot-resume", type=seconds, default=30.0, metavar="SECONDS",
                       help="live: the autopilot takes the look back this long after the "
                            "performer last played it (default 30)")
    swarm.add_argument("--obstacle", type=obstacle, action="append", default=[],
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
    sound.add_argument("--audio-start", type=song_time, default=0.0, metavar="TIME",
                       help="with --audio-file: play it from here (seconds, or 1:30); a show "
                            "the supervisor restarts goes on where the song was")
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
    timing = parser.add_argument_group("musical time")
    timing.add_argument("--link", action="store_true",
                        help="join the Ableton Link session on the local network: its tempo "
                             "and beat grid lead (T taps a tempo, D marks the bar's first beat)")
    network = parser.add_argument_group("OSC")
    network.add_argument("--osc", metavar="[HOST:]PORT", type=osc_endpoint,
                         help="listen for OSC on this UDP port (all interfaces, or HOST only, "
                              "e.g. 127.0.0.1:9000): /swarm/<param> value, /swarm/<param>/norm "
                              "0..1, /swarm/preset N, /swarm/respawn, /swarm/burst")
    remote = parser.add_argument_group("web remote")
    remote.add_argument("--web", metavar="[HOST:]PORT", type=web_endpoint,
                        help="serve a control page for a browser on this port (this machine "
                             "only, or HOST, e.g. 0.0.0.0:8080 for a phone on the network: a "
                             "link with a token is printed)")
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
    # the supervisor's restart: --audio-start was the song's position at this CLOCK_MONOTONIC
    safety.add_argument("--audio-start-clock", type=float, help=argparse.SUPPRESS)

    add_render_arguments(parser)
    add_output_arguments(parser)  # video out: --out-ndi, --out-stream, ...
    state = parser.add_argument_group("state")
    state.add_argument("--state-in", metavar="PATH.npz",
                       help="start from this state (arrays position, velocity); sets the count")
    state.add_argument("--state-out", metavar="PATH.npz",
                       help="write the state after the last frame")
    return parser


def web_endpoint(text: str) -> tuple[str, int]:
    """--web's value, checked while the command line is parsed: its host looked up too, so
    that a name nobody knows is refused before the show starts, as a bad port is."""
    try:
        return resolve_endpoint(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--web ")) from None


def osc_endpoint(text: str) -> tuple[str, int]:
    """--osc's value, checked while the command line is parsed."""
    try:
        return parse_endpoint(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--osc {text!r}: ")) from None
