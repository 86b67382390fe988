"""MidiController and the Midi glue without a device: messages, 14-bit pairs, pickup, actions,
learn, bad input and bad mapping files."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from swarm_instrument.control.actions import Action
from swarm_instrument.control.midi.controller import LEARN_FINE_WINDOW_S, MidiController
from swarm_instrument.control.midi.mapping import ActionRule, Binding, MidiMapping
from swarm_instrument.control.midi.mapping_file import load_mapping
from swarm_instrument.control.midi.midi_in import DEFAULT_MAPPING, Midi
from swarm_instrument.control.parameters.registry import ParamError, Params


def cc(channel: int, controller: int, value: int) -> bytes:
    return bytes([0xB0 | (channel - 1), controller, value])


def note_on(channel: int, note: int, velocity: int) -> bytes:
    return bytes([0x90 | (channel - 1), note, velocity])


def program(channel: int, number: int) -> bytes:
    return bytes([0xC0 | (channel - 1), number])


def controller(armed: bool = True, **values) -> MidiController:
    return MidiController(Params(values), load_mapping(DEFAULT_MAPPING), armed=armed)


def test_unarmed_knob_sets_its_parameter_through_the_mapping():
    c = controller(armed=False)
    c.handle(cc(1, 70, 127), 0.0)
    assert c.params["separation_weight"] == 5.0
    c.handle(cc(1, 76, 0), 0.0)  # max_speed, exp 1..40
    assert c.params["max_speed"] == 1.0
    c.handle(cc(2, 70, 0), 0.0)  # another channel: not bound
    assert c.params["separation_weight"] == 5.0


def test_pickup_from_below_then_follows():
    c = controller(separation_weight=2.5)  # knob position 0.5 on 0..5
    c.handle(cc(1, 70, 10), 0.0)
    c.handle(cc(1, 70, 50), 0.0)
    assert c.params["separation_weight"] == 2.5
    assert c.state()["pickup"]["separation_weight"]["knob"] == pytest.approx(50 / 127 * 5)
    c.handle(cc(1, 70, 70), 0.0)  # crossed 63.5
    assert c.params["separation_weight"] == pytest.approx(70 / 127 * 5)
    assert c.state()["pickup"] == {}
    c.handle(cc(1, 70, 3), 0.0)
    assert c.params["separation_weight"] == pytest.approx(3 / 127 * 5)


def test_pickup_from_above():
    c = controller(separation_weight=2.5)
    c.handle(cc(1, 70, 120), 0.0)
    c.handle(cc(1, 70, 90), 0.0)
    assert c.params["separation_weight"] == 2.5
    c.handle(cc(1, 70, 60), 0.0)
    assert c.params["separation_weight"] == pytest.approx(60 / 127 * 5)


def test_preset_recall_rearms_pickup():
    c = controller(armed=False)
    c.handle(cc(1, 71, 127), 0.0)  # alignment_weight 4
    c.params["alignment_weight"] = 1.0  # a preset sets it
    c.arm_pickup()
    c.handle(cc(1, 71, 120), 0.0)
    assert c.params["alignment_weight"] == 1.0
    c.handle(cc(1, 71, 20), 0.0)  # 1.0 is at 31.75: crossed
    assert c.params["alignment_weight"] == pytest.approx(20 / 127 * 4)


def test_14_bit_pairs():
    mapping = MidiMapping((Binding(1, 1, "max_speed", fine_controller=33, lo=0, hi=10),))
    c = MidiController(Params(), mapping, armed=False)
    c.handle(cc(1, 33, 5), 0.0)  # an LSB before any MSB has nothing to refine
    assert c.params["max_speed"] == 8.0
    c.handle(cc(1, 1, 64), 0.0)
    assert c.params["max_speed"] == pytest.approx(64 / 127 * 10)  # MSB-only reads 7 bits
    c.handle(cc(1, 33, 5), 0.001)
    assert c.params["max_speed"] == pytest.approx((64 * 128 + 5) / 16383 * 10)
    c.handle(cc(1, 33, 6), 5.0)  # an LSB alone refines the last MSB
    assert c.params["max_speed"] == pytest.approx((64 * 128 + 6) / 16383 * 10)
    c.handle(cc(1, 1, 127), 6.0)
    c.handle(cc(1, 33, 127), 6.0)
    assert c.params["max_speed"] == 10.0
    c.handle(cc(1, 1, 0), 7.0)  # once it has sent LSBs, an MSB resets the LSB to 0
    assert c.params["max_speed"] == 0.0


def test_14_bit_pickup_measures_with_the_fine_position():
    mapping = MidiMapping((Binding(1, 1, "max_speed", fine_controller=33, lo=0, hi=10),))
    c = MidiController(Params({"max_speed": 6.0}), mapping)  # 6.0 sits at 14-bit 9829.8
    c.handle(cc(1, 1, 76), 0.0)  # 76 * 128 = 9728
    c.handle(cc(1, 33, 101), 0.0)  # 9829: 0.8 of a step below, not touching
    assert c.params["max_speed"] == 6.0
    c.handle(cc(1, 33, 103), 0.0)  # 9831: crossed
    assert c.params["max_speed"] == pytest.approx(9831 / 16383 * 10)


def test_bool_and_choice_knobs_pick_up_on_the_matching_side():
    mapping = MidiMapping((Binding(1, 1, "seek"), Binding(1, 2, "boundary")))
    c = MidiController(Params({"seek": False}), mapping)
    c.handle(cc(1, 1, 20), 0.0)  # off side: touching False, picked up
    assert c.params["seek"] is False
    c.handle(cc(1, 1, 100), 0.0)
    assert c.params["seek"] is True
    c.handle(cc(1, 2, 100), 0.0)  # "wrap" side while boundary is "sphere": waits
    assert c.params["boundary"] == "sphere"
    c.handle(cc(1, 2, 10), 0.0)
    c.handle(cc(1, 2, 127), 0.0)
    assert c.params["boundary"] == "wrap"


def test_notes_and_program_changes_become_actions():
    c = controller()
    assert c.handle(note_on(10, 36, 100), 0.0) == [Action("respawn")]
    # a burst as strong as the pad was hit: velocity 64 of 127
    assert c.handle(note_on(1, 38, 64), 0.0) == [Action("separation_burst", 64 / 127)]
    assert c.handle(note_on(1, 36, 0), 0.0) == []  # velocity 0 is a note off
    assert c.handle(bytes([0x80, 36, 64]), 0.0) == []
    assert c.handle(note_on(1, 50, 90), 0.0) == []  # unmapped note
    assert c.handle(program(3, 4), 0.0) == [Action("recall_preset", 5)]  # program 4: slot 5


def test_a_fixed_preset_rule():
    mapping = MidiMapping(actions=(ActionRule("note", 40, "recall_preset", channel=2, preset=7),))
    c = MidiController(Params(), mapping)
    assert c.handle(note_on(2, 40, 1), 0.0) == [Action("recall_preset", 8)]  # index 7: slot 8
    assert c.handle(note_on(1, 40, 1), 0.0) == []


@pytest.mark.parametrize("message", [
    b"",
    bytes([0xF0, 0x7E, 0x7F, 0x06, 0x01, 0xF7]),  # SysEx
    bytes([0xF8]),  # clock
    bytes([0xFE]),  # active sensing
    bytes([70, 127]),  # running-status fragment: no status byte
    bytes([0xB0, 70]),  # truncated CC
    bytes([0xB0, 70, 127, 1]),  # too long
    bytes([0xB0, 70, 0x80]),  # data byte with the top bit set
    bytes([0xE0, 0, 64]),  # pitch bend: valid but unmapped
    [0xB0, 70, 300],  # not a byte
    [0xB0, "x", 1],
    None,
    "B0 46 7F",
])
def test_bad_or_unknown_input_is_ignored(message):
    c = controller(armed=False)
    before = c.params.as_dict()
    assert c.handle(message, 0.0) == []
    assert c.params.as_dict() == before
    assert c.received == 1
    c.handle(cc(1, 70, 127), 0.0)  # and it still works
    assert c.params["separation_weight"] == 5.0


def test_last_message_and_counts_for_telemetry():
    c = controller()
    c.handle(cc(1, 70, 12), 0.0)
    c.handle(bytes([0xF0, 1, 0xF7]), 0.0)
    state = c.state()
    assert state["messages"] == 2 and state["ignored"] == 1
    assert state["last_message"] == "sysex (3 bytes)"
    c.handle(cc(16, 5, 7), 0.0)
    assert c.state()["last_message"] == "ch16 CC 5 7"


def test_learn_binds_the_next_controller_and_arms_pickup():
    c = controller(armed=False, max_speed=8.0)
    old = c.mapping.binding_for("max_speed")
    c.start_learn("max_speed")
    assert c.state()["learn"] == {"active": True, "param": "max_speed", "last_bound": None}
    c.handle(cc(1, 76, 127), 0.0)  # learning its own knob again: bound, nothing moves
    assert c.params["max_speed"] == 8.0
    assert c.mapping.lookup(1, 76) == (old, False)
    assert c.learning is None
    c2 = controller(armed=False, max_speed=8.0)
    c2.start_learn("max_speed")
    assert c2.handle(cc(3, 20, 127), 0.0) == [Action("learned", param="max_speed")]
    assert c2.learning is None
    binding = c2.mapping.binding_for("max_speed")
    assert binding == Binding(3, 20, "max_speed", old.curve, old.invert, None, old.lo, old.hi)
    assert c2.mapping.lookup(1, 76) is None  # one knob a parameter: the old one is gone
    assert c2.params["max_speed"] == 8.0  # the learning turn itself changes nothing
    c2.handle(cc(3, 20, 100), 1.0)
    assert c2.params["max_speed"] == 8.0  # armed: 8.0 sits at about 55
    assert "max_speed" in c2.state()["pickup"]
    c2.handle(cc(3, 20, 40), 1.0)
    assert c2.params["max_speed"] == pytest.approx(binding.value(40 / 127))
    assert c2.state()["learn"]["last_bound"] == "max_speed <- ch3 CC20"


def test_learn_takes_a_knob_from_another_parameter():
    c = controller(armed=False)
    c.start_learn("seek")
    c.handle(cc(1, 70, 0), 0.0)  # CC70 drove separation_weight
    assert c.mapping.lookup(1, 70)[0].param == "seek"
    assert c.mapping.binding_for("separation_weight") is None


def test_learn_spots_a_14_bit_knob():
    c = controller()
    c.start_learn("cohesion_weight")
    c.handle(cc(1, 5, 64), 10.0)
    assert c.handle(cc(1, 37, 3), 10.0 + LEARN_FINE_WINDOW_S / 2) == \
        [Action("learned", param="cohesion_weight")]
    assert c.mapping.binding_for("cohesion_weight").fine_controller == 37
    assert c.mapping.lookup(1, 37)[1] is True
    late = controller()
    late.start_learn("cohesion_weight")
    late.handle(cc(1, 5, 64), 10.0)
    assert late.handle(cc(1, 37, 3), 10.0 + LEARN_FINE_WINDOW_S * 2) == []
    assert late.mapping.binding_for("cohesion_weight").fine_controller is None


def test_cancel_learn_and_unknown_parameters():
    c = controller()
    c.start_learn("seek_weight")
    c.cancel_learn()
    c.handle(cc(5, 5, 5), 0.0)
    assert c.mapping.lookup(5, 5) is None
    with pytest.raises(ParamError, match="unknown parameter 'warp'"):
        c.start_learn("warp")
    with pytest.raises(ParamError, match="colour|color"):
        c.start_learn("slow_color")


class FakeSource:
    """Stands in for MidiInput: hands over queued messages."""

    def __init__(self) -> None:
        self.queued: list[tuple[bytes, float]] = []
        self.polls: list[float] = []
        self.closed = False

    def poll(self, now: float) -> None:
        self.polls.append(now)

    def drain(self) -> list[tuple[bytes, float]]:
        queued, self.queued = self.queued, []
        return queued

    def status(self) -> dict:
        return {"api": "fake", "ports_open": ["fake:out"], "state": "MIDI FAKE: fake:out"}

    def close(self) -> None:
        self.closed = True


def test_midi_learn_saves_the_mapping_and_it_is_read_at_start(tmp_path):
    reports: list[str] = []
    save = tmp_path / "midi.json"
    source = FakeSource()
    midi = Midi(Params(), source, save_path=save, report=reports.append)
    assert midi.mapping_path == DEFAULT_MAPPING  # nothing learned yet
    midi.start_learn("seek_weight")
    source.queued = [(cc(2, 40, 1), 1.0)]
    assert midi.update(1.0) == [Action("learned", param="seek_weight")]
    assert source.polls == [1.0]
    assert load_mapping(save).binding_for("seek_weight").controller == 40
    state = midi.state()
    assert state["ports_open"] == ["fake:out"] and state["messages"] == 1
    assert state["learn"]["last_bound"] == "seek_weight <- ch2 CC40"
    midi.close()
    assert source.closed
    again = Midi(Params(), FakeSource(), save_path=save, report=reports.append)
    assert again.mapping_path == save
    assert again.controller.mapping.lookup(2, 40)[0].param == "seek_weight"
    assert reports == []


def test_midi_falls_back_to_the_default_on_a_bad_file(tmp_path):
    reports: list[str] = []
    bad = tmp_path / "mine.json"
    bad.write_text('{"bindings": 3}')
    midi = Midi(Params(), FakeSource(), mapping_path=bad, save_path=None, report=reports.append)
    assert midi.mapping_path == DEFAULT_MAPPING
    assert reports == [f"{bad}: bindings: must be a list of objects; MIDI mapping not loaded"]
    assert midi.controller.mapping == load_mapping(DEFAULT_MAPPING)


def test_without_rtmidi_the_instrument_runs_without_midi(monkeypatch):
    monkeypatch.setitem(sys.modules, "rtmidi", None)  # import rtmidi now raises ImportError
    reports: list[str] = []
    midi = Midi.open(Params(), save_path=None, report=reports.append)
    assert midi.update(0.0) == [] and midi.update(2.0) == []
    state = midi.state()
    assert state["api"] is None and state["ports_open"] == []
    assert "python-rtmidi is not installed" in state["state"]
    assert len(reports) == 1 and "pip install python-rtmidi" in reports[0]
    midi.close()


def test_unknown_api_is_refused_clearly():
    from swarm_instrument.control.midi.ports import MidiInput

    reports: list[str] = []
    source = MidiInput(api="coreaudio", report=reports.append)
    assert source.api is None
    assert reports == ["unknown MIDI API 'coreaudio'; choose one of alsa, jack"]


def test_shipped_default_path_exists():
    assert Path(DEFAULT_MAPPING).is_file()
