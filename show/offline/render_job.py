"""An offline render's plan: its options, the song, the control track, the codec, the size and
the output, every check that can fail done before the first frame, each failure one line
naming the file or option (RenderProblem, exit 2). Main thread only."""

from __future__ import annotations

import argparse
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from swarm_instrument.audio.files.decode import AudioFileError, read_audio
from swarm_instrument.control.looks.files import FileProblem
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.control.tracks.control_track import ControlTrack
from swarm_instrument.show.cli.options import START_LOOK_NOTE
from swarm_instrument.show.offline.replay import Replay
from swarm_instrument.show.video_outputs import render_refusal
from swarm_instrument.visual.output.video import DEFAULT_CRF, DEFAULT_PRESET, X264_PRESETS
from swarm_instrument.visual.output.video_files import (
    DEFAULT_CODEC,
    check_output,
    check_size,
    choose_codec,
    fps_fraction,
    frames_for,
)
from swarm_instrument.visual.sim.agents import MAX_DT

log = logging.getLogger(__name__)
DEFAULT_FPS = 60.0
DEFAULT_SIZE = (1920, 1080)
FROM_CONTROL = "@control"  # `--render` without a song: the control track's recorded audio


class RenderProblem(FileProblem):
    """Bad input for a render (options, song, track): one line, said before any frame."""


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
                            "with --record-control (with the file the set played: its own "
                            "frames again), or a MIDI file (.mid) through the MIDI mapping")
    group.add_argument("--codec", metavar="NAME",
                       help="video codec (default libx264: H.264; mpeg4 where it is missing)")
    group.add_argument("--crf", type=_crf, default=DEFAULT_CRF, metavar="Q",
                       help="H.264 quality, 0 (lossless) to 51; lower is better and bigger "
                            f"(default {DEFAULT_CRF:g}: visually clean)")
    group.add_argument("--encoder-preset", default=DEFAULT_PRESET, metavar="NAME",
                       help="x264 speed preset, ultrafast to veryslow (default "
                            f"{DEFAULT_PRESET})")
    group.add_argument("--retime", action="store_true",
                       help="with --control of a recorded set: draw it on the video's own "
                            "frames (i / fps) instead of the set's own, smooth at --fps but "
                            "not the set's pictures")
    group.add_argument("--record-control", metavar="TRACK.jsonl",
                       help="live: save the audio features, MIDI, parameter and preset "
                            "changes with their times and each frame's clock, to render the "
                            "set again with --control (the show runs reproducibly meanwhile)")


def _crf(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 51:
        raise argparse.ArgumentTypeError(f"expected a quality from 0 to 51, got {text!r}")
    return value


def load_song(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """(samples (frames, channels) float32, rate) of a sound file: WAV, MP3, FLAC, OGG, M4A,
    read as --audio-file reads it (audio/files/decode.py); RenderProblem names the file."""
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
    track: Any = None  # control.tracks.control_track.ControlTrack
    midi_mapping: str | None = None
    args: argparse.Namespace | None = None  # for --screenshot and --state-out at the end
    replay: Replay | None = None  # the set's own frames (show/offline/replay.py), or None

    @property
    def substeps(self) -> int:
        """Equal simulation steps a frame, each at most MAX_DT, so simulated time = song time."""
        return max(math.ceil((1.0 / self.fps) / MAX_DT - 1e-9), 1)

    @property
    def step(self) -> float:
        return 1.0 / self.fps / self.substeps

    @property
    def video_frames(self) -> int:
        """Frames the video gets (a replay's: as many as cover the set at --fps)."""
        return self.replay.video_frames if self.replay is not None else self.frames

    def time_of(self, index: int) -> float:
        """Seconds of song (or of the set) at frame `index` drawn."""
        return self.replay.time_of(index) if self.replay is not None else index / self.fps

    def slots(self, index: int) -> range:
        """The video frames that show frame `index` drawn."""
        return self.replay.slots[index] if self.replay is not None else range(index, index + 1)

    def summary(self) -> str:
        """The render in a line, said before its first frame."""
        width, height = self.size
        video = (f"{self.video_frames} frames at {self.fps:g} fps, {width}x{height}, "
                 f"{self.codec}")
        if self.replay is not None:
            return (f"render: {self.track.path.name}'s own {self.frames} frames "
                    f"({self.duration:.2f} s, with {self.song.name}) -> {self.out}: {video}")
        source = self.song.name if self.song else f"{self.track.path.name} (recorded audio)"
        return (f"render: {source}, {self.duration:.2f} s -> {self.out}: {video} "
                f"({self.substeps} step{'s' if self.substeps > 1 else ''} of "
                f"{self.step * 1000:.2f} ms each)")


def plan_render(args: argparse.Namespace, params: Params, routes: list
                ) -> tuple[RenderJob, list]:
    """Check everything a render needs and return the job and the routes to use; raises
    RenderProblem (or VideoProblem) naming the file or option. Applies a control track's
    starting parameters to `params` (then the preset and --count again on top)."""
    if getattr(args, "dt", None) is not None:
        raise RenderProblem("--dt cannot be combined with --render: a render steps exactly "
                            "1/fps a frame (--fps sets it)")
    if getattr(args, "autopilot", False) and getattr(args, "render", None) == FROM_CONTROL:
        raise RenderProblem("--autopilot analyses a song's form: give --render SONG (a control "
                            "track's recorded audio holds levels, not the sound)")
    if getattr(args, "record_control", None):
        raise RenderProblem("--record-control records a live set; a render is already "
                            "repeatable (drop --record-control, or --render)")
    if getattr(args, "audio_file", None) or getattr(args, "audio_device", None) is not None:
        raise RenderProblem("--render takes its sound from SONG; drop --audio-file / "
                            "--audio-device")
    if getattr(args, "link", False):
        raise RenderProblem("--link follows a live session; a render tracks its song's own "
                            "beats")
    if getattr(args, "osc", None):
        raise RenderProblem("--osc plays a live show; a render is driven by SONG and --control "
                            "(record a live set with --record-control, OSC included)")

    if render_refusal(args):  # --out-ndi, --out-stream, ...: a live picture, not a render's
        raise RenderProblem(render_refusal(args))
    if getattr(args, "web", None):
        raise RenderProblem("--web plays a live show; a render is driven by SONG and --control "
                            "(record a live set with --record-control, the web remote's moves "
                            "included)")
    if args.encoder_preset not in X264_PRESETS:
        raise RenderProblem(f"--encoder-preset {args.encoder_preset}: not one of "
                            f"{', '.join(X264_PRESETS)}")
    fps = float(fps_fraction(float(args.fps) if args.fps else DEFAULT_FPS))  # as stored

    song = None if args.render == FROM_CONTROL else Path(args.render)
    track = ControlTrack.load(args.control) if args.control else None
    if song is None and track is None:
        raise RenderProblem("--render needs a song (--render SONG), or a control track with "
                            "recorded audio (--render --control TRACK)")
    if song is None and (track.from_midi_file or not track.has_audio):
        raise RenderProblem(f"{track.path}: holds no recorded audio to drive the swarm; give "
                            "the song too: --render SONG --control "
                            f"{track.path}")
    replay = _plan_replay(track, song, args, fps)
    recorded_size = replay.frames[0].size if replay is not None else None
    size = tuple(args.size) if args.size else recorded_size or DEFAULT_SIZE
    out = Path(args.out) if args.out else Path.cwd() / (
        (song.stem if song else track.path.stem) + ".mp4")
    check_output(out, (song, args.control), overwrite=getattr(args, "overwrite", False))
    codec, message = choose_codec(args.codec or DEFAULT_CODEC)
    if message:
        log.info(message)
    check_size(size, codec)

    samples, rate = (load_song(song) if song is not None else (None, 0))
    if replay is not None:
        duration = replay.video_frames / fps
        _check_replay_song(track, song, len(samples), rate)
    elif samples is not None:
        duration = len(samples) / rate
    else:
        duration = track.duration
        if duration <= 0:
            raise RenderProblem(f"{track.path}: lasts 0 s; nothing to render")
        if track.header.get("audio_file"):
            log.info(f"rendering {track.path.name}'s recorded audio features, without sound; "
                f"give the set's sound file to mux it: --render "
                f"{track.header['audio_file']} --control {track.path}")

    opens_on_track = track is not None and not track.from_midi_file
    if opens_on_track:
        routes = _apply_track_start(track, args, params, routes)
    frames = frames_for(duration, fps) if replay is None else len(replay.frames)
    if getattr(args, "frames", None) and replay is None:
        frames = min(frames, int(args.frames))
    job = RenderJob(song, samples, rate, out, fps, size, codec, float(args.crf),
                    args.encoder_preset, frames, duration, track,
                    getattr(args, "midi_map", None), args, replay)
    if getattr(args, "start_look", False) and not opens_on_track:
        log.info(START_LOOK_NOTE)  # the track's own start said above
    return job, routes


def _apply_track_start(track: Any, args: argparse.Namespace, params: Params, routes: list
                       ) -> list:
    """A recorded set starts from its own parameters and routes, unless --preset (or
    --resume) chose a start now; --count applies on top either way. The seed is the track's
    unless --seed gives one (--seed 0 included)."""
    if not (getattr(args, "preset", None) or getattr(args, "resume", False)):
        params.update(track.start_params, where=f"{track.path}: params")
        routes = track.routes
        log.info(f"opening on the look recorded in {track.path.name} (--preset chooses "
                 "another)")
        if getattr(args, "count", None) is not None:
            params["count"] = args.count
    seed = track.header.get("seed")
    if isinstance(seed, int) and args.seed is None:
        args.seed = seed
        if seed != 0:
            log.info(f"seed {seed}, as recorded in {track.path.name}")
    return routes


def _plan_replay(track: Any, song: Path | None, args: argparse.Namespace, fps: float
                 ) -> Replay | None:
    """A recorded set's own frames to draw again, where the track holds them and SONG is the
    file the set played (show/offline/replay.py); None: the video's own frames (--retime, no
    song, a MIDI file, a track without frames or of a set that heard its live input)."""
    retime = getattr(args, "retime", False)
    if retime and (track is None or track.from_midi_file):
        raise RenderProblem("--retime renders a recorded set (--control TRACK.jsonl) on the "
                            "video's own frames; give the set's track")
    if track is None or track.from_midi_file or retime or song is None or not track.frames:
        return None
    if not track.header.get("audio_file"):
        log.info(f"{track.path.name}: the set heard its live input, not a file: rendered on "
                 f"the video's own frames with {song.name}'s sound (not the set's pictures)")
        return None
    if getattr(args, "autopilot", False):
        raise RenderProblem(f"--autopilot: {track.path} is a set that plays its own looks "
                            "again (its autopilot's as they were chosen); drop --autopilot, or "
                            "add --retime to choose again on the video's own frames")
    replay = Replay.plan(track, fps, getattr(args, "frames", None))
    sizes = {frame.size for frame in track.frames if frame.size is not None}
    if args.size and tuple(args.size) not in sizes:
        log.info(f"--size {args.size[0]}x{args.size[1]}: the set was drawn at "
                 f"{', '.join(f'{w}x{h}' for w, h in sorted(sizes)) or 'another size'}: its "
                 "frames again, but not its pictures pixel for pixel")
    elif len(sizes) > 1:
        log.info(f"{track.path.name}: the set's frame changed size; all are drawn at the "
                 "first one's (--size chooses)")
    return replay


def _check_replay_song(track: Any, song: Path, length: int, rate: int) -> None:
    """Say so when SONG is not the file the set played (another name, rate or length): the
    set's frames follow it all the same, but they are no longer the set's pictures."""
    played = Path(str(track.header.get("audio_file")))
    said, played_rate = track.header.get("audio_samples"), track.header.get("rate") or rate
    if played.name != song.name or float(played_rate) != rate or (
            isinstance(said, int) and said != length):
        log.info(f"{song}: the set played {played.name} ({float(played_rate):g} Hz"
                 f"{f', {said} samples' if isinstance(said, int) else ''}): its frames follow "
                 "this file all the same, but they are not the set's pictures")
