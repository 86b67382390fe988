"""Soak: a long show at a fixed time step, with audio from a file and random MIDI traffic.

    python benchmarks/bench_soak.py --minutes 60 --json soak.json [--audio song.wav]
    python benchmarks/bench_soak.py --wall-limit 540 --checkpoint soak.npz ...  # then --resume
    soak.npz

Runs the whole frame (update with audio analysis, modulation and MIDI; simulate; cull; draw)
offscreen, `--minutes` of simulated show time at 1/60 s a frame. MIDI traffic is random: the
shipped mapping's eight knobs turned every frame or so, pad notes (respawn, separation burst)
and now and then a program change that recalls a preset slot with a morph. Without --audio a
synthetic song (beats and a bass line) plays. It reports frame-time percentiles (wall time to
ctx.finish() per frame, CPU work included), the resident memory at the start and every
twentieth of the run beside the grid's size (growth from the first tenth to the end: none
expected), and every failure (none expected). With --wall-limit it stops at a frame, saves
agents, parameters, the MIDI generator and the frame times to --checkpoint and exits 3;
--resume goes on in a new process, and the memory is then reported for each process.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

from swarm_instrument.audio.base import OfflineAudio
from swarm_instrument.audio.files.decode import read_audio
from swarm_instrument.control.looks.atomic import atomic_write_bytes
from swarm_instrument.control.looks.preset_bank import PresetBank
from swarm_instrument.control.midi.midi_in import DEFAULT_MAPPING, Midi
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.loop import Loop, Offscreen, Tick
from swarm_instrument.show.show import Show
from swarm_instrument.visual.gpu.context import create_headless_context

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
    """A MIDI source (control.midi.midi_in's MessageSource) that plays random traffic."""

    def __init__(self, seed: int, program_changes: bool = True) -> None:
        self.rng = np.random.default_rng(seed)
        self.program_changes = program_changes
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
        if rng.random() < 0.001 and self.program_changes:
            out.append(bytes([0xC0, int(rng.integers(0, 6))]))
        self.sent += len(out)
        return [(message, 0.0) for message in out]

    def status(self) -> dict:
        return {"api": "soak", "ports_open": ["soak:random"], "state": "MIDI: random traffic"}

    def close(self) -> None:
        pass


class RecallCounter(logging.Handler):
    """Counts the preset recalls the show says (program changes from the random MIDI)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += record.getMessage().startswith("preset: slot")


class LoopingSong:
    """The soak's clock: 1/60 s a frame from frame `first`, the song's time looping."""

    def __init__(self, duration: float, first: int) -> None:
        self.duration = duration
        self.frame = first

    def next(self):
        tick = Tick((self.frame / 60) % self.duration, 1 / 60)
        self.frame += 1
        return tick


def save_checkpoint(path: str, state: dict, position: np.ndarray, velocity: np.ndarray,
                    times: np.ndarray) -> None:
    """Where the soak stands, to go on in another process (an hour does not fit one call to
    the lent GPU): agents, parameters, the MIDI generator, frame times so far."""
    buffer = io.BytesIO()
    np.savez(buffer, position=position, velocity=velocity, times=times,
             state=np.frombuffer(json.dumps(state).encode(), np.uint8))
    atomic_write_bytes(path, buffer.getvalue(), backup=False)


def load_checkpoint(path: str) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    try:
        with np.load(path) as data:
            state = json.loads(bytes(data["state"]).decode())
            return state, data["position"], data["velocity"], data["times"]
    except (OSError, ValueError, KeyError) as exc:
        raise SystemExit(f"soak: cannot resume from {path}: {exc}; start a new soak without "
                         "--resume") from exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0, help="simulated show minutes")
    parser.add_argument("--count", type=int, default=16384)
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--audio", metavar="WAV", help="audio file (default: a synthetic song)")
    parser.add_argument("--no-midi", action="store_true", help="no MIDI traffic (to compare)")
    parser.add_argument("--no-program-changes", action="store_true",
                        help="knobs and pads only: no preset recalls (to compare)")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--wall-limit", type=float, metavar="SECONDS",
                        help="stop after this much wall time and write --checkpoint, to go "
                             "on with --resume in a new process")
    parser.add_argument("--checkpoint", metavar="PATH.npz", help="where --wall-limit saves")
    parser.add_argument("--resume", metavar="PATH.npz", help="go on from a checkpoint")
    args = parser.parse_args(argv)
    if args.wall_limit is not None and not args.checkpoint:
        parser.error("--wall-limit needs --checkpoint PATH.npz (where to save the progress)")
    width, height = (int(v) for v in args.size.lower().split("x"))


    resumed = load_checkpoint(args.resume) if args.resume else None
    samples = read_audio(args.audio)[0] if args.audio else synthetic_song()
    audio = OfflineAudio(samples, RATE)
    ctx = create_headless_context()
    source = RandomMidi(1, program_changes=not args.no_program_changes)
    if resumed is None:
        frames = round(args.minutes * 60 * 60)
        state = {"frames": frames, "done": 0, "segments": [], "failures": [], "sent": 0,
                 "recalls": 0, "wall_s": 0.0}
        params = Params({"count": args.count, "morph_seconds": 2.0})
        times = np.zeros(frames)
        position = velocity = None
    else:
        state, position, velocity, times = resumed
        frames = state["frames"]
        params = Params(state["params"])
        source.rng.bit_generator.state = state["midi_rng"]
        source.knobs = np.array(state["knobs"])
        source.sent = state["sent"]
    midi = None if args.no_midi else Midi(params, source, mapping_path=DEFAULT_MAPPING,
                                          save_path=None, report=lambda text: None)
    recalls = RecallCounter()
    logging.getLogger("swarm_instrument.show.look_state").addHandler(recalls)
    logging.getLogger("swarm_instrument.show.look_state").setLevel(logging.INFO)
    show = Show(ctx, params, ShowOptions(fixed_dt=1 / 60, position=position, velocity=velocity,
                                         live=False),
                audio=audio, midi=midi, presets=PresetBank())
    sink = Offscreen(show, (width, height))

    first = state["done"]
    memory = [(first, resident_mb(), 0)]
    failures: list[str] = state["failures"]
    started = time.perf_counter()
    frame = first - 1
    loop = Loop(show, LoopingSong(audio.duration, first))
    for frame in range(first, frames):
        ctx.finish()
        t0 = time.perf_counter()
        try:
            loop.frame(*sink.target())
            ctx.finish()
        except Exception as exc:  # noqa: BLE001 - a soak counts failures instead of stopping
            failures.append(f"frame {frame}: {type(exc).__name__}: {exc}")
            if len(failures) > 20:
                break
        times[frame] = (time.perf_counter() - t0) * 1e3
        if (frame + 1) % max(frames // 20, 1) == 0:
            memory.append((frame + 1, resident_mb(), show.swarm.grid_capacity))
            print(f"{(frame + 1) / 3600:.2f} min simulated, frame p50 "
                  f"{np.percentile(times[first:frame + 1], 50):.2f} ms, {memory[-1][1]:.0f} MiB",
                  flush=True)
        if args.wall_limit is not None and time.perf_counter() - started > args.wall_limit:
            break
    done = frame + 1
    memory.append((done, resident_mb(), show.swarm.grid_capacity))
    position, velocity = show.swarm.read_state()
    # Growth within this process, from its first tenth (start-up allocations) to its end.
    settled = next((m for m in memory[1:] if m[0] - first >= (done - first) / 10), memory[-1])
    state["segments"].append({
        "frames": [first, done], "wall_s": time.perf_counter() - started,
        "memory_mib": memory, "memory_growth_mib": memory[-1][1] - settled[1]})
    state.update(done=done, sent=source.sent, failures=failures,
                 recalls=state["recalls"] + recalls.count,
                 wall_s=state["wall_s"] + state["segments"][-1]["wall_s"])
    finite = bool(np.isfinite(position).all() and np.isfinite(velocity).all())
    if done < frames and len(failures) <= 20:
        state.update(params=show.params.as_dict(), midi_rng=source.rng.bit_generator.state,
                     knobs=[int(k) for k in source.knobs])
        save_checkpoint(args.checkpoint, state, position, velocity, times)
        print(f"soak: {done / 3600:.2f} of {frames / 3600:.2f} simulated minutes; go on with "
              f"--resume {args.checkpoint}", flush=True)
        show.release()
        ctx.release()
        return 3
    result = {
        "benchmark": "soak", "renderer": ctx.info["GL_RENDERER"], "minutes": done / 3600,
        "frames": done, "count": show.swarm.count, "size": [width, height],
        "processes": len(state["segments"]), "wall_s": state["wall_s"],
        "frame_ms": {p: float(np.percentile(times[:done], p)) for p in (50, 90, 99, 99.9)},
        "frame_ms_max": float(times[:done].max()),
        "slow_frames_over_16ms": int((times[:done] > 1000 / 60).sum()),
        "segments": state["segments"],
        "memory_growth_mib": max(s["memory_growth_mib"] for s in state["segments"]),
        "midi_messages": source.sent, "presets_recalled": state["recalls"],
        "guarded_agents": show.swarm.read_guarded(),
        "state_finite": finite,
        "failures": failures,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "segments"}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    show.release()
    ctx.release()
    return 1 if failures or not finite else 0


if __name__ == "__main__":
    sys.exit(main())
