"""The offline render as a user runs it: a short synthetic song in, a music video out.

The song is 2 s: a near-silent first second (-80 dBFS noise) and a loud second one. Rendered
at 160x90, 12 fps, 1500 agents (llvmpipe is slow), it checks the video's frames, size, codec,
duration and audio; that two renders give the same frames; that the swarm speeds up in the
loud half; that Ctrl+C leaves a playable file; and that bad input stops before any frame.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from swarm_instrument import instrument
from swarm_instrument.audio.files.wav_writer import write_wav
from swarm_instrument.control.looks.files import FileProblem
from swarm_instrument.control.looks.preset_bank import PresetBank
from swarm_instrument.control.looks.presets import load_preset
from swarm_instrument.show.cli.options import START_LOOK, options_from_args
from swarm_instrument.show.offline.offline_render import render, run_render
from swarm_instrument.show.offline.progress import Progress
from swarm_instrument.show.offline.render_job import add_render_arguments, load_song, plan_render
from swarm_instrument.visual.output.video import VideoEncoder
from swarm_instrument.visual.output.video_files import decode_frames, video_info

from conftest import ROOT, listening

RATE = 48000
FPS = 12
SIZE = "160x90"
COUNT = "1500"
SMALL = ("--fps", str(FPS), "--size", SIZE, "--count", COUNT)
START = load_preset(PresetBank().resolve(START_LOOK)).values  # what a render opens on

import av  # noqa: E402 - a declared dependency: missing, the module fails


def render_parser():
    """The instrument's parser, with the render options once (the lead's build_parser adds
    them itself once --render is wired in)."""
    parser = instrument.build_parser()
    if not any("--render" in action.option_strings for action in parser._actions):
        add_render_arguments(parser)
    return parser


def wired() -> bool:
    """True once instrument.py dispatches --render itself (then tests go through it)."""
    return "run_render" in (ROOT / "instrument.py").read_text()


def run_cli(*argv: str) -> tuple[int, str]:
    """`instrument.py ARGV`: a real process once --render is wired, else in-process through
    run_render as instrument.main would call it. Returns (exit code, everything said)."""
    if wired():
        result = subprocess.run([sys.executable, str(ROOT / "instrument.py"), *argv],
                                capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
        return result.returncode, result.stdout + result.stderr
    args = render_parser().parse_args(list(argv))
    with listening() as lines:
        try:
            params, routes, *_ = instrument.build_params(args)
            code = run_render(args, params, routes)
        except FileProblem as exc:  # what instrument.main prints as one line, exit 2
            lines.append(f"error: {exc}")
            code = 2
    return code, "\n".join(lines)


@pytest.fixture(scope="module")
def song(tmp_path_factory):
    folder = tmp_path_factory.mktemp("song")
    noise = np.random.default_rng(1).normal(size=2 * RATE)
    samples = np.concatenate([noise[:RATE] * 1e-4, noise[RATE:] * 0.3])
    stereo = np.stack([samples, samples * 0.5], axis=1)
    path = folder / "song.wav"
    write_wav(path, stereo, RATE)
    # A knob turned at 1 s (a recorded control track): agent_size does not change speed.
    track = folder / "auto.jsonl"
    track.write_text(json.dumps({"format": "swarm-control", "version": 1, "seed": 0}) + "\n"
                     + json.dumps({"t": 1.0, "kind": "param", "name": "agent_size",
                                   "value": 1.2}) + "\n")
    return path, track


@pytest.fixture(scope="module")
def through_cli(song, tmp_path_factory):
    """Render A: through the command line, with --telemetry (out.parent / telemetry.jsonl)."""
    path, track = song
    out = tmp_path_factory.mktemp("a") / "out.mp4"
    code, said = run_cli("--render", str(path), "--out", str(out), "--control", str(track),
                         "--telemetry", str(out.parent / "telemetry.jsonl"), *SMALL)
    assert code == 0, said
    return out, said


@pytest.fixture(scope="module")
def observed(song, tmp_path_factory):
    """Render B: the same settings in-process, reading the swarm after every frame."""
    path, track = song
    out = tmp_path_factory.mktemp("b") / "out.mp4"
    args = render_parser().parse_args(["--render", str(path), "--out", str(out), "--control",
                                       str(track), *SMALL])
    params, routes, *_ = instrument.build_params(args)
    job, routes = plan_render(args, params, routes)
    seen = []

    def observe(show, index, t):
        _, velocity = show.swarm.read_state()
        seen.append({"t": t, "speed": float(np.linalg.norm(velocity, axis=1).mean()),
                     "level": show.audio.level, "agent_size": show.params["agent_size"]})

    result = render(job, params, options_from_args(args, params, render=True), routes,
                    observe=observe, progress=Progress(job.frames, io.StringIO()))
    return out, seen, result


def test_the_video_holds_the_song(through_cli):
    out, said = through_cli
    info = video_info(out)
    video, audio = info["video"], info["audio"]
    assert video["codec"] == "h264" and (video["width"], video["height"]) == (160, 90)
    assert video["frames"] == 2 * FPS and video["rate"] == FPS
    assert video["duration"] == pytest.approx(2.0, abs=1 / FPS)
    assert audio["codec"] == "aac" and audio["channels"] == 2 and audio["rate"] == RATE
    assert audio["duration"] == pytest.approx(2.0, abs=1 / FPS)
    frames = decode_frames(out)
    assert frames.shape == (2 * FPS, 90, 160, 3)
    assert frames.max() > 60, "nothing drawn"
    assert f"{2 * FPS} frames" in said and "written to" in said


def test_two_renders_give_the_same_frames(through_cli, observed):
    a, b = decode_frames(through_cli[0]), decode_frames(observed[0])
    assert a.shape == b.shape
    differing = [i for i in range(len(a)) if not np.array_equal(a[i], b[i])]
    assert not differing, f"frames {differing} differ between two renders of the same song"


def test_a_render_writes_telemetry_on_song_time(through_cli, ctx):
    """A record at each whole second of song time (the frame at 0 s and at 1 s) and one at
    the end, with the live show's fields and the song's time: the same records every run."""
    from swarm_instrument.control.parameters.registry import Params
    from swarm_instrument.show.cli.options import ShowOptions
    from swarm_instrument.show.show import Show

    lines = (through_cli[0].parent / "telemetry.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["song_time"] for r in records] == pytest.approx([0.0, 1.0, (2 * FPS - 1) / FPS])
    assert [r["frame"] for r in records] == [1, FPS + 1, 2 * FPS]
    live = Show(ctx, Params({"count": 100}), ShowOptions())
    try:
        fields = set(live.telemetry()) | {"time"}  # Telemetry stamps each record's time
    finally:
        live.release()
    for record in records:
        assert set(record) == fields | {"song_time"}
        assert record["agents"] == int(COUNT) and record["audio"]["device"] == "song.wav"
        assert not record["real_time"]["behind"] and record["real_time"]["lag_s"] == 0.0
    assert records[-1]["params"]["agent_size"] == 1.2  # the track's knob, turned at 1 s


def test_the_swarm_follows_the_song(observed):
    _, seen, result = observed
    assert result.frames == 2 * FPS and not result.interrupted
    quiet = [s for s in seen if s["t"] < 1.0]
    loud = [s for s in seen if s["t"] >= 1.25]  # a quarter second for the swarm to speed up
    assert max(s["level"] for s in quiet) < 0.05 and min(s["level"] for s in loud) > 0.5
    quiet_speed = np.mean([s["speed"] for s in quiet])
    loud_speed = np.mean([s["speed"] for s in loud])
    assert loud_speed > 1.5 * quiet_speed, (quiet_speed, loud_speed)
    # The control track's knob turns at 1 s, on the frame at 1 s.
    # The track records no look of its own: the render opens on the start look.
    assert [s["agent_size"] for s in seen if s["t"] < 1.0] == [START["agent_size"]] * FPS
    assert all(s["agent_size"] == 1.2 for s in seen if s["t"] >= 1.0)


@pytest.mark.posix  # SIGINT sent to this process, as Ctrl+C does
def test_ctrl_c_leaves_a_playable_file(song, tmp_path, monkeypatch):
    """SIGINT during the fourth frame's simulation: the file holds the three frames before it,
    with their sound."""
    from swarm_instrument.show.show import Show

    path, _ = song
    out = tmp_path / "stopped.mp4"
    advance = Show.advance
    calls = []

    def advance_then_interrupt(self, dt):
        calls.append(dt)
        if len(calls) == 3 * 3 + 1:  # 3 substeps a frame at 12 fps
            os.kill(os.getpid(), signal.SIGINT)
        advance(self, dt)

    monkeypatch.setattr(Show, "advance", advance_then_interrupt)
    args = render_parser().parse_args(["--render", str(path), "--out", str(out), *SMALL])
    params, routes, *_ = instrument.build_params(args)
    with listening() as lines:
        assert run_render(args, params, routes) == 130
    assert any("stopped (Ctrl+C): 3 of 24 frames" in line for line in lines), lines
    info = video_info(out)
    assert info["video"]["frames"] == 3 and decode_frames(out).shape[0] == 3
    assert info["audio"]["duration"] == pytest.approx(3 / FPS, abs=1 / FPS)


def test_render_from_recorded_audio_alone(tmp_path):
    """`--render --control TRACK`: a set recorded without its sound renders from its audio
    features, for the track's length, with no audio stream."""
    track = tmp_path / "set.jsonl"
    lines = [json.dumps({"format": "swarm-control", "version": 1, "seed": 3, "count": 800,
                         "params": {"count": 800}})]
    for frame in range(60):
        lines.append(json.dumps({"t": frame / 60, "kind": "audio", "level": frame / 60,
                                 "low": 0.1, "mid": 0.2, "high": 0.3, "onset": 0.0}))
    lines.append(json.dumps({"t": 1.0, "kind": "end"}))
    track.write_text("\n".join(lines) + "\n")
    out = tmp_path / "set.mp4"
    code, said = run_cli("--render", "--control", str(track), "--out", str(out), "--fps",
                         str(FPS), "--size", SIZE)
    assert code == 0, said
    info = video_info(out)
    assert info["video"]["frames"] == FPS and "audio" not in info
    assert "800 agents" in said and "seed 3" in said


def test_a_midi_file_automates_the_render(song, tmp_path):
    import mido

    path, _ = song
    midi_path = tmp_path / "knob.mid"
    midi = mido.MidiFile(type=0, ticks_per_beat=480)
    midi.tracks.append(mido.MidiTrack([
        mido.MetaMessage("set_tempo", tempo=500000, time=0),  # 120 bpm: a beat is 0.5 s
        mido.Message("control_change", channel=0, control=76, value=127, time=480)]))
    midi.save(midi_path)
    args = render_parser().parse_args(["--render", str(path), "--out", str(tmp_path / "m.mp4"),
                                       "--control", str(midi_path), *SMALL, "--frames", "9"])
    params, routes, *_ = instrument.build_params(args)
    job, routes = plan_render(args, params, routes)
    speeds = []
    render(job, params, options_from_args(args, params, render=True), routes,
           observe=lambda show, index, t: speeds.append(show.params["max_speed"]),
           progress=Progress(job.frames, io.StringIO()))
    # CC 76 (max_speed, 1-40 exp in the shipped mapping) at 0.5 s: frame 6 at 12 fps.
    assert speeds == [START["max_speed"]] * 6 + [pytest.approx(40.0)] * 3  # the start look's


def test_a_compressed_song_is_read_through_ffmpeg(tmp_path):
    """Not only WAV: a FLAC file decodes through PyAV to the same samples."""
    tone = (0.5 * np.sin(2 * np.pi * 440 * np.arange(RATE // 2) / RATE)).astype(np.float32)
    path = tmp_path / "tone.flac"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("flac", rate=RATE, layout="mono")
        frame = av.AudioFrame.from_ndarray((tone * 32767).astype(np.int16)[None, :],
                                           format="s16", layout="mono")
        frame.sample_rate = RATE
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    samples, rate = load_song(path)
    assert rate == RATE and samples.shape == (RATE // 2, 1)
    np.testing.assert_allclose(samples[:, 0], tone, atol=1e-3)


@pytest.fixture
def no_gl(monkeypatch):
    """Bad input must be caught before the render starts: making a GL context fails the test."""
    from swarm_instrument.visual.gpu import context

    def refuse():
        raise AssertionError("a GL context was made before the input was checked")

    monkeypatch.setattr(context, "create_headless_context", refuse)


@pytest.mark.parametrize("case, expected", [
    ("text", r"text\.wav: not a WAV file"),
    ("mp3", r"noise\.mp3: not a sound file this can read"),
    ("missing", r"nothing\.wav: no such file"),
    ("folder", r"no-such-folder.*does not exist"),
    ("is-dir", r"is a folder"),
    ("avi", r"unknown video type '\.avi'"),
    ("odd", r"--size 161x90: .* even width and height; try --size 160x90"),
    ("codec", r"video codec 'nosuchcodec' is not in this FFmpeg build"),
    ("dt", r"--dt cannot be combined with --render"),
    ("same", r"is also an input"),
    ("no-song", r"--render needs a song"),
])
def test_bad_input_stops_before_rendering(song, tmp_path, no_gl, case, expected):
    path, _ = song
    (tmp_path / "text.wav").write_text("hello, not audio")
    (tmp_path / "noise.mp3").write_bytes(np.random.default_rng(0).bytes(4000))
    out = tmp_path / "out.mp4"
    song_arg, extra = str(path), []
    if case == "text":
        song_arg = str(tmp_path / "text.wav")
    elif case == "mp3":
        song_arg = str(tmp_path / "noise.mp3")
    elif case == "missing":
        song_arg = str(tmp_path / "nothing.wav")
    elif case == "folder":
        out = tmp_path / "no-such-folder" / "out.mp4"
    elif case == "is-dir":
        out = tmp_path
    elif case == "avi":
        out = tmp_path / "out.avi"
    elif case == "odd":
        extra = ["--size", "161x90"]
    elif case == "codec":
        extra = ["--codec", "nosuchcodec"]
    elif case == "dt":
        extra = ["--dt", "0.01"]
    elif case == "same":
        out = path.with_suffix(".mp4")
        song_arg = str(out)
    argv = ["--render", song_arg, "--out", str(out), "--fps", str(FPS), "--count", COUNT,
            *extra]
    if case == "no-song":
        argv = ["--render", "--out", str(out)]
    elif "--size" not in extra:
        argv += ["--size", SIZE]
    args = render_parser().parse_args(argv)
    params, routes, *_ = instrument.build_params(args)
    with pytest.raises(FileProblem, match=expected) as caught:
        run_render(args, params, routes)
    assert "\n" not in str(caught.value)
    if case not in ("is-dir", "same"):
        assert not out.exists()


def test_a_live_recorder_drops_frames_instead_of_waiting(tmp_path):
    """blocking=False: a full queue refuses the frame at once; the file still plays, the
    dropped frames shown as the previous one held."""
    out = tmp_path / "live.mp4"
    encoder = VideoEncoder(out, (320, 180), 30, blocking=False, queue_frames=1)
    image = np.zeros((180, 320, 3), np.uint8)
    accepted = 0
    for index in range(60):
        image[:, :, 0] = index * 4
        accepted += encoder.submit(image.copy(), index)
    stats = encoder.close()
    assert stats.dropped == 60 - accepted and stats.frames == accepted
    assert stats.dropped > 0, "the encoder kept up with 60 frames submitted at once"
    info = video_info(out)
    assert info["video"]["frames"] == accepted and "audio" not in info


def test_progress_line():
    stream = io.StringIO()
    progress = Progress(100, stream, plain_every=0.0)
    progress.started -= 10.0
    progress.update(25)
    line = stream.getvalue()
    assert "25/100 frames" in line and "25%" in line and "2.5 fps" in line
    assert "0:30 left" in line and "\r" not in line


def test_an_explicit_seed_overrides_the_tracks_even_zero(tmp_path):
    from types import SimpleNamespace

    from swarm_instrument.control.parameters.registry import Params
    from swarm_instrument.show.offline.render_job import _apply_track_start

    track = SimpleNamespace(header={"seed": 3}, path=tmp_path / "set.jsonl", start_params={},
                            routes=[])
    for given, expected in ((None, 3), (0, 0), (5, 5)):
        args = SimpleNamespace(seed=given, preset=None, resume=False, count=None)
        with listening() as said:
            _apply_track_start(track, args, Params(), [])
        assert args.seed == expected
        assert ("seed 3, as recorded in set.jsonl" in said) == (given is None)
