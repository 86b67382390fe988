"""The MIDI mapping maths and files: ranges, curves, invert, 14-bit, pickup, load / save."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from swarm_instrument.control.midi.mapping import (
    ActionRule,
    Binding,
    MappingError,
    MidiMapping,
    Pickup,
    position_7bit,
    position_14bit,
)
from swarm_instrument.control.midi.mapping_file import load_mapping, save_mapping
from swarm_instrument.control.parameters.registry import param

DEFAULT = Path(__file__).resolve().parent.parent / "presets" / "midi-default.json"


def test_positions_reach_both_ends_in_7_and_14_bits():
    assert position_7bit(0) == 0.0 and position_7bit(127) == 1.0
    assert position_14bit(0, 0) == 0.0 and position_14bit(127, 127) == 1.0
    assert position_14bit(64, 0) == pytest.approx(8192 / 16383)
    # 14 bits resolve 128 steps between two 7-bit ones
    assert 0 < position_14bit(64, 1) - position_14bit(64, 0) < position_7bit(1) / 100


def test_a_knob_spans_the_performance_range_unless_narrowed():
    # max_speed may go to 10000 but plays over 1..40, geometric: half a turn is sqrt(40)
    full = Binding(1, 70, "max_speed")
    assert (full.value(0.0), full.value(1.0)) == (1.0, 40.0) == param("max_speed").play_range
    assert full.value(0.5) == pytest.approx(math.sqrt(40.0))
    assert full.value(0.5) == pytest.approx(param("max_speed").from_norm(0.5))
    weight = Binding(1, 71, "alignment_weight")
    assert (weight.value(0.0), weight.value(1.0)) == (0.0, 4.0)
    narrow = Binding(1, 70, "separation_weight", lo=0.5, hi=4.5)
    assert narrow.value(0.0) == 0.5
    assert narrow.value(1.0) == 4.5
    assert narrow.value(position_7bit(64)) == pytest.approx(0.5 + 64 / 127 * 4)


def test_exp_curve_is_geometric_when_lo_is_positive():
    b = Binding(1, 74, "neighbor_radius", curve="exp", lo=0.5, hi=12)
    assert b.value(0.0) == 0.5
    assert b.value(1.0) == 12
    assert b.value(0.5) == pytest.approx(math.sqrt(0.5 * 12))
    # equal turns, equal ratios
    assert b.value(0.75) / b.value(0.5) == pytest.approx(b.value(0.5) / b.value(0.25))


def test_exp_curve_is_squared_when_the_range_starts_at_zero():
    b = Binding(1, 70, "cohesion_weight", curve="exp", lo=0, hi=4)
    assert b.value(0.0) == 0.0
    assert b.value(1.0) == 4.0
    assert b.value(0.5) == pytest.approx(1.0)


def test_invert_turns_the_knob_round():
    b = Binding(1, 70, "seek_weight", invert=True, lo=0, hi=2)
    assert b.value(0.0) == 2.0
    assert b.value(1.0) == 0.0
    assert b.value(0.25) == pytest.approx(1.5)
    assert Binding(1, 70, "separation", invert=True).value(1.0) is False


def test_position_inverts_value_for_every_curve():
    bindings = [
        Binding(1, 1, "max_speed", lo=1, hi=40),
        Binding(1, 1, "max_speed", curve="exp", lo=1, hi=40),
        Binding(1, 1, "max_speed", curve="exp", lo=0, hi=40),
        Binding(1, 1, "max_speed", curve="exp", lo=1, hi=40, invert=True),
    ]
    for b in bindings:
        for x in (0.0, 0.1, 0.5, 0.93, 1.0):
            assert b.position(b.value(x)) == pytest.approx(x, abs=1e-12), b
    # values outside the knob's range sit at its nearer end
    assert bindings[0].position(100.0) == 1.0
    assert bindings[3].position(100.0) == 0.0


def test_int_parameters_round():
    b = Binding(1, 1, "count", lo=1, hi=100)
    assert b.value(0.0) == 1 and b.value(1.0) == 100
    assert b.value(0.5) == 50  # 50.5 rounds to even
    assert all(isinstance(b.value(position_7bit(v)), int) for v in range(128))


def test_bool_switches_at_the_middle():
    b = Binding(1, 1, "seek")
    assert b.value(position_7bit(63)) is False
    assert b.value(position_7bit(64)) is True
    assert b.value(position_14bit(63, 127)) is False
    assert b.value(position_14bit(64, 0)) is True


def test_choice_picks_by_position():
    b = Binding(1, 1, "boundary")
    assert [b.value(position_7bit(v)) for v in (0, 63, 64, 127)] == \
        ["sphere", "sphere", "wrap", "wrap"]
    assert Binding(1, 1, "dimensions").value(1.0) == 2


@pytest.mark.parametrize("fields, key", [
    ({"channel": 0}, "channel"),
    ({"channel": 17}, "channel"),
    ({"controller": 128}, "controller"),
    ({"fine_controller": 70}, "fine_controller"),
    ({"param": "warp_factor"}, "param"),
    ({"curve": "log"}, "curve"),
    ({"lo": -1}, "lo"),
    ({"lo": 5, "hi": 2}, "hi"),
    ({"invert": "yes"}, "invert"),
    ({"param": "slow_color"}, "param"),
])
def test_bad_bindings_name_their_field(fields, key):
    entry = {"channel": 1, "controller": 70, "param": "max_speed", **fields}
    with pytest.raises(ValueError) as info:
        Binding(**entry)
    assert info.value.key == key


def test_pickup_from_below_needs_the_knob_to_reach_the_value():
    pickup = Pickup()
    pickup.arm()
    assert not pickup.follow(0.1, 0.5)
    assert not pickup.follow(0.3, 0.5)
    assert not pickup.follow(0.2, 0.5)  # turning back does not count
    assert pickup.follow(0.6, 0.5)  # crossed
    assert pickup.follow(0.0, 0.5)  # now it follows anywhere


def test_pickup_from_above():
    pickup = Pickup()
    pickup.arm()
    assert not pickup.follow(0.9, 0.5)
    assert not pickup.follow(0.7, 0.5)
    assert pickup.follow(0.4, 0.5)


def test_pickup_by_touching_or_a_jump_across():
    touch = Pickup()
    touch.arm()
    assert not touch.follow(0.2, 0.5, tolerance=0.004)
    assert touch.follow(0.5, 0.5, tolerance=0.004)
    near = Pickup()
    near.arm()
    assert near.follow(0.503, 0.5, tolerance=0.004)  # the first message may land on it
    jump = Pickup()
    jump.arm()
    assert not jump.follow(0.0, 0.5)
    assert jump.follow(1.0, 0.5)


def test_pickup_rearms():
    pickup = Pickup()
    assert pickup.follow(0.1, 0.9)  # not armed: follows at once
    pickup.arm()
    assert not pickup.follow(0.1, 0.9)
    assert not pickup.picked_up


def test_pickup_windows_for_bool_and_continuous():
    b = Binding(1, 1, "seek")
    assert b.window(True) == (0.75, 0.25)  # anywhere in the upper half touches "on"
    c = Binding(1, 1, "max_speed", lo=0, hi=10, fine_controller=33)
    assert c.window(5.0) == (0.5, 0.5 / 16383)


def test_mapping_lookup_and_learn_replacement():
    a = Binding(1, 70, "max_speed")
    fine = Binding(1, 1, "seek_weight", fine_controller=33, lo=0, hi=4)
    mapping = MidiMapping((a, fine))
    assert mapping.lookup(1, 70) == (a, False)
    assert mapping.lookup(1, 33) == (fine, True)
    assert mapping.lookup(2, 70) is None
    # learn moves max_speed to CC 33 on channel 1: the old binding and seek's 14-bit pair go
    moved = mapping.with_binding(Binding(1, 33, "max_speed"))
    assert [b.param for b in moved.bindings] == ["max_speed"]
    assert moved.lookup(1, 70) is None
    assert mapping.lookup(1, 70) == (a, False)  # the original is untouched


def test_duplicate_controllers_are_refused():
    with pytest.raises(ValueError, match="already bound to 'max_speed'"):
        MidiMapping((Binding(1, 70, "max_speed"), Binding(1, 70, "seek_weight")))


def test_default_mapping_binds_eight_knobs():
    mapping = load_mapping(DEFAULT)
    assert [b.param for b in mapping.bindings] == [
        "separation_weight", "alignment_weight", "cohesion_weight", "seek_weight",
        "neighbor_radius", "separation_radius", "max_speed", "audio_speed_boost"]
    assert [(b.channel, b.controller) for b in mapping.bindings] == [(1, cc) for cc in
                                                                    range(70, 78)]
    assert mapping.actions_for("note", 10, 36)[0].action == "respawn"
    assert mapping.actions_for("note", 1, 38)[0].action == "separation_burst"
    assert mapping.actions_for("program", 1, 5)[0].action == "recall_preset"
    # every default sits inside its knob's range, so pickup can reach it
    for b in mapping.bindings:
        lo, hi = b.range
        assert lo <= param(b.param).default <= hi, b


def test_save_then_load_round_trips_and_keeps_a_backup(tmp_path):
    mapping = MidiMapping(
        (Binding(2, 1, "max_speed", curve="exp", lo=1, hi=40, invert=True, fine_controller=33),
         Binding(1, 70, "boundary")),
        (ActionRule("note", 36, "respawn", channel=10), ActionRule("program", None,
                                                                   "recall_preset"),
         ActionRule("note", 40, "recall_preset", preset=3)),
        about="test")
    path = tmp_path / "midi.json"
    save_mapping(path, mapping)
    assert load_mapping(path) == mapping
    first = path.read_text()
    save_mapping(path, mapping.with_binding(Binding(1, 71, "seek")))
    assert (tmp_path / "midi.json.bak").read_text() == first
    assert load_mapping(path).binding_for("seek") == Binding(1, 71, "seek")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["midi.json", "midi.json.bak"]


def test_save_into_a_missing_folder_says_where(tmp_path):
    with pytest.raises(MappingError, match="nowhere"):
        save_mapping(tmp_path / "nowhere" / "midi.json", MidiMapping())


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(text)
    return path


def test_bad_json_names_the_file_and_line(tmp_path):
    path = _write(tmp_path, '{\n  "bindings": [\n    {"channel": 1,,}\n  ]\n}\n')
    with pytest.raises(MappingError) as info:
        load_mapping(path)
    assert str(path) in str(info.value) and "line 3" in str(info.value)


@pytest.mark.parametrize("data, where", [
    ({"bindings": [{"channel": 1, "controller": 70, "param": "max_speed"},
                   {"channel": 1, "controller": 71, "param": "warp"}]},
     "bindings[1].param: unknown parameter 'warp'"),
    ({"bindings": [{"channel": 1, "controller": 70, "param": "max_speed", "invret": True}]},
     "bindings[0]: unknown key 'invret'"),
    ({"bindings": [{"channel": 1, "param": "max_speed"}]}, "bindings[0]: missing 'controller'"),
    ({"bindings": [{"channel": 1, "controller": 70, "param": "max_speed", "hi": 1e9}]},
     "bindings[0].hi: must be a number within"),
    ({"bindings": [{"channel": 1, "controller": 70, "param": "max_speed"},
                   {"channel": 1, "controller": 70, "param": "seek_weight"}]},
     "bindings[1]: ch1 CC70 is already bound"),
    ({"actions": [{"note": 36, "action": "explode"}]}, "actions[0].action: must be one of"),
    ({"actions": [{"note": 300, "action": "respawn"}]}, "actions[0].note: must be a whole"),
    ({"actions": [{"note": 36, "program": 1, "action": "respawn"}]}, "actions[0]: needs exactly"),
    ({"actions": [{"note": 36, "action": "respawn", "preset": 2}]}, "actions[0].preset"),
    ({"binding": []}, "unknown key 'binding'"),
    ([1, 2], "a MIDI mapping is a JSON object"),
])
def test_bad_entries_name_the_file_and_key(tmp_path, data, where):
    path = _write(tmp_path, json.dumps(data))
    with pytest.raises(MappingError) as info:
        load_mapping(path)
    assert f"{path}: {where}" in str(info.value)


def test_missing_file_says_so(tmp_path):
    with pytest.raises(MappingError, match="no such file"):
        load_mapping(tmp_path / "absent.json")
