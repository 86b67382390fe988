"""What a call costs after an idle (issue 31's light CPU): the live analysis's numpy steps on
2,048 samples, each timed by itself, after nothing (back to back), a 16 ms busy loop, or a
16 ms sleep (as a paced frame waits for its turn); medians of 200 passes, in microseconds.

    python benchmarks/probes/cold_calls.py          # all three, one line each

The figures and what they say are in docs/measured.md (the seventh round here).
"""

from __future__ import annotations

import sys
import time

import numpy as np

STEPS = ("multiply", "rfft", "abs", "log1p", "dot")
MODES = ("b2b", "spin", "paced")


def passes(mode: str, count: int = 200, idle_s: float = 0.016) -> np.ndarray:
    """(count, len(STEPS)) nanoseconds: each step of each pass, after `mode`'s idle."""
    samples = np.random.default_rng(1).standard_normal(2048) * 0.2
    window, out = np.hanning(2048), np.empty(2048)

    def one() -> list[int]:
        stamps = [time.perf_counter_ns()]
        np.multiply(samples, window, out=out)
        stamps.append(time.perf_counter_ns())
        spectrum = np.fft.rfft(out)
        stamps.append(time.perf_counter_ns())
        magnitude = np.abs(spectrum)
        stamps.append(time.perf_counter_ns())
        np.log1p(magnitude * 3.0)
        stamps.append(time.perf_counter_ns())
        float(np.dot(samples, samples))
        stamps.append(time.perf_counter_ns())
        return list(np.diff(stamps))

    for _ in range(50):  # the code and the FFT's plan made once
        one()
    rows = []
    for _ in range(count):
        if mode == "paced":
            time.sleep(idle_s)
        elif mode == "spin":
            end = time.perf_counter() + idle_s
            while time.perf_counter() < end:
                pass
        rows.append(one())
    return np.array(rows)


def main(modes: list[str]) -> None:
    print(f"# microseconds, median of 200 passes: {' '.join(STEPS)}")
    for mode in modes:
        medians = np.median(passes(mode), axis=0) / 1000.0
        print(f"{mode:>6}: " + " ".join(f"{value:7.1f}" for value in medians))


if __name__ == "__main__":
    main(sys.argv[1:] or list(MODES))
