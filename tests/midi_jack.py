"""JACK helpers for the MIDI tests: a MIDI sender that runs as its own process, as a controller or
a DAW would, on the JACK server of the `jack` fixture (tests/conftest.py).

The sender lives in another process so that unplugging it is killing it: JACK drops its
client without the sender unregistering ports, which libjack cannot do safely while the graph
changes (see control/midi/ports.py). Run as a script it is that sender:
    python tests/midi_jack.py CLIENT --virtual PORT   (a device with an output port)
    python tests/midi_jack.py CLIENT --to PORT        (a program that plays our port)
then reads messages as hex bytes, one a line ("b0 46 7f"), from stdin; "clock BPM" starts
MIDI clock (0xF8, 24 a beat, each due at its own time from the first, as a DAW sends it) from
a thread of its own, "clock 0" stops it.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
import time

WAIT_S = 10.0  # a generous bound for something to come true; never a measured time


def require_rtmidi_jack() -> None:
    """python-rtmidi with its JACK API (the PyPI wheel has it), or the test fails saying so."""
    import rtmidi

    if rtmidi.API_UNIX_JACK not in rtmidi.get_compiled_api():
        raise RuntimeError("this python-rtmidi has no JACK support (get_compiled_api() lacks "
                           "API_UNIX_JACK); the PyPI wheel has it")


class Sender:
    """A MIDI output in its own process (see the top comment); `unplug()` kills it."""

    def __init__(self, client: str, *, virtual: str | None = None, to: str | None = None):
        require_rtmidi_jack()
        how = ["--virtual", virtual] if virtual else ["--to", str(to)]
        self.client = client
        self.process = subprocess.Popen(
            [sys.executable, __file__, client, *how], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.process.stdout], [], [], WAIT_S)
        line = self.process.stdout.readline() if ready else ""
        if line.strip() != "ready":
            self.unplug()
            raise RuntimeError(f"the MIDI sender did not start: {line!r} "
                               f"{self.process.stderr.read()[-2000:]}")

    def send(self, *messages: list[int]) -> None:
        for message in messages:
            self.process.stdin.write(" ".join(f"{byte:02x}" for byte in message) + "\n")
        self.process.stdin.flush()

    def clock(self, bpm: float) -> None:
        """Send MIDI clock at `bpm` from now on (0: stop sending it)."""
        self.process.stdin.write(f"clock {bpm}\n")
        self.process.stdin.flush()

    def unplug(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            stream.close()


def _main(argv: list[str]) -> None:
    import rtmidi

    client, how, port = argv
    out = rtmidi.MidiOut(rtmidi.API_UNIX_JACK, client)
    if how == "--virtual":
        out.open_virtual_port(port)
    else:
        names = out.get_ports()
        if port not in names:
            print(f"no port {port!r} in {names}", flush=True)
            os._exit(1)
        out.open_port(names.index(port))
    lock = threading.Lock()  # one sender at a time into rtmidi's JACK ring buffer
    tempo = {"generation": 0}

    def pulses(generation: int, bpm: float) -> None:
        interval, start, sent = 60.0 / (24 * bpm), time.perf_counter(), 0
        while tempo["generation"] == generation:
            delay = start + sent * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            with lock:
                if tempo["generation"] != generation:
                    return
                out.send_message([0xF8])
            sent += 1

    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["clock"]:
            with lock:
                tempo["generation"] += 1
            if float(words[1]) > 0:
                threading.Thread(target=pulses, args=(tempo["generation"], float(words[1])),
                                 daemon=True).start()
            continue
        with lock:
            out.send_message([int(byte, 16) for byte in words])
    os._exit(0)  # no rtmidi teardown: the server drops the client


if __name__ == "__main__":
    _main(sys.argv[1:])
