"""A recorded set played again: a live show with --audio-file (its autopilot on, a performer's
hands on it) recorded with --record-control, then `--render SONG --control TRACK`, draws the
set's own frames again, bit for bit, at the times they were played; the same record rendered
twice gives the same file, byte for byte."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from test_autopilot import LIVE_FORM
from test_form import RATE, song

from swarm_instrument import instrument
from swarm_instrument.audio.files.wav_writer import write_wav
from swarm_instrument.control.actions import Action
from swarm_instrument.control.tracks.control_track import ControlTrack
from swarm_instrument.show.cli import live_show
from swarm_instrument.show.cli.live_show import LiveShow
from swarm_instrument.show.cli.options import options_from_args
from swarm_instrument.show.loop import Offscreen, WallClock
from swarm_instrument.show.offline import offline_render
from swarm_instrument.show.offline.render_job import RenderProblem, plan_render
from swarm_instrument.show.offline.replay import video_slots
from swarm_instrument.show.supervision.supervisor import StopSignals

from conftest import run_instrument
from pictures import read_png

SIZE = ("--size", "96x54", "--count", "600", "--seed", "4")
FRAMES = 200  # of a jittery live clock: 12 s of the song, the autopilot's first change in it


class Hands:
    """A performer's control surface (show/inputs/input_poll.py reads it twice a frame, as
    it reads the control window): at the update of frame 20 a knob, of frame 40 more agents
    than the machine holds live; at the late read of frame 30 a burst, of frame 31 a
    selection (it changes nothing, but the frame's values are made again, as for any input
    that comes)."""

    def __init__(self) -> None:
        self.reads = 0

    def poll(self, values):
        frame, late = divmod(self.reads, 2)
        self.reads += 1
        if (frame, late) == (20, 0):
            return [Action("set", values={"max_speed": 11.5})]
        if (frame, late) == (40, 0):
            return [Action("set", values={"count": 900})]
        if (frame, late) == (30, 1):
            return [Action("separation_burst", 0.7)]
        if (frame, late) == (31, 1):
            return [Action("select", 1)]
        return []

    def publish(self, show, now):
        pass

    def state(self):
        return {}

    def close(self):
        pass


class Jittery:
    """A live clock whose frames come 30 to 90 ms apart (one or more steps each), with a 150 ms
    hitch now and then, and whose late read comes a few ms after each frame's update
    (show/loop.py WallClock)."""

    def __init__(self, seed: int = 1) -> None:
        self.rng = np.random.default_rng(seed)
        self.now, self.calls = 1000.0, 0

    def __call__(self) -> float:
        self.calls += 1
        if self.calls % 2:  # a frame's update
            gap = 0.15 if self.calls % 97 == 1 else float(self.rng.uniform(0.03, 0.09))
            self.now += gap if self.calls > 1 else 0.0
            return self.now
        return self.now + float(self.rng.uniform(0.002, 0.01))  # its late read


class Frames(Offscreen):
    """The live show's frame, kept each time one is drawn; between frames, keys and the
    wheel as the window hands them over (a respawn, the pointer's lure, a zoom)."""

    def __init__(self, show, size, live) -> None:
        super().__init__(show, size)
        self.live, self.kept, self.values = live, [], []

    def after(self, show, index) -> None:
        self.kept.append(self.pixels())
        self.values.append(dict(show.values))
        if index == 12:
            self.live.key("R", False, False)
        if index == 25:
            self.live.pointer(30.0, 20.0, 96, 54)
            self.live.scroll(2.0)


@pytest.fixture(scope="module")
def wav(tmp_path_factory):
    path = tmp_path_factory.mktemp("replay") / "song.wav"
    write_wav(path, song(LIVE_FORM)[:, None], RATE)
    return path


def test_an_autopilot_set_with_a_performers_hands_plays_again_bit_for_bit(ctx, wav, tmp_path,
                                                                          monkeypatch):
    """Issue 29: the record of an autopilot set played again bit for bit. Every frame of
    the live set (its jittery clock, the file played by it, the autopilot's looks, a knob,
    a late burst, keys between frames) against every frame its render draws."""
    track = tmp_path / "set.jsonl"
    args = instrument.build_parser().parse_args([
        "--headless", "--audio-file", str(wav), "--mute", "--autopilot", "--autopilot-resume",
        "2", "--no-midi", "--frames", str(FRAMES), "--record-control", str(track), *SIZE])
    params, routes, preset = instrument.build_params(args)
    monkeypatch.setattr(live_show, "check_machine", lambda *_: 700)  # a machine of 700 agents
    live = LiveShow(args, params, routes, preset, StopSignals())
    show = live.build(ctx, (96, 54))
    show.surfaces.append(Hands())
    live.loop.clock = WallClock(time_source=Jittery())
    sink = Frames(show, (96, 54), live)
    live.loop.run(sink, frames=FRAMES)
    looks = [show.autopilot.look]
    assert show.swarm.count == 700 and "capped at 700" in show.status["count"]
    live.finish(None)

    events = ControlTrack.load(track).events
    chosen = [e.get("look") for e in events if e.kind == "autopilot"]
    assert chosen and chosen[-1] == looks[0], "the autopilot changed no look in the set"
    assert {e.get("came") for e in events} >= {"between", "late"}
    assert {e.get("action") for e in events if e.kind == "action"} >= {
        "respawn", "lure", "zoom", "separation_burst"}

    out = tmp_path / "again.mp4"
    args = instrument.build_parser().parse_args([
        "--render", str(wav), "--control", str(track), "--out", str(out)])
    params, routes, _ = instrument.build_params(args)
    job, routes = plan_render(args, params, routes)
    drawn, values = [], []
    real_after = offline_render.VideoSink.after

    def keep(self, show, index):  # the render's frame, read back as the live one was
        drawn.append(self.offscreen.pixels())
        real_after(self, show, index)

    def observe(show, index, t):
        looks.append(show.autopilot.look)
        values.append(dict(show.values))

    monkeypatch.setattr(offline_render.VideoSink, "after", keep)
    options = options_from_args(args, params, render=True)
    result = offline_render.render(job, params, options, routes, ctx=ctx, observe=observe)
    assert job.size == (96, 54) and len(drawn) == len(sink.kept) == FRAMES
    differ = [k for k, (a, b) in enumerate(zip(sink.kept, drawn)) if a != b]
    assert not differ, f"frames {differ[:5]}... of {FRAMES} differ from the set's"
    differ = [k for k, (a, b) in enumerate(zip(sink.values, values)) if a != b]
    assert not differ, (f"the values of frames {differ[:5]}... differ from the set's", [
        (k, {n: (sink.values[k][n], values[k].get(n)) for n in sink.values[k]
             if sink.values[k][n] != values[k].get(n)}) for k in differ[:3]])
    assert np.frombuffer(drawn[-1], np.uint8).max() > 40, "nothing drawn"
    assert looks[-1] == looks[0]
    assert result.frames == job.slots(FRAMES - 1).stop  # a video covering the set at 60 fps


def test_the_video_shows_the_latest_frame_drawn_at_each_of_its_times():
    from swarm_instrument.control.tracks.track_frames import RecordedFrame

    frames = [RecordedFrame(now, 0.0, 1, now) for now in (50.0, 50.01, 50.02, 50.1, 50.13)]
    # video frames at 0, 1/30, 2/30, 3/30, 4/30 s: the set's frames 0, 2, 2, 3 (at 0.1 s
    # exactly), 4; frame 1 was drawn and replaced before the video's next frame
    assert video_slots(frames, 30.0) == [range(0, 1), range(1, 1), range(1, 3), range(3, 4),
                                         range(4, 5)]
    assert video_slots(frames, 30.0, limit=2) == [range(0, 1), range(1, 1), range(1, 2)]
    assert video_slots([], 30.0) == []


def test_a_live_set_recorded_then_rendered_is_the_same_set(wav, tmp_path):
    """As a user plays it: a live show (headless) playing a sound file with its autopilot,
    recorded; then the render of the record with the same file. The last frame, the swarm's
    state and the last telemetry record are the live set's; rendered twice, the same bytes."""
    track = tmp_path / "set.jsonl"
    files = {name: (tmp_path / f"{name}.png", tmp_path / f"{name}.npz",
                    tmp_path / f"{name}.jsonl") for name in ("live", "again")}

    def outputs(name):
        png, state, telemetry = files[name]
        return ("--screenshot", str(png), "--state-out", str(state), "--telemetry",
                str(telemetry))

    played = run_instrument("--headless", "--audio-file", str(wav), "--autopilot", "--no-midi",
                            "--no-supervisor", "--frames", "40", *SIZE, "--record-control",
                            str(track), *outputs("live"))
    assert played.returncode == 0, played.stderr
    again = run_instrument("--render", str(wav), "--control", str(track), "--out",
                           str(tmp_path / "a.mp4"), *outputs("again"))
    assert again.returncode == 0, again.stderr
    assert "render: set.jsonl's own 40 frames" in again.stdout
    first, second = read_png(files["live"][0]), read_png(files["again"][0])
    assert (first.max(axis=2) > 40).mean() > 0.01, "nothing drawn"
    assert (first == second).all(), f"{(first != second).any(axis=2).mean():.2%} differ"
    for key in ("position", "velocity"):
        assert np.array_equal(np.load(files["live"][1])[key], np.load(files["again"][1])[key])
    records = [json.loads(path.read_text().splitlines()[-1])
               for path in (files["live"][2], files["again"][2])]
    for key in ("frame", "params", "modulated", "speed_scale", "visible", "lure", "tempo",
                "agents", "frame_size"):
        assert records[0][key] == records[1][key], key
    for key in ("rms", "level", "bands", "onsets"):
        assert records[0]["audio"][key] == records[1]["audio"][key], key

    twice = run_instrument("--render", str(wav), "--control", str(track), "--out",
                           str(tmp_path / "b.mp4"))
    assert twice.returncode == 0, twice.stderr
    assert (tmp_path / "a.mp4").read_bytes() == (tmp_path / "b.mp4").read_bytes()


def write_set(path, wav, frames: int = 30, **header) -> None:
    """A recorded set by hand: `frames` frames 1/30 s apart from t = 500 s of the loop's
    clock, the file played by them, 96x54."""
    lines = [{"format": "swarm-control", "version": 1, "rate": float(RATE), "seed": 4,
              "count": 600, "audio_file": str(wav), **header}]
    for k in range(frames):
        lines.append({"t": k / 30, "kind": "audio", "level": 0.5, "heard": k * RATE // 30})
        lines.append({"t": (k + 1) / 30, "kind": "frame", "now": 500 + k / 30, "dt": 1 / 30,
                      "steps": 1, "late": 500 + k / 30 + 0.004,
                      **({"size": [96, 54]} if k == 0 else {})})
    lines.append({"t": frames / 30, "kind": "end"})
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")


def plan(*argv):
    args = instrument.build_parser().parse_args(["--out", "/nonexistent/x.mp4", *argv])
    params, routes, _ = instrument.build_params(args)
    return plan_render(args, params, routes)[0]


def test_a_recorded_sets_render_is_planned_on_its_own_frames_unless_retimed(wav, tmp_path,
                                                                           caplog):
    track = tmp_path / "set.jsonl"
    write_set(track, wav)
    caplog.set_level(logging.INFO)
    out = ("--out", str(tmp_path / "v.mp4"))
    job = plan("--render", str(wav), "--control", str(track), *out)
    assert job.replay is not None and job.frames == 30 and job.size == (96, 54)
    assert job.video_frames == 59 and job.time_of(3) == pytest.approx(0.1)  # at 60 fps
    retimed = plan("--render", str(wav), "--control", str(track), "--retime", "--fps", "30",
                   "--size", "320x180", *out)
    assert retimed.replay is None and retimed.frames == round(len(song(LIVE_FORM)) / RATE * 30)
    assert retimed.size == (320, 180) and retimed.time_of(3) == pytest.approx(0.1)

    other = tmp_path / "other.wav"
    write_wav(other, song([("groove", 1)])[:, None], RATE)
    plan("--render", str(other), "--control", str(track), *out)
    assert f"{other}: the set played song.wav (16000 Hz): its frames follow this file" in \
        caplog.text
    with pytest.raises(RenderProblem, match="--autopilot: .*set.jsonl is a set that plays its "
                                            "own looks again"):
        plan("--render", str(wav), "--control", str(track), "--autopilot", *out)
    with pytest.raises(RenderProblem, match="--retime renders a recorded set"):
        plan("--render", str(wav), "--retime", *out)


def test_on_the_videos_frames_a_recorded_action_is_not_quantised_again(ctx, wav, tmp_path):
    """A respawn recorded with `quantize` on was carried out on its beat live: played on the
    video's frames (--retime) it happens at its time, not at the next bar again."""
    track = tmp_path / "set.jsonl"
    write_set(track, wav, frames=12, params={"quantize": "bar", "count": 600})
    lines = track.read_text().splitlines()
    lines.insert(8, json.dumps({"t": 0.1, "kind": "action", "action": "respawn"}))
    track.write_text("\n".join(lines) + "\n")
    args = instrument.build_parser().parse_args([
        "--render", str(wav), "--control", str(track), "--retime", "--fps", "30", "--frames",
        "8", "--size", "96x54", "--out", str(tmp_path / "v.mp4")])
    params, routes, _ = instrument.build_params(args)
    job, routes = plan_render(args, params, routes)
    respawns = []
    offline_render.render(job, params, options_from_args(args, params, render=True), routes,
                          ctx=ctx, observe=lambda show, index, t: respawns.append(show.respawns))
    assert params["quantize"] == "bar" and respawns == [0, 0, 0, 1, 1, 1, 1, 1]
