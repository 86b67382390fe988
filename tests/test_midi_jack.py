"""MIDI through real ports on a JACK server with the dummy driver: a second rtmidi client sends
to the instrument's port and the parameters follow; a device that goes away and comes back is
reopened by name; learn binds a knob end to end.

The module starts its own jackd (a unique server name) and stops it; a missing jackd fails
the tests rather than skipping them, since CI installs it (Debian: apt-get install jackd2).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from control.midi import DEFAULT_MAPPING, Midi
from control.midi_controller import Action
from control.midi_input import MidiInput, list_midi_ports
from control.midi_map import Binding, load_mapping
from control.params import Params

WAIT_S = 10.0  # a generous bound for a condition to come true; never a measured time


@pytest.fixture(scope="module")
def jack_server() -> Iterator[str]:
    """A private JACK server (dummy driver, no realtime so CI needs no privileges), selected for
    this process's JACK clients through JACK_DEFAULT_SERVER."""
    jackd = shutil.which("jackd")
    if jackd is None:
        pytest.fail("jackd not found: the MIDI port tests need a JACK server "
                    "(Debian: apt-get install jackd2)")
    import rtmidi

    if rtmidi.API_UNIX_JACK not in rtmidi.get_compiled_api():
        pytest.fail("this python-rtmidi has no JACK support (get_compiled_api() lacks "
                    "API_UNIX_JACK); install the PyPI wheel, which has it")
    name = f"midi-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryFile() as log, pytest.MonkeyPatch.context() as patch:
        server = subprocess.Popen([jackd, "--no-realtime", "-n", name, "-d", "dummy", "-r",
                                   "48000", "-p", "256"], stdout=log, stderr=subprocess.STDOUT)
        patch.setenv("JACK_DEFAULT_SERVER", name)
        try:
            _wait_for_server(server, log, rtmidi)
            yield name
        finally:
            server.terminate()
            try:
                server.wait(timeout=5)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def _wait_for_server(server: subprocess.Popen, log, rtmidi) -> None:
    deadline = time.monotonic() + WAIT_S
    while True:
        if server.poll() is not None:
            log.seek(0)
            pytest.fail(f"jackd exited ({server.returncode}):\n{log.read().decode()[-2000:]}")
        try:
            rtmidi.MidiOut(rtmidi.API_UNIX_JACK, "midi-test-probe").delete()
            return
        except rtmidi.SystemError:
            if time.monotonic() > deadline:
                pytest.fail("jackd did not start accepting clients")
            time.sleep(0.05)


def _sender(client: str, virtual_port: str | None = "out"):
    import rtmidi

    out = rtmidi.MidiOut(rtmidi.API_UNIX_JACK, client)
    if virtual_port:
        out.open_virtual_port(virtual_port)
    return out


def _close(out) -> None:
    out.close_port()
    out.delete()


def cc(controller: int, value: int, channel: int = 1) -> list[int]:
    return [0xB0 | (channel - 1), controller, value]


class Pump:
    """Runs the instrument's per-frame MIDI step until a condition holds. The poll clock is
    fake (one second a step), so each step rescans the ports without real waiting."""

    def __init__(self, midi: Midi) -> None:
        self.midi = midi
        self.clock = 0.0
        self.actions: list[Action] = []

    def until(self, condition: Callable[[], bool], what: str,
              resend: Callable[[], None] | None = None) -> None:
        deadline = time.monotonic() + WAIT_S
        last_send = 0.0
        while True:
            if resend is not None and time.monotonic() - last_send > 0.5:
                resend()  # the messages repeat harmlessly until the connection carries them
                last_send = time.monotonic()
            self.clock += 1.0
            self.actions += self.midi.update(self.clock)
            if condition():
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"never saw {what}; MIDI state: {self.midi.state()}")
            time.sleep(0.01)


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def test_a_second_client_plays_the_virtual_port(jack_server):
    client, reports = _unique("inst"), []
    source = MidiInput(ports=[], virtual="knobs", api="jack", client_name=client,
                       report=reports.append)
    midi = Midi(Params(), source, mapping_path=DEFAULT_MAPPING, save_path=None,
                report=reports.append)
    sender = _sender(_unique("daw"), None)
    try:
        assert source.ports_open == ["virtual:knobs"]
        target = f"{client}:knobs"
        ports = sender.get_ports()
        assert target in ports, ports
        sender.open_port(ports.index(target))
        params, pump = midi.controller.params, Pump(midi)

        def play() -> None:
            sender.send_message([0xF0, 0x7E, 0x7F, 0x06, 0x01, 0xF7])  # SysEx: ignored
            sender.send_message(cc(70, 0))  # separation_weight 0..5: from below 1.5 ...
            sender.send_message(cc(70, 100))  # ... across it: picked up
            sender.send_message(cc(76, 127))  # max_speed exp 1..40: from above 8 ...
            sender.send_message(cc(76, 0))  # ... across it
            sender.send_message([0x99, 36, 110])  # a pad on channel 10: respawn
            sender.send_message([0xC0, 2])  # program 2: recall preset 2

        pump.until(lambda: params["max_speed"] == 1.0, "max_speed follow CC76", resend=play)
        assert params["separation_weight"] == pytest.approx(100 / 127 * 5)
        assert Action("respawn", 110) in pump.actions
        assert Action("recall_preset", 2) in pump.actions
        pump.until(lambda: params["separation_weight"] == pytest.approx(20 / 127 * 5),
                   "separation_weight follow CC70 down",
                   resend=lambda: sender.send_message(cc(70, 20)))
        state = midi.state()
        assert state["api"] == "jack" and state["ports_open"] == ["virtual:knobs"]
        assert state["last_message"] == "ch1 CC 70 20"
        assert state["messages"] >= 7 and state["pickup"] == {}
        assert reports == []
    finally:
        _close(sender)
        midi.close()


def test_a_device_that_goes_away_is_reopened_by_name(jack_server):
    device, reports = _unique("nanoknobs"), []
    sender = _sender(device)
    key = f"{device}:out"
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

        def pick_up() -> None:
            sender.send_message(cc(71, 0))  # alignment_weight 0..4, default 1
            sender.send_message(cc(71, 127))

        pump.until(lambda: params["alignment_weight"] == 4.0, "the knob drive its parameter",
                   resend=pick_up)

        _close(sender)  # unplugged
        pump.until(lambda: source.ports_open == [], "the port close")
        assert source.waiting_for == [key]
        assert "waiting for" in source.state and key in source.state
        everything.poll(1e9)
        assert key not in everything.ports_open

        sender = _sender(device)  # plugged back in
        pump.until(lambda: source.ports_open == [key], "the port reopen")
        # picked up before the unplug: it follows at once (resent, because JACK may still be
        # wiring the new connection when the first message goes out)
        pump.until(lambda: params["alignment_weight"] == pytest.approx(32 / 127 * 4),
                   "the reopened knob drive its parameter",
                   resend=lambda: sender.send_message(cc(71, 32)))
        everything.poll(2e9)
        assert key in everything.ports_open
        assert reports == [f"opened MIDI input '{key}'",
                           f"MIDI input '{key}' went away; waiting for it to come back",
                           f"opened MIDI input '{key}'"]
    finally:
        _close(sender)
        midi.close()
        everything.close()


def test_learn_binds_a_knob_end_to_end(jack_server, tmp_path):
    client, device = _unique("inst"), _unique("pads")
    sender = _sender(device)
    save = tmp_path / "midi.json"
    source = MidiInput(ports=[device], api="jack", client_name=client, report=lambda text: None)
    midi = Midi(Params(), source, mapping_path=DEFAULT_MAPPING, save_path=save,
                report=lambda text: None)
    params, pump = midi.controller.params, Pump(midi)
    try:
        midi.start_learn("cohesion_weight")
        assert midi.state()["learn"]["active"]
        pump.until(lambda: midi.controller.learning is None, "learn bind",
                   resend=lambda: sender.send_message(cc(21, 5, channel=3)))
        expected = Binding(3, 21, "cohesion_weight", lo=0, hi=4)  # the default's range stays
        assert midi.controller.mapping.binding_for("cohesion_weight") == expected
        assert load_mapping(save).binding_for("cohesion_weight") == expected
        assert midi.state()["learn"] == {"active": False, "param": None,
                                         "last_bound": "cohesion_weight <- ch3 CC21"}
        assert params["cohesion_weight"] == 0.8  # learning and pickup: nothing jumped

        def sweep() -> None:
            sender.send_message(cc(21, 0, channel=3))
            sender.send_message(cc(21, 127, channel=3))

        pump.until(lambda: params["cohesion_weight"] == 4.0, "the learned knob drive it",
                   resend=sweep)
    finally:
        _close(sender)
        midi.close()


def test_no_jack_server_means_no_midi_and_one_clear_report(monkeypatch):
    monkeypatch.setenv("JACK_DEFAULT_SERVER", f"absent-{uuid.uuid4().hex[:8]}")
    reports: list[str] = []
    source = MidiInput(api="jack", report=reports.append)
    source.poll(0.0)
    source.poll(5.0)
    assert source.drain() == [] and source.ports_open == []
    assert len(reports) == 1 and "start a JACK server" in reports[0]
    assert source.state.startswith("MIDI off: JACK MIDI is not available")
    assert "MIDI unavailable" in list_midi_ports("jack")
    source.close()
