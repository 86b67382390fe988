"""Synthetic music for benchmarks and the contact sheet: a drum loop whose beats are known.
Pure numpy: any thread."""

from __future__ import annotations

import numpy as np


def drum_loop(bpm: float, seconds: float, rate: int, seed: int = 0) -> np.ndarray:
    """Kick on 1 and 3, snare on 2 and 4, hats on the eighths, noise at -30 dB; the first
    eighth at 0.1 s. Mono float32; the same samples for the same arguments."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(0.2 * rate)) / rate
    kick = 0.9 * np.sin(2 * np.pi * 55 * t) * np.exp(-t / 0.1)
    snare = 0.5 * rng.standard_normal(len(t)) * np.exp(-t / 0.05)
    hat = 0.15 * rng.standard_normal(len(t)) * np.exp(-t / 0.01)
    x = 0.03 * rng.standard_normal(int(seconds * rate))
    period = 60.0 / bpm
    for k, at in enumerate(np.arange(0.1, seconds - 0.3, period / 2)):
        start = int(at * rate)
        sound = (kick if k % 4 == 0 else snare if k % 4 == 2 else 0) + hat
        x[start:start + len(t)] += sound
    return x.astype(np.float32)
