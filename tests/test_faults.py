"""Fault injection on a running show, one test a fault (the first failure hides no other):
after each fault the show still runs, the screen is not black, and no file on disk is damaged.

The faults: an audio callback fed blocks that break it, an audio stream that stalls, an audio
device that vanishes, a MIDI port that vanishes mid-message (and malformed MIDI bytes), a
truncated preset recalled live, a shader with a syntax error saved while running, NaN written
into the agent buffer, hostile OSC datagrams (junk, a bundle bomb, NaN, a flood). SIGKILL of
the show process is in test_supervisor.py (it needs the supervisor's child process).
"""

from __future__ import annotations

import hashlib
import shutil
import socket
import struct
from pathlib import Path

import numpy as np
import pytest
from test_audio_faults import FakeSoundDevice, mic, sine_block
from test_midi_show import FakeSource

from swarm_instrument.audio.input.live_input import AudioInput
from swarm_instrument.control.actions import Action
from swarm_instrument.control.looks.preset_bank import PresetBank
from swarm_instrument.control.looks.presets import load_preset
from swarm_instrument.control.looks.recovery import RecoveryWriter
from swarm_instrument.control.midi.midi_in import DEFAULT_MAPPING, Midi
from swarm_instrument.control.osc.osc_input import OscInput
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.loop import FixedStep, Loop, Offscreen
from swarm_instrument.show.show import Show
from swarm_instrument.visual.gpu.shaders import BUNDLED_SHADERS

from conftest import ROOT

SIZE = (160, 90)
FPS = 60


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.is_file()}


class Rig:
    """A show with a fake sound card and a fake MIDI port, driven frame by frame."""

    def __init__(self, ctx, tmp_path: Path, said: list[str]) -> None:
        self.sd = FakeSoundDevice([mic()])
        self.audio = AudioInput(sd=self.sd)
        self.midi_source = FakeSource()
        params = Params({"count": 1200, "agent_size": 2.0, "morph_seconds": 0.0})
        self.midi = Midi(params, self.midi_source, mapping_path=DEFAULT_MAPPING,
                         save_path=tmp_path / "user" / "midi.json", report=lambda text: None)
        self.messages = said
        self.osc = OscInput("127.0.0.1", 0)
        self.show = Show(ctx, params, ShowOptions(), audio=self.audio, midi=self.midi,
                         osc=self.osc,
                         presets=PresetBank(tmp_path / "user"),
                         recovery=RecoveryWriter(tmp_path / "recovery.json", interval=0.5))
        self.sink = Offscreen(self.show, SIZE)
        self.now = 100.0

    def frames(self, count: int, feed_audio: bool = True) -> np.ndarray:
        """`count` frames of the show's one loop, a fixed step, the fake card fed before each
        (as its callback thread would) unless `feed_audio` is off."""
        def feed(tick) -> None:
            self.now = tick.now
            stream = self.sd.streams[-1] if self.sd.streams else None
            if feed_audio and stream and not (stream.closed or stream.dead):
                for _ in range(3):
                    stream.feed(sine_block())

        loop = Loop(self.show, FixedStep(1 / FPS, start=self.now + 1 / FPS), before=feed,
                    after=lambda: self.audio.wait_for_reopening())
        loop.run(self.sink, frames=count)
        pixels = self.sink.pixels()
        return np.frombuffer(pixels, np.uint8).reshape(SIZE[1], SIZE[0], 3)

    def assert_healthy(self, what: str) -> None:
        image = self.frames(12)
        assert (image.max(axis=2) > 40).mean() > 0.01, f"black screen after {what}"
        position, velocity = self.show.swarm.read_state()
        assert np.isfinite(position).all() and np.isfinite(velocity).all(), what


@pytest.fixture
def rig(ctx, tmp_path, monkeypatch, said):
    """A healthy show to break; afterwards, nothing on disk was damaged: the bundled presets
    are unchanged and the recovery file, if written, reads whole."""
    shaders = tmp_path / "shaders"
    shutil.copytree(BUNDLED_SHADERS, shaders)
    monkeypatch.setenv("SWARM_SHADERS", str(shaders))
    bundled = digest(ROOT / "presets")
    rig = Rig(ctx, tmp_path, said)
    rig.shaders = shaders
    rig.assert_healthy("start")
    assert rig.audio.state == "ok" and rig.show.audio.level > 0.5
    yield rig
    assert rig.show.looks.recovery.flush()
    if (tmp_path / "recovery.json").exists():
        load_preset(tmp_path / "recovery.json")  # whole: raises on a damaged file
    rig.show.release()
    assert digest(ROOT / "presets") == bundled


def test_malformed_audio_blocks(rig):
    class Exploding:
        def __len__(self):
            raise RuntimeError("driver bug")

    callback = rig.sd.stream.callback  # as PortAudio's thread calls it; it must never raise
    for block in (None, "text", np.full((256, 2), np.nan, np.float32), Exploding(),
                  np.zeros((10**6, 2), np.float32)):
        callback(block, 256, None, None)
    rig.assert_healthy("malformed audio blocks")
    assert np.isfinite(rig.show.audio.level)


def test_an_audio_stream_that_stalls(rig):
    rig.frames(round(1.2 * FPS), feed_audio=False)
    assert rig.audio.state in ("audio lost", "ok")  # lost, or already reopened by name
    rig.assert_healthy("an audio stall")


@pytest.mark.slow  # seconds of show through an outage
def test_an_audio_device_that_vanishes_and_comes_back(rig):
    rig.sd.plugged = []
    rig.sd.stream.dead = True
    rig.frames(round(1.0 * FPS))
    assert rig.audio.state == "audio lost" and rig.show.audio.level < 0.3
    rig.assert_healthy("the audio device vanishing")
    rig.sd.plugged = [mic()]
    rig.frames(round(6 * FPS))
    assert rig.audio.state == "ok"


def test_a_midi_port_vanishing_mid_message_and_junk_bytes(rig):
    rig.midi_source.queue += [(bytes([0xB0, 70]), 1.0)]  # the port went away here
    rig.midi_source.status = lambda: {"api": "fake", "ports_open": [], "state": "MIDI: lost"}
    rig.assert_healthy("a MIDI port vanishing mid-message")
    rig.midi_source.queue += [(bytes([0xF0, 1, 2]), 1.1), (bytes([0xFF] * 7), 1.2),
                              (b"", 1.3), (bytes([0x80]), 1.4)]
    rig.assert_healthy("malformed MIDI")
    rig.midi_source.queue += [(bytes([0xB0, 70, 0]), 1.5), (bytes([0xB0, 70, 127]), 1.6)]
    rig.frames(1)
    assert rig.show.params["separation_weight"] == pytest.approx(5.0)  # knobs still work


def test_a_truncated_preset_recalled_live(rig, tmp_path):
    user = tmp_path / "user"
    user.mkdir(exist_ok=True)
    truncated = '{"format": "swarm-preset", "version": 1, "params": {"max_speed": 1'
    (user / "slot-4.json").write_text(truncated)
    before = rig.show.params.as_dict()
    rig.show.act(Action("recall_preset", 4))
    rig.assert_healthy("a truncated preset")
    assert rig.show.params.as_dict() == before  # the look stays
    assert (user / "slot-4.json").read_text() == truncated  # the file is left as it was
    assert "slot-4.json" in rig.show.looks.problem


def test_a_shader_with_a_syntax_error_saved_while_running(rig):
    vertex = rig.shaders / "agent.vert"
    vertex.write_text(vertex.read_text() + "\nvoid broken( {\n")
    rig.show._shaders.watch._next = 0.0
    rig.show.poll_shaders(rig.now + 10)
    assert "agent.vert" in rig.show.status["shaders"]
    rig.assert_healthy("a broken shader")  # the last good one keeps drawing


def test_nan_in_the_agent_buffer(rig):
    agents = np.frombuffer(rig.show.swarm.current.read(), np.float32).reshape(-1, 8).copy()
    agents[::50, 0:3] = np.nan  # a driver fault, a bad write
    rig.show.swarm.current.write(agents.tobytes())
    rig.assert_healthy("NaN in the agent buffer")
    assert rig.show.swarm.read_guarded() >= len(agents[::50])  # the guard put them back


def test_hostile_osc(rig):
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    target = ("127.0.0.1", rig.osc.port)
    bomb = b"/swarm/respawn\0\0"
    for _ in range(30):
        bomb = b"#bundle\0" + bytes(8) + struct.pack(">i", len(bomb)) + bomb
    nan = b"/swarm/max_speed\0\0\0\0,f\0\0" + struct.pack(">f", float("nan"))
    huge = b"/swarm/max_speed\0\0\0\0,f\0\0" + struct.pack(">f", 1e30)
    for junk in [bytes(range(256)) * 200, b"", bomb, nan, huge] + [b"\x00" * 8] * 600:
        sender.sendto(junk, target)
    rig.assert_healthy("hostile OSC")
    sender.sendto(b"/swarm/max_speed\0\0\0\0,f\0\0" + struct.pack(">f", 6.5), target)
    sender.close()
    rig.assert_healthy("hostile OSC")
    assert rig.show.params["max_speed"] == 6.5 and rig.osc.rejected >= 600
    assert sum(line.startswith("osc:") for line in rig.messages) <= 2  # not one line each
