"""Soak: a long show at a fixed time step, with audio from a file and random MIDI traffic.

    python benchmarks/soak.py --minutes 60 --json soak.json [--audio song.wav]

Runs the whole frame (update with audio analysis, modulation and MIDI; simulate; cull; draw)
offscreen, `--minutes` of simulated show time at 1/60 s a frame. MIDI traffic is random: the
shipped mapping's eight knobs turned every frame or so, pad notes (respawn, separation burst)
and now and then a program change that recalls a preset slot with a morph. Without --audio a
synthetic song (beats and a bass line) plays. It reports frame-time percentiles (wall time to
ctx.finish() per frame, CPU work included), the resident memory at the start and every tenth of
the run (growth expected: none), and every failure (none expected).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RATE = 48000


def resident_mb() -> float:
    """Resident memory now (Linux /proc), in MiB."""
    try:
        with open("/proc/self/statm") as stream:
            pages = int(stream.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synthetic_song(seconds: float = 32.0) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    beat = (np.exp(-((t % 0.5) * 30.0)) * np.sin(2 * np.pi * 60 * t)).astype(np.float32)
    bass = 0.2 * np.sin(2 * np.pi * 55 * t) * (np.sin(2 * np.pi * t / 8) > 0)
    hats = 0.05 * np.random.default_rng(0).normal(size=t.size) * ((t % 0.25) < 0.02)
    return np.clip(0.6 * beat + bass + hats, -1, 1).astype(np.float32)


class RandomMidi:
    """A MIDI source (control.midi's MessageSource) that plays random traffic."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.knobs = self.rng.integers(0, 128, size=8)
        self.sent = 0

    def poll(self, now: float) -> None:
        pass

    def drain(self) -> list[tuple[bytes, float]]:
        rng, out = self.rng, []
        for _ in range(rng.poisson(1.5)):
            k = rng.integers(0, 8)
            self.knobs[k] = np.clip(self.knobs[k] + rng.integers(-6, 7), 0, 127)
            out.append(bytes([0xB0, 70 + k, int(self.knobs[k])]))
        if rng.random() < 0.01:
            out.append(bytes([0x90, int(rng.choice([36, 38])), int(rng.integers(1, 128))]))
        if rng.random() < 0.001:
            out.append(bytes([0xC0, int(rng.integers(0, 6))]))
        self.sent += len(out)
        return [(message, 0.0) for message in out]

    def status(self) -> dict:
        return {"api": "soak", "ports_open": ["soak:random"], "state": "MIDI: random traffic"}

    def close(self) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0, help="simulated show minutes")
    parser.add_argument("--count", type=int, default=16384)
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--audio", metavar="WAV", help="audio file (default: a synthetic song)")
    parser.add_argument("--no-midi", action="store_true", help="no MIDI traffic (to compare)")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))

    from audio.base import OfflineAudio
    from audio.wavfile import read_wav
    from control.midi import DEFAULT_MAPPING, Midi
    from control.params import Params
    from control.presets import PresetBank
    from visual.app import Show, ShowOptions
    from visual.gl import create_headless_context

    samples = read_wav(args.audio)[0] if args.audio else synthetic_song()
    audio = OfflineAudio(samples, RATE)
    ctx = create_headless_context()
    params = Params({"count": args.count, "morph_seconds": 2.0})
    source = RandomMidi(1)
    midi = None if args.no_midi else Midi(params, source, mapping_path=DEFAULT_MAPPING,
                                          save_path=None, report=lambda text: None)
    messages: list[str] = []
    show = Show(ctx, params, ShowOptions(fixed_dt=1 / 60), audio=audio, midi=midi,
                presets=PresetBank(), say=messages.append)
    framebuffer = show.renderer.offscreen_framebuffer((width, height))

    frames = round(args.minutes * 60 * 60)
    times = np.empty(frames)
    memory = [(0, resident_mb())]
    failures: list[str] = []
    started = time.perf_counter()
    for frame in range(frames):
        t = frame / 60
        ctx.finish()
        t0 = time.perf_counter()
        try:
            show.update(t % audio.duration)  # the song loops
            show.advance(1 / 60)
            show.draw(framebuffer)
            ctx.finish()
        except Exception as exc:  # noqa: BLE001 - a soak counts failures instead of stopping
            failures.append(f"frame {frame}: {type(exc).__name__}: {exc}")
            if len(failures) > 20:
                break
        times[frame] = (time.perf_counter() - t0) * 1e3
        if (frame + 1) % max(frames // 10, 1) == 0:
            memory.append((frame + 1, resident_mb()))
            print(f"{(frame + 1) / 3600:.2f} min simulated, frame p50 "
                  f"{np.percentile(times[:frame + 1], 50):.2f} ms, {memory[-1][1]:.0f} MiB",
                  flush=True)
    position, velocity = show.swarm.read_state()
    done = frame + 1
    result = {
        "benchmark": "soak", "renderer": ctx.info["GL_RENDERER"], "minutes": done / 3600,
        "frames": done, "count": args.count, "size": [width, height],
        "wall_s": time.perf_counter() - started,
        "frame_ms": {p: float(np.percentile(times[:done], p)) for p in (50, 90, 99, 99.9)},
        "frame_ms_max": float(times[:done].max()),
        "slow_frames_over_16ms": int((times[:done] > 1000 / 60).sum()),
        "memory_mib": memory, "memory_growth_mib": memory[-1][1] - memory[1][1],
        "midi_messages": source.sent, "presets_recalled": sum("preset:" in m for m in messages),
        "guarded_agents": show.swarm.read_guarded(),
        "state_finite": bool(np.isfinite(position).all() and np.isfinite(velocity).all()),
        "failures": failures,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "memory_mib"}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    show.release()
    ctx.release()
    return 1 if failures or not result["state_finite"] else 0


if __name__ == "__main__":
    sys.exit(main())
