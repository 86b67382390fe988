"""The live input's stream: PortAudio opened on the performer's input, copying into a ring.

`InputWorker` finds the input (by index or name), opens and starts a sounddevice
InputStream whose callback copies each block into a Ring and returns. Its callback runs on
PortAudio's thread and never raises, blocks or allocates arrays; `open` and `close` run on
one other thread.

`python -m audio.input.worker` runs it in a process of its own, which is how the show's live input
runs (audio/input/process.py starts it). PortAudio 19.6 hangs for good in abort, close and terminate
once a JACK server quit under it, so no process that calls PortAudio can be trusted to come
back; a worker can always be killed, and the next one starts from a fresh PortAudio that sees
the devices (and JACK servers) there are now. The worker:

- attaches the shared-memory ring the show made (`--segment`) and writes samples there;
- reports on its stdout, one JSON object a line: `opened` (device, rate, channels) or
  `failed` (the HUD's state word and the message for the performer), then nothing more;
- sends everything the libraries print (ALSA, JACK, PortAudio, a Python traceback) to its
  fd 2, which the show reads and summarises: fd 1 is pointed there too, once the report
  channel has its own descriptor;
- stops when its stdin reaches end of file (the show closed it, or the show died), or when
  the show's process is no longer its parent; it ignores SIGINT, so a Ctrl+C on the show's
  terminal leaves the stopping to the show. It leaves with `os._exit`, never through
  sounddevice's exit handler, which would hang on a dead JACK server.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing import resource_tracker, shared_memory
from typing import IO, Any

from swarm_instrument.audio.input.block_analysis import BlockAnalysis
from swarm_instrument.audio.input.devices import (
    AudioProblem,
    default_input_index,
    input_devices,
    load_sounddevice,
    rescan,
    resolve_input_device,
)
from swarm_instrument.audio.input.ring import Ring

DEFAULT_RATE = 48000
STOP_GRACE_S = 0.3  # closing the stream politely; past this the worker just leaves
ORPHAN_CHECK_S = 0.5


def _writer(ring: Ring, wake: Callable[[], None]) -> Callable[..., None]:
    """The PortAudio callback for one stream: copy into its ring, count trouble, wake the
    block analysis (one non-blocking write), return."""

    def callback(indata: Any, frames: int, time: Any, status: Any) -> None:
        try:
            ring.write(indata)
            if status:
                ring.note_status(status)
            wake()
        except Exception:  # noqa: BLE001 - never raise into PortAudio
            pass

    return callback


class InputWorker:
    """Opens one input stream into `ring`. `spec` is an index, a name substring or None (the
    default input); `sd` stands in for the sounddevice module in tests (loaded when None).
    Its blocks are measured by a BlockAnalysis (`analysis`), started once the stream is
    open and stopped with it."""

    def __init__(self, spec: int | str | None, ring: Ring, sd: Any = None) -> None:
        self.spec = spec
        self.ring = ring
        self.sd = sd
        self.stream: Any = None
        self.analysis: BlockAnalysis | None = None

    def open(self, rescan_first: bool = False) -> dict[str, Any]:
        """Find the device, open and start a stream on it; the device's description
        (`name`, `index`, `rate`, `channels`, `hostapi`). Raises AudioProblem."""
        if self.sd is None:
            self.sd = load_sounddevice()
        sd = self.sd
        try:
            info = self._find(sd, rescan_first)
        except AudioProblem:
            raise
        except Exception as exc:  # noqa: BLE001 - PortAudio failing to list its devices
            raise AudioProblem("device failed", f"cannot list audio devices: {exc}; try "
                               "--list-devices, or --audio-file PATH.wav") from None
        name = info["name"]
        rate = float(info.get("default_samplerate") or DEFAULT_RATE)
        channels = max(1, min(2, int(info["max_input_channels"])))
        analysis = BlockAnalysis(self.ring)
        try:
            stream = sd.InputStream(device=info["index"], channels=channels, samplerate=rate,
                                    dtype="float32", blocksize=0, latency="low",
                                    callback=_writer(self.ring, analysis.wake))
            try:
                stream.start()
            except Exception:
                stream.close()
                raise
        except Exception as exc:  # noqa: BLE001 - PortAudioError and friends
            analysis.stop()
            raise AudioProblem("device failed", f"cannot open audio input '{name}': {exc}; "
                               "try another --audio-device (see --list-devices) or "
                               "--audio-file PATH.wav") from None
        self.stream = stream
        self.analysis = analysis
        analysis.start(rate)
        return {"name": name, "index": info["index"], "rate": rate, "channels": channels,
                "hostapi": info.get("hostapi_name", "")}

    def _find(self, sd: Any, rescan_first: bool) -> dict[str, Any]:
        """The device to open; rescans PortAudio once if it is not in the current list."""
        if rescan_first:
            rescan(sd)
        try:
            return dict(resolve_input_device(input_devices(sd), default_input_index(sd),
                                             self.spec))
        except AudioProblem:
            if rescan_first:
                raise
        rescan(sd)  # started before the device (or the JACK server) appeared
        return dict(resolve_input_device(input_devices(sd), default_input_index(sd),
                                         self.spec))

    def close(self) -> None:
        """Abort and close the stream. May hang inside PortAudio (a JACK server that quit):
        callers run it where a hang cannot hurt, or bound it."""
        stream, self.stream = self.stream, None
        if stream is None:
            return
        for action in ("abort", "close"):
            try:
                getattr(stream, action)()
            except Exception:  # noqa: BLE001 - a vanished device may refuse either
                pass
        # after the stream: its callback writes to the analysis' pipe, whose descriptors must
        # not be closed (and their numbers reused) under it
        analysis, self.analysis = self.analysis, None
        if analysis is not None:
            analysis.stop()


# ----- the worker process ----------------------------------------------------------------------

def attach_segment(name: str) -> Any:
    """The show's shared memory, attached without Python's resource tracker: the show owns
    and unlinks it, and a tracker here would unlink it when this worker is killed (and be one
    more process). Python 3.13 says so with track=False."""
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name, track=False)
    register = resource_tracker.register
    resource_tracker.register = lambda *args, **kwargs: None
    try:
        return shared_memory.SharedMemory(name)
    finally:
        resource_tracker.register = register


def _report_channel() -> IO[str]:
    """A descriptor of its own for the JSON reports; fd 1 then joins fd 2, so a library that
    prints to stdout cannot garble them. fd 2 is made non-blocking: a show that stops
    reading must never stall a thread of PortAudio's that prints."""
    channel = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    try:
        os.set_blocking(2, False)
    except OSError:
        pass
    return channel


def _watch_parent(parent: int, stop: threading.Event) -> None:
    """Stop when stdin ends (the show closed it or died) or the show is no longer the
    parent; leave outright shortly after, in case the main thread is stuck in PortAudio."""

    def watch() -> None:
        try:
            while True:
                if os.getppid() != parent:
                    break
                ready, _, _ = select.select([0], [], [], ORPHAN_CHECK_S)
                if ready and not os.read(0, 4096):
                    break
        except OSError:
            pass
        stop.set()
        time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="audio-worker-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    """`python -m audio.input.worker --segment NAME --device JSON --parent PID`. Never returns."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parser = argparse.ArgumentParser(prog="python -m audio.input.worker")
    parser.add_argument("--segment", required=True, help="the show's shared memory")
    parser.add_argument("--device", default="null", help="JSON: null, an index or a name")
    parser.add_argument("--parent", type=int, default=os.getppid())
    args = parser.parse_args(argv)
    channel = _report_channel()

    def report(**fields: Any) -> None:
        try:
            channel.write(json.dumps(fields) + "\n")
            channel.flush()
        except OSError:  # the show is gone
            os._exit(0)

    stop = threading.Event()
    _watch_parent(args.parent, stop)
    try:
        segment = attach_segment(args.segment)
        ring = Ring.attach(segment.buf)
        worker = InputWorker(json.loads(args.device), ring)
        info = worker.open()
    except AudioProblem as problem:
        report(event="failed", state=problem.state, message=str(problem))
        os._exit(0)
    except Exception as exc:  # noqa: BLE001 - a bug: its traceback goes to fd 2 for the show

        traceback.print_exc()
        report(event="failed", state="audio failed",
               message=f"the audio worker failed ({type(exc).__name__}: {exc})")
        os._exit(1)
    report(event="opened", **info)
    stop.wait()
    closer = threading.Thread(target=worker.close, name="audio-worker-close", daemon=True)
    closer.start()
    closer.join(STOP_GRACE_S)
    os._exit(0)


if __name__ == "__main__":
    main()
