"""Audio faults without a device: malformed blocks, a stream that stops, a device that
vanishes and returns, a close that hangs, no input device, no PortAudio at all.

A fake sounddevice module stands in for PortAudio. Like PortAudio it only sees devices
plugged in at its last (re)initialisation, and its streams deliver blocks only when a test
calls `feed`. Given it, `AudioInput` opens its streams in this process (the worker's logic
without the worker process), so the watchdog and back-off run here without a device. Time is
the `now` each test passes to `update`, so nothing here sleeps.
"""

from __future__ import annotations

import importlib.abc
import json
import math
import sys
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from swarm_instrument.audio.files.playback import AudioFile
from swarm_instrument.audio.files.wav_writer import write_wav
from swarm_instrument.audio.input.devices import (
    AudioProblem,
    list_input_devices,
    resolve_input_device,
    stable_name,
)
from swarm_instrument.audio.input.live_input import AudioInput
from swarm_instrument.audio.source import Silence, open_audio

RATE = 48000
BLOCK = 256
FPS = 60


def mic(name: str = "USB Mic", channels: int = 2) -> dict:
    return {"name": name, "hostapi": 0, "max_input_channels": channels,
            "max_output_channels": 0, "default_samplerate": float(RATE)}


def speakers(name: str = "Speakers") -> dict:
    return {"name": name, "hostapi": 0, "max_input_channels": 0, "max_output_channels": 2,
            "default_samplerate": float(RATE)}


class PortAudioError(Exception):
    pass


class FakeStream:
    def __init__(self, sd: FakeSoundDevice, **kwargs) -> None:
        self.sd, self.kwargs = sd, kwargs
        self.callback = kwargs["callback"]
        self.started = self.closed = self.dead = False  # dead: its device is gone
        self.hang = sd.hang_on_close

    def start(self) -> None:
        self.started = True

    def abort(self) -> None:
        if self.hang is not None:
            self.hang.wait()  # like PortAudio after the JACK server quit

    def close(self) -> None:
        self.closed = True

    def feed(self, block: object, status: object = None) -> None:
        frames = len(block) if hasattr(block, "__len__") else 0
        self.callback(block, frames, None, status)  # the test fails if this raises


class FakeSoundDevice:
    """The parts of sounddevice the audio package uses."""

    def __init__(self, devices: list[dict], default_input: int = 0) -> None:
        self.plugged = list(devices)  # what is connected
        self._visible = list(devices)  # what PortAudio saw at its last initialisation
        self.default = SimpleNamespace(device=[default_input, -1])
        self.streams: list[FakeStream] = []
        self.rescans = 0
        self.fail_open: str | None = None
        self.hang_on_close: threading.Event | None = None
        self.PortAudioError = PortAudioError

    def query_hostapis(self, index: int | None = None):
        apis = [{"name": "Fake API"}]
        return apis if index is None else apis[index]

    def query_devices(self, index: int | None = None):
        listed = [dict(d, index=i) for i, d in enumerate(self._visible)]
        return listed if index is None else listed[index]

    def _terminate(self) -> None:
        pass

    def _initialize(self) -> None:
        self.rescans += 1
        self._visible = list(self.plugged)

    def InputStream(self, **kwargs) -> FakeStream:  # noqa: N802 - sounddevice's name
        device = kwargs["device"]
        if device >= len(self._visible) or self._visible[device] not in self.plugged:
            raise PortAudioError("Error opening InputStream: Device unavailable [PaErrorCode "
                                 "-9985]")
        if self.fail_open:
            raise PortAudioError(self.fail_open)
        stream = FakeStream(self, **kwargs)
        self.streams.append(stream)
        return stream

    @property
    def stream(self) -> FakeStream:
        return self.streams[-1]


def sine_block(amplitude: float = 0.5, channels: int = 2) -> np.ndarray:
    t = np.arange(BLOCK) / RATE
    return np.repeat((amplitude * np.sin(2 * np.pi * 300 * t))[:, None], channels,
                     axis=1).astype(np.float32)


class Clock:
    """Frames at 60 fps; each frame may feed the current stream a few blocks."""

    def __init__(self, source: AudioInput, sd: FakeSoundDevice) -> None:
        self.source, self.sd, self.now = source, sd, 100.0

    def frames(self, count: int, feed: bool) -> list[float]:
        levels = []
        for _ in range(count):
            self.now += 1 / FPS
            stream = self.sd.streams[-1] if self.sd.streams else None
            if feed and stream and not (stream.closed or stream.dead):
                for _ in range(3):
                    stream.feed(sine_block())
            self.source.update(self.now)
            # reopening runs on a helper thread: let it finish, so the next frame takes it
            assert self.source.wait_for_reopening()
            levels.append(self.source.level)
        return levels

    def run_until(self, seconds: float, feed: bool) -> None:
        self.frames(round(seconds * FPS), feed)


def test_callback_survives_malformed_blocks():
    sd = FakeSoundDevice([mic()])
    source = AudioInput(sd=sd)
    assert source.state == "ok" and source.device == "USB Mic"
    stream = sd.stream
    assert stream.kwargs["dtype"] == "float32" and stream.kwargs["samplerate"] == RATE
    nan_block = sine_block()
    nan_block[::5] = np.nan

    class BadStatus:
        def __bool__(self) -> bool:
            return True

        @property
        def input_overflow(self) -> bool:
            raise RuntimeError("broken flags")

    stream.feed(None)
    stream.feed([0.1, 0.2])
    stream.feed(np.zeros((BLOCK, 2), np.int16))
    stream.feed(np.zeros((BLOCK, 2, 2), np.float32))
    stream.feed(np.zeros((0, 2), np.float32))
    stream.feed(np.zeros((1 << 17, 2), np.float32))  # larger than the ring can take
    stream.feed(sine_block(), BadStatus())
    stream.feed(nan_block)
    stream.feed(sine_block(), SimpleNamespace(input_overflow=True))
    stream.feed(sine_block().astype(np.float64))  # a stray float64 block still counts
    ring = source.ring
    assert (ring.malformed, ring.oversized) == (5, 1)
    assert ring.blocks == 4 and ring.overflows == 1
    assert ring.errors == 1  # the flags that raised
    source.update(1.0)
    assert math.isfinite(source.level) and source.level > 0.5  # NaN samples did not poison it
    telemetry = source.telemetry()
    assert telemetry["blocks_dropped"] == 7 and telemetry["overflows"] == 1
    json.dumps(telemetry)


def test_a_stream_that_stops_goes_quiet_and_is_reopened():
    sd = FakeSoundDevice([mic()])
    source = AudioInput(sd=sd)
    clock = Clock(source, sd)
    levels = clock.frames(30, feed=True)
    assert levels[-1] > 0.9 and source.has_data and source.state == "ok"
    assert source.take_messages() == []

    # the driver stalls: no blocks at all
    before = len(sd.streams)
    clock.run_until(0.45, feed=False)
    assert source.state == "ok"  # not yet: a hiccup is not a loss
    clock.run_until(0.1, feed=False)
    assert source.state == "audio lost" and not source.has_data
    assert sd.streams[-1].closed
    lost = source.take_messages()
    assert len(lost) == 1 and "audio lost" in lost[0] and "USB Mic" in lost[0]
    falling = clock.frames(round(0.45 * FPS), feed=False)
    assert all(b <= a for a, b in zip(falling, falling[1:]))  # a smooth fall, no jump
    assert falling[-1] < 0.2
    assert len(sd.streams) == before  # the first retry waits 0.5 s
    clock.run_until(0.1, feed=False)
    assert len(sd.streams) == before + 1  # reopened by name...
    assert source.state == "audio lost" and source.take_messages() == []  # ...but silent
    clock.run_until(0.45, feed=False)
    assert len(sd.streams) == before + 1 and source.state == "audio lost"
    clock.run_until(0.1, feed=False)  # a reopened stream that stays silent is dropped...
    assert len(sd.streams) == before + 1 and sd.streams[-1].closed
    clock.run_until(0.45, feed=False)  # ...and tried again 1 s after the last try (back-off)
    assert len(sd.streams) == before + 2 and not sd.streams[-1].closed
    assert source.take_messages() == []  # the loss was said once; retries stay quiet
    clock.frames(1, feed=True)  # blocks again: only now is audio back
    assert source.state == "ok" and source.has_data
    assert source.take_messages() == ["audio back: 'USB Mic' reopened"]
    assert clock.frames(20, feed=True)[-1] > 0.9
    assert source.opens == 3
    telemetry = source.telemetry()
    assert telemetry["worker_restarts"] == 2 and telemetry["worker_pid"] is None


def test_a_device_that_vanishes_and_returns_is_reopened_by_name():
    sd = FakeSoundDevice([speakers(), mic("Scarlett 2i2 USB (hw:1,0)")], default_input=1)
    source = AudioInput("scarlett", sd=sd)
    clock = Clock(source, sd)
    clock.frames(20, feed=True)
    assert source.state == "ok" and source.device == "Scarlett 2i2 USB (hw:1,0)"

    sd.plugged = [speakers()]  # unplugged
    sd.stream.dead = True
    attempts = source.attempts
    retry_times = []
    for _ in range(round(12 * FPS)):
        clock.frames(1, feed=True)
        if source.attempts != attempts:
            attempts = source.attempts
            retry_times.append(clock.now)
    assert source.state == "audio lost" and source.level < 0.01
    assert len(source.take_messages()) == 1  # said once, not at every retry
    gaps = np.diff(retry_times)
    np.testing.assert_allclose(gaps[:3], [1.0, 2.0, 4.0], atol=1.5 / FPS)  # back-off
    assert sd.rescans >= len(retry_times)  # each try looks for newly plugged devices

    # it comes back on another card number and another index
    sd.plugged = [mic("Webcam"), speakers(), mic("Scarlett 2i2 USB (hw:2,0)")]
    clock.run_until(5.5, feed=True)
    assert source.state == "ok" and source.device == "Scarlett 2i2 USB (hw:2,0)"
    assert sd.stream.kwargs["device"] == 2
    assert clock.frames(20, feed=True)[-1] > 0.9
    assert source.take_messages() == ["audio back: 'Scarlett 2i2 USB (hw:2,0)' reopened"]


def test_a_stream_whose_close_hangs_leaves_the_show_running():
    """PortAudio 19.6 hangs for good closing a stream whose JACK server quit."""
    sd = FakeSoundDevice([mic("system")])
    source = AudioInput(sd=sd, close_timeout_s=0.05)
    clock = Clock(source, sd)
    clock.frames(10, feed=True)
    sd.hang_on_close = sd.stream.hang = threading.Event()
    try:
        clock.run_until(0.55, feed=False)
        assert source.state == "audio lost"
        assert "reopening it" in source.take_messages()[0]
        clock.run_until(0.55, feed=False)  # the first reopening finds the old stream hung
        assert source.state == "audio lost"
        [message] = source.take_messages()
        assert "PortAudio hangs on 'system'" in message and "restart the instrument" in message
        attempts = source.attempts
        clock.run_until(10.0, feed=False)  # and it never touches PortAudio again
        assert source.attempts == attempts and len(sd.streams) == 1
        source.close()
    finally:
        sd.hang_on_close.set()


def test_no_input_device_runs_silent_and_says_what_to_do():
    sd = FakeSoundDevice([speakers()], default_input=-1)
    source = open_audio(sd=sd)
    assert source.state == "no input device"
    [message] = source.take_messages()
    assert "--audio-device" in message and "--list-devices" in message
    source.update(1.0)
    source.update(2.0)
    assert source.level == 0.0 and not source.has_data
    assert source.attempts == 1  # nothing asked for, nothing there: no rescans every frame
    assert "no audio inputs found" in list_input_devices(sd)


def test_a_named_device_plugged_in_later_is_picked_up():
    sd = FakeSoundDevice([speakers()], default_input=-1)
    source = AudioInput("zoom", sd=sd)
    assert source.state == "no input device"
    [message] = source.take_messages()
    assert "'zoom'" in message and "--list-devices" in message
    sd.plugged = [speakers(), mic("Zoom H4n")]
    clock = Clock(source, sd)
    clock.run_until(1.1, feed=True)
    assert source.state == "ok" and source.device == "Zoom H4n" and source.has_data


def test_a_device_that_fails_to_open_names_itself():
    sd = FakeSoundDevice([mic("Busy Interface")])
    sd.fail_open = "Error opening InputStream: Device unavailable [PaErrorCode -9985]"
    source = AudioInput(sd=sd)
    assert source.state == "device failed"
    [message] = source.take_messages()
    assert "'Busy Interface'" in message and "Device unavailable" in message
    sd.fail_open = None
    Clock(source, sd).run_until(1.1, feed=True)
    assert source.state == "ok" and source.level > 0.9


class _NoPortAudio(importlib.abc.MetaPathFinder):
    """Makes `import sounddevice` fail as it does when libportaudio is missing."""

    def find_spec(self, name, path=None, target=None):
        if name == "sounddevice":
            raise OSError("PortAudio library not found")
        return None


@pytest.fixture
def no_portaudio(monkeypatch):
    monkeypatch.delitem(sys.modules, "sounddevice", raising=False)
    finder = _NoPortAudio()
    sys.meta_path.insert(0, finder)
    yield
    sys.meta_path.remove(finder)


def test_no_portaudio_at_all(no_portaudio, tmp_path, monkeypatch):
    with pytest.raises(OSError):
        import sounddevice  # noqa: F401 - the simulation works
    # the live input loads PortAudio in its worker process: there, a sounddevice that fails
    # as the real one does when libportaudio is missing comes first on the path
    missing = tmp_path / "no-portaudio"
    missing.mkdir()
    (missing / "sounddevice.py").write_text("raise OSError('PortAudio library not found')\n")
    monkeypatch.setenv("PYTHONPATH", str(missing))
    source = open_audio()
    try:
        assert isinstance(source, AudioInput) and source.state == "no PortAudio"
        [message] = source.take_messages()
        assert "PortAudio library not found" in message and "libportaudio2" in message
        for now in (1.0, 1.5, 2.0, 10.0):
            source.update(now)
        assert source.level == 0.0 and not source.has_data
        assert source.telemetry()["state"] == "no PortAudio"
        assert source.attempts == 1  # no retries: nothing changes without a restart
    finally:
        source.close()
    assert "libportaudio2" in list_input_devices()  # this process's PortAudio is missing too

    # a file still plays, silently, through the same analysis
    path = tmp_path / "tone.wav"
    write_wav(path, 0.5 * np.sin(2 * np.pi * 300 * np.arange(RATE) / RATE), RATE)
    played = open_audio(file=path)
    assert isinstance(played, AudioFile) and not played.playing_out_loud
    assert "silently" in played.take_messages()[0]
    for i in range(1, 31):
        played.update(i / FPS)
    assert played.level > 0.9 and played.state == "file"


def test_device_names_resolve_like_sounddevice():
    devices = [dict(mic("Built-in Microphone"), index=0),
               dict(mic("USB Audio CODEC (hw:1,0)"), index=3),
               dict(mic("USB Audio Interface (hw:2,0)"), index=5)]
    assert resolve_input_device(devices, 0, None)["index"] == 0
    assert resolve_input_device(devices, 0, 3)["index"] == 3
    assert resolve_input_device(devices, 0, "5")["index"] == 5
    assert resolve_input_device(devices, 0, "built-in")["index"] == 0
    assert resolve_input_device(devices, 0, "usb audio codec (hw:4,0)")["index"] == 3
    with pytest.raises(AudioProblem, match="matches 2 inputs"):
        resolve_input_device(devices, 0, "usb")
    with pytest.raises(AudioProblem, match="no input device has that index"):
        resolve_input_device(devices, 0, 7)
    with pytest.raises(AudioProblem, match="'zoom': no input device's name contains it"):
        resolve_input_device(devices, 0, "zoom")
    assert stable_name("USB Audio CODEC (hw:1,0)") == "USB Audio CODEC"
    listing = list_input_devices(FakeSoundDevice([speakers(), mic("Built-in Microphone")],
                                                 default_input=1))
    assert "> " in listing and "Built-in Microphone" in listing and "Speakers" not in listing


def test_a_bad_audio_file_falls_back_to_silence(tmp_path):
    missing = open_audio(file=tmp_path / "nope.wav")
    assert isinstance(missing, Silence) and missing.state == "no audio file"
    assert "nope.wav" in missing.take_messages()[0]
    text = tmp_path / "notes.wav"
    text.write_text("not audio")
    assert "not a WAV file" in open_audio(file=text).take_messages()[0]


def test_portaudio_failing_to_list_devices_is_a_message_not_a_crash():
    sd = FakeSoundDevice([mic()])

    def broken(index=None):
        raise PortAudioError("Error querying device -1")

    sd.query_devices = broken
    source = AudioInput(sd=sd)
    assert source.state == "device failed"
    assert "cannot list audio devices: Error querying device -1" in source.take_messages()[0]
