"""A live show from the command line: its inputs opened, the show built, played by the one
loop in a window or headless, and ended cleanly (screenshot, state, the last telemetry).

`run_headless` (here) and `run_window` (show/cli/live_window.py) differ only in the sink: an
offscreen framebuffer, or the window's, whose on_draw calls `Loop.frame`. Ctrl+C and SIGTERM
end the show after its frame (`StopSignals`, installed by instrument.py). Main thread only.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from swarm_instrument.audio.base import Silence
from swarm_instrument.audio.source import open_audio
from swarm_instrument.control.looks.files import FileProblem
from swarm_instrument.control.looks.preset_bank import PresetBank
from swarm_instrument.control.looks.recovery import RecoveryWriter
from swarm_instrument.control.looks.swarm_state import save_state
from swarm_instrument.control.midi.midi_in import Midi
from swarm_instrument.control.musical_time.link import LinkClock, LinkUnavailable
from swarm_instrument.control.osc.osc_input import OscInput, OscProblem
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.control.tracks.track_recorder import open_recorder
from swarm_instrument.show.autopilot.live_autopilot import open_autopilot
from swarm_instrument.show.cli.options import (
    HEADLESS_SIZE,
    START_LOOK_NOTE,
    ShowOptions,
    options_from_args,
)
from swarm_instrument.show.idle_gc import IdleCollector
from swarm_instrument.show.inputs.keys import key_action
from swarm_instrument.show.inputs.web_input import open_web
from swarm_instrument.show.loop import Loop, Offscreen, WallClock
from swarm_instrument.show.offline.progress import RunProgress
from swarm_instrument.show.show import Show
from swarm_instrument.show.supervision.heartbeat import Heartbeat, audio_start
from swarm_instrument.show.supervision.start_trace import mark
from swarm_instrument.show.supervision.supervisor import StopSignals
from swarm_instrument.show.telemetry_files import LatestRecord, Telemetry
from swarm_instrument.show.video_outputs import DEFAULT_RATE, open_outputs
from swarm_instrument.visual.gpu.context import prepared_or_new_context
from swarm_instrument.visual.gpu.limits import machine_limits
from swarm_instrument.visual.output.png import write_png
from swarm_instrument.visual.sim.agents import crowding_note
from swarm_instrument.visual.ui.hud import hud_layout

log = logging.getLogger(__name__)


def open_inputs(args: argparse.Namespace, params: Params) -> dict[str, Any]:
    """The audio source, MIDI, OSC and the web remote the command line asks for; none fails
    (each says why and the show runs without it). Safe mode opens none."""
    if args.safe_mode:
        log.info("safe mode: no audio, no MIDI, no OSC, no web remote, the bundled shaders")
        return {"audio": Silence("safe mode", "safe mode: audio is off"), "midi": None,
                "osc": None, "web": None}
    # The picture first: the live input's worker starts beside the show's building and its
    # first frames (silent until it reports, said then), where awaiting it cost a start, and a
    # supervisor's restart, up to half a second (0.44 s on the H200's host, 0.67 s here).
    audio = open_audio(args.audio_device, args.audio_file, args.mute, start_wait_s=0.0,
                       start_s=audio_start(args))
    midi = None
    if not args.no_midi:
        midi = Midi.open(params, ports=args.midi_port or None, virtual=args.midi_virtual,
                         api=args.midi_api, mapping_path=args.midi_map)
    return {"audio": audio, "midi": midi, "osc": open_osc(args.osc),
            "web": open_web(getattr(args, "web", None))}


def open_osc(endpoint: tuple[str, int] | None):
    """The OSC input --osc asks for, or None; a port that cannot be opened is said and the
    show runs without OSC."""
    if not endpoint:
        return None
    host, port = endpoint
    try:
        osc = OscInput(host, port)
    except OscProblem as exc:
        log.info(f"{exc}; the show goes on without OSC")
        return None
    log.info(f"osc: listening on {osc.host}:{osc.port} (/swarm/<param> value, /swarm/preset N...)")
    return osc


def open_link(show: Show, bpm: float) -> None:
    """--link: join the Ableton Link session on the local network (its tempo and grid lead
    musical time); a Link that cannot start is said and the show goes on without it."""
    try:
        link = LinkClock.open(bpm=bpm)
    except LinkUnavailable as exc:
        log.info(f"link: {exc}; the show goes on without Link")
        return
    show.tempo.add(link)
    log.info(f"link: joined the session at {bpm:g} BPM (quantum 4)")


def check_machine(ctx, args: argparse.Namespace, params: Params, size: tuple[int, int]) -> int:
    """The frame size and the count against what this GL holds (visual/gpu/limits.py), before the
    first frame: a refusal names the figure (exit 2). Returns the count a live change (a knob,
    OSC, a recall) is capped at."""
    limits = machine_limits(ctx)
    problem = limits.size_problem(size, "--size" if args.size else "the window")
    problem = problem or limits.count_problem(params["count"], args.frames is None, "--count" if
                                              args.count is not None else "count")
    if problem:
        raise FileProblem(problem)
    if (crowded := crowding_note(params.as_dict())) is not None:
        log.info(crowded)
    return limits.live_count


class LiveShow:
    """What every live run shares: building the show, the telemetry files, the heartbeat, the
    console's status line, the key map, and the ending."""

    def __init__(self, args: argparse.Namespace, params: Params, routes: list, preset: Any,
                 stop: StopSignals) -> None:
        self.args = args
        self.params = params
        self.routes = routes
        self.preset = preset
        self.stop = stop
        self.options: ShowOptions = options_from_args(args, params)
        self.heartbeat = Heartbeat(args.heartbeat_fd)
        self.latest = LatestRecord(args.last_telemetry) if args.last_telemetry else None
        self.telemetry = None
        if args.telemetry:
            try:
                self.telemetry = Telemetry(args.telemetry)
            except OSError as exc:
                raise FileProblem(str(exc)) from None
        self.started = time.perf_counter()
        self._last_report = self.started
        self.show: Show | None = None
        self.loop: Loop | None = None
        self.progress: RunProgress | None = None  # a bounded run's (the no-display one's)
        self._last_shown: float | None = None  # the window's last frame, for the governor

    def build(self, ctx, size: tuple[int, int], rate: float | None = None) -> Show:
        """The show on `ctx` once the machine can hold it, its inputs open, --record-control's
        recorder on it, its video outputs (`rate`: the window's, told to their receivers) and
        the loop that plays it."""
        self.options.count_limit = check_machine(ctx, self.args, self.params, size)
        if getattr(self.args, "start_look", False):  # after every check: an error comes first
            log.info(START_LOOK_NOTE)
        # The recovery file is for open-ended shows: a bounded run (--frames) leaves the last
        # show's alone.
        recovery = RecoveryWriter() if self.args.frames is None else None
        mark("show: the machine checked")
        inputs = open_inputs(self.args, self.params)
        mark("show: inputs open")
        show = Show(ctx, self.params, self.options, routes=self.routes,
                    presets=PresetBank(), preset=self.preset, recovery=recovery, **inputs)
        mark("show: built")
        show.recorder = open_recorder(self.args, self.params, self.routes, show.audio,
                                      self.options.count_limit)
        open_autopilot(self.args, show, self.options.seed)
        clock = getattr(show.midi, "clock", None)
        if clock is not None:  # MIDI clock from any input: a DAW, a drum machine
            show.tempo.add(clock)
        if getattr(self.args, "link", False) and not self.args.safe_mode:
            open_link(show, self.params["bpm"])
        self.show = show
        show.outputs = open_outputs(self.args, ctx, rate)  # video out: one more sink
        self.loop = Loop(show, WallClock(self.args.dt), after=self.each_frame,
                         outputs=show.outputs, idle=self.idle)
        show.collector = IdleCollector()  # no collection inside a frame from here on
        show.collector.start()
        return show

    @property
    def stopping(self) -> bool:
        return self.stop.requested is not None

    def done(self) -> bool:
        return self.stopping or (self.args.frames is not None
                                 and self.show.frame >= self.args.frames)

    def each_frame(self) -> None:
        now = time.perf_counter()
        self.heartbeat.beat(now, getattr(self.show.audio, "position", None))
        if self.heartbeat.orphaned:
            self.stop.request("the supervisor is gone")
        if self.progress is not None:
            self.progress.frame(self.show.frame)

    def idle(self) -> None:
        """After a frame is shown, outside it: the web page's and the control window's state
        (Show.publish), the telemetry files (once a second), the console's status line (every
        5 s), the garbage (show/idle_gc.py)."""
        now = time.perf_counter()
        if self.show.frame == 1:
            mark("show: first frame")
        self.show.publish()
        if self.latest is not None:
            self.latest.maybe_write(now, self.show.telemetry)
        if self.telemetry is not None:
            self.telemetry.maybe_write(now, self.show.telemetry)
            if self.telemetry.error:
                log.info(self.telemetry.error)
                self.telemetry = None
        if self.args.frames is None and now - self._last_report >= 5.0:
            self._last_report = now
            log.info(" | ".join(self.show.hud_lines()[:3]))
        self.show.collector.idle()

    # ---- the window's performer -------------------------------------------------------------

    def frame(self, target, size: tuple[int, int]) -> None:
        self.loop.frame(target, size)

    def hud_lines(self, size: tuple[int, int]) -> list[str]:
        return self.show.hud_lines(compact=hud_layout(size).compact)  # a small window: fewer

    def paced(self, start: float, worked: float, shown: float) -> float:
        """The window's frame was shown: the governor (show/governor.py) watches the frames of
        a live clock (not --dt's, which repeat); the period until the next frame."""
        show = self.show
        last, self._last_shown = self._last_shown, shown
        if self.args.dt is None:  # the first frame's interval: its own time
            since = start if last is None else last
            show.governor.observe(shown, shown - since, worked - start, show.params,
                                  show.renderer.post_active(show.values or show.params))
        self.idle()
        return 1.0 / show.governor.target_fps(show.params)

    def key(self, name: str, ctrl: bool, shift: bool) -> None:
        action = key_action(name, ctrl, shift, time.perf_counter())  # the loop's clock
        if action is not None:
            self.show.act(action)

    def pointer(self, x: float, y: float, width: int, height: int) -> None:
        self.show.move_lure(self.show.camera.screen_to_swarm(x, y, width, height))

    def scroll(self, clicks: float) -> None:
        show = self.show
        show.camera.zoom(0.9 ** clicks)
        if show.recorder is not None:  # no Action: the camera's own, recorded all the same
            show.recorder.record_action(show.show_time, "zoom", 0.9 ** clicks)

    # ---- the end ----------------------------------------------------------------------------

    def finish(self, image: tuple[bytes, tuple[int, int]] | None) -> None:
        """Write the screenshot, state and last telemetry; report; release the show."""
        show, args = self.show, self.args
        show.collector.stop()
        if self.progress is not None:
            self.progress.finish()
        if self.stopping:
            log.info(f"stopped ({self.stop.requested})")
        show.ctx.finish()
        elapsed = time.perf_counter() - self.started
        log.info(f"{show.frame} frames, {show.sim_time:.2f} s simulated in {elapsed:.2f} s "
            f"({elapsed / max(show.frame, 1) * 1000:.1f} ms a frame)")
        guarded = show.swarm.read_guarded()
        if guarded:
            log.info(f"the guard put back {guarded} agents whose state became NaN or infinite")
        if args.screenshot and image is not None:
            pixels, (width, height) = image
            array = np.frombuffer(pixels, np.uint8).reshape(height, width, 3)[::-1]
            write_png(args.screenshot, array)
            log.info(f"screenshot ({width}x{height}) saved to {Path(args.screenshot).resolve()}")
        if args.state_out:
            position, velocity = show.swarm.read_state()
            save_state(args.state_out, position, velocity)
            log.info(f"state of {len(position)} agents written to {args.state_out}")
        if self.telemetry is not None:
            self.telemetry.write(show.telemetry())
            self.telemetry.close()
        if show.recorder is not None:
            show.recorder.close(end=show.show_time)
            log.info(show.recorder.error or f"control track written to {args.record_control}")
        if show.outputs is not None:  # their last frames sent, their pixel buffers freed
            show.outputs.close()
        show.release()


def run_headless(live: LiveShow) -> None:
    """Render offscreen (EGL) until --frames, Ctrl+C or SIGTERM."""
    args = live.args
    if getattr(args, "output_screen", None) is not None or \
            getattr(args, "control_screen", None) is not None:
        log.info("--output-screen, --control-screen: a headless show has no screens; no "
                 "control window")
    mark("show: making the GL context")
    ctx = prepared_or_new_context("4.1")  # at least: the show picks the backend (--gl)
    mark("show: GL context")
    size = args.size or HEADLESS_SIZE
    show = live.build(ctx, size)
    sink = Offscreen(show, size)
    log.info(f"headless: {show.swarm.count} agents, {args.neighbors} neighbours, "
             f"{size[0]}x{size[1]}, {ctx.info['GL_RENDERER']}, GL {show.backend} backend")
    # With video outputs a headless show plays in real time, at --fps (default 60) as a
    # window would at its refresh rate, its frame rate held by the governor (unless --dt);
    # without, as fast as it renders.
    cap = (args.fps or DEFAULT_RATE) if show.outputs else None
    if cap:
        show.governor.display_fps = cap
    live.loop.run(sink, frames=args.frames, stop=lambda: live.stopping, cap=cap,
                  govern=bool(cap) and args.dt is None)
    live.finish((sink.pixels(), sink.size) if args.screenshot else None)
    ctx.release()
