"""Songs written as WAV files, for the tests and the benchmarks that play or render one (a
synthetic drum loop from audio/synth.py, a tone): float32 WAV through PyAV's FFmpeg, the
library that reads them back. Any thread (no shared state).
"""

from __future__ import annotations

import os

import numpy as np


def write_wav(path: str | os.PathLike, samples: np.ndarray, rate: int) -> None:
    """Write samples (frames,) or (frames, 1 or 2 channels), clipped to -1..1 as a sound card
    would play them, as a float32 WAV file at `rate` Hz."""
    import av  # noqa: PLC0415 - PyAV takes about a second to import: only when a file is coded
    samples = np.asarray(samples, np.float32)
    if samples.ndim == 1:
        samples = samples[:, None]
    if samples.ndim != 2 or samples.shape[1] not in (1, 2):
        raise ValueError(f"need (frames,) or (frames, 1 or 2) samples, got {samples.shape}")
    layout = "mono" if samples.shape[1] == 1 else "stereo"
    packed = np.clip(samples, -1.0, 1.0).reshape(1, -1)  # "flt": channels interleaved
    with av.open(os.fspath(path), "w", format="wav") as container:
        stream = container.add_stream("pcm_f32le", rate=rate, layout=layout)
        frame = av.AudioFrame.from_ndarray(packed, format="flt", layout=layout)
        frame.sample_rate, frame.pts = rate, 0
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
