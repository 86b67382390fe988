"""Real audio through sounddevice and PortAudio on a JACK server with the dummy driver.

A second JACK client (tests/jackd.py) plays tone bursts into the instrument's input ports,
which its audio worker process opened; the level must rise within one block plus one frame
(the shared-memory ring adds no frame). File playback and --list-devices still use PortAudio
in this process. The module starts its own server and fails, never skips, without jackd: CI
installs jackd2 and libportaudio2. The server quitting and returning: test_audio_worker.py.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import numpy as np
import pytest
import sounddevice as sd

from swarm_instrument.audio.files.playback import AudioFile
from swarm_instrument.audio.files.wav_writer import write_wav
from swarm_instrument.audio.input.devices import list_input_devices
from swarm_instrument.audio.input.live_input import AudioInput
from swarm_instrument.audio.source import open_audio

from jackd import PERIOD, RATE, ToneBurstClient

FRAME = 1 / 60
BLOCK = PERIOD / RATE


@pytest.fixture(scope="module")
def portaudio_again():
    """PortAudio started again once the module's JACK server has quit (see `jack`)."""
    yield
    sd._initialize()


@pytest.fixture(scope="module")
def jack(portaudio_again, jack):
    """The shared JACK server (tests/conftest.py), and this process's PortAudio (file
    playback, --list-devices) let go of it while it still runs: after it quits, PortAudio
    19.6 hangs or aborts in Pa_Terminate. The live input needs no such care: its PortAudio
    is in its worker."""
    yield jack
    sd._terminate()


class Frames:
    """A 60 fps main loop: sleeps to each frame's deadline, then updates the source."""

    def __init__(self, source) -> None:
        self.source = source
        self.deadline = time.monotonic()
        self.last = self.deadline

    def step(self) -> float:
        self.deadline += FRAME
        time.sleep(max(0.0, self.deadline - time.monotonic()))
        self.last = time.monotonic()
        self.source.update(self.last)
        return self.last


def test_list_devices_shows_jack(jack):
    sd._terminate()  # PortAudio enumerates devices only when it starts
    sd._initialize()
    listing = list_input_devices()
    assert "system, JACK Audio Connection Kit (2 in, 48000 Hz)" in listing


def first_sound(ring, start: int) -> int:
    """The ring's index (as `written` counts) of its first sample not silent from `start` on."""
    out = np.empty(ring.written - start, np.float32)
    assert ring.read_from(start, out), "the ring moved on before it was read"
    loud = np.flatnonzero(np.abs(out) > 1e-4)
    assert len(loud), "no sound in the ring"
    return start + int(loud[0])


def test_level_rises_at_the_first_frame_that_holds_a_block_of_sound(jack):
    """A tone burst into the instrument's ports: the level rises at the first frame whose
    update could read a whole block of it, never a frame later. Told by the ring's sample
    counts (a handshake), not by clocks: the frame before the rise had read the ring up to a
    point short of the burst's first whole block."""
    source = open_audio()  # the default input: JACK's system device, in a worker process
    try:
        assert isinstance(source, AudioInput) and source.state == "ok", source.message
        assert source.device == "system" and source.rate == RATE
        assert source.worker_pid is not None and source.worker_pid != os.getpid()
        # the frame waits for the worker's measures of the blocks it read (a handshake: on a
        # busy machine they may take longer than the show's 3 ms)
        source.latch.wait_s = 5.0
        with ToneBurstClient(jack, frequency=1000.0, amplitude=0.5) as burst:
            ports = burst.input_ports()
            assert len(ports) == 2, ports  # the instrument's two input ports
            for port in ports:
                burst.connect(port)
            frames = Frames(source)
            for _ in range(30):
                frames.step()
            assert source.has_data and source.level < 0.05  # the dummy driver's silence

            latencies, slack = [], []
            for _ in range(8):
                for _ in range(30):  # 0.5 s of silence: the level falls back below 0.5
                    frames.step()
                assert source.level < 0.5
                silent_until = source.ring.written - PERIOD  # all silence: nothing armed yet
                burst.burst(0.1)
                unrisen = None  # what the last update without a rise had in the ring
                for _ in range(60):  # a hang's bound: the block comes when the machine lets it
                    had = source.ring.written  # the update reads at least this far
                    now = frames.step()
                    if source.level > 0.5:
                        break
                    unrisen = had
                assert source.level > 0.5, "the tone burst never reached the level"
                assert burst.started_at is not None
                latencies.append(now - burst.started_at)  # said, not asserted
                if unrisen is not None:  # samples of the burst's first block it lacked
                    slack.append(first_sound(source.ring, silent_until) + PERIOD - unrisen)
            for _ in range(3):  # until the FFT window holds only the tone, not its start
                frames.step()
            assert source.bands.mid > 0.9  # and it was the 1 kHz tone that came through
            # measured in the worker's process, block by block, not in this frame
            assert source.ring.features.count > 8 * 60

        print(f"\nJACK latency, burst start to level > 0.5 at 60 fps, {PERIOD}-sample blocks "
              f"at {RATE} Hz: median {statistics.median(latencies) * 1000:.1f} ms, "
              f"max {max(latencies) * 1000:.1f} ms (one block {BLOCK * 1000:.1f} ms + "
              f"one frame {FRAME * 1000:.1f} ms)")
        assert all(lacked > 0 for lacked in slack), slack  # never a whole block unheard
        telemetry = source.telemetry()
        assert telemetry["state"] == "ok" and telemetry["blocks"] > 100
        assert telemetry["blocks_dropped"] == 0 and telemetry["worker_restarts"] == 0
    finally:
        source.close()
    assert source.state == "closed" and not Path(f"/proc/{telemetry['worker_pid']}").exists()


def test_file_plays_out_of_jack_and_through_the_analysis(jack, tmp_path):
    path = tmp_path / "tone.wav"
    t = np.arange(RATE) / RATE
    write_wav(path, np.stack([0.5 * np.sin(2 * np.pi * 100 * t)] * 2, axis=1), RATE)
    sd._terminate()
    sd._initialize()
    source = AudioFile(path, sd=sd)
    try:
        assert source.playing_out_loud, source.message
        assert source.device == "tone.wav -> system"
        frames = Frames(source)
        for _ in range(20):
            frames.step()
        assert source.ring.blocks > 0  # the output callback is what feeds the analysis
        assert source.level > 0.9 and source.bands.low > 0.9 and source.has_data
    finally:
        source.close()
