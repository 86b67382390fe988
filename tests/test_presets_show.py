"""Presets in the running show: number keys recall with a morph, Ctrl+number saves, a MIDI
program change recalls, a crossfade fader blends two slots, a bad slot keeps the look, and
--resume starts from the recovery file."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from swarm_instrument.control.actions import Action
from swarm_instrument.control.looks.preset_bank import PresetBank
from swarm_instrument.control.looks.presets import load_preset
from swarm_instrument.control.looks.recovery import RecoveryWriter
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.inputs.selection import LEARNABLE
from swarm_instrument.show.show import Show

from conftest import ROOT


@pytest.fixture
def show(ctx, tmp_path, said):
    messages = said
    params = Params({"count": 400, "morph_seconds": 1.0})
    show = Show(ctx, params, ShowOptions(), presets=PresetBank(tmp_path / "user"),
                recovery=RecoveryWriter(tmp_path / "recovery.json", interval=0.0))
    show.messages = messages
    yield show
    show.release()


def run_frames(show, seconds, fps=30):
    for _ in range(round(seconds * fps)):
        show.update(show.show_time)
        show.advance(1 / fps)


def test_a_recall_morphs_then_lands_exactly(show):
    target = PresetBank(show.looks.bank.user_folder).recall(2)  # bundled slot 2: murmuration
    start = show.params["max_speed"]
    show.act(Action("recall_preset", 2))
    assert show.params["count"] == target.values["count"]  # stepped values switch at once
    run_frames(show, 0.5)
    middle = show.params["max_speed"]
    assert min(start, target.values["max_speed"]) < middle < max(start, target.values["max_speed"])
    assert "morph" in show.looks.status_line(show.show_time)
    assert 0 < show.telemetry()["preset"]["morph"] < 1
    run_frames(show, 0.7)
    for name, value in target.values.items():
        assert show.params[name] == (tuple(value) if isinstance(value, list) else value), name
    assert show.telemetry()["preset"] == {"name": "murmuration", "modified": False,
                                          "morph": None}
    show.params["seek_weight"] = 3.0
    show.update(show.show_time)
    assert "preset: murmuration (modified)" in show.hud_lines()


def test_ctrl_number_saves_and_the_number_recalls_it(show):
    show.params.update({"separation_weight": 4.25, "trail": 0.5})
    show.act(Action("save_preset", 7))
    saved = show.looks.bank.user_folder / "slot-7.json"
    assert load_preset(saved).values["separation_weight"] == 4.25
    show.params.update({"separation_weight": 1.0, "trail": 0.0, "morph_seconds": 0.0})
    show.act(Action("recall_preset", 7))
    run_frames(show, 0.1)
    assert show.params["separation_weight"] == 4.25 and show.params["trail"] == 0.5
    # Saving again keeps the previous file as a backup.
    show.params["trail"] = 0.25
    show.act(Action("save_preset", 7))
    assert load_preset(str(saved) + ".bak").values["trail"] == 0.5


def test_a_bad_slot_file_keeps_the_current_look(show):
    folder = show.looks.bank.user_folder
    folder.mkdir(parents=True)
    (folder / "slot-3.json").write_text('{"format": "swarm-preset", "version": 1, "params": {')
    before = show.params.as_dict()
    show.act(Action("recall_preset", 3))
    run_frames(show, 0.2)
    assert show.params.as_dict() == before
    assert "slot-3.json" in show.looks.problem
    assert (folder / "slot-3.json").read_text().endswith('"params": {')  # untouched


def test_program_change_and_the_crossfade_fader(show):
    show.params["morph_seconds"] = 0.0
    show.act(Action("recall_preset", 1))  # program change 0: slot 1
    run_frames(show, 0.1)
    assert show.looks.preset.name == PresetBank(show.looks.bank.user_folder).recall(1).name
    a, b = (PresetBank(show.looks.bank.user_folder).recall(n) for n in (1, 2))
    show.params.update({"crossfade_a": 1, "crossfade_b": 2, "crossfade": 0.25})
    run_frames(show, 0.1)
    expected = a.values["alignment_weight"] * 0.75 + b.values["alignment_weight"] * 0.25
    assert show.params["alignment_weight"] == pytest.approx(expected)
    assert show.params["boundary"] == a.values["boundary"]
    show.params["crossfade"] = 1.0
    run_frames(show, 0.1)
    assert show.params["alignment_weight"] == pytest.approx(b.values["alignment_weight"])
    assert show.params["crossfade"] == 1.0  # the fader's own value is not overwritten


def test_the_recovery_file_follows_the_show(show, tmp_path):
    show.params["cohesion_weight"] = 2.75
    run_frames(show, 0.1)
    assert show.looks.recovery.flush()  # written on the recovery thread
    recovered = load_preset(tmp_path / "recovery.json")
    assert recovered.values["cohesion_weight"] == 2.75


@pytest.mark.slow  # the command, played
def test_resume_starts_from_the_recovery_file(tmp_path):
    recovery = tmp_path / "recovery.json"
    RecoveryWriter(recovery).save(Params({"count": 333, "max_speed": 21.0}), [],
                                  {"preset": "murmuration"})
    env = {**os.environ, "SWARM_RECOVERY_FILE": str(recovery)}
    telemetry = tmp_path / "t.jsonl"
    result = subprocess.run(
        [sys.executable, str(ROOT / "instrument.py"), "--headless", "--frames", "2", "--resume",
         "--size", "96x54", "--no-midi", "--telemetry", str(telemetry)],
        env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "resuming from" in result.stdout
    record = json.loads(telemetry.read_text().splitlines()[-1])
    assert record["agents"] == 333 and record["params"]["max_speed"] == 21.0
    # No recovery file: say so and start from the defaults.
    env["SWARM_RECOVERY_FILE"] = str(tmp_path / "none.json")
    result = subprocess.run(
        [sys.executable, str(ROOT / "instrument.py"), "--headless", "--frames", "1", "--resume",
         "--size", "96x54", "--no-midi", "--count", "200"],
        env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "cannot resume" in result.stdout


@pytest.mark.slow  # the command, played
def test_preset_by_name_and_unknown_name(tmp_path):
    env = {**os.environ, "SWARM_PRESETS_DIR": str(tmp_path)}
    ok = subprocess.run([sys.executable, str(ROOT / "instrument.py"), "--headless", "--frames",
                         "1", "--size", "96x54", "--no-midi", "--count", "300", "--preset",
                         "flat-wrap"], env=env, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, str(ROOT / "instrument.py"), "--headless", "--frames",
                          "1", "--preset", "murmuraton"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and "murmuraton" in bad.stderr and "murmuration" in bad.stderr


def test_a_crash_mid_morph_resumes_the_look_it_was_heading_to(show, tmp_path):
    """The recovery file written during a morph holds the preset's target, not the blend, and
    a look changed after its recall is marked modified rather than named as the preset."""
    target = PresetBank(show.looks.bank.user_folder).recall(4)  # drift-trails
    show.params["morph_seconds"] = 10.0
    show.act(Action("recall_preset", 4))
    run_frames(show, 0.5)  # 5 % into the morph: the live values are a blend
    assert show.looks.morph is not None
    assert show.params["contain_radius"] != target.values["contain_radius"]
    assert show.looks.recovery.flush()
    saved = load_preset(tmp_path / "recovery.json")
    for name in ("contain_radius", "max_speed", "slow_color", "trail"):
        assert saved.values[name] == pytest.approx(target.values[name]), name
    assert saved.state["preset"] == "drift-trails" and not saved.state["modified"]
    show.looks.morph = None  # landed; then the performer changes something
    show.params.update(target.values)
    show.params["max_speed"] = 30.0
    run_frames(show, 0.1)
    assert show.looks.recovery.flush()
    saved = load_preset(tmp_path / "recovery.json")
    assert saved.state["modified"] and saved.values["max_speed"] == 30.0


@pytest.mark.slow  # seconds of morph played
def test_what_the_performer_plays_during_a_morph_wins_over_it(show):
    target = PresetBank(show.looks.bank.user_folder).recall(2)
    show.params["morph_seconds"] = 2.0
    show.act(Action("recall_preset", 2))
    run_frames(show, 0.3)
    show.selection.index = LEARNABLE.index("max_speed")
    show.nudge(0.1)  # a key during the morph
    played = show.params["max_speed"]
    run_frames(show, 2.5)  # the morph lands for everything else
    assert show.looks.morph is None
    assert show.params["max_speed"] == played != target.values["max_speed"]
    assert show.params["cohesion_weight"] == pytest.approx(target.values["cohesion_weight"])


def test_a_count_from_the_command_line_stays_through_recalls_until_played(ctx, tmp_path):
    params = Params({"count": 300, "morph_seconds": 0.0})
    show = Show(ctx, params, ShowOptions(pinned=frozenset({"count"})),
                presets=PresetBank(tmp_path / "user"))
    try:
        show.act(Action("recall_preset", 1))  # bundled presets hold 16384 agents
        run_frames(show, 0.1)
        assert params["count"] == 300 and show.swarm.count == 300
        assert show.looks.preset.name == "calm-school" and not show.looks.preset_modified()
        show.nudge(0.1)  # the performer changes the count: it is theirs now
        assert params["count"] == 600 and "count" not in show.looks.pinned
        show.act(Action("recall_preset", 2))
        run_frames(show, 0.1)
        assert params["count"] == 16384 and show.swarm.count == 16384
    finally:
        show.release()
