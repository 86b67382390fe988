"""Frame time of the show with video outputs running against the same show without them.

    python benchmarks/bench_outputs.py                                   # this machine: 640x360
    python benchmarks/bench_outputs.py --size 1920x1080 --fps 60 --count 16384 --json out.json

The show plays headless in real time, paced at --fps as a headless show with outputs is (and a
window by its refresh rate), through the one loop, in alternating rounds: no outputs, then the
outputs (default: NDI with a receiver connected, and H.264 in MPEG-TS over UDP to 127.0.0.1),
each at the frame's size and every frame. Each frame is timed by the wall clock from the start
of the loop's frame to ctx.finish() (CPU work and the GPU's, the readback's copies included),
with the GPU idle before it, as benchmarks/bench_frame.py times frames; `loop ms` is the loop's call
alone. The outputs' threads work meanwhile, between and during frames. The verdict compares
the medians of all frames of each kind: within 10 %.

NDI discovers and announces by multicast: with a network interface other than loopback the
benchmark runs itself again inside a network namespace with only loopback (`unshare -n`,
root); where that cannot be made, --network-ok runs it in place (a machine with no network).
NDI_CONFIG_DIR, if not set, points at a config that finds the source at 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_swarm import scaled_params  # run as a script: benchmarks/ is on the path

from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.loop import Loop, Offscreen, WallClock
from swarm_instrument.show.show import Show
from swarm_instrument.show.video_outputs import Outputs
from swarm_instrument.visual.gpu.context import create_headless_context
from swarm_instrument.visual.output.frame_output import FrameOutput
from swarm_instrument.visual.output.ndi import NdiBackend
from swarm_instrument.visual.output.stream import TransportStreamBackend

LIMIT = 1.10  # frames with outputs at most 10 % longer


def receive(name: str, seconds: float, out: Path) -> None:
    """An NDI receiver (cyndilib's Receiver and FrameSync) counting the distinct frames of the
    source whose name contains `name`; writes {"frames", "seconds", "source"}."""
    from cyndilib.finder import Finder  # noqa: PLC0415 - optional: NDI, only with --out-ndi
    from cyndilib.receiver import Receiver  # noqa: PLC0415 - optional: NDI, only with --out-ndi
    from cyndilib.video_frame import VideoFrameSync  # noqa: PLC0415 - optional: NDI, only with --out-ndi
    from cyndilib.wrapper.ndi_recv import RecvBandwidth, RecvColorFormat  # noqa: PLC0415 - optional: NDI, only with --out-ndi

    os.nice(19)  # it stands in for another machine: on this one, it takes only spare CPU
    finder = Finder()
    deadline = time.monotonic() + 20.0
    source = None
    while source is None and time.monotonic() < deadline:
        finder.wait_for_sources(0.2)
        source = next((s for s in finder if name in s.name), None)
    if source is None:
        out.write_text(json.dumps({"frames": 0, "seconds": 0, "source": None}))
        return
    receiver = Receiver(color_format=RecvColorFormat.RGBX_RGBA,
                        bandwidth=RecvBandwidth.highest)
    video = VideoFrameSync()
    receiver.frame_sync.set_video_frame(video)
    receiver.set_source(source)
    frames, last, first = 0, None, None
    end = [time.monotonic() + seconds]
    signal.signal(signal.SIGTERM, lambda *_: end.__setitem__(0, 0.0))  # the benchmark is done
    while time.monotonic() < end[0]:
        receiver.frame_sync.capture_video()
        if video.get_data_size() > 0 and min(video.get_resolution()) > 0:
            with memoryview(video) as view:  # no copy of a whole 1080p frame 250 times a second
                sample = np.frombuffer(view, np.uint8)[::4099].copy()
            if last is None or not np.array_equal(sample, last):
                frames += 1
                first = first or time.monotonic()
                last = sample
        time.sleep(0.004)
    spent = time.monotonic() - first if first else 0.0
    out.write_text(json.dumps({"frames": frames, "seconds": spent, "source": source.name}))


def make_show(ctx, args):
    show = Show(ctx, scaled_params(args.count), ShowOptions(seed=1))
    sink = Offscreen(show, args.size)
    for _ in range(round(args.settle * 30)):
        show.swarm.step(1 / 30, target=show.lure_position())
    for _ in range(4):  # the renderer measures the swarm; the camera snaps to frame it
        show.draw(sink.framebuffer)
    show.renderer.read_counts_now()
    show.camera.follow(show.renderer.swarm_radius, 1e6, show.renderer.swarm_center)
    return show, sink


def open_outputs(ctx, kinds: list[str], fps: float, ndi_name: str, udp_port: int):
    outputs = []
    for kind in kinds:
        if kind == "ndi":
            backend = NdiBackend(ndi_name)
        elif kind == "stream":
            backend = TransportStreamBackend(f"udp://127.0.0.1:{udp_port}")
        else:
            raise SystemExit(f"unknown output {kind!r}: ndi, stream")
        outputs.append(FrameOutput(backend, nominal_rate=fps))
    return Outputs(ctx, outputs)


def play_round(ctx, show, sink, outputs, args) -> dict:
    """One round of args.round seconds in real time; frame times and what the outputs did."""
    loop = Loop(show, WallClock(), outputs=outputs)
    show.outputs = outputs
    period = 1.0 / args.fps
    frame_ms, loop_ms, late = [], [], 0
    started = time.perf_counter()
    due = started
    before = {o.label: (o.sent, o.dropped) for o in outputs.outputs} if outputs else {}
    while time.perf_counter() - started < args.round:
        now = time.perf_counter()
        if now < due:
            time.sleep(due - now)
        else:
            late += now - due > period
        due = max(due + period, time.perf_counter() - period)
        ctx.finish()
        t0 = time.perf_counter()
        loop.frame(*sink.target())
        t1 = time.perf_counter()
        ctx.finish()
        frame_ms.append((time.perf_counter() - t0) * 1e3)
        loop_ms.append((t1 - t0) * 1e3)
    spent = time.perf_counter() - started
    result = {"frames": len(frame_ms), "seconds": spent, "late": late, "frame_ms": frame_ms,
              "loop_ms": loop_ms, "outputs": {}}
    for output in outputs.outputs if outputs else []:
        sent0, dropped0 = before[output.label]
        result["outputs"][output.label] = {
            "sent": output.sent - sent0, "dropped": output.dropped - dropped0,
            "state": output.state, "error": output.error, "detail": output.detail()}
    return result


def summary(rounds: list[dict]) -> dict:
    frames = [ms for r in rounds for ms in r["frame_ms"]]
    loops = [ms for r in rounds for ms in r["loop_ms"]]
    return {"frames": len(frames), "frame_ms": statistics.median(frames),
            "frame_ms_p90": float(np.percentile(frames, 90)),
            "frame_ms_mean": statistics.fmean(frames), "loop_ms": statistics.median(loops),
            "round_medians": [statistics.median(r["frame_ms"]) for r in rounds],
            "fps": sum(r["frames"] for r in rounds) / sum(r["seconds"] for r in rounds)}


def only_loopback() -> bool:
    return [name for _, name in socket.if_nameindex()] == ["lo"]


def in_private_network(argv: list[str]) -> int | None:
    """Run this benchmark again inside `unshare -n` (loopback only); None if that cannot be
    made here."""
    if not shutil.which("unshare") or not shutil.which("ip"):
        return None
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        return None
    return subprocess.call(["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$0" "$@"',
                            sys.executable, str(Path(__file__).resolve()), *argv])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="640x360", help="frame size (default 640x360)")
    parser.add_argument("--fps", type=float, default=15.0, help="the show's pace (default 15)")
    parser.add_argument("--count", type=int, default=4096, help="agents (default 4096)")
    parser.add_argument("--outputs", default="ndi,stream", help="ndi, stream (default both)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each kind")
    parser.add_argument("--round", type=float, default=8.0, help="seconds a round")
    parser.add_argument("--settle", type=float, default=2.0, help="simulated seconds first")
    parser.add_argument("--no-receiver", action="store_true",
                        help="no NDI receiver (libndi may then skip compressing)")
    parser.add_argument("--network-ok", action="store_true",
                        help="run NDI here even with network interfaces (no network there)")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--receive", nargs=3, metavar=("NAME", "SECONDS", "OUT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.receive:
        receive(args.receive[0], float(args.receive[1]), Path(args.receive[2]))
        return 0
    kinds = [k.strip() for k in args.outputs.split(",") if k.strip()]
    if "ndi" in kinds and not only_loopback() and not args.network_ok:
        code = in_private_network(argv)
        if code is None:
            print("benchmarks/bench_outputs.py: NDI multicasts; run it inside `unshare -n` (only "
                  "loopback), or pass --network-ok on a machine without network",
                  file=sys.stderr)
            return 2
        return code
    if "NDI_CONFIG_DIR" not in os.environ:
        folder = Path(tempfile.mkdtemp(prefix="ndi-config-"))
        (folder / "ndi-config.v1.json").write_text(json.dumps(
            {"ndi": {"networks": {"ips": "127.0.0.1", "discovery": ""},
                     "multicast": {"send": {"enable": False}}}}))
        os.environ["NDI_CONFIG_DIR"] = str(folder)
    args.size = tuple(int(v) for v in args.size.lower().split("x"))


    ctx = create_headless_context()
    renderer = ctx.info["GL_RENDERER"]
    show, sink = make_show(ctx, args)
    ndi_name = f"swarm-bench-{os.getpid()}"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        udp_port = probe.getsockname()[1]
    print(f"# {ctx.info['GL_RENDERER']}; {args.size[0]}x{args.size[1]}, {args.count} agents, "
          f"paced at {args.fps:g} fps; outputs: {', '.join(kinds)}; {os.cpu_count()} CPUs",
          flush=True)
    outputs = open_outputs(ctx, kinds, args.fps, ndi_name, udp_port)
    receiver, received_path = None, Path(tempfile.mkdtemp()) / "received.json"
    total = args.rounds * args.round * 2 + 10
    if "ndi" in kinds and not args.no_receiver:
        receiver = subprocess.Popen([sys.executable, __file__, "--receive", ndi_name,
                                     str(total), str(received_path)])
    rows: dict[str, list[dict]] = {"none": [], "outputs": []}
    play_round(ctx, show, sink, None, argparse.Namespace(**{**vars(args), "round": 1.0}))
    # The outputs open (and the receiver connects) before the first timed round.
    warm = play_round(ctx, show, sink, outputs, argparse.Namespace(**{**vars(args),
                                                                        "round": 3.0}))
    print(f"# warm-up with outputs: {json.dumps(warm['outputs'])}", flush=True)
    print(f"{'round':>6} {'kind':>8} {'frames':>7} {'median ms':>10} {'p90 ms':>8} "
          f"{'loop ms':>8}  outputs (sent / dropped)", flush=True)
    for index in range(args.rounds):
        for kind, group in (("none", None), ("outputs", outputs)):
            row = play_round(ctx, show, sink, group, args)
            rows[kind].append(row)
            sent = "  ".join(f"{label}: {o['sent']} / {o['dropped']}"
                             for label, o in row["outputs"].items())
            print(f"{index:>6} {kind:>8} {row['frames']:>7} "
                  f"{statistics.median(row['frame_ms']):10.3f} "
                  f"{np.percentile(row['frame_ms'], 90):8.3f} "
                  f"{statistics.median(row['loop_ms']):8.3f}  {sent}", flush=True)
    outputs.close()
    received = None
    if receiver is not None:
        receiver.terminate() if receiver.poll() is None else None
        receiver.wait(30)
        if received_path.exists():
            received = json.loads(received_path.read_text())
    show.release()
    ctx.release()
    none, with_outputs = summary(rows["none"]), summary(rows["outputs"])
    ratio = with_outputs["frame_ms"] / none["frame_ms"]
    sent = {label: {"sent": sum(r["outputs"][label]["sent"] for r in rows["outputs"]),
                    "dropped": sum(r["outputs"][label]["dropped"] for r in rows["outputs"]),
                    "state": rows["outputs"][-1]["outputs"][label]["state"],
                    "detail": rows["outputs"][-1]["outputs"][label]["detail"]}
            for label in rows["outputs"][-1]["outputs"]}
    print(f"none: median {none['frame_ms']:.3f} ms (p90 {none['frame_ms_p90']:.3f}, "
          f"{none['fps']:.1f} fps); outputs: median {with_outputs['frame_ms']:.3f} ms "
          f"(p90 {with_outputs['frame_ms_p90']:.3f}, {with_outputs['fps']:.1f} fps): "
          f"{ratio:.3f}x, {'within' if ratio <= LIMIT else 'OVER'} {LIMIT - 1:.0%}", flush=True)
    for label, counts in sent.items():
        print(f"  {label}: {counts['sent']} sent, {counts['dropped']} dropped "
              f"({counts['state']}{', ' + counts['detail'] if counts['detail'] else ''})")
    if received is not None:
        ndi = next(o for o in outputs.outputs if o.backend.kind == "ndi")
        received["sent_in_all"] = ndi.sent  # the warm-up's included, as the receiver saw it
        print(f"  NDI receiver: {received['frames']} frames from {received['source']}, of "
              f"{ndi.sent} sent (warm-up included)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "benchmark": "outputs", "renderer": renderer, "size": args.size, "fps": args.fps,
            "count": args.count, "outputs": kinds, "python": platform.python_version(),
            "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "none": none, "with_outputs": with_outputs, "ratio": ratio, "sent": sent,
            "ndi_receiver": received,
            "rounds": {k: [{**r, "frame_ms": None, "loop_ms": None} for r in v]
                       for k, v in rows.items()}}, indent=2))
    return 0 if ratio <= LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
