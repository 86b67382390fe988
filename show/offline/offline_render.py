"""The offline render: a sound file in, a music video out (`instrument.py --render SONG`).

The same show as live (analysis, modulation, preset, MIDI mapping), driven by the song's time
instead of the clock: frame i is analysed at t = i / fps, simulated for exactly 1 / fps (in
equal substeps of at most 1/30 s, the seed's clamp) and drawn offscreen at the video's size;
its pixels go to the encoder's thread (visual/output/video.py) while the next frame renders. The
same song, preset, seed and settings give the same frames.

The plan (every check before the first frame) is show/offline/render_job.py, the progress line
show/offline/progress.py. A control track (`--control`, control/tracks/control_track.py) automates
parameters along the song: a track recorded live with `--record-control`, or a Standard MIDI
File sent through the MIDI mapping. A recorded set with its sound file is drawn again on its
own frames instead (show/offline/replay.py: the set's pictures, bit for bit), unless
`--retime` asks for the video's. Every check that can fail (the song, the track, the codec,
the size, the output) runs before the first frame, each failure one line naming the file and
what to do. Ctrl+C stops the render, finishes the file (playable, with its sound up to the
last frame) and says how many frames it holds.

`--telemetry PATH` gets the live show's record (show/report.py) with the frame's `song_time`
(a replay's: from the set's first frame): one at each whole second of song time (the first
frame at or after it) and one at the end, so a render writes the same records, at the same
frames, every time (their wall-clock `time`, `fps` and `frame_ms` tell the render's own
speed).

Main thread only (it owns the GL context); the encoder and the progress bar's output are the
only other activity, the encoder on its own thread.
"""

from __future__ import annotations

import argparse
import logging
import math
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from swarm_instrument.audio.base import OfflineAudio
from swarm_instrument.audio.files.recorded import RecordedAudio
from swarm_instrument.control.looks.preset_bank import BUNDLED_DIR, PresetBank, user_presets_dir
from swarm_instrument.control.looks.swarm_state import save_state
from swarm_instrument.control.midi.controller import MidiController
from swarm_instrument.control.midi.midi_in import Midi, user_mapping
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.control.tracks.midi_track import MidiFileSource
from swarm_instrument.show.autopilot.autopilot import Autopilot, autopilot_looks
from swarm_instrument.show.cli.console import console as show_console
from swarm_instrument.show.cli.options import ShowOptions, options_from_args
from swarm_instrument.show.loop import Loop, Offscreen, SongClock, Tick
from swarm_instrument.show.offline.progress import Progress
from swarm_instrument.show.offline.render_job import RenderJob, RenderProblem, plan_render
from swarm_instrument.show.offline.replay import ReplayedFile, apply_all
from swarm_instrument.show.show import Show
from swarm_instrument.show.telemetry_files import Telemetry
from swarm_instrument.visual.gpu.context import create_headless_context
from swarm_instrument.visual.output.png import write_png
from swarm_instrument.visual.output.video import VideoEncoder
from swarm_instrument.visual.output.video_files import VideoProblem
from swarm_instrument.visual.output.yuv import YuvReadback, supported

log = logging.getLogger(__name__)
EXIT_INTERRUPTED = 130  # the shell's code for a run ended by Ctrl+C


# ----- the command line -------------------------------------------------------------------


# ----- the song ----------------------------------------------------------------------------


# ----- progress ------------------------------------------------------------------------------


@contextmanager
def _sigint_deferred() -> Iterator[list]:
    """While the file is being finished, a second Ctrl+C is noted, not raised, so it cannot
    leave a half-written file. Only the main thread may touch signal handlers."""
    caught: list = []
    try:
        previous = signal.signal(signal.SIGINT, lambda *_: caught.append(True))
    except ValueError:  # not the main thread
        yield caught
        return
    try:
        yield caught
    finally:
        signal.signal(signal.SIGINT, previous)


# ----- the render --------------------------------------------------------------------------

@dataclass
class RenderResult:
    frames: int  # frames written to the file
    planned: int
    seconds: float  # wall time of the frame loop and the encoder's finish
    interrupted: bool
    out: Path

    @property
    def fps(self) -> float:
        """Output frames a second: the render speed."""
        return self.frames / self.seconds if self.seconds > 0 else 0.0


Observer = Callable[[Any, int, float], None]


class SongTelemetry:
    """--telemetry for a render: the live record on song time, a record at each whole second
    of it and one at the end. A write that fails is said once and telemetry stops."""

    def __init__(self, path: str | Path, job: RenderJob) -> None:
        try:
            self.file = Telemetry(path)
        except OSError as exc:
            raise RenderProblem(str(exc)) from None
        self.job = job
        self._second = -math.inf  # the last whole second of song time a record was written at

    def frame(self, show: Show) -> None:
        """After each frame: a record if a new whole second of song time has begun."""
        second = math.floor(self.job.time_of(show.frame - 1) + 1e-9)
        if second > self._second:
            self._second = second
            self._write(show)

    def close(self, show: Show | None) -> None:
        """The record at the end (`show` None: nothing rendered to tell), then the file."""
        if show is not None:
            self._write(show)
        self.file.close()

    def _write(self, show: Show) -> None:
        if self.file.error is not None:
            return
        song_time = self.job.time_of(show.frame - 1) if show.frame else 0.0
        self.file.write({**show.telemetry(), "song_time": round(song_time, 6)})
        if self.file.error is not None:
            log.info(self.file.error)


class VideoSink:
    """The loop's sink for a render: an offscreen framebuffer whose every frame goes to the
    encoder (its own thread, behind a queue), then to the progress line and `observe`. Where
    the size allows (visual/output/yuv.py), the GPU turns each frame into the video's 4:2:0 planes,
    read back two frames late, so neither the frame loop nor the encoder's thread converts or
    waits; elsewhere the frame is read back as RGB and converted by the encoder (swscale)."""

    def __init__(self, show: Show, job: RenderJob, encoder: Any, progress: Progress,
                 observe: Observer | None) -> None:
        self.offscreen = Offscreen(show, job.size)
        self.job = job
        self.encoder = encoder
        self.progress = progress
        self.observe = observe
        # The planes are a compute pass: on the GL 4.1 backend the frame is read back as RGB.
        self.yuv = (YuvReadback(show.ctx, job.size, shader_dir=show.renderer.shader_dir)
                    if supported(job.size) and show.backend == "4.3" else None)

    def target(self):
        return self.offscreen.target()

    def after(self, show: Show, index: int) -> None:
        if self.yuv is not None:
            texture = self.offscreen.framebuffer.color_attachments[0]
            for tag, planes in self.yuv.capture(texture, index):
                self._submit(planes, tag)
        else:
            self._submit(self.offscreen.pixels(), index)
        if self.observe is not None:
            self.observe(show, index, self.job.time_of(index))
        self.progress.update(index + 1)

    def _submit(self, picture: Any, index: int) -> None:
        """Frame `index` drawn, into each video frame that shows it (a replay's frame may be
        shown in none, once or more: show/offline/replay.py)."""
        for slot in self.job.slots(index):
            self.encoder.submit(picture, slot)

    def flush(self) -> None:
        """The frames still on their way back from the GPU, to the encoder (at the end)."""
        if self.yuv is not None:
            for tag, planes in self.yuv.flush():
                self._submit(planes, tag)

    def last_pixels(self) -> bytes:
        """The last frame drawn, RGB rows bottom first (waits for the GPU: at the end only)."""
        return self.offscreen.pixels()

    def release(self) -> None:
        if self.yuv is not None:
            self.yuv.release()
            self.yuv = None


def render(job: RenderJob, params: Params, options: ShowOptions, routes: Sequence[Any], *,
           ctx: Any = None, observe: Observer | None = None,
           progress: Progress | None = None) -> RenderResult:
    """Render `job` to its file: the one loop with the song's clock into a video sink.
    `ctx`: a GL context to use (default: a new headless one, released at the end).
    `observe(show, index, t)` runs after each frame is drawn (tests read the swarm there).
    Ctrl+C ends it early with a complete, playable file."""
    audio_for_video = (job.samples, job.rate) if job.samples is not None else None
    encoder = VideoEncoder(job.out, job.size, job.fps, codec=job.codec, crf=job.crf,
                           preset=job.encoder_preset, audio=audio_for_video)
    own_ctx = ctx is None
    show = None
    telemetry = None
    try:
        path = getattr(job.args, "telemetry", None)
        telemetry = SongTelemetry(path, job) if path else None
        if own_ctx:
            ctx = create_headless_context("4.1")  # at least: the show picks (--gl)
        if job.replay is not None:  # the set's own frames: the file as the set played it
            audio = ReplayedFile(job.song)
        elif job.samples is not None:
            audio = OfflineAudio(job.samples, job.rate, name=job.song.name)
        else:
            audio = RecordedAudio(job.track)
        progress = progress or Progress(job.frames)
        console = show_console()
        if console is not None:  # messages never break into the progress line
            console.before.append(progress.clear)
        midi = _midi_file_input(job, params)
        extra = {"midi": midi, "presets": _preset_bank()} if midi is not None else {}
        show = Show(ctx, params, options, audio=audio, routes=routes, **extra)
        if getattr(job.args, "autopilot", False):
            show.autopilot = _autopilot(job, options.seed)
        clock, before = _playback(job, show)
        sink = VideoSink(show, job, encoder, progress, observe)
    except BaseException:
        encoder.abandon()  # nothing rendered: leave no empty file behind
        if telemetry is not None:
            telemetry.close(None)
        if show is not None:
            show.release()
        if own_ctx and ctx is not None:
            ctx.release()
        raise

    log.info(f"{job.summary()}, {show.swarm.count} agents, {ctx.info['GL_RENDERER']}, GL "
             f"{show.backend} backend")
    loop = Loop(show, clock, before=before,
                after=None if telemetry is None else lambda: telemetry.frame(show))
    started = time.perf_counter()
    interrupted = False
    failure: BaseException | None = None
    try:
        loop.run(sink, frames=job.frames)
    except KeyboardInterrupt:
        interrupted = True
    except BaseException as exc:  # noqa: BLE001 - finish the file, then re-raise
        failure = exc
    with _sigint_deferred():
        progress.finish()
        if console is not None:
            console.before.remove(progress.clear)
        try:
            sink.flush()
        except Exception as exc:  # noqa: BLE001 - the loop's own failure matters more
            if failure is None:
                failure = exc
        try:
            stats = encoder.close()
        except Exception as exc:  # noqa: BLE001 - the loop's own failure matters more
            if failure is None:
                failure = exc
            stats = encoder.stats
    seconds = time.perf_counter() - started
    result = RenderResult(stats.frames, job.video_frames, seconds, interrupted, job.out)
    try:
        if failure is None:
            if interrupted:
                log.info(f"render stopped (Ctrl+C): {result.frames} of {result.planned} frames "
                    f"({result.frames / job.fps:.2f} s) written to {job.out}, a playable "
                    "file")
            else:
                log.info(f"render: {result.frames} frames ({result.frames / job.fps:.2f} s) "
                    f"written to {job.out.resolve()} in {seconds:.1f} s ({result.fps:.2f} "
                    "frames a second)")
            _finish_extras(show, sink.last_pixels, job)
    finally:
        if telemetry is not None:  # the last record, as a live show's at its end
            telemetry.close(show if failure is None else None)
        sink.release()
        show.release()
        if own_ctx:
            ctx.release()
    if failure is not None:
        raise failure
    return result


def _playback(job: RenderJob, show: Show) -> tuple[Any, Callable[[Tick], None]]:
    """The render's clock, and what runs before each frame: a recorded set's own frames
    (show/offline/replay.py), or the song's frames with a track's events at their times."""
    if job.replay is not None:
        clock = job.replay.attach(show)
        return clock, lambda tick: job.replay.before(show, clock)
    track = job.track if job.track is not None and not job.track.from_midi_file else None
    previous = [-math.inf]

    def replay(tick: Tick) -> None:  # a recorded set's events up to this frame's time
        if track is not None:
            action = apply_all(show, track.events_between(previous[0], tick.now),
                               live_clock=False)
            if action is not None:
                show.act(action)
        previous[0] = tick.now

    return SongClock(job.fps, job.substeps), replay


def _midi_file_input(job: RenderJob, params: Params) -> Any:
    """For a .mid control track: the live MIDI path (mapping, knobs, actions) fed from the
    file at song time. Knobs act at once: no pickup, since a file has no physical knob."""
    if job.track is None or not job.track.from_midi_file:
        return None

    learned = user_mapping()
    mapping = job.midi_mapping or (learned if learned.exists() else None)
    midi = Midi(params, MidiFileSource(job.track.midi_messages(), job.track.path.name),
                mapping_path=mapping, save_path=None)
    midi.controller = MidiController(params, midi.controller.mapping, armed=False)
    return midi


def _autopilot(job: RenderJob, seed: int) -> Autopilot:
    """--autopilot: the song's sections and a cue for each, before the first frame."""
    presets = autopilot_looks([BUNDLED_DIR, user_presets_dir()])
    if not presets:
        raise RenderProblem("--autopilot: no preset has tags (calm, groove, build, peak) to "
                            f"choose looks by; tag some in {user_presets_dir()}")
    return Autopilot.for_song(job.samples, job.rate, presets, seed,
                              getattr(job.args, "autopilot_rate", "section"),
                              frame_s=1.0 / job.fps)


def _preset_bank() -> Any:
    """The preset slots, so a MIDI file's program changes and crossfades recall presets as
    live. Not for recorded tracks: their param events already hold what the presets did."""
    return PresetBank()


def _finish_extras(show: Any, last_pixels: Callable[[], bytes], job: RenderJob) -> None:
    """--screenshot (the last frame) and --state-out, as a headless run writes them."""
    args = job.args
    if args is None:
        return
    if getattr(args, "screenshot", None) and show.frame > 0:
        pixels = last_pixels()
        width, height = job.size
        write_png(args.screenshot, np.frombuffer(pixels, np.uint8).reshape(height, width,
                                                                              3)[::-1])
        log.info(f"screenshot ({width}x{height}) saved to {Path(args.screenshot).resolve()}")
    if getattr(args, "state_out", None):
        position, velocity = show.swarm.read_state()
        save_state(args.state_out, position, velocity)
        log.info(f"state of {len(position)} agents written to {args.state_out}")


def run_render(args: argparse.Namespace, params: Params, routes: list) -> int:
    """`instrument.py --render`: plan (every check), render, report. Bad input raises
    RenderProblem / VideoProblem (FileProblem: the instrument prints one line, exit 2) before
    anything renders; 0 when done, 130 after Ctrl+C (the file holds what was rendered)."""
    try:
        job, routes = plan_render(args, params, routes)
        options = options_from_args(args, params, render=True)
        result = render(job, params, options, routes)
    except VideoProblem as exc:
        raise RenderProblem(str(exc)) from None
    except KeyboardInterrupt:  # while checking or setting up, before the first frame
        log.info("render stopped (Ctrl+C) before the first frame; no video written")
        return EXIT_INTERRUPTED
    return EXIT_INTERRUPTED if result.interrupted else 0
