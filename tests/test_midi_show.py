"""MIDI playing the instrument end to end: a controller on a JACK dummy server turns a knob and
the running instrument's parameter follows (after pickup), as telemetry reports it."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid

import pytest

from swarm_instrument.control.looks.preset_bank import PresetBank
from swarm_instrument.control.looks.presets import load_preset
from swarm_instrument.show.cli.options import START_LOOK

from conftest import ROOT, wait_for
from midi_jack import WAIT_S, Sender
from telemetry import last_record


def wait_until(check, what, process, resend=None):
    """`check` comes true while the instrument plays; `resend` is sent again meanwhile."""
    def sent_and_checked():
        if check():
            return True
        if resend:
            resend()
        return False

    wait_for(sent_and_checked, what, timeout=3 * WAIT_S, process=process, every=0.3)


@pytest.mark.posix  # Ctrl+C (SIGINT) ends the show
def test_a_knob_drives_the_running_instrument(jack, tmp_path):
    telemetry = tmp_path / "t.jsonl"
    device = f"knobs{uuid.uuid4().hex[:6]}"
    knobs = Sender(device, virtual="out")  # on the `jack` server, as the instrument is
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "instrument.py"), "--headless", "--size", "160x90",
         "--count", "500", "--midi-api", "jack", "--midi-port", device,
         "--telemetry", str(telemetry)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (r := last_record(telemetry)) is not None
                   and f"{device}:out" in r["midi"]["ports_open"], "the port to open",
                   process)
        record = last_record(telemetry)
        start = load_preset(PresetBank().resolve(START_LOOK)).values  # a plain start's
        assert record["params"]["separation_weight"] == start["separation_weight"]
        # CC 70 is separation_weight 0..5 in the shipped mapping. The knob starts armed:
        # 0 then 100 crosses the value (1.2) and picks it up; 100/127 * 5 is where it ends.
        wait_until(lambda: last_record(telemetry)["params"]["separation_weight"]
                   == pytest.approx(100 / 127 * 5), "the parameter to follow the knob",
                   process, resend=lambda: knobs.send([0xB0, 70, 0], [0xB0, 70, 100]))
        assert last_record(telemetry)["midi"]["messages"] >= 2
    finally:
        process.send_signal(signal.SIGINT)
        try:
            out, err = process.communicate(timeout=30)
        finally:
            knobs.unplug()
    assert process.returncode == 0, err
    assert "stopped (Ctrl+C)" in out


class FakeSource:
    """A MIDI input that delivers what the test queues (the Midi MessageSource protocol)."""

    def __init__(self):
        self.queue = []

    def poll(self, now):
        pass

    def drain(self):
        out, self.queue = self.queue, []
        return out

    def status(self):
        return {"api": "fake", "ports_open": ["fake:knobs"], "state": "MIDI: fake:knobs"}

    def close(self):
        pass


def test_learn_from_the_hud_and_the_burst_and_respawn_notes(ctx, tmp_path):
    from swarm_instrument.control.actions import Action
    from swarm_instrument.control.midi.midi_in import DEFAULT_MAPPING, Midi
    from swarm_instrument.control.parameters.registry import Params
    from swarm_instrument.show.cli.options import ShowOptions
    from swarm_instrument.show.show import Show

    params = Params({"count": 300})
    source = FakeSource()
    midi = Midi(params, source, mapping_path=DEFAULT_MAPPING, save_path=tmp_path / "midi.json",
                report=lambda text: None)
    show = Show(ctx, params, ShowOptions(), midi=midi)
    try:
        while show.selected_param != "cohesion_weight":
            show.act(Action("select", 1))  # Down, as the window hands it on
        show.act(Action("learn"))  # L
        show.update(0.0)
        assert "LEARN: turn a knob for cohesion_weight" in "\n".join(show.hud_lines())
        source.queue += [(bytes([0xB3, 21, 10]), 0.1)]  # CC 21 on channel 4
        show.update(0.2)
        binding = midi.controller.mapping.binding_for("cohesion_weight")
        assert (binding.channel, binding.controller) == (4, 21)
        assert (tmp_path / "midi.json").exists()  # saved at once
        assert "LEARN" not in "\n".join(show.hud_lines())

        # Note 38: a separation burst, only in this frame's values, fading away.
        show.advance(1 / 60)
        source.queue += [(bytes([0x90, 38, 127]), 0.3)]
        show.update(0.3)
        assert show.values["separation_weight"] > params["separation_weight"] + 2.5
        for _ in range(60):
            show.advance(1 / 60)
        show.update(1.5)
        assert "separation_weight" not in show.modulated
        assert show.values["separation_weight"] == 1.5
        assert params["separation_weight"] == 1.5
        # Note 36: respawn.
        before = show.respawns
        source.queue += [(bytes([0x90, 36, 100]), 1.6)]
        show.update(1.6)
        assert show.respawns == before + 1
    finally:
        show.release()
