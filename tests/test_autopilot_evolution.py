"""The look moving inside a section (show/autopilot/evolution.py): the camera, the hue and the
feedback drift from the look's values to a new place each phrase, eased (no jump), the same
for the same seed, more in a drop than in a break, never before the look's morph is over, never
what the command line pinned; the performer's hand takes what it touches and the autopilot's
next look gives it back; live in the show, the look as chosen is not "modified"."""

from __future__ import annotations

import numpy as np
import pytest
from test_autopilot import LOOKS, LiveShow, silent_audio

from swarm_instrument.control.actions import Action
from swarm_instrument.control.looks.preset_bank import BUNDLED_DIR, preset_files
from swarm_instrument.control.looks.presets import Preset, load_preset
from swarm_instrument.control.parameters.registry import BY_NAME, Params
from swarm_instrument.control.tracks.control_track import ControlTrack
from swarm_instrument.control.tracks.track_recorder import ControlRecorder
from swarm_instrument.show.autopilot.choreography import Cue
from swarm_instrument.show.autopilot.evolution import DRIFTS, Evolution
from swarm_instrument.show.autopilot.live_autopilot import LiveAutopilot
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.show import Show

FPS = 30
PHRASE = 8.0  # four bars at 120 BPM


def vortex() -> dict:
    """A bundled look with feedback (its drift moves the feedback too)."""
    path = next(p for p in preset_files(BUNDLED_DIR) if p.name.endswith("vortex.json"))
    return load_preset(path).values


def drift(seed: int, seconds: float, label: str = "groove", look: dict | None = None,
          morph_until: float = 0.0, kept=frozenset()) -> tuple[Params, list[dict]]:
    """A look played at 0 s, drifting frame by frame for `seconds`: the values of every frame."""
    look = look or vortex()
    params = Params(look)
    evolution = Evolution(seed)
    evolution.new_look(look, 0.0, PHRASE, label)
    frames = []
    for frame in range(round(seconds * FPS)):
        now = frame / FPS
        evolution.step(params, now, now < morph_until, kept)
        frames.append({name: params[name] for name in DRIFTS})
    return params, frames


def test_the_look_drifts_a_new_place_each_phrase_eased_and_within_its_range():
    look = vortex()
    _, frames = drift(1, 5 * PHRASE)
    for name in DRIFTS:
        values = np.array([frame[name] for frame in frames])
        low, high = BY_NAME[name].play_range
        assert values.min() >= low and values.max() <= high
        assert np.ptp(values) > 0, f"{name} never moved"
        steps = np.abs(np.diff(values))
        # eased: no frame moves it more than 1.5/phrase of the whole way (smoothstep's top
        # speed), and it slows to a stop at each phrase's edge
        far = np.ptp(values)
        assert steps.max() <= 1.5 * far / (PHRASE * FPS) * 2.05, name
        edges = [round(k * PHRASE * FPS) for k in (2, 3, 4)]
        assert all(steps[edge - 1] < 0.2 * steps.max() for edge in edges), name
    start = frames[0]
    assert all(start[name] == pytest.approx(look[name]) for name in DRIFTS)  # no jump at 0
    hue = [frame["hue_shift"] for frame in frames]
    assert max(abs(h) for h in hue) > 5.0  # the palette turns, degrees not fractions


def test_the_same_seed_drifts_the_same_way_another_seed_another():
    assert drift(7, 3 * PHRASE)[1] == drift(7, 3 * PHRASE)[1]
    assert drift(7, 3 * PHRASE)[1] != drift(8, 3 * PHRASE)[1]
    # whatever the frame rate: the places are drawn a phrase at a time, not a frame
    evolution = Evolution(7)
    params = Params(vortex())
    evolution.new_look(vortex(), 0.0, PHRASE, "groove")
    for now in np.arange(0.0, 3 * PHRASE, 1 / 10):
        evolution.step(params, float(now), False, frozenset())
    at = {name: params[name] for name in DRIFTS}
    slow = drift(7, 3 * PHRASE)[1][round(float(now) * FPS)]
    assert at == pytest.approx(slow)


def test_a_drop_drifts_further_than_a_break():
    def reach(label: str) -> float:
        frames = drift(3, 6 * PHRASE, label)[1]
        return np.ptp([frame["hue_shift"] for frame in frames])

    assert reach("drop") > reach("break")


def test_it_waits_for_the_looks_morph_and_leaves_pinned_and_feedless_alone():
    look = {**vortex(), "feedback": 0.0}
    params, frames = drift(2, 2 * PHRASE, look=look, morph_until=4.0,
                           kept=frozenset({"orbit_speed"}))
    before = [frame for index, frame in enumerate(frames) if index / FPS < 4.0]
    assert all(frame == frames[0] for frame in before)  # the morph has the look
    assert frames[-1]["camera_distance"] != frames[0]["camera_distance"]
    assert {frame["orbit_speed"] for frame in frames} == {look["orbit_speed"]}  # pinned
    assert {frame["feedback"] for frame in frames} == {0.0}  # no feedback added to a look


def test_the_performers_touch_takes_what_it_touches_until_the_next_look():
    look = vortex()
    params = Params(look)
    evolution = Evolution(5)
    evolution.new_look(look, 0.0, PHRASE, "groove")
    moved = set()
    for frame in range(round(PHRASE * FPS)):
        now = frame / FPS
        if frame == 60:
            evolution.release({"hue_shift"})
            params["hue_shift"] = 12.5  # the performer's knob
        moved = evolution.step(params, now, False, frozenset())
    assert params["hue_shift"] == 12.5 and "hue_shift" not in moved
    assert "camera_distance" in moved  # the rest of the look still moves
    evolution.release(None)  # a recall: all of it
    assert evolution.step(params, PHRASE, False, frozenset()) == set()
    evolution.new_look(look, PHRASE, PHRASE, "groove")  # the autopilot's next look
    assert "hue_shift" in evolution.step(params, PHRASE + 1, False, frozenset())


def test_live_the_autopilots_look_drifts_and_the_hand_takes_over(ctx):
    """In the real show: the autopilot plays a look (a cut), which then drifts; the look stays
    "not modified"; a knob on hue_shift takes it (the rest keeps drifting), switching off
    leaves the look where it is."""
    show = Show(ctx, Params({"count": 256}), ShowOptions())
    try:
        look = Preset("vortex", vortex(), tags=("build",))
        pilot = LiveAutopilot(show.audio, [look], seed=3, resume_s=5.0).attach(show)
        pilot.waiting = [Cue(0.5, "groove", "vortex", 0.0, False)]
        distances = []
        for frame in range(round(2 * PHRASE * FPS)):
            now = frame / FPS
            show.update(now)
            distances.append(show.params["camera_distance"])
            if frame == round(PHRASE * FPS):
                show.act(Action("set", values={"hue_shift": -30.0}))
        assert len(set(distances)) > 100  # it moved all along
        assert show.params["hue_shift"] == -30.0  # the hand's value stayed
        assert "hue_shift" not in show.looks.evolving and "camera_distance" in \
            show.looks.evolving
        assert show.looks.preset.name == "vortex"
        show.params["hue_shift"] = look.values["hue_shift"]  # put back: only the drift differs
        show.update(2 * PHRASE)
        assert not show.looks.modified  # the look as chosen, moving
        show.act(Action("autopilot", 0))
        show.update(2 * PHRASE + 1 / FPS)
        held = show.params["camera_distance"]
        show.update(2 * PHRASE + 1.0)
        assert show.params["camera_distance"] == held and show.looks.evolving == set()
        show.act(Action("autopilot", 1))  # on again: the look playing drifts at once
        for frame in range(1, 3 * FPS):
            show.update(2 * PHRASE + 1.0 + frame / FPS)
        assert show.params["camera_distance"] != held and "hue_shift" in show.looks.evolving
    finally:
        show.release()


def test_live_at_rate_phrase_each_look_drifts_on_from_where_the_last_left_it():
    """A new look each phrase: the drift starts again from the values the last one reached,
    never a jump back to the look's own (the looks here share their values: any jump would
    be the drift's)."""
    presets = [Preset(look.name, vortex(), tags=look.tags) for look in LOOKS]
    pilot = LiveAutopilot(silent_audio(), presets, seed=2, rate="phrase")
    show = LiveShow()
    show.params.update(vortex())
    pilot.section, pilot.section_start = "groove", 0.0
    pilot.waiting = [Cue(0.0, "groove", "walk", 0.0, False)]
    distances = []
    for frame in range(round(4 * PHRASE * FPS)):
        pilot.update(show, frame / FPS)
        distances.append(show.params["camera_distance"])
    assert len(show.looks.went) == 4  # the groove's look, then one a phrase
    steps = np.abs(np.diff(distances))
    assert np.ptp(distances) > 0.05 and steps.max() < 0.01


def test_a_recorded_set_keeps_the_drift(ctx, tmp_path):
    """The drift writes the registry, so --record-control's track holds it as param events (a
    set played by the autopilot renders again with the same moves)."""
    show = Show(ctx, Params({"count": 256}), ShowOptions())
    try:
        recorder = ControlRecorder(tmp_path / "set.jsonl", params=show.params)
        show.recorder = recorder
        pilot = LiveAutopilot(show.audio, [Preset("vortex", vortex(), tags=("build",))],
                              seed=3).attach(show)
        pilot.waiting = [Cue(0.2, "groove", "vortex", 0.0, False)]
        for frame in range(round(PHRASE * FPS)):
            show.update(frame / FPS)
            show.show_time = frame / FPS
        recorder.close(PHRASE)
        events = ControlTrack.load(tmp_path / "set.jsonl").events
        hues = [e for e in events if e.kind == "param" and e.get("name") == "hue_shift"]
        assert len(hues) > 100 and hues[-1].get("value") == pytest.approx(
            show.params["hue_shift"], abs=1e-4)
        assert [e.get("look") for e in events if e.kind == "autopilot"] == ["vortex"]
    finally:
        show.release()
