"""The autopilot (show/autopilot/): looks chosen by the song's sections from tagged presets, a
morph over a build, a cut with a burst on a drop's downbeat, never the same look twice in a
row, the same choices for the same song and seed; tags read and refused when damaged; the
render through the command line with its telemetry; a recorded track's autopilot events; live:
the looks a bar after each section, the performer's hand holding it off, the switch."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import numpy as np
import pytest
from test_form import BEAT, RATE, song

from swarm_instrument.audio.analysis.beat_feed import FileBeatFeed
from swarm_instrument.audio.analysis.beats import BeatTracker
from swarm_instrument.audio.base import OfflineAudio
from swarm_instrument.audio.files.wav_writer import write_wav
from swarm_instrument.control.actions import Action
from swarm_instrument.control.looks.preset_bank import BUNDLED_DIR, preset_files
from swarm_instrument.control.looks.presets import (
    TAGS,
    Preset,
    PresetError,
    load_preset,
    parse_preset,
)
from swarm_instrument.control.midi.controller import MidiController
from swarm_instrument.control.midi.mapping_file import mapping_from_json
from swarm_instrument.control.osc.osc_input import OscError, interpret
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.control.tracks.control_track import ControlTrack, ControlTrackError
from swarm_instrument.control.tracks.track_recorder import ControlRecorder
from swarm_instrument.show.autopilot.autopilot import Autopilot, autopilot_looks
from swarm_instrument.show.autopilot.choreography import Cue, Look, plan
from swarm_instrument.show.autopilot.live_autopilot import LiveAutopilot
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.inputs.keys import key_action
from swarm_instrument.show.report import autopilot_line, hud_lines
from swarm_instrument.show.show import Show
from swarm_instrument.visual.output.video_files import decode_frames

from conftest import ROOT

LOOKS = [Look("still", ("calm",)), Look("mist", ("calm",)), Look("walk", ("groove",)),
         Look("run", ("groove",)), Look("rise", ("build",)), Look("spiral", ("build",)),
         Look("blast", ("peak",)), Look("storm", ("peak",))]
SECTIONS = [(0.0, 16.0, "intro"), (16.0, 32.0, "groove"), (32.0, 48.0, "build"),
            (48.0, 64.0, "drop"), (64.0, 72.0, "break"), (72.0, 88.0, "drop"),
            (88.0, 96.0, "drop"), (96.0, 104.0, "outro")]
WANTED = {"intro": "calm", "break": "calm", "outro": "calm", "groove": "groove",
          "build": "build", "drop": "peak"}


# ---- tags ---------------------------------------------------------------------------------

def test_tags_are_read_and_written():
    preset = parse_preset({"name": "x", "tags": ["calm", "build"]}, "x.json")
    assert preset.tags == ("calm", "build")
    assert parse_preset({"name": "x"}, "x.json").tags == ()


@pytest.mark.parametrize("tags, said", [
    ("calm", r"x.json: 'tags' must be a list of words from calm, groove, build, peak, got "
             r"'calm'"),
    (["calm", 3], r"'tags' must be a list of words"),
    (["pek"], r"x.json: tags: unknown tag 'pek' \(did you mean 'peak'\?\); a look's tags are"),
    (["calm", "calm"], r"names a tag twice"),
])
def test_damaged_tags_are_refused_in_one_line_naming_the_file(tags, said):
    with pytest.raises(PresetError, match=said) as caught:
        parse_preset({"name": "x", "tags": tags}, "x.json")
    assert "\n" not in str(caught.value)


def test_every_bundled_look_is_tagged_and_every_tag_has_two_looks():
    presets = [load_preset(path) for path in preset_files(BUNDLED_DIR)]
    assert all(p.tags for p in presets), [p.name for p in presets if not p.tags]
    for tag in TAGS:
        assert sum(tag in p.tags for p in presets) >= 2, tag  # never the same twice in a row


def test_a_damaged_user_preset_is_left_out_with_one_line(tmp_path, caplog):
    (tmp_path / "slot-1.json").write_text(json.dumps({"name": "mine", "tags": ["peek"]}))
    (tmp_path / "slot-2.json").write_text(json.dumps({"name": "ours", "tags": ["peak"]}))
    (tmp_path / "slot-3.json").write_text(json.dumps({"name": "plain"}))  # untagged: not chosen
    with caplog.at_level(logging.INFO):
        presets = autopilot_looks([BUNDLED_DIR, tmp_path])
    names = [p.name for p in presets]
    assert "ours" in names and "mine" not in names and "plain" not in names
    said = [r.getMessage() for r in caplog.records if "slot-1.json" in r.getMessage()]
    assert len(said) == 1 and "unknown tag 'peek'" in said[0] and "left out" in said[0]


# ---- choices ------------------------------------------------------------------------------

def test_each_section_gets_a_look_of_its_kind_never_the_same_twice_in_a_row():
    for seed in range(20):
        cues = plan(SECTIONS, LOOKS, seed, bar_seconds=2.0)
        tags = {look.name: look.tags for look in LOOKS}
        assert [c.section for c in cues] == [label for *_, label in SECTIONS]
        assert all(WANTED[c.section] in tags[c.look] for c in cues)
        assert all(a.look != b.look for a, b in zip(cues, cues[1:]))


def test_a_build_morphs_over_itself_a_drop_cuts_with_a_burst():
    cues = {c.section: c for c in plan(SECTIONS[:4], LOOKS, 0, bar_seconds=2.0)}
    assert cues["build"].morph == 16.0 and not cues["build"].burst
    assert cues["drop"].morph == 0.0 and cues["drop"].burst and cues["drop"].t == 48.0
    assert cues["intro"].morph == 4.0 and cues["groove"].morph == 2.0


def test_the_same_seed_chooses_the_same_looks_another_seed_others():
    first = plan(SECTIONS, LOOKS, 7, 2.0)
    assert plan(SECTIONS, LOOKS, 7, 2.0) == first
    assert any(plan(SECTIONS, LOOKS, seed, 2.0) != first for seed in range(8, 12))


class FakeLooks:
    def __init__(self):
        self.went = []
        self.morph, self.kept, self.evolving = None, frozenset(), set()

    def go_to(self, preset, seconds, now):
        self.went.append((preset.name, seconds, now))


class FakeShow:
    def __init__(self):
        self.looks, self.acts, self.show_time, self.recorder = FakeLooks(), [], 0.0, None
        self.params = Params()

    def act(self, action):
        self.acts.append((action.kind, action.value))


def test_cues_play_on_the_frame_at_or_after_their_time():
    presets = [Preset(name, {}) for name in ("a", "b")]
    pilot = Autopilot([Cue(0.0, "intro", "a", 4.0, False), Cue(8.0, "drop", "b", 0.0, True)],
                      presets, bar_seconds=2.0)
    show = FakeShow()
    for now in np.arange(0.0, 9.0, 1 / 30):
        show.show_time = float(now)
        pilot.update(show, float(now))
    assert [name for name, *_ in show.looks.went] == ["a", "b"]
    assert show.looks.went[1][1] == 0.0 and 8.0 <= show.looks.went[1][2] < 8.0 + 1 / 30
    assert show.acts == [("separation_burst", 1.0)]
    state = pilot.telemetry(9.0)
    assert state["section"] == "drop" and state["look"] == "b" and state["next"] is None
    # a render's: on the frame nearest the cue, half a frame early at most
    nearest = Autopilot([Cue(8.01, "drop", "b", 0.0, True)], presets, frame_s=1 / 30)
    show = FakeShow()
    for frame in range(270):
        show.show_time = frame / 30
        nearest.update(show, frame / 30)
    assert show.looks.went[0][2] == 240 / 30  # 10 ms early, where the next frame was 23 late
    assert state["phrase"] == {"bar": 1, "beat": 3.0} and state["control"] == "autopilot"


# ---- the record ---------------------------------------------------------------------------

def test_autopilot_events_are_recorded_and_read_back(tmp_path):
    path = tmp_path / "set.jsonl"
    recorder = ControlRecorder(path, params=Params())
    recorder.record_autopilot(15.0, "drop", "lure-rush")
    recorder.close(20.0)
    events = [e for e in ControlTrack.load(path).events if e.kind == "autopilot"]
    assert [(e.t, e.get("section"), e.get("look")) for e in events] == [
        (15.0, "drop", "lure-rush")]
    lines = path.read_text().splitlines()
    bad = [json.loads(lines[0]), {"t": 1.0, "kind": "autopilot", "section": "chorus",
                                  "look": "x"}]
    path.write_text("\n".join(json.dumps(x) for x in bad) + "\n")
    with pytest.raises(ControlTrackError, match="autopilot \"section\" must be one of intro"):
        ControlTrack.load(path)


# ---- the render ---------------------------------------------------------------------------

FORM = [("pad", 4), ("groove", 4), ("drop", 4)]
SMALL = ("--fps", "8", "--size", "160x90", "--count", "1500", "--seed", "3")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """The same song rendered twice with --autopilot through the command line."""
    folder = tmp_path_factory.mktemp("autopilot")
    wav = folder / "song.wav"
    write_wav(wav, song(FORM)[:, None], RATE)
    outs = []
    for name in ("a", "b"):
        out = folder / f"{name}.mp4"
        result = subprocess.run(
            [sys.executable, str(ROOT / "instrument.py"), "--render", str(wav), "--autopilot",
             "--out", str(out), "--telemetry", str(folder / f"{name}.jsonl"), *SMALL],
            capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
        outs.append((out, folder / f"{name}.jsonl", result.stdout + result.stderr))
    return outs


@pytest.mark.slow  # the command renders a song, twice
def test_a_render_follows_the_songs_sections(rendered):
    _, telemetry, said = rendered[0]
    records = [json.loads(line) for line in telemetry.read_text().splitlines()]
    bar = 4 * BEAT
    sections = {r["autopilot"]["section"] for r in records if r["song_time"] < 4 * bar - 0.5}
    assert sections == {"intro"}
    groove = [r for r in records if 4 * bar + 0.5 < r["song_time"] < 8 * bar]
    drop = [r for r in records if r["song_time"] > 8 * bar + 0.5]
    assert {r["autopilot"]["section"] for r in groove} == {"groove"}
    assert {r["autopilot"]["section"] for r in drop} == {"drop"}
    looks = [records[0]["autopilot"]["look"], groove[0]["autopilot"]["look"],
             drop[0]["autopilot"]["look"]]
    assert len(set(looks)) == 3 and drop[0]["preset"]["name"] == looks[2]
    assert abs(groove[0]["autopilot"]["section_start"] - 4 * bar) < 0.03
    assert "autopilot: drop at" in said and "(cut, burst)" in said
    # inside the drop the look moves (evolution.py): the camera and the hue drift, the look
    # as chosen, not "modified"
    for name in ("camera_distance", "hue_shift"):
        assert len({r["params"][name] for r in drop}) >= 3, name
    assert not any(r["preset"]["modified"] for r in records)


@pytest.mark.slow  # the command renders a song, twice (the fixture)
def test_the_same_song_and_seed_give_the_same_video(rendered):
    a, b = decode_frames(rendered[0][0]), decode_frames(rendered[1][0])
    assert a.shape == b.shape and a.max() > 40
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    same = [json.loads(line)["autopilot"] for line in rendered[0][1].read_text().splitlines()]
    assert same == [json.loads(line)["autopilot"]
                    for line in rendered[1][1].read_text().splitlines()]


def test_a_live_show_starts_its_autopilot_and_says_how_to_switch_it(tmp_path):
    wav = tmp_path / "song.wav"
    write_wav(wav, song([("pad", 2)])[:, None], RATE)
    result = subprocess.run(
        [sys.executable, str(ROOT / "instrument.py"), "--audio-file", str(wav), "--headless",
         "--autopilot", "--frames", "30", "--size", "160x90", "--count", "1500", "--no-midi",
         "--no-supervisor", "--telemetry", str(tmp_path / "t.jsonl")],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    said = result.stdout + result.stderr
    assert result.returncode == 0, said
    assert "autopilot: on, 12 looks; A or /swarm/autopilot switches it off and on" in said
    last = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[-1])["autopilot"]
    assert last["on"] is True and last["control"] == "autopilot" and last["section"] == "intro"


def test_a_file_feed_hands_its_listeners_every_sample_the_tracker_gets():
    samples = song([("groove", 1)])
    heard = []
    feed = FileBeatFeed(BeatTracker(RATE), samples, listeners=[heard.append])
    for played in (1000, 1000, 25000, len(samples)):
        feed.update(played, played / RATE)
    assert np.array_equal(np.concatenate(heard), samples)


# ---- live ---------------------------------------------------------------------------------

LIVE_FORM = [("pad", 4), ("groove", 4), ("drop", 4), ("pad", 4)]
LIVE_STARTS = np.cumsum([0] + [n for _, n in LIVE_FORM[:-1]]) * 4 * BEAT


def silent_audio() -> OfflineAudio:
    """A real source with nothing to hear (the autopilot reads its beat tracker)."""
    return OfflineAudio(np.zeros(RATE), RATE)


class LiveShow(FakeShow):
    """What the live autopilot touches of a show: the look, the burst, the show's time."""


def play_live(pilot, audio, samples, until, show=None, touch_at=None, start=0.0):
    """The song heard by a real source (OfflineAudio: its beat tracker and its listeners fed
    each frame the samples up to the frame's end) at 30 fps from `start` to `until` (s), the
    autopilot updated each frame after the audio, as the show's loop does."""
    show = show or LiveShow()
    for frame in range(round(start * 30), round(until * 30)):
        now = frame / 30
        audio.update((frame + 1) / 30)
        show.show_time = now
        if touch_at is not None and abs(now - touch_at) < 1 / 60:
            pilot.touched(now=now)
        pilot.update(show, now)
    return show


def test_live_the_looks_change_within_a_phrase_of_each_section_start():
    """Issue 29's live target. (The tracker takes about 1.5 s to lock when the drums come in
    after a beatless pad, so the change comes up to 7 beats after the start, not on the
    music's downbeat: see docs/measured.md.)"""
    samples = song(LIVE_FORM)
    audio = OfflineAudio(samples, RATE)
    presets = [Preset(look.name, {}, tags=look.tags) for look in LOOKS]
    pilot = LiveAutopilot(audio, presets, seed=1, resume_s=10.0)
    show = play_live(pilot, audio, samples, len(samples) / RATE)
    # the form reads the source's beat tracker and runs none of its own
    assert pilot.form.tracker is audio.beat_tracker and not pilot.form.own
    went = show.looks.went
    assert len(went) == 3, went
    for (name, seconds, at), start in zip(went, LIVE_STARTS[1:]):
        assert start < at <= start + 16 * BEAT, (went, start)
    tags = {look.name: look.tags for look in LOOKS}
    assert [tag in tags[name] for (name, *_), tag in zip(went, ("groove", "peak", "calm"))] \
        == [True] * 3
    assert went[1][1] == 0.0 and ("separation_burst", 1.0) in show.acts  # the drop cuts
    assert pilot.telemetry(went[-1][2])["section"] == "break"


def test_live_the_performers_touch_holds_the_autopilot_off_then_it_takes_over_again():
    samples = song(LIVE_FORM)
    audio = OfflineAudio(samples, RATE)
    presets = [Preset(look.name, {}, tags=look.tags) for look in LOOKS]
    pilot = LiveAutopilot(audio, presets, seed=1, resume_s=6.0)
    touch = LIVE_STARTS[1] + 1.0  # a knob turned as the groove begins
    show = play_live(pilot, audio, samples, touch + 5.0, touch_at=touch)
    assert show.looks.went == []  # the groove's change fell inside the hold
    state = pilot.telemetry(touch + 5.0)
    assert state["control"] == "performer" and state["section"] == "groove"
    assert state["resumes_at"] == pytest.approx(touch + 6.0, abs=0.05)
    rest = play_live(pilot, audio, samples, len(samples) / RATE, start=touch + 5.0)
    assert [at > touch + 6.0 for *_, at in rest.looks.went] == [True, True]  # drop, break
    assert pilot.telemetry(len(samples) / RATE)["control"] == "autopilot"


def test_the_autopilot_switches_off_and_on_by_key_and_osc():
    assert key_action("A") == Action("autopilot")
    assert interpret("/swarm/autopilot", [0]) == Action("autopilot", 0)
    assert interpret("/swarm/autopilot", []) == Action("autopilot", None)
    with pytest.raises(OscError, match="takes 0\\|1, or nothing"):
        interpret("/swarm/autopilot", [2])
    pilot = LiveAutopilot(OfflineAudio(np.zeros(RATE), RATE),
                          [Preset("a", {}, tags=("calm",))])
    pilot.switch(Action("autopilot"), 0.0)
    assert pilot.telemetry(0.0)["on"] is False and pilot.telemetry(0.0)["control"] == "off"
    pilot.switch(Action("autopilot", 1), 0.0)
    assert pilot.telemetry(0.0)["control"] == "autopilot"


def test_the_autopilot_key_without_an_autopilot_says_how_to_have_one(ctx):
    """A pressed on a show started without --autopilot: nothing to switch, and the HUD says
    why (it used to do nothing at all)."""
    show = Show(ctx, Params({"count": 256}), ShowOptions())
    try:
        show.act(Action("autopilot"))
        assert show.status["autopilot"] == "off: start the show with --autopilot to use it"
        assert "autopilot: off: start the show with --autopilot" in "\n".join(
            hud_lines(show))
    finally:
        show.release()


@pytest.mark.slow  # seconds of a live show, frame by frame
def test_a_knob_turned_during_an_autopilot_morph_wins_and_the_autopilot_waits(ctx):
    """In the real show: the autopilot morphs into a look over four seconds; a second in, the
    performer sets max_speed (a knob, OSC, a key: one "set" action); the morph lets go of it,
    the rest of the look arrives, and the autopilot holds off until its resume time."""
    show = Show(ctx, Params({"count": 500, "max_speed": 5.0}), ShowOptions())
    try:
        target = Preset("target", {**Params().as_dict(), "max_speed": 20.0, "glow": 3.0},
                        tags=("peak",))
        pilot = LiveAutopilot(show.audio, [target], resume_s=8.0)
        pilot.waiting = [Cue(0.5, "drop", "target", 4.0, False)]
        pilot.attach(show)
        for frame in range(60):  # 2 s at 30 fps: the morph starts at 0.5 s
            show.update(frame / 30)
            show.advance(1 / 30)
            if frame == 45:  # 1.5 s: the knob
                show.act(Action("set", values={"max_speed": 7.5}))
        for frame in range(60, 180):  # on to 6 s: the morph is over
            show.update(frame / 30)
            show.advance(1 / 30)
        assert show.params["max_speed"] == 7.5  # the hand's value stayed
        assert show.params["glow"] == pytest.approx(3.0)  # the rest of the look arrived
        state = pilot.telemetry(show.now)
        assert state["control"] == "performer" and state["resumes_at"] == pytest.approx(9.5)
        assert pilot.telemetry(9.6)["control"] == "autopilot"
    finally:
        show.release()


def test_the_hud_says_the_section_the_look_the_next_change_and_who_has_it():
    assert autopilot_line({"on": False}, 0.0) == "off (A: on)"
    state = {"on": True, "section": "build", "phrase": {"bar": 3, "beat": 1.0},
             "look": "vortex", "control": "performer", "resumes_at": 27741.0,
             "next": {"t": 27738.5, "section": "drop", "look": "lure-rush"}}
    # a live show's clock is the machine's: seconds from now, never its absolute seconds
    line = autopilot_line(state, 27730.0)
    assert line == "build bar 3  vortex  next: drop in 8.5 s  performer for 11.0 s"


def test_a_midi_note_mapped_to_the_autopilot_switches_it():
    mapping = mapping_from_json({"bindings": [], "actions": [
        {"note": 40, "action": "autopilot"}]}, "m.json")
    controller = MidiController(Params(), mapping, armed=False)
    assert controller.handle([0x90, 40, 100], 0.0) == [Action("autopilot")]


def test_the_rate_of_change_from_rarely_to_every_phrase():
    tags = {look.name: look.tags for look in LOOKS}
    often = plan(SECTIONS, LOOKS, 3, bar_seconds=2.0, rate="phrase")  # a phrase is 8 s
    inside = [c for c in often if c.phrase]
    assert [c.t for c in inside] == [8.0, 24.0, 56.0, 80.0]  # none in the build, no sliver
    assert all(WANTED[c.section] in tags[c.look] and not c.burst for c in inside)
    assert [c.morph for c in inside] == [2.0, 2.0, 0.0, 0.0]  # over a bar; a drop cuts
    assert all(a.look != b.look for a, b in zip(often, often[1:]))
    rarely = plan(SECTIONS, LOOKS, 3, bar_seconds=2.0, rate="rarely")
    assert [c.section for c in rarely] == ["intro", "groove", "build", "drop", "break", "drop",
                                           "outro"]  # the second drop in a row keeps its look
    with pytest.raises(ValueError, match="one of rarely, section, phrase"):
        plan(SECTIONS, LOOKS, 3, 2.0, rate="often")


def test_live_at_the_rate_phrase_a_long_section_changes_its_look_each_phrase():
    samples = song([("pad", 4), ("groove", 12)])
    audio = OfflineAudio(samples, RATE)
    presets = [Preset(look.name, {}, tags=look.tags) for look in LOOKS]
    pilot = LiveAutopilot(audio, presets, seed=2, rate="phrase")
    went = play_live(pilot, audio, samples, len(samples) / RATE).looks.went
    tags = {look.name: look.tags for look in LOOKS}
    # the groove's change, then a change on each of its phrases (4 bars): 16 beats after the
    # section's start, about 16, 24 and 32 s (the last a frame before the song ends: live, the
    # end is not known). The start is a beat of the live grid: the tracker's beats during the
    # beatless pad fall where they may, and it takes the drums' beats within a second or two
    # of their coming in (8 s), so the section starts up to two beats after them (8.0 s by
    # chance before issue 30's relock, 9.0 with it)
    assert len(went) >= 3, went
    assert all("groove" in tags[name] for name, *_ in went)
    assert all(a[0] != b[0] for a, b in zip(went, went[1:]))
    starts = [at for *_, at in went]
    assert 16 * BEAT - 0.1 <= pilot.section_start <= 18 * BEAT + 0.1
    assert starts[1:] == pytest.approx(
        [pilot.section_start + 16 * BEAT * k for k in range(1, len(starts))], abs=0.1)
