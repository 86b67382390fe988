"""Time an offline render (`--render`) as a user runs it, and hold its picture against the
frames the renderer drew.

    python benchmarks/bench_render.py --seconds 10 --size 1920x1080 --fps 60 --json out.json

A synthetic 120 BPM drum loop (audio/synth.py) of --seconds is written as a WAV file and
rendered to H.264 through show/offline/offline_render.py with the bundled look --preset, once each
way:

    gpu     the frames turned into 4:2:0 video on the GPU, read back two frames late
            (visual/output/yuv.py): how renders run now
    rgb     the frames read back as RGB each frame and converted by swscale on the encoder's
            thread (how renders ran before), for the ratio
    both at the old default encoding (x264 medium, CRF 18), then the GPU path at the default
    now (visual/output/video.py DEFAULT_PRESET, DEFAULT_CRF); --presets and --try PRESET:CRF add
    others (speed against quality)

Each reports frames of video a second (wall time of the render, the encoder's finish
included). Quality: for the first --quality frames of each way, every frame drawn is read back
(which waits: those frames are not timed) and compared with the decoded video, PSNR in dB of
the worst frame and the mean.
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import av
import numpy as np

from swarm_instrument.audio.files.wav_writer import write_wav
from swarm_instrument.audio.synth import drum_loop
from swarm_instrument.control.looks.preset_bank import PresetBank
from swarm_instrument.control.looks.presets import apply_preset, load_preset
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.show.cli.arguments import build_parser
from swarm_instrument.show.cli.options import options_from_args
from swarm_instrument.show.offline.offline_render import render
from swarm_instrument.show.offline.progress import Progress
from swarm_instrument.show.offline.render_job import plan_render
from swarm_instrument.visual.output import yuv
from swarm_instrument.visual.output.video import DEFAULT_CRF, DEFAULT_PRESET


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    error = np.mean((a.astype(float) - b.astype(float)) ** 2)
    return float(10 * np.log10(255.0 ** 2 / max(error, 1e-12)))


def render_once(song: Path, out: Path, args: argparse.Namespace, *, gpu: bool, preset: str,
                crf: float | None = None, frames: int | None = None, keep: bool = False
                ) -> dict:
    supported = yuv.supported
    yuv.supported = supported if gpu else (lambda size: False)
    try:
        argv = ["--render", str(song), "--out", str(out), "--overwrite", "--size",
                f"{args.size[0]}x{args.size[1]}", "--fps", f"{args.fps:g}", "--preset",
                args.preset, "--seed", "1", "--encoder-preset", preset]
        if frames is not None:
            argv += ["--frames", str(frames)]
        if crf is not None:
            argv += ["--crf", f"{crf:g}"]
        cli = build_parser().parse_args(argv)
        params = Params()  # the look as instrument.py's --preset gives it
        routes = apply_preset(load_preset(PresetBank().resolve(args.preset)), params)
        job, routes = plan_render(cli, params, routes)
        drawn: list[np.ndarray] = []
        width, height = args.size

        def observe(show, index, t):
            pixels = show.renderer.offscreen_framebuffer(args.size).read(components=3,
                                                                          alignment=1)
            drawn.append(np.frombuffer(pixels, np.uint8).reshape(height, width, 3)[::-1])

        started = time.perf_counter()
        result = render(job, params, options_from_args(cli, params, render=True), routes,
                        observe=observe if keep else None,
                        progress=Progress(job.frames, io.StringIO()))
        seconds = time.perf_counter() - started
    finally:
        yuv.supported = supported
    row = {"way": "gpu" if gpu else "rgb", "preset": preset, "crf": crf, "frames": result.frames,
           "seconds": seconds, "fps": result.frames / seconds, "bytes": out.stat().st_size}
    if keep:
        with av.open(str(out)) as container:
            decoded = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
        scores = [psnr(a, b) for a, b in zip(decoded, drawn)]
        row.update(psnr_min=min(scores), psnr_mean=float(np.mean(scores)))
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--size", default="1920x1080")
    parser.add_argument("--fps", type=float, default=60.0)
    parser.add_argument("--preset", default="aurora", help="the bundled look (default aurora)")
    parser.add_argument("--presets", default="", help="x264 presets to try too, comma-separated")
    parser.add_argument("--try", dest="tries", default="",
                        help="PRESET:CRF pairs to try too (GPU path), comma-separated")
    parser.add_argument("--quality", type=int, default=60,
                        help="frames read back and compared with the decoded video")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    args.size = tuple(int(v) for v in args.size.lower().split("x"))

    folder = Path(tempfile.mkdtemp(prefix="swarm-render-bench-"))
    song = folder / "song.wav"
    write_wav(song, drum_loop(120.0, args.seconds, 48000)[:, None], 48000)
    rows = []

    # the old default both ways (the ratio), then the default now
    ways = [(True, "medium", 18.0), (False, "medium", 18.0), (True, DEFAULT_PRESET, DEFAULT_CRF)]
    ways += [(True, p, None) for p in args.presets.split(",") if p]
    ways += [(True, t.split(":")[0], float(t.split(":")[1])) for t in args.tries.split(",") if t]
    print(f"# {args.seconds:g} s at {args.size[0]}x{args.size[1]}, {args.fps:g} fps, "
          f"look {args.preset}", flush=True)
    for gpu, preset, crf in ways:
        timed = render_once(song, folder / "timed.mp4", args, gpu=gpu, preset=preset, crf=crf)
        judged = render_once(song, folder / "judged.mp4", args, gpu=gpu, preset=preset,
                             crf=crf, frames=args.quality, keep=True)
        timed.update(psnr_min=judged["psnr_min"], psnr_mean=judged["psnr_mean"])
        rows.append(timed)
        print(f"{timed['way']:>4} {preset:>9} crf {crf if crf is not None else 'default'}: "
              f"{timed['frames']} frames in "
              f"{timed['seconds']:.2f} s, {timed['fps']:.1f} frames of video a second, "
              f"{timed['bytes'] / 1e6:.1f} MB; PSNR against the drawn frames: worst "
              f"{timed['psnr_min']:.2f} dB, mean {timed['psnr_mean']:.2f} dB", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"benchmark": "offline render", "size": args.size,
                                         "fps": args.fps, "seconds": args.seconds,
                                         "python": platform.python_version(),
                                         "results": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
