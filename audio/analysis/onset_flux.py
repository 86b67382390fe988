"""Onset strength, hop by hop: the beat tracker's view of the sound. Main thread (pure numpy).

Each hop of HOP_S (about 10 ms; 512 samples at 44.1 and 48 kHz) a Hann window of twice the hop
ending at the hop's last sample is turned into the energy of BANDS bands spaced evenly in log
frequency (30 Hz to 16 kHz), compressed as log(1 + C x) so a soft note and a loud drum both
register, and the rise of each band from the hop before, kept where it rises, is summed: the
spectral flux. Three sums come out:
- `full`: every band, any note or drum: the tempo is read from it;
- `high`: the bands above HIGH_HZ (snare, claps, hats, cymbals);
- `kick`: the bins from KICK_HZ[0] to KICK_HZ[1] of a window eight times as long (85 ms at
  48 kHz: 12 Hz a bin), where a kick drum lives and a bass line mostly does not.
The beat is placed on `kick` and `high` (beats.py): the mid bands, where bass lines and chords
speak, put it on the off-beat of house music (an off-beat bass, measured stronger there than
the kick on the beat), where these two put it on the beat in every song of the benchmark.

Samples arrive in any number (a frame's worth); the hops they complete are computed together
in one batch, so the cost is a few numpy calls a frame, whatever the frame rate.
"""

from __future__ import annotations

import numpy as np

HOP_S = 0.0107  # about 94 hops a second
BANDS = 24
HIGH_HZ = 2000.0
KICK_HZ = (20.0, 70.0)
LONG = 8  # the kick's window, in hops
COMPRESSION = 1000.0
_EMPTY = np.zeros(0, np.float32)


def hop_size(rate: float) -> int:
    """The power of two nearest HOP_S at `rate`: 512 at 44.1 and 48 kHz, 1024 at 96 kHz."""
    return int(2 ** round(np.log2(rate * HOP_S)))


def band_matrix(rate: float, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(bands x bins) averaging matrix and each band's lower edge (Hz). A band too narrow to
    hold a bin takes the nearest one, so every band sees something."""
    freqs = np.fft.rfftfreq(size, 1.0 / rate)
    edges = np.geomspace(30.0, min(16000.0, rate / 2.0), BANDS + 1)
    matrix = np.zeros((BANDS, len(freqs)), np.float32)
    for band in range(BANDS):
        inside = (freqs >= edges[band]) & (freqs < edges[band + 1])
        if not inside.any():
            inside[np.argmin(np.abs(freqs - np.sqrt(edges[band] * edges[band + 1])))] = True
        matrix[band, inside] = 1.0 / inside.sum()
    return matrix, edges[:-1]


class OnsetFlux:
    """Turns a stream of mono samples into two onset strengths a hop (`full`, `low`)."""

    def __init__(self, rate: float) -> None:
        self.rate = float(rate)
        self.hop = hop_size(rate)
        self.size = 2 * self.hop
        self.fps = self.rate / self.hop  # hops a second
        self._window = np.hanning(self.size).astype(np.float32)
        matrix, lower = band_matrix(self.rate, self.size)
        self._matrix = np.ascontiguousarray(matrix.T)
        self._high = lower >= HIGH_HZ
        self.long = LONG * self.hop
        freqs = np.fft.rfftfreq(self.long, 1.0 / self.rate)
        bins = np.flatnonzero((freqs >= KICK_HZ[0]) & (freqs <= KICK_HZ[1]))
        angle = 2 * np.pi * np.outer(np.arange(self.long), bins) / self.long
        window = np.hanning(self.long)[:, None]
        # cosines then sines, windowed: two real products (float32 BLAS), not a complex one
        self._kick_basis = np.ascontiguousarray(
            np.hstack([np.cos(angle) * window, np.sin(angle) * window]).astype(np.float32))
        self._kick_bins = len(bins)
        self._buffer = np.zeros(self.long + 8 * self.hop, np.float32)
        self._filled = self.long - self.hop  # the window before the first hop is silence
        self._previous = np.zeros(BANDS, np.float32)
        self._previous_kick = np.zeros(len(bins), np.float32)

    @property
    def pending(self) -> int:
        """Samples of a hop not yet complete."""
        return self._filled - (self.long - self.hop)

    def push(self, samples: np.ndarray) -> tuple[np.ndarray, ...]:
        """Take new samples; return the (full, high, kick) flux of every hop they completed,
        and each hop's mean square (its loudness)."""
        samples = np.asarray(samples, np.float32)
        parts = []
        done = 0
        while done < len(samples):
            room = len(self._buffer) - self._filled
            take = min(room, len(samples) - done)
            self._buffer[self._filled:self._filled + take] = samples[done:done + take]
            self._filled += take
            done += take
            parts.append(self._hops())
        if not parts:
            return _EMPTY, _EMPTY, _EMPTY, _EMPTY
        if len(parts) == 1:
            return parts[0]
        return tuple(np.concatenate(column) for column in zip(*parts, strict=True))

    def _hops(self) -> tuple[np.ndarray, ...]:
        count = (self._filled - self.long) // self.hop + 1
        if count <= 0:
            return _EMPTY, _EMPTY, _EMPTY, _EMPTY
        frames = np.lib.stride_tricks.sliding_window_view(
            self._buffer[:self.long + (count - 1) * self.hop], self.long)[::self.hop]
        short = frames[:, self.long - self.size:]
        fresh = frames[:, self.long - self.hop:]  # each hop's new samples
        energy = np.einsum("ij,ij->i", fresh, fresh) / self.hop
        spectrum = np.abs(np.fft.rfft(short * self._window, axis=1)).astype(np.float32)
        rise = self._rise(np.log1p(COMPRESSION * (spectrum @ self._matrix)), "_previous")
        parts = frames @ self._kick_basis
        real, imaginary = parts[:, :self._kick_bins], parts[:, self._kick_bins:]
        kick = self._rise(np.log1p(COMPRESSION * np.sqrt(real * real + imaginary * imaginary)),
                          "_previous_kick")
        used = count * self.hop
        keep = self._filled - used
        self._buffer[:keep] = self._buffer[used:self._filled]
        self._filled = keep
        return rise.sum(axis=1), rise[:, self._high].sum(axis=1), kick.sum(axis=1), energy

    def _rise(self, bands: np.ndarray, previous: str) -> np.ndarray:
        """Each band's rise from the hop before, where it rose."""
        rise = np.diff(bands, axis=0, prepend=getattr(self, previous)[None, :])
        np.maximum(rise, 0.0, out=rise)
        setattr(self, previous, bands[-1].copy())
        return rise

    def reset_window(self) -> None:
        """Forget the partial window (samples were lost): the next hop starts on silence."""
        self._buffer[:] = 0.0
        self._filled = self.long - self.hop
