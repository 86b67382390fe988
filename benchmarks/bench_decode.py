"""Time reading a song as --audio-file and --render read it (audio/files/decode.py
`read_audio`), and the memory it takes.

    python benchmarks/bench_decode.py [--minutes 3] [--runs 3] [--json out.json]

A synthetic drum loop (audio/synth.py) of --minutes, 48 kHz stereo, is written as a 16-bit PCM
WAV (what most songs are) and a float32 WAV (what DAWs export), and each is read --runs
times, each time in a fresh process: wall and CPU seconds of `read_audio`, and the peak
resident memory it added over the process after its imports (Linux's VmHWM; FFmpeg's
libraries, loaded on the first read, are charged to it).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import av
import numpy as np

from swarm_instrument.audio.files.wav_writer import write_wav
from swarm_instrument.audio.synth import drum_loop

RATE = 48000

# run in a fresh process, so that each peak is this read's own (VmHWM: the resident high-water
# mark of this process's memory, Linux; ru_maxrss would carry the parent's peak over the exec)
_READ_ONCE = """
import json, re, sys, time
from swarm_instrument.audio.files.decode import read_audio

def high_water_kib():
    return int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
before = high_water_kib()
wall, cpu = time.perf_counter(), time.process_time()
samples, rate = read_audio(sys.argv[1])
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "peak_added_mib": (high_water_kib() - before)
                  / 1024, "frames": len(samples), "channels": samples.shape[1], "rate": rate}))
"""


def write_pcm16(path: Path, samples: np.ndarray) -> None:
    """A 16-bit PCM WAV through PyAV (audio/files/wav_writer.py writes float32 only)."""
    pcm = (np.clip(samples, -1.0, 1.0 - 1 / 32768) * 32768).round().astype(np.int16)
    with av.open(str(path), "w", format="wav") as container:
        stream = container.add_stream("pcm_s16le", rate=RATE, layout="stereo")
        frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="stereo")
        frame.sample_rate, frame.pts = RATE, 0
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)


def read_once(song: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", _READ_ONCE, str(song)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    left = drum_loop(120.0, args.minutes * 60, RATE)
    stereo = np.stack([left, np.roll(left, RATE // 100)], axis=1)
    results = {}
    with tempfile.TemporaryDirectory(prefix="swarm-decode-bench-") as folder:
        songs = {"pcm16": Path(folder) / "pcm16.wav", "float32": Path(folder) / "float32.wav"}
        write_pcm16(songs["pcm16"], stereo)
        write_wav(songs["float32"], stereo, RATE)
        for kind, song in songs.items():
            runs = [read_once(song) for _ in range(args.runs)]
            assert all(r["frames"] == len(stereo) and r["channels"] == 2 for r in runs), runs
            results[kind] = {
                "mib_on_disk": song.stat().st_size / 2 ** 20,
                "wall_s": statistics.median(r["wall_s"] for r in runs),
                "cpu_s": statistics.median(r["cpu_s"] for r in runs),
                "peak_added_mib": statistics.median(r["peak_added_mib"] for r in runs),
            }
            row = results[kind]
            print(f"{kind:8s} {row['mib_on_disk']:6.1f} MiB on disk: {row['wall_s']:.3f} s wall, "
                  f"{row['cpu_s']:.3f} s CPU, peak memory +{row['peak_added_mib']:.0f} MiB "
                  f"(median of {args.runs})")
    result = {"minutes": args.minutes, "rate": RATE, "channels": 2,
              "songs": results, "machine": platform.processor() or platform.machine(),
              "python": platform.python_version()}
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
