"""MidiInput's ALSA path (one MidiIn a port) against a fake rtmidi, since this machine has no
ALSA sequencer: opening by name, hot-plug by name when ALSA renumbers the device, the virtual
port, and reading queued messages that never raises. The JACK path runs for real in
test_midi_jack.py."""

from __future__ import annotations

import sys
import types
from collections import deque

import pytest

import swarm_instrument.control.midi.ports as midi_input
import swarm_instrument.control.midi.systems as midi_system
from swarm_instrument.control.midi.ports import MidiInput
from swarm_instrument.control.midi.systems import port_key


class FakeSystemError(OSError):
    pass


class FakeAlsa:
    """The ports an ALSA sequencer would list, and the MidiIns listening to them."""

    def __init__(self) -> None:
        self.ports: list[str] = []
        self.listening: dict[str, FakeMidiIn] = {}
        self.virtual: dict[str, FakeMidiIn] = {}
        self.deleted = 0

    def module(self) -> types.ModuleType:
        system = self

        class MidiIn(FakeMidiIn):
            def __init__(self, api: int, name: str, queue_size_limit: int = 1024) -> None:
                super().__init__(system, api, name)
                self.queue_size_limit = queue_size_limit

        module = types.ModuleType("rtmidi")
        module.API_LINUX_ALSA, module.API_UNIX_JACK = 2, 3
        module.get_compiled_api = lambda: [2]
        module.MidiIn = MidiIn
        module.SystemError = FakeSystemError
        return module

    def play(self, port: str, message: list[int]) -> None:
        self.listening[port].queue.append((message, 0.0))  # rtmidi queues it, in C


class FakeMidiIn:
    def __init__(self, system: FakeAlsa, api: int, name: str) -> None:
        assert api == 2
        self.system, self.port = system, None
        self.queue: deque = deque()

    def get_ports(self) -> list[str]:
        return list(self.system.ports)

    def get_port_count(self) -> int:
        return len(self.system.ports)

    def ignore_types(self, **kwargs) -> None:
        assert kwargs == {"sysex": True, "timing": False, "active_sense": False}

    def set_callback(self, callback) -> None:
        raise AssertionError("no Python callback: it would run on JACK's realtime thread")

    def get_message(self):
        if not self.queue:
            return None
        item = self.queue.popleft()
        if isinstance(item, Exception):
            raise item
        return item

    def open_port(self, index: int, name: str) -> None:
        self.port = self.system.ports[index]
        self.system.listening[self.port] = self

    def open_virtual_port(self, name: str) -> None:
        self.system.virtual[name] = self

    def close_port(self) -> None:
        self.system.listening.pop(self.port, None)

    def delete(self) -> None:
        self.system.deleted += 1


@pytest.fixture
def alsa(monkeypatch) -> FakeAlsa:
    system = FakeAlsa()
    monkeypatch.setitem(sys.modules, "rtmidi", system.module())
    return system


NANO = "nanoKONTROL2:nanoKONTROL2 nanoKONTROL2 _ CTRL"


def test_port_keys_drop_alsa_addresses():
    assert port_key(f"{NANO} 24:0") == NANO
    assert port_key("knobs:out") == "knobs:out"


def test_ports_by_name_follow_a_device_alsa_renumbers(alsa):
    alsa.ports = ["Midi Through:Midi Through Port-0 14:0", f"{NANO} 24:0"]
    reports: list[str] = []
    source = MidiInput(ports=["nanokontrol"], api="alsa", report=reports.append)
    assert source.api == "alsa"
    assert source.ports_open == [NANO]
    alsa.play(f"{NANO} 24:0", [0xB0, 70, 5])
    messages = source.drain()
    assert [m for m, _ in messages] == [bytes([0xB0, 70, 5])]
    assert source.drain() == []

    alsa.ports = alsa.ports[:1]  # unplugged
    source.poll(10.0)
    assert source.ports_open == [] and source.waiting_for == [NANO]
    assert f"{NANO} 24:0" not in alsa.listening and alsa.deleted == 1
    alsa.ports.append(f"{NANO} 28:0")  # back, with another address
    source.poll(10.5)  # within the second: no scan yet
    assert source.ports_open == []
    source.poll(11.0)
    assert source.ports_open == [NANO]
    alsa.play(f"{NANO} 28:0", [0xB0, 70, 6])
    assert [m for m, _ in source.drain()] == [bytes([0xB0, 70, 6])]
    assert reports == [f"opened MIDI input '{NANO}'",
                       f"MIDI input '{NANO}' went away; waiting for it to come back",
                       f"opened MIDI input '{NANO}'"]
    source.close()
    assert alsa.listening == {}


def test_a_port_that_matches_nothing_is_said_with_the_inputs_and_waited_for(alsa):
    alsa.ports = ["Midi Through:Midi Through Port-0 14:0"]
    reports: list[str] = []
    source = MidiInput(ports=["nanokontrol"], api="alsa", report=reports.append)
    assert reports == ["--midi-port 'nanokontrol' matches no MIDI input yet (inputs: Midi "
                       "Through:Midi Through Port-0); waiting for it, or see --list-midi"]
    assert source.waiting_for == ["nanokontrol"] and "waiting for nanokontrol" in source.state
    alsa.ports.append(f"{NANO} 24:0")  # plugged in later: opened by itself
    source.poll(100.0)
    assert source.ports_open == [NANO] and reports[-1] == f"opened MIDI input '{NANO}'"
    source.close()


def test_every_input_by_default_and_a_virtual_port(alsa):
    alsa.ports = ["Midi Through:Midi Through Port-0 14:0", f"{NANO} 24:0"]
    source = MidiInput(virtual="swarm", api="alsa", report=lambda text: None)
    assert source.ports_open == ["Midi Through:Midi Through Port-0", NANO, "virtual:swarm"]
    alsa.virtual["swarm"].queue.append(([0x90, 36, 100], 0.0))
    assert [m for m, _ in source.drain()] == [bytes([0x90, 36, 100])]
    assert source.state == ("MIDI ALSA: Midi Through:Midi Through Port-0, "
                            f"{NANO}, virtual:swarm")


def test_selectors_that_match_nothing_are_waited_for(alsa):
    source = MidiInput(ports=["launch"], api="alsa", report=lambda text: None)
    assert source.ports_open == [] and source.waiting_for == ["launch"]
    assert source.state == "MIDI ALSA: no inputs open; waiting for launch"
    alsa.ports = ["Launch Control XL:Launch Control XL MIDI 1 20:0"]
    source.poll(5.0)
    assert source.ports_open == ["Launch Control XL:Launch Control XL MIDI 1"]


def test_no_alsa_sequencer_is_reported_with_what_to_do(alsa, monkeypatch):
    def broken(api: int, name: str, **kwargs) -> None:
        raise FakeSystemError("MidiInAlsa::initialize: error creating ALSA sequencer client")

    monkeypatch.setattr(sys.modules["rtmidi"], "MidiIn", broken)
    reports: list[str] = []
    source = MidiInput(api="alsa", report=reports.append)
    assert source.api is None and source.drain() == []
    assert len(reports) == 1 and "snd-seq" in reports[0] and "--midi-api jack" in reports[0]
    assert midi_system.list_midi_ports("alsa").startswith(
        "MIDI unavailable: no ALSA sequencer")


def test_reading_never_raises_counts_what_it_skips_and_bounds_a_flood(alsa, monkeypatch):
    monkeypatch.setattr(midi_input, "QUEUE_SIZE", 3)
    alsa.ports = [f"{NANO} 24:0"]
    source = MidiInput(api="alsa", report=lambda text: None)
    port = alsa.listening[f"{NANO} 24:0"]
    assert port.queue_size_limit == 3  # rtmidi's own queue, a port
    port.queue += [([0xB0, 1, 300], 0.0), (None, 0.0)]  # not bytes; not even a message
    port.queue += [([0xB0, 1, value], 0.0) for value in range(4)]
    assert [m for m, _ in source.drain()] == [bytes([0xB0, 1, 0])]  # 3 read a frame at most
    assert [m for m, _ in source.drain()] == [bytes([0xB0, 1, 1]), bytes([0xB0, 1, 2]),
                                              bytes([0xB0, 1, 3])]
    port.queue += [RuntimeError("driver"), ([0xB0, 1, 9], 0.0)]  # a failing port: next frame
    assert source.drain() == [] and [m for m, _ in source.drain()] == [bytes([0xB0, 1, 9])]
    assert source.dropped == 3 and source.status()["dropped"] == 3


def test_messages_queued_as_a_port_goes_are_kept(alsa):
    alsa.ports = [f"{NANO} 24:0"]
    source = MidiInput(api="alsa", report=lambda text: None)
    alsa.play(f"{NANO} 24:0", [0xB0, 70, 1])
    alsa.ports = []
    source.poll(10.0)  # unplugged: the port closes
    assert source.ports_open == [] and [m for m, _ in source.drain()] == [bytes([0xB0, 70, 1])]
