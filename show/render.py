"""The offline render: a sound file in, a music video out (`instrument.py --render SONG`).

The same show as live (analysis, modulation, preset, MIDI mapping), driven by the song's time
instead of the clock: frame i is analysed at t = i / fps, simulated for exactly 1 / fps (in
equal substeps of at most 1/30 s, the seed's clamp) and drawn offscreen at the video's size;
its pixels go to the encoder's thread (visual/video.py) while the next frame renders. The same
song, preset, seed and settings give the same frames.

A control track (`--control`, control/control_track.py) automates parameters along the song:
a track recorded live with `--record-control`, or a Standard MIDI File sent through the MIDI
mapping. Every check that can fail (the song, the track, the codec, the size, the output)
runs before the first frame, each failure one line naming the file and what to do. Ctrl+C
stops the render, finishes the file (playable, with its sound up to the last frame) and says
how many frames it holds.

Main thread only (it owns the GL context); the encoder and the progress bar's output are the
only other activity, the encoder on its own thread.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from control.actions import Action
from control.files import FileProblem, save_state
from control.modulation import routes_from_json
from control.params import Params
from show.console import console as show_console
from show.frame import Show
from show.loop import Loop, Offscreen, SongClock, Tick
from show.options import ShowOptions, options_from_args
from visual.swarm import MAX_DT

log = logging.getLogger(__name__)
DEFAULT_FPS = 60.0
DEFAULT_SIZE = (1920, 1080)
FROM_CONTROL = "@control"  # `--render` without a song: the control track's recorded audio
EXIT_INTERRUPTED = 130  # the shell's code for a run ended by Ctrl+C


class RenderProblem(FileProblem):
    """Bad input for a render (options, song, track): one line, said before any frame."""


# ----- the command line -------------------------------------------------------------------

def add_render_arguments(parser: argparse.ArgumentParser) -> None:
    """The offline render's and the control recorder's options. In render mode the parser's
    own --fps and --size mean the video's rate (default 60) and size (default 1920x1080)."""
    group = parser.add_argument_group(
        "offline render", "render a music video from a sound file: --render SONG --out "
                          "VIDEO.mp4 (--fps and --size then set the video's rate and size, "
                          "default 60 and 1920x1080)")
    group.add_argument("--render", nargs="?", const=FROM_CONTROL, metavar="SONG",
                       help="render the swarm driven by this sound file (WAV, or anything "
                            "FFmpeg reads: MP3, FLAC, OGG) into a video, frame by frame; "
                            "without SONG, the audio recorded in --control drives it")
    group.add_argument("--out", metavar="VIDEO.mp4",
                       help="the video to write (.mp4, .mov, .m4v or .mkv; default: the "
                            "song's name with .mp4, in the current folder)")
    group.add_argument("--overwrite", action="store_true",
                       help="with --render: replace --out if it exists (default: refuse)")
    group.add_argument("--control", metavar="TRACK",
                       help="automate parameters along the song: a control track recorded "
                            "with --record-control, or a MIDI file (.mid) through the MIDI "
                            "mapping")
    group.add_argument("--codec", metavar="NAME",
                       help="video codec (default libx264: H.264; mpeg4 where it is missing)")
    group.add_argument("--crf", type=_crf, default=18.0, metavar="Q",
                       help="H.264 quality, 0 (lossless) to 51; lower is better and bigger "
                            "(default 18: visually clean)")
    group.add_argument("--encoder-preset", default="medium", metavar="NAME",
                       help="x264 speed preset, ultrafast to veryslow (default medium)")
    group.add_argument("--record-control", metavar="TRACK.jsonl",
                       help="live: save the audio features, MIDI, parameter and preset "
                            "changes with their times, to re-render the set with --control")


def _crf(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 51:
        raise argparse.ArgumentTypeError(f"expected a quality from 0 to 51, got {text!r}")
    return value


# ----- the song ----------------------------------------------------------------------------

def load_song(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """(samples (frames, channels) float32, rate) of a sound file: WAV, MP3, FLAC, OGG, M4A,
    read as --audio-file reads it (audio/decode.py); RenderProblem names the file."""
    from audio.decode import read_audio
    from audio.wavfile import AudioFileError

    try:
        return read_audio(path)
    except AudioFileError as exc:
        raise RenderProblem(str(exc)) from None


@dataclass
class RenderJob:
    song: Path | None  # None: the control track's recorded audio drives the swarm
    samples: np.ndarray | None  # (frames, channels) float32
    rate: int
    out: Path
    fps: float
    size: tuple[int, int]
    codec: str
    crf: float
    encoder_preset: str
    frames: int  # frames to render
    duration: float  # seconds of song (or of control track)
    track: Any = None  # control.control_track.ControlTrack
    midi_mapping: str | None = None
    args: argparse.Namespace | None = None  # for --screenshot and --state-out at the end

    @property
    def substeps(self) -> int:
        """Equal simulation steps a frame, each at most MAX_DT, so simulated time = song time."""
        return max(math.ceil((1.0 / self.fps) / MAX_DT - 1e-9), 1)

    @property
    def step(self) -> float:
        return 1.0 / self.fps / self.substeps


def plan_render(args: argparse.Namespace, params: Params, routes: list
                ) -> tuple[RenderJob, list]:
    """Check everything a render needs and return the job and the routes to use; raises
    RenderProblem (or VideoProblem) naming the file or option. Applies a control track's
    starting parameters to `params` (then the preset and --count again on top)."""
    from control.control_track import ControlTrack
    from visual.video import (
        DEFAULT_CODEC,
        X264_PRESETS,
        check_output,
        check_size,
        choose_codec,
        fps_fraction,
        frames_for,
    )

    if getattr(args, "dt", None) is not None:
        raise RenderProblem("--dt cannot be combined with --render: a render steps exactly "
                            "1/fps a frame (--fps sets it)")
    if getattr(args, "record_control", None):
        raise RenderProblem("--record-control records a live set; a render is already "
                            "repeatable (drop --record-control, or --render)")
    if getattr(args, "audio_file", None) or getattr(args, "audio_device", None) is not None:
        raise RenderProblem("--render takes its sound from SONG; drop --audio-file / "
                            "--audio-device")
    if getattr(args, "osc", None):
        raise RenderProblem("--osc plays a live show; a render is driven by SONG and --control "
                            "(record a live set with --record-control, OSC included)")
    if args.encoder_preset not in X264_PRESETS:
        raise RenderProblem(f"--encoder-preset {args.encoder_preset}: not one of "
                            f"{', '.join(X264_PRESETS)}")
    fps = float(fps_fraction(float(args.fps) if args.fps else DEFAULT_FPS))  # as stored
    size = tuple(args.size) if args.size else DEFAULT_SIZE

    song = None if args.render == FROM_CONTROL else Path(args.render)
    track = ControlTrack.load(args.control) if args.control else None
    if song is None and track is None:
        raise RenderProblem("--render needs a song (--render SONG), or a control track with "
                            "recorded audio (--render --control TRACK)")
    if song is None and (track.from_midi_file or not track.has_audio):
        raise RenderProblem(f"{track.path}: holds no recorded audio to drive the swarm; give "
                            "the song too: --render SONG --control "
                            f"{track.path}")
    out = Path(args.out) if args.out else Path.cwd() / (
        (song.stem if song else track.path.stem) + ".mp4")
    check_output(out, (song, args.control), overwrite=getattr(args, "overwrite", False))
    codec, message = choose_codec(args.codec or DEFAULT_CODEC)
    if message:
        log.info(message)
    check_size(size, codec)

    samples, rate = (load_song(song) if song is not None else (None, 0))
    if samples is not None:
        duration = len(samples) / rate
    else:
        duration = track.duration
        if duration <= 0:
            raise RenderProblem(f"{track.path}: lasts 0 s; nothing to render")
        if track.header.get("audio_file"):
            log.info(f"rendering {track.path.name}'s recorded audio features, without sound; "
                f"give the set's sound file to mux it: --render "
                f"{track.header['audio_file']} --control {track.path}")

    if track is not None and not track.from_midi_file:
        routes = _apply_track_start(track, args, params, routes)
    frames = frames_for(duration, fps)
    if getattr(args, "frames", None):
        frames = min(frames, int(args.frames))
    job = RenderJob(song, samples, rate, out, fps, size, codec, float(args.crf),
                    args.encoder_preset, frames, duration, track,
                    getattr(args, "midi_map", None), args)
    return job, routes


def _apply_track_start(track: Any, args: argparse.Namespace, params: Params, routes: list
                       ) -> list:
    """A recorded set starts from its own parameters and routes, unless --preset (or
    --resume) chose a start now; --count applies on top either way. The seed is the track's
    unless --seed gives one (--seed 0 included)."""
    if not (getattr(args, "preset", None) or getattr(args, "resume", False)):
        params.update(track.start_params, where=f"{track.path}: params")
        routes = track.routes
        if getattr(args, "count", None) is not None:
            params["count"] = args.count
    seed = track.header.get("seed")
    if isinstance(seed, int) and args.seed is None:
        args.seed = seed
        if seed != 0:
            log.info(f"seed {seed}, as recorded in {track.path.name}")
    return routes


# ----- progress ------------------------------------------------------------------------------

class Progress:
    """One status line: frames done of the total, output frames a second, time left.

    On a terminal it is redrawn in place (carriage return) at most 5 times a second; into a
    file or pipe it prints a plain line every `plain_every` seconds.
    """

    def __init__(self, total: int, stream: TextIO | None = None,
                 plain_every: float = 5.0) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.plain_every = plain_every
        self.started = time.perf_counter()
        self._last = -math.inf
        self._shown = False

    def line(self, done: int, now: float | None = None) -> str:
        now = time.perf_counter() if now is None else now
        elapsed = max(now - self.started, 1e-9)
        rate = done / elapsed
        left = (self.total - done) / rate if rate > 0 else math.inf
        percent = 100.0 * done / max(self.total, 1)
        width = 24
        filled = int(width * done / max(self.total, 1))
        bar = "#" * filled + "-" * (width - filled)
        return (f"render [{bar}] {done}/{self.total} frames {percent:3.0f}%  "
                f"{rate:5.1f} fps  {_clock(elapsed)} elapsed, {_clock(left)} left")

    def update(self, done: int) -> None:
        now = time.perf_counter()
        interval = 0.2 if self.tty else self.plain_every
        if done < self.total and now - self._last < interval:
            return
        self._last = now
        text = self.line(done, now)
        try:
            if self.tty:
                self.stream.write("\r" + text + "\x1b[K")
                self._shown = True
            else:
                self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed terminal must not stop the render

    def clear(self) -> None:
        """Before a console line: clear the progress line on a terminal (drawn again at the
        next update), so the two never run into each other."""
        if not (self.tty and self._shown):
            return
        try:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        except (OSError, ValueError):
            pass
        self._last = -math.inf

    def finish(self) -> None:
        if self.tty and self._shown:
            try:
                self.stream.write("\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "--:--"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else \
        f"{rest // 60}:{rest % 60:02d}"


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


class VideoSink:
    """The loop's sink for a render: an offscreen framebuffer whose every frame goes to the
    encoder (its own thread, behind a queue), then to the progress line and `observe`."""

    def __init__(self, show: Show, job: RenderJob, encoder: Any, progress: Progress,
                 observe: Observer | None) -> None:
        self.offscreen = Offscreen(show, job.size)
        self.job = job
        self.encoder = encoder
        self.progress = progress
        self.observe = observe
        self.last_pixels: bytes | None = None

    def target(self):
        return self.offscreen.target()

    def after(self, show: Show, index: int) -> None:
        self.last_pixels = self.offscreen.pixels()
        self.encoder.submit(self.last_pixels, index)
        if self.observe is not None:
            self.observe(show, index, index / self.job.fps)
        self.progress.update(index + 1)


def render(job: RenderJob, params: Params, options: ShowOptions, routes: Sequence[Any], *,
           ctx: Any = None, observe: Observer | None = None,
           progress: Progress | None = None) -> RenderResult:
    """Render `job` to its file: the one loop with the song's clock into a video sink.
    `ctx`: a GL context to use (default: a new headless one, released at the end).
    `observe(show, index, t)` runs after each frame is drawn (tests read the swarm there).
    Ctrl+C ends it early with a complete, playable file."""
    from audio.base import OfflineAudio
    from audio.recorded import RecordedAudio
    from visual.gl import create_headless_context
    from visual.video import VideoEncoder

    audio_for_video = (job.samples, job.rate) if job.samples is not None else None
    encoder = VideoEncoder(job.out, job.size, job.fps, codec=job.codec, crf=job.crf,
                           preset=job.encoder_preset, audio=audio_for_video)
    own_ctx = ctx is None
    show = None
    try:
        if own_ctx:
            ctx = create_headless_context()
        if job.samples is not None:
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
        sink = VideoSink(show, job, encoder, progress, observe)
    except BaseException:
        encoder.abandon()  # nothing rendered: leave no empty file behind
        if show is not None:
            show.release()
        if own_ctx and ctx is not None:
            ctx.release()
        raise

    width, height = job.size
    source = job.song.name if job.song else f"{job.track.path.name} (recorded audio)"
    log.info(f"render: {source}, {job.duration:.2f} s -> {job.out}: {job.frames} frames at "
        f"{job.fps:g} fps ({job.substeps} step{'s' if job.substeps > 1 else ''} of "
        f"{job.step * 1000:.2f} ms each), {width}x{height}, {job.codec}, "
        f"{show.swarm.count} agents, {ctx.info['GL_RENDERER']}")
    track = job.track if job.track is not None and not job.track.from_midi_file else None
    previous = [-math.inf]

    def replay(tick: Tick) -> None:  # a recorded set's events up to this frame's time
        if track is not None:
            for event in track.events_between(previous[0], tick.now):
                apply_event(show, event)
        previous[0] = tick.now

    loop = Loop(show, SongClock(job.fps, job.substeps), before=replay)
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
            stats = encoder.close()
        except Exception as exc:  # noqa: BLE001 - the loop's own failure matters more
            if failure is None:
                failure = exc
            stats = encoder.stats
    seconds = time.perf_counter() - started
    result = RenderResult(stats.frames, job.frames, seconds, interrupted, job.out)
    try:
        if failure is None:
            if interrupted:
                log.info(f"render stopped (Ctrl+C): {result.frames} of {job.frames} frames "
                    f"({result.frames / job.fps:.2f} s) written to {job.out}, a playable "
                    "file")
            else:
                log.info(f"render: {result.frames} frames ({result.frames / job.fps:.2f} s) "
                    f"written to {job.out.resolve()} in {seconds:.1f} s ({result.fps:.2f} "
                    "frames a second)")
            _finish_extras(show, sink.last_pixels, job)
    finally:
        show.release()
        if own_ctx:
            ctx.release()
    if failure is not None:
        raise failure
    return result


def apply_event(show: Show, event: Any) -> None:
    """A recorded param, preset or action event, at its time (audio and midi events are
    read elsewhere or only logged: see control/control_track.py). A recalled preset's values
    are in the param events that follow; only actions that change no parameter (a respawn, a
    separation burst) are replayed. A burst recorded before strengths were 0..1 holds the
    note's velocity 1-127."""
    if event.kind == "param":
        show.params[event.get("name")] = event.get("value")
    elif event.kind == "preset":
        show.params.update(event.get("params") or {})
        show.looks.routes = routes_from_json(event.get("routes") or [])
    elif event.kind == "action":
        if event.get("action") == "respawn":
            show.act(Action("respawn"))
        elif event.get("action") == "separation_burst":
            value = event.get("value")
            strength = 1.0 if value is None else value / 127.0 if value > 1 else float(value)
            show.act(Action("separation_burst", strength))


def _midi_file_input(job: RenderJob, params: Params) -> Any:
    """For a .mid control track: the live MIDI path (mapping, knobs, actions) fed from the
    file at song time. Knobs act at once: no pickup, since a file has no physical knob."""
    if job.track is None or not job.track.from_midi_file:
        return None
    from control.control_track import MidiFileSource
    from control.midi import Midi, user_mapping
    from control.midi_controller import MidiController

    learned = user_mapping()
    mapping = job.midi_mapping or (learned if learned.exists() else None)
    midi = Midi(params, MidiFileSource(job.track.midi_messages(), job.track.path.name),
                mapping_path=mapping, save_path=None)
    midi.controller = MidiController(params, midi.controller.mapping, armed=False)
    return midi


def _preset_bank() -> Any:
    """The preset slots, so a MIDI file's program changes and crossfades recall presets as
    live. Not for recorded tracks: their param events already hold what the presets did."""
    try:
        from control.presets import PresetBank
    except ImportError:
        return None
    return PresetBank()


def _finish_extras(show: Any, pixels: bytes | None, job: RenderJob) -> None:
    """--screenshot (the last frame) and --state-out, as a headless run writes them."""
    args = job.args
    if args is None:
        return
    if getattr(args, "screenshot", None) and pixels is not None:
        from visual.png import write_png

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
    from visual.video import VideoProblem

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
