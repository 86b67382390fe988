"""Control tracks without a GPU: recording a set (never on the frame's time), reading it back,
playback queries, bad files named by line, MIDI files through the mapping."""

from __future__ import annotations

import json
import math
import threading
import time
from types import SimpleNamespace

import pytest

import swarm_instrument.control.tracks.track_recorder as control_track
from swarm_instrument.audio.analysis.features import AudioFeatures, Bands
from swarm_instrument.audio.files.recorded import RecordedAudio
from swarm_instrument.control.midi.controller import MidiController
from swarm_instrument.control.midi.midi_in import DEFAULT_MAPPING, Midi
from swarm_instrument.control.parameters.modulation import Route
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.control.tracks.control_track import ControlTrack
from swarm_instrument.control.tracks.midi_track import MidiFileSource
from swarm_instrument.control.tracks.track_events import ControlTrackError
from swarm_instrument.control.tracks.track_recorder import ControlRecorder


def features(level: float, onset: bool = False) -> AudioFeatures:
    return AudioFeatures(level=level, bands=Bands(level / 2, level / 3, level / 4), onset=onset,
                         onset_envelope=1.0 if onset else 0.0)


def record_a_set(path, frames: int = 30, fps: float = 60.0) -> Params:
    """Half a second of a set: the level rises, a knob turns at frame 10, a preset at 20."""
    params = Params({"count": 500})
    recorder = ControlRecorder(path, params=params, seed=7, rate=44100.0,
                               routes=[Route("onset", "separation_weight", 2.0)])
    for frame in range(frames):
        t = frame / fps
        if frame == 10:
            params["max_speed"] = 12.0
        if frame == 20:
            params.update({"trail": 0.5, "cohesion_weight": 2.0})
            recorder.record_preset(t, "calm.json", {"trail": 0.5, "cohesion_weight": 2.0})
        if frame == 25:
            recorder.record_action(t, "respawn", 100)
            recorder.record_action(t, "learned")  # changes nothing to render: skipped
        recorder.record_audio(t, features(frame / frames, onset=frame in (5, 15)))
        recorder.record_params(t, params)
    recorder.close()
    assert recorder.error is None
    return params


def test_a_recorded_set_reads_back(tmp_path):
    path = tmp_path / "set.jsonl"
    record_a_set(path)
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["format"] == "swarm-control" and header["version"] == 1
    assert header["seed"] == 7 and header["count"] == 500 and header["rate"] == 44100.0
    assert header["routes"] == [{"source": "onset", "param": "separation_weight", "amount": 2.0}]

    track = ControlTrack.load(path)
    kinds = [e.kind for e in track.events]
    assert kinds.count("audio") == 30
    assert kinds.count("preset") == 1 and kinds.count("action") == 1
    # The knob's change is one param event; the preset's values are in the preset event only.
    params = [e for e in track.events if e.kind == "param"]
    assert [(e.get("name"), e.get("value")) for e in params] == [("max_speed", 12.0)]
    assert track.duration == pytest.approx(29 / 60)
    assert [r.param for r in track.routes] == ["separation_weight"]

    assert track.values_at(0.1)["max_speed"] == 8.0
    assert track.values_at(10 / 60)["max_speed"] == 12.0
    later = track.values_at(1.0)
    assert later["trail"] == 0.5 and later["cohesion_weight"] == 2.0 and later["count"] == 500

    # Stepping through frames at another rate hands each event out exactly once.
    seen, previous = [], -math.inf
    for frame in range(13):
        t = frame / 24
        seen += track.events_between(previous, t)
        previous = t
    assert seen == track.events

    assert track.audio_at(-0.01) is None
    held = track.audio_at(0.2)  # between events: the latest one before holds
    assert held.t == pytest.approx(12 / 60) and held.get("level") == pytest.approx(12 / 30)


def test_recorded_audio_plays_back_the_features(tmp_path):
    path = tmp_path / "set.jsonl"
    record_a_set(path)
    audio = RecordedAudio(ControlTrack.load(path))
    assert audio.update(-0.5).level == 0.0 and not audio.has_data
    first = audio.update(6 / 60)
    assert first.level == pytest.approx(6 / 30) and first.onset and first.onsets == 1
    assert first.bands.low == pytest.approx(3 / 30, abs=1e-4)
    assert audio.sources()["level"] == pytest.approx(6 / 30)
    assert not audio.update(7 / 60).onset
    assert audio.update(1.0).onsets == 2 and audio.has_data


def test_capture_records_what_changed(tmp_path):
    """`capture(show, t)` once a frame: audio always, parameters and routes only on change."""
    params = Params()
    show = SimpleNamespace(params=params, routes=[], audio=SimpleNamespace(
        features=features(0.25)))
    recorder = ControlRecorder(tmp_path / "set.jsonl", params=params)
    recorder.capture(show, 0.0)
    params["trail"] = 0.9
    show.routes = [Route("low", "cohesion_weight", 1.5)]
    recorder.capture(show, 0.5)
    recorder.capture(show, 1.0)
    recorder.close()
    track = ControlTrack.load(tmp_path / "set.jsonl")
    assert [(e.t, e.kind) for e in track.events] == [
        (0.0, "audio"), (0.5, "audio"), (0.5, "param"), (0.5, "preset"), (1.0, "audio"),
        (1.0, "end")]
    assert track.events[3].get("routes") == [
        {"source": "low", "param": "cohesion_weight", "amount": 1.5}]
    assert track.values_at(0.5)["trail"] == 0.9 and track.values_at(0.4)["trail"] == 0.0


class FrameShow:
    """What the recorder reads of a show around a frame (show/loop.py calls it)."""

    def __init__(self, params: Params) -> None:
        self.params, self.routes, self.show_time, self.now = params, [], 0.0, 0.0
        self.audio = SimpleNamespace(features=features(0.5), ring=SimpleNamespace(written=0))
        self.governor = SimpleNamespace(level={"render_scale": 0, "post": 0, "count": 0})
        self.renderer = SimpleNamespace(last_size=(160, 90))
        self.values: dict = {}


def test_each_frame_is_recorded_with_its_clock_and_where_each_input_came_in(tmp_path):
    """The loop's calls around a frame: a frame event with its clock (now, dt, steps, the late
    read's time), the samples the file had played, the governor's lowered levers and the
    size when they change; each input is that frame's, said to have come between frames, at
    the update (unsaid) or at the late read; the track reads them back frame by frame."""
    path, params = tmp_path / "set.jsonl", Params()
    show = FrameShow(params)
    recorder = ControlRecorder(path, params=params)
    for frame in range(3):
        now = 100.0 + frame * 0.02
        recorder.begin_frame(show, SimpleNamespace(now=now, dt=0.01, steps=2))  # a key's
        show.now = now
        show.audio.ring.written = 320 * frame
        if frame == 1:
            recorder.record_action(show.show_time, "lure", None, {"point": (1.0, 2.0, 3.0)})
            recorder.record_autopilot(show.show_time, "drop", "lure-rush")
        recorder.capture(show, show.show_time)
        show.show_time += 0.02
        recorder.latching(show)
        show.now = now + 0.015
        if frame == 1:  # a knob turned while the swarm stepped: the frame's values made again
            params["max_speed"] = 11.0
            show.values = {"max_speed": 11.0}
            show.governor.level["render_scale"] = 2
        recorder.end_frame(show)
        if frame == 1:  # a key after the draw: the next frame's, come between
            recorder.record_action(show.show_time, "respawn")
            params["trail"] = 0.5
            recorder.record_action(show.show_time, "zoom", 0.9)
    recorder.close(show.show_time)
    lines = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    frames = [line for line in lines if line["kind"] == "frame"]
    assert [(f["now"], f["dt"], f["steps"], f["late"]) for f in frames] == [
        (100.0 + k * 0.02, 0.01, 2, 100.0 + k * 0.02 + 0.015) for k in range(3)]
    assert [f.get("size") for f in frames] == [[160, 90], None, None]
    assert [f.get("governor") for f in frames] == [None, {"render_scale": 2},
                                                     {"render_scale": 2}]
    assert [f.get("latched", False) for f in frames] == [False, True, False]
    assert [line["heard"] for line in lines if line["kind"] == "audio"] == [0, 320, 640]

    times = [line["t"] for line in lines]
    assert times == sorted(times), "the file's order is its time order"
    assert {line.get("came") for line in lines} == {None, "between", "late"}
    track = ControlTrack.load(path)
    first, second, third = track.frames
    assert (second.now, second.dt, second.steps, second.late, second.heard) == (
        100.02, 0.01, 2, 100.035, 320)
    assert third.size == (160, 90) and second.governor == {"render_scale": 2}
    assert [(e.kind, e.get("action") or e.get("look")) for e in second.update] == [
        ("action", "lure"), ("autopilot", "lure-rush")]
    assert second.update[0].get("point") == [1.0, 2.0, 3.0]
    assert [(e.get("name"), e.get("value")) for e in second.late_events] == [
        ("max_speed", 11.0)]
    assert [(e.kind, e.get("action") or e.get("name")) for e in third.between] == [
        ("action", "respawn"), ("action", "zoom"), ("param", "trail")]
    assert not first.between and not first.late_events and not third.update


def test_the_tracks_governor_levers_are_the_governors():
    from swarm_instrument.control.tracks.control_track import LEVERS
    from swarm_instrument.show.governor import LEVERS as GOVERNOR_LEVERS

    assert LEVERS == GOVERNOR_LEVERS


def test_recording_never_waits_for_the_disk(tmp_path, monkeypatch):
    """The frame loop's calls only queue: with the writer stuck, a thousand frames of events
    are recorded while no write has ended (so none was waited for), at little CPU cost;
    everything reaches the file after close."""
    gate = threading.Event()
    real_dumps = json.dumps
    written = []

    def stuck_dumps(*args, **kwargs):
        gate.wait(60)
        written.append(True)
        return real_dumps(*args, **kwargs)

    monkeypatch.setattr(control_track.json, "dumps", stuck_dumps)
    params = Params()
    recorder = ControlRecorder(tmp_path / "slow.jsonl", params=params)
    started = time.thread_time()
    for frame in range(1000):
        recorder.record_audio(frame / 60, features(0.5))
        params["max_speed"] = 8.0 + (frame % 2)
        recorder.record_params(frame / 60, params)
    elapsed = time.thread_time() - started
    assert not written, "the frame loop waited for a write to the disk"
    assert elapsed < 0.5, f"recording 1000 frames took {elapsed:.3f} s of CPU on the frame thread"
    gate.set()
    recorder.close()
    monkeypatch.undo()
    track = ControlTrack.load(tmp_path / "slow.jsonl")
    assert sum(e.kind == "audio" for e in track.events) == 1000
    assert sum(e.kind == "param" for e in track.events) == 999  # the first frame changed none


def test_an_unwritable_track_is_named(tmp_path):
    with pytest.raises(ControlTrackError, match="no-such-folder"):
        ControlRecorder(tmp_path / "no-such-folder" / "set.jsonl", params=Params())
    with pytest.raises(ControlTrackError, match="is a folder"):
        ControlRecorder(tmp_path, params=Params())


HEADER = '{"format": "swarm-control", "version": 1, "seed": 0, "count": 100}'


@pytest.mark.parametrize("lines, expected", [
    (["not json"], r"set\.jsonl:1: not valid JSON"),
    (['{"format": "something-else"}'], r"set\.jsonl:1: not a control track"),
    (['{"format": "swarm-control", "version": 9}'], "version 9 is not supported"),
    ([HEADER, '{"t": 1, "kind": "param", "name": "max_speed", "value": 1}', "{oops"],
     r"set\.jsonl:3: not valid JSON"),
    ([HEADER, '{"t": 1, "kind": "param", "name": "warp_factor", "value": 1}'],
     r"set\.jsonl:2: unknown parameter 'warp_factor'"),
    ([HEADER, '{"t": 1, "kind": "param", "name": "max_speed", "value": -5}'],
     r"set\.jsonl:2: 'max_speed' = -5.0 is out of range"),
    ([HEADER, '{"t": -1, "kind": "audio", "level": 0.5}'], r"set\.jsonl:2: \"t\" must be"),
    ([HEADER, '{"t": 1, "kind": "audio", "level": 7}'], r"set\.jsonl:2: audio \"level\""),
    ([HEADER, '{"t": 1, "kind": "dance"}'], r"set\.jsonl:2: \"kind\" must be one of"),
    ([HEADER, '{"t": 1, "kind": "midi", "data": [300]}'], r"set\.jsonl:2: midi \"data\""),
    ([HEADER, '{"t": 1, "kind": "preset", "params": {"trail": 5}}'], r"set\.jsonl:2: .*trail"),
    ([HEADER, '{"t": 1, "kind": "frame", "now": 5, "dt": 0.01, "steps": 0, "late": 5}'],
     r"set\.jsonl:2: frame \"steps\" must be a whole number"),
    ([HEADER, '{"t": 1, "kind": "frame", "now": "x", "dt": 0.01, "steps": 1, "late": 5}'],
     r"set\.jsonl:2: frame \"now\" must be a time"),
    ([HEADER, '{"t": 1, "kind": "frame", "now": 5, "dt": 0, "steps": 1, "late": 5, '
              '"governor": {"warp": 1}}'], r"set\.jsonl:2: frame \"governor\" must map"),
    ([HEADER, '{"t": 1, "kind": "frame", "now": 5, "dt": 0, "steps": 1, "late": 5, '
              '"size": [0, 90]}'], r"set\.jsonl:2: frame \"size\" must be \[width, height\]"),
    ([HEADER, '{"t": 1, "kind": "action", "action": "respawn", "came": "soon"}'],
     r"set\.jsonl:2: \"came\" must be one of between, advance, late"),
    ([HEADER, '{"t": 1, "kind": "action", "action": "lure", "point": [1, 2]}'],
     r"set\.jsonl:2: lure \"point\" must be \[x, y, z\]"),
    ([HEADER, '{"t": 1, "kind": "action", "action": "zoom", "value": 0}'],
     r"set\.jsonl:2: zoom \"value\" must be a factor above 0"),
    ([HEADER, '{"t": 1, "kind": "audio", "level": 0.5, "heard": -3}'],
     r"set\.jsonl:2: audio \"heard\" must be a count of samples"),
    (['{"format": "swarm-control", "version": 1, "rate": "fast"}'],
     r"set\.jsonl:1: \"rate\" must be the audio's sample rate"),
    ([], r"set\.jsonl: empty"),
])
def test_bad_tracks_are_named_by_line(tmp_path, lines, expected):
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ControlTrackError, match=expected):
        ControlTrack.load(path)


def test_missing_and_binary_tracks(tmp_path):
    with pytest.raises(ControlTrackError, match="no such file"):
        ControlTrack.load(tmp_path / "nothing.jsonl")
    binary = tmp_path / "noise.jsonl"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(ControlTrackError, match="not a control track"):
        ControlTrack.load(binary)


def test_a_broken_midi_file_is_named(tmp_path):
    broken = tmp_path / "broken.mid"
    broken.write_bytes(b"MThd\x00\x00")
    with pytest.raises(ControlTrackError, match=r"broken\.mid: not a readable Standard MIDI"):
        ControlTrack.load(broken)


def write_midi_file(path) -> None:
    """120 bpm, then 60 bpm from beat 2: CC 76 (max_speed) at 0.5 s, note 36 (respawn) at
    1.0 s, CC 76 again at 2.0 s (one beat at 60 bpm after the tempo change)."""
    import mido  # a declared dependency: missing, the test fails

    midi = mido.MidiFile(type=1, ticks_per_beat=480)
    track = mido.MidiTrack()
    midi.tracks.append(track)
    track.append(mido.MetaMessage("set_tempo", tempo=500000, time=0))
    track.append(mido.Message("control_change", channel=0, control=76, value=127, time=480))
    track.append(mido.Message("note_on", channel=9, note=36, velocity=100, time=480))
    track.append(mido.MetaMessage("set_tempo", tempo=1000000, time=0))
    track.append(mido.Message("note_off", channel=9, note=36, velocity=0, time=0))
    track.append(mido.Message("control_change", channel=0, control=76, value=0, time=480))
    midi.save(path)


def test_a_midi_file_drives_the_mapping_at_song_time(tmp_path):
    path = tmp_path / "automation.mid"
    write_midi_file(path)
    track = ControlTrack.load(path)
    assert track.from_midi_file
    times = [round(t, 6) for t, _ in track.midi_messages()]
    assert times == [0.5, 1.0, 1.0, 2.0]
    assert track.midi_messages()[0][1] == bytes([0xB0, 76, 127])

    params = Params()
    midi = Midi(params, MidiFileSource(track.midi_messages()), mapping_path=DEFAULT_MAPPING,
                save_path=None, report=lambda text: None)
    midi.controller = MidiController(params, midi.controller.mapping, armed=False)
    assert midi.update(0.49) == [] and params["max_speed"] == 8.0
    assert midi.update(0.5) == [] and params["max_speed"] == pytest.approx(40.0)
    actions = midi.update(1.5)
    assert [a.kind for a in actions] == ["respawn"]
    midi.update(2.0)
    assert params["max_speed"] == pytest.approx(1.0)
    assert "4/4 messages" in midi.state()["state"]
