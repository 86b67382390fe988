"""The offscreen latency rig's performer (benchmarks/bench_latency.py --offscreen): a process
of its own that sends each stimulus, so that when it goes does not depend on the show's GIL.

Sent from a thread of the show's process, a stimulus went out only when the frame let go of
the GIL: at the pacer's sleep, right after a frame, so every trial waited about one whole frame
and the 90th percentile read about 1.02 frames whatever the frame did (rounds one to seven on
the GPU machines). A controller, a phone or a sound card does not wait for the show's GIL.

    python latency_sender.py --osc-port P --web-port W --midi-fd F --click-fd C --spread S

Each line on stdin names a stimulus (`osc VALUE`, `web VALUE`, `midi STATUS CC VALUE`,
`click`). This process waits a random 0..S seconds of its own (the stimulus falls anywhere in
a frame) and sends it: a UDP datagram to the OSC input; a WebSocket message, as the page's
slider sends it; the control change's three bytes into the MIDI stand-in's pipe, as rtmidi's
callback queues them without the GIL; one byte into the sound card stand-in's pipe, which
makes its next block loud. It answers with the time the stimulus went, on time.perf_counter's
clock (CLOCK_MONOTONIC: the same in every process here).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import sys
import threading
import time

from latency_devices import osc_message  # run as a script: benchmarks/probes/ on the path


def web_socket(port: int):
    """The page's WebSocket; the show's snapshots read and dropped on a thread of its own."""
    from websockets.sync.client import connect  # noqa: PLC0415 - only where the web is tried

    page = connect(f"ws://127.0.0.1:{port}/ws", origin=f"http://127.0.0.1:{port}",
                   open_timeout=10)

    def read() -> None:
        try:
            for _message in page:
                pass
        except Exception:  # noqa: BLE001 - the socket closed: the reader ends
            pass

    threading.Thread(target=read, daemon=True).start()
    return page


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--osc-port", type=int, required=True)
    parser.add_argument("--web-port", type=int, required=True)
    parser.add_argument("--midi-fd", type=int, required=True)
    parser.add_argument("--click-fd", type=int, required=True)
    parser.add_argument("--spread", type=float, default=0.05)
    args = parser.parse_args()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    page = web_socket(args.web_port)
    print("ready", flush=True)
    for line in sys.stdin:
        kind, *rest = line.split()
        value = float(rest[0]) if len(rest) == 1 else 0.0
        time.sleep(random.uniform(0.0, args.spread))
        if kind == "osc":
            message = osc_message("/swarm/exposure", value)
            sent = time.perf_counter()
            udp.sendto(message, ("127.0.0.1", args.osc_port))
        elif kind == "web":
            text = json.dumps(["/swarm/exposure", value])
            sent = time.perf_counter()
            page.send(text)
        elif kind == "midi":
            data = bytes(int(byte) for byte in rest)
            sent = time.perf_counter()
            os.write(args.midi_fd, data)
        elif kind == "click":
            sent = time.perf_counter()  # the sound's own stamp is its loud block's (the card's)
            os.write(args.click_fd, b"!")
        else:
            print(f"unknown stimulus {kind!r}", file=sys.stderr, flush=True)
            return 2
        print(f"{sent:.7f}", flush=True)
    page.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
