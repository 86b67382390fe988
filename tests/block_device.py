"""sounddevice as the live input opens it in this process (audio/input/in_process.py): one
input device whose stream delivers a block when the test says, so a test decides when each
sound reaches the ring."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np


class BlockDevice:
    """One input device, 48 kHz mono; `feed` and `feed_samples` call the stream's callback as
    PortAudio would."""

    class PortAudioError(Exception):
        pass

    def __init__(self, rate: float = 48000.0) -> None:
        self.default = SimpleNamespace(device=[0, -1])
        self.rate = rate
        self.stream = None

    def query_hostapis(self, index=None):
        apis = [{"name": "test"}]
        return apis if index is None else apis[index]

    def query_devices(self, index=None):
        devices = [{"name": "test mic", "hostapi": 0, "max_input_channels": 1,
                    "max_output_channels": 0, "default_samplerate": self.rate, "index": 0}]
        return devices if index is None else devices[index]

    def _terminate(self) -> None:
        pass

    def _initialize(self) -> None:
        pass

    def InputStream(self, **kwargs):  # noqa: N802 - sounddevice's name
        self.stream = SimpleNamespace(start=lambda: None, abort=lambda: None,
                                      close=lambda: None, callback=kwargs["callback"])
        return self.stream

    def feed(self, amplitude: float, blocks: int = 1) -> None:
        """Blocks of 256 samples of a square wave at the Nyquist rate: loud, no DC."""
        for _ in range(blocks):
            block = np.full((256, 1), amplitude, np.float32)
            block[::2] *= -1.0
            self.stream.callback(block, 256, None, None)

    def feed_samples(self, samples: np.ndarray, block: int = 256) -> None:
        """`samples` (mono) in blocks of `block`, as they would arrive."""
        for start in range(0, len(samples), block):
            chunk = np.ascontiguousarray(samples[start:start + block], np.float32)[:, None]
            self.stream.callback(chunk, len(chunk), None, None)
