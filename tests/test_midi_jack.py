"""MIDI through real ports on a JACK server with the dummy driver: a second client sends to the
instrument's port and the parameters follow; a device that goes away and comes back is
reconnected by name; learn binds a knob end to end.

The module starts its own jackd (a unique server name) and stops it; a missing jackd fails
the tests rather than skipping them, since CI installs it (Debian: apt-get install jackd2).
Each test closes the instrument before unplugging its senders (see tests/midi_jack.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest

from swarm_instrument.control.actions import Action
from swarm_instrument.control.midi.mapping import Binding
from swarm_instrument.control.midi.mapping_file import load_mapping
from swarm_instrument.control.midi.midi_in import DEFAULT_MAPPING, Midi
from swarm_instrument.control.midi.ports import MidiInput
from swarm_instrument.control.midi.systems import list_midi_ports
from swarm_instrument.control.parameters.registry import Params

from midi_jack import WAIT_S, Sender


def cc(controller: int, value: int, channel: int = 1) -> list[int]:
    return [0xB0 | (channel - 1), controller, value]


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


class Pump:
    """Runs the instrument's per-frame MIDI step until a condition holds. The poll clock is
    fake (one second a step), so each step rescans the ports without real waiting."""

    def __init__(self, midi: Midi) -> None:
        self.midi = midi
        self.clock = 0.0
        self.actions: list[Action] = []

    def until(self, condition: Callable[[], bool], what: str,
              resend: Callable[[], None] | None = None) -> None:
        """`resend` repeats harmless messages while waiting: JACK may still be wiring a new
        connection when the first ones go out."""
        deadline = time.monotonic() + WAIT_S
        last_send = -1.0
        while True:
            if resend is not None and time.monotonic() - last_send > 0.5:
                resend()
                last_send = time.monotonic()
            self.clock += 1.0
            self.actions += self.midi.update(self.clock)
            if condition():
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"never saw {what}; MIDI state: {self.midi.state()}")
            time.sleep(0.01)


def test_a_second_client_plays_the_virtual_port(jack):
    client, reports = _unique("inst"), []
    source = MidiInput(ports=[], virtual="knobs", api="jack", client_name=client,
                       report=reports.append)
    midi = Midi(Params(), source, mapping_path=DEFAULT_MAPPING, save_path=None,
                report=reports.append)
    assert source.ports_open == ["virtual:knobs"]
    daw = Sender(_unique("daw"), to=f"{client}:knobs")
    params, pump = midi.controller.params, Pump(midi)
    try:
        def play() -> None:
            daw.send([0xF0, 0x7E, 0x7F, 0x06, 0x01, 0xF7],  # SysEx: ignored
                     cc(70, 0), cc(70, 100),  # separation_weight 0..5: across 1.5, picked up
                     cc(76, 127), cc(76, 0),  # max_speed exp 1..40: across 8 from above
                     [0x99, 36, 110],  # a pad on channel 10: respawn
                     [0xC0, 2])  # program 2: recall preset 2

        pump.until(lambda: params["max_speed"] == 1.0, "max_speed follow CC76", resend=play)
        assert params["separation_weight"] == pytest.approx(100 / 127 * 5)
        assert Action("respawn") in pump.actions
        assert Action("recall_preset", 3) in pump.actions  # program change 2: slot 3
        pump.until(lambda: params["separation_weight"] == pytest.approx(20 / 127 * 5),
                   "separation_weight follow CC70 down", resend=lambda: daw.send(cc(70, 20)))
        state = midi.state()
        assert state["api"] == "jack" and state["ports_open"] == ["virtual:knobs"]
        assert state["last_message"] == "ch1 CC 70 20"
        assert state["messages"] >= 7 and state["pickup"] == {}
        assert reports == []
    finally:
        midi.close()
        daw.unplug()


def test_a_device_that_goes_away_is_reconnected_by_name(jack):
    device, reports = _unique("nanoknobs"), []
    key = f"{device}:out"
    knobs = Sender(device, virtual="out")
    assert key in list_midi_ports("jack")
    source = MidiInput(ports=[device], api="jack", client_name=_unique("inst"),
                       report=reports.append)
    everything = MidiInput(api="jack", client_name=_unique("all"), report=lambda text: None)
    midi = Midi(Params(), source, mapping_path=DEFAULT_MAPPING, save_path=None,
                report=reports.append)
    params, pump = midi.controller.params, Pump(midi)
    try:
        assert source.ports_open == [key]
        assert key in everything.ports_open  # no --midi-port: every input
        pump.until(lambda: params["alignment_weight"] == 4.0, "the knob drive its parameter",
                   resend=lambda: knobs.send(cc(71, 0), cc(71, 127)))  # across 1: picked up

        knobs.unplug()
        pump.until(lambda: source.ports_open == [], "the port go away")
        assert source.waiting_for == [key]
        assert "waiting for" in source.state and key in source.state
        everything.poll(1e9)
        assert key not in everything.ports_open

        knobs = Sender(device, virtual="out")  # plugged back in
        pump.until(lambda: source.ports_open == [key], "the port come back")
        # picked up before the unplug, so it follows at once
        pump.until(lambda: params["alignment_weight"] == pytest.approx(32 / 127 * 4),
                   "the returning knob drive its parameter",
                   resend=lambda: knobs.send(cc(71, 32)))
        everything.poll(2e9)
        assert key in everything.ports_open
        assert reports == [f"opened MIDI input '{key}'",
                           f"MIDI input '{key}' went away; waiting for it to come back",
                           f"opened MIDI input '{key}'"]
    finally:
        midi.close()
        everything.close()
        knobs.unplug()


def test_learn_binds_a_knob_end_to_end(jack, tmp_path):
    device = _unique("pads")
    pads = Sender(device, virtual="out")
    save = tmp_path / "midi.json"
    source = MidiInput(ports=[device], api="jack", client_name=_unique("inst"),
                       report=lambda text: None)
    midi = Midi(Params(), source, mapping_path=DEFAULT_MAPPING, save_path=save,
                report=lambda text: None)
    params, pump = midi.controller.params, Pump(midi)
    try:
        midi.start_learn("cohesion_weight")
        assert midi.state()["learn"]["active"]
        pump.until(lambda: midi.controller.learning is None, "learn bind",
                   resend=lambda: pads.send(cc(21, 5, channel=3)))
        expected = Binding(3, 21, "cohesion_weight")  # the performance range: 0..4
        assert expected.range == (0.0, 4.0)
        assert midi.controller.mapping.binding_for("cohesion_weight") == expected
        assert load_mapping(save).binding_for("cohesion_weight") == expected
        assert midi.state()["learn"] == {"active": False, "param": None,
                                         "last_bound": "cohesion_weight <- ch3 CC21"}
        assert params["cohesion_weight"] == 0.8  # learning and pickup: nothing jumped
        pump.until(lambda: params["cohesion_weight"] == 4.0, "the learned knob drive it",
                   resend=lambda: pads.send(cc(21, 0, channel=3), cc(21, 127, channel=3)))
    finally:
        midi.close()
        pads.unplug()


def test_a_port_chosen_by_index_is_then_followed_by_name(jack):
    device, reports = _unique("indexed"), []
    key = f"{device}:out"
    sender = Sender(device, virtual="out")
    listing = list_midi_ports("jack").splitlines()
    index = next(line.split(":")[0].strip() for line in listing if line.endswith(key))
    source = MidiInput(ports=[index, "99"], api="jack", client_name=_unique("inst"),
                       report=reports.append)
    try:
        assert source.ports_open == [key]
        assert reports[0].startswith("MIDI input 99 does not exist (inputs: ")
        assert key in reports[0] and "--list-midi" in reports[0]
        sender.unplug()
        deadline = time.monotonic() + WAIT_S
        while key in source.ports_open and time.monotonic() < deadline:
            source.poll(time.monotonic())  # real clock: a scan about once a second
            time.sleep(0.05)
        assert source.waiting_for == [key]
        sender = Sender(device, virtual="out")
        source.poll(time.monotonic() + 1e6)
        assert source.ports_open == [key]
    finally:
        source.close()
        sender.unplug()


@pytest.mark.jack  # libjack, through python-rtmidi's JACK API: no server is the point
def test_no_jack_server_means_no_midi_and_one_clear_report(monkeypatch):
    monkeypatch.setenv("JACK_DEFAULT_SERVER", f"absent-{uuid.uuid4().hex[:8]}")
    reports: list[str] = []
    source = MidiInput(api="jack", report=reports.append)
    source.poll(0.0)
    source.poll(5.0)
    assert source.drain() == [] and source.ports_open == []
    assert len(reports) == 1 and "no JACK server (start jackd" in reports[0]
    assert "\n" not in reports[0] and len(reports[0]) < 160
    assert "library lines hidden" in reports[0]  # libjack's own lines did not reach stderr
    assert source.state.startswith("MIDI off: no JACK server")
    assert "MIDI unavailable" in list_midi_ports("jack")
    source.close()
