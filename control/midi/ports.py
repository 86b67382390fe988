"""MIDI input ports through python-rtmidi: opening them, queueing their messages, hot-plug.

Only the main thread runs our code. rtmidi queues incoming messages in C on its own thread
(for JACK, the JACK process thread), and `drain()` takes them with `get_message()` once a
frame: no Python callback, so JACK's realtime thread never waits for the GIL (a shader
compile or a long frame holding it would otherwise make the whole JACK graph late: an xrun in
the music). `poll(now)` runs once a frame too and does work about once a second. rtmidi is
imported lazily, so a machine without it (the GPU box) still runs the instrument, with no
MIDI and one message saying why.

JACK and ALSA are opened differently, on purpose. With ALSA each input gets its own MidiIn,
closed when the device goes away. With JACK, closing a port while the graph changes can crash
the process: rtmidi unregisters the port while libjack's notification thread walks the
client's port list (jack2 issue #216, seen here about once in 15 hot-plug runs). So with JACK
the instrument opens one input port at start and never closes it while running; a small
portless JACK client (`_JackPatchbay`, the libjack rtmidi already loaded, through ctypes)
connects each wanted device to it, and JACK itself drops the connection when a device goes.

Each message gets its arrival time in time.perf_counter()'s clock (the loop's), not the time it
was read, so MIDI clock pulses keep their spacing though read once a frame. rtmidi gives each
message the seconds since the previous one on that MidiIn; `PortTimeline` sums them into a
timeline of the port's own and places it on perf_counter with an offset bounded by what a read
knows: the newest message came before the read, and every message came after the read before
that emptied the queue. The offset is the tightest of those bounds seen, so it settles within a
few frames to the moment the fastest read saw, and the spacing of the messages is rtmidi's.
rtmidi's JACK side stamps ignored messages too (their delta is lost to the next message), so
active sensing is let through rtmidi and dropped here; SysEx stays ignored in rtmidi (rare in a
show; a lost delta is one step the bounds and MidiClock's outlier test absorb).
"""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from swarm_instrument.control.midi.systems import (
    _JACK_PORT_IS_INPUT,
    _JACK_PORT_IS_OUTPUT,
    MidiUnavailable,
    _api_constant,
    _JackPatchbay,
    open_api,
    port_key,
)
from swarm_instrument.control.midi.timeline import PortTimeline

POLL_INTERVAL_S = 1.0
QUEUE_SIZE = 4096  # rtmidi's queue a port: 1.4 s of a saturated 31.25 kbaud cable
LOCAL_PORT_NAME = "in"
ACTIVE_SENSING = 0xFE  # a device's keep-alive: read (for its delta), never handed on


log = logging.getLogger(__name__)


def _report(text: str) -> None:
    """What the MIDI ports tell the performer, through this module's logger."""
    log.info(f"midi: {text}")


class MidiInput:
    """The instrument's MIDI inputs: chosen ports (index or name substring; None: every input)
    and an optional virtual port, reconnected by name when a device comes back."""

    def __init__(self, ports: Sequence[str | int] | None = None, virtual: str | None = None,
                 api: str | None = None, client_name: str = "swarm-instrument",
                 report: Callable[[str], None] = _report,
                 poll_interval: float = POLL_INTERVAL_S) -> None:
        self.client_name = client_name
        self.report = report
        self.poll_interval = poll_interval
        self.api: str | None = None
        self.dropped = 0  # messages that could not be read (odd bytes, a failing port)
        self._lasting_problem: str | None = None
        self._scan_problem: str | None = None
        self._reported: set[str] = set()
        self._open: dict[str, Any] = {}  # port key -> its MidiIn (ALSA) or None (JACK)
        self._lost: list[str] = []
        self._patterns: list[str] | None = None  # None: every input
        self._exact: set[str] = set()
        self._last_poll: float | None = None
        self._virtual_name = virtual
        self._virtual: Any = None  # the MidiIn with our virtual port (with JACK: every input)
        self._early: list[tuple[bytes, float]] = []  # taken from a port as it went away
        self._timelines: dict[int, PortTimeline] = {}  # id(MidiIn) -> its arrival times
        self._jack_port: str | None = None  # with JACK: the full name of that port
        self._patchbay: _JackPatchbay | None = None
        self._probe: Any = None
        self._rtmidi: Any = None
        try:
            self._rtmidi, self.api, self._probe = open_api(api, f"{client_name}-probe")
        except MidiUnavailable as exc:
            self._problem(str(exc))
            return
        if self.api == "jack":
            self._open_jack_input()
        elif virtual:
            self._virtual = self._new_midi_in()
            if self._virtual is not None and not self._try(
                    lambda: self._virtual.open_virtual_port(virtual),
                    f"cannot open virtual MIDI input '{virtual}'"):
                self._virtual.delete()
                self._virtual = None
        self._select(ports)
        self._scan()
        self._say_unmatched()

    # ----- main thread -----

    def _say_unmatched(self) -> None:
        """A --midi-port that matches no input yet is said once, with the inputs there are;
        it is waited for (a controller plugged in later opens by itself)."""
        unmatched = [p for p in self._patterns or []
                     if not any(p in key.casefold() for key in self._open)]
        if unmatched:
            listed = [port_key(name) for name in self._list_ports() or []]
            inputs = ", ".join(name for name in listed if self._wanted_any(name)) or "none"
            self.report(f"--midi-port {', '.join(repr(p) for p in unmatched)} matches no MIDI "
                        f"input yet (inputs: {inputs}); waiting for it, or see --list-midi")

    def _wanted_any(self, key: str) -> bool:
        return not key.casefold().startswith(self.client_name.casefold())

    def _problem(self, text: str, lasting: bool = True) -> None:
        """Keep the problem for the HUD and report each distinct one once. A lasting one
        (a bad selector, no API) stays; others last until the next scan."""
        if lasting:
            self._lasting_problem = text
        else:
            self._scan_problem = text
        if text not in self._reported:
            self._reported.add(text)
            self.report(text)

    def _try(self, action: Callable[[], Any], what: str, lasting: bool = True) -> bool:
        try:
            action()
            return True
        except Exception as exc:  # noqa: BLE001 - a device problem must not stop the show
            self._problem(f"{what} ({exc})", lasting)
            return False

    def _new_midi_in(self) -> Any:
        """A MidiIn that queues its messages for drain(), or None (reported) if it cannot be
        made."""
        made: list[Any] = []

        def make() -> None:
            midi_in = self._rtmidi.MidiIn(_api_constant(self._rtmidi, self.api),
                                          self.client_name, queue_size_limit=QUEUE_SIZE)
            # clock for MidiClock; active sensing read for its delta, dropped in _take
            midi_in.ignore_types(sysex=True, timing=False, active_sense=False)
            made.append(midi_in)

        return made[0] if self._try(make, "cannot create a MIDI input", lasting=False) else None

    def _select(self, ports: Sequence[str | int] | None) -> None:
        """Indexes are resolved to names now (then matched by name); substrings stay patterns."""
        if ports is None:
            return
        self._patterns = []
        listed = self._list_ports() or []
        for selector in ports:
            text = str(selector).strip()
            if text.isdigit():
                index = int(text)
                if index < len(listed):
                    self._exact.add(port_key(listed[index]))
                else:
                    choices = ", ".join(f"{i}: {p}" for i, p in enumerate(listed)) or "none"
                    self._problem(f"MIDI input {index} does not exist (inputs: {choices}); "
                                  "--list-midi lists them, --midi-port also takes a name")
            elif text:
                self._patterns.append(text.casefold())

    def _wanted(self, key: str) -> bool:
        if key.casefold().startswith(self.client_name.casefold()):
            return False  # never listen to ourselves
        if self._patterns is None:
            return True
        return key in self._exact or any(p in key.casefold() for p in self._patterns)

    def _open_jack_input(self) -> None:
        """Our one JACK input port, open until close(); devices get connected to it."""
        try:
            self._patchbay = _JackPatchbay(f"{self.client_name}-patchbay")
        except OSError as exc:
            self._problem(f"cannot connect JACK MIDI ports ({exc}); only the port itself "
                          "can be played (connect to it with jack_connect or qjackctl)")
        before = set(self._patchbay.midi_ports(_JACK_PORT_IS_INPUT)) if self._patchbay else set()
        port_name = self._virtual_name or LOCAL_PORT_NAME
        midi_in = self._new_midi_in()
        if midi_in is None:
            return
        if not self._try(lambda: midi_in.open_virtual_port(port_name),
                         f"cannot open JACK MIDI input '{port_name}'"):
            midi_in.delete()  # no port was registered, so this cannot race
            return
        self._virtual = midi_in
        if self._patchbay:
            after = set(self._patchbay.midi_ports(_JACK_PORT_IS_INPUT))
            ours = [name for name in after - before if name.endswith(f":{port_name}")]
            # JACK renames a second client with the same name; the new port is ours
            self._jack_port = ours[0] if ours else f"{self.client_name}:{port_name}"

    def _attach(self, key: str) -> bool:
        """Start listening to port `key`: a JACK connection, or a MidiIn of its own."""
        if self.api == "jack":
            if self._patchbay is None or self._jack_port is None:
                return False
            code = self._patchbay.connect(key, self._jack_port)
            if code not in (0, errno.EEXIST):
                self._problem(f"cannot connect MIDI input '{key}' (JACK error {code}); "
                              "retrying each second", lasting=False)
                return False
            self._open[key] = None
            return True
        midi_in = self._new_midi_in()
        if midi_in is None:
            return False

        def open_port() -> None:
            names = [port_key(name) for name in midi_in.get_ports()]
            midi_in.open_port(names.index(key), LOCAL_PORT_NAME)  # ValueError: gone again

        if not self._try(open_port, f"cannot open MIDI input '{key}'; retrying each second",
                         lasting=False):
            midi_in.delete()
            return False
        self._open[key] = midi_in
        return True

    def _detach(self, key: str) -> None:
        """Forget a port that went away (JACK has already dropped its connection); what it
        queued before going is kept for the next drain()."""
        midi_in = self._open.pop(key)
        if midi_in is not None:
            self._early += self._take(midi_in)
            self._timelines.pop(id(midi_in), None)
            midi_in.close_port()
            midi_in.delete()

    def _list_ports(self) -> list[str] | None:
        """The MIDI sources now, or None (reported) if they cannot be listed. rtmidi's listing
        fails when a port goes while it reads the names, so it gets a second and third try."""
        if self._patchbay is not None:
            return self._patchbay.midi_ports(_JACK_PORT_IS_OUTPUT)
        for attempt in range(3):
            try:
                return self._probe.get_ports()
            except Exception as exc:  # noqa: BLE001 - a device problem must not stop the show
                if attempt == 2:
                    self._problem(f"cannot list MIDI ports ({exc})", lasting=False)
        return None

    def _scan(self) -> None:
        """Let go of ports that vanished, open wanted ones that (re)appeared."""
        self._scan_problem = None
        listed = self._list_ports()
        if listed is None:
            return
        present = {port_key(name) for name in listed}
        for key in [key for key in self._open if key not in present]:
            self._detach(key)
            self._lost.append(key)
            self.report(f"MIDI input '{key}' went away; waiting for it to come back")
        for key in sorted(present):
            if key not in self._open and self._wanted(key) and self._attach(key):
                if key in self._lost:
                    self._lost.remove(key)
                self.report(f"opened MIDI input '{key}'")

    def poll(self, now: float) -> None:
        """Call each frame with a monotonic time; rescans the ports about once a second."""
        if self._probe is None:
            return
        if self._last_poll is not None and now - self._last_poll < self.poll_interval:
            return
        self._last_poll = now
        self._scan()

    def drain(self) -> list[tuple[bytes, float]]:
        """The messages queued since the last call, each port's oldest first: (bytes, when it
        reached the port, in time.perf_counter()'s clock; see the top comment)."""
        messages, self._early = self._early, []
        for midi_in in (self._virtual, *self._open.values()):
            if midi_in is not None:
                messages += self._take(midi_in)
        return messages

    def _take(self, midi_in: Any) -> list[tuple[bytes, float]]:
        """What one MidiIn has queued, at most QUEUE_SIZE (a flood waits for the next frame),
        with arrival times. Never raises: an odd message is counted and skipped, a failing port
        left for now."""
        read: list[tuple[bytes | None, float]] = []  # None: not handed on, but timed
        emptied = False
        for _ in range(QUEUE_SIZE):
            try:
                event = midi_in.get_message()
            except Exception:  # noqa: BLE001 - a device problem must not stop the show
                self.dropped += 1
                break
            if event is None:
                emptied = True
                break
            try:
                delta = float(event[1])
            except Exception:  # noqa: BLE001 - odd data from a driver: no spacing known
                delta = 0.0
            try:
                message: bytes | None = bytes(event[0])
            except Exception:  # noqa: BLE001 - odd bytes from a driver
                self.dropped += 1
                message = None  # still timed: the next message's delta counts from it
            if message and message[0] == ACTIVE_SENSING:
                message = None
            read.append((message, delta))
        now = time.perf_counter()  # after the queue was seen empty: every message came before
        timeline = self._timelines.get(id(midi_in))
        if timeline is None:
            timeline = self._timelines[id(midi_in)] = PortTimeline()
        times = timeline.place([delta for _, delta in read], now, emptied)
        return [(message, when) for (message, _), when in zip(read, times)
                if message is not None]

    @property
    def problem(self) -> str | None:
        return self._scan_problem or self._lasting_problem

    @property
    def ports_open(self) -> list[str]:
        names = list(self._open)
        if self._virtual is not None and self._virtual_name:
            names.append(f"virtual:{self._virtual_name}")
        return names

    @property
    def waiting_for(self) -> list[str]:
        """Ports lost, and selectors that match nothing open: what the HUD says we wait for."""
        waiting = list(self._lost)
        for pattern in self._patterns or []:
            if not any(pattern in key.casefold() for key in [*self._open, *self._lost]):
                waiting.append(pattern)
        waiting += [key for key in self._exact if key not in self._open and key not in waiting]
        return waiting

    @property
    def state(self) -> str:
        """One line for the HUD."""
        if self.api is None:
            return f"MIDI off: {self.problem}"
        text = f"MIDI {self.api.upper()}: " + (", ".join(self.ports_open) or "no inputs open")
        if self.waiting_for:
            text += "; waiting for " + ", ".join(self.waiting_for)
        return text

    def status(self) -> dict[str, Any]:
        """The input's part of telemetry's `midi` object."""
        return {"api": self.api, "ports_open": self.ports_open, "waiting_for": self.waiting_for,
                "dropped": self.dropped, "problem": self.problem, "state": self.state}

    def close(self) -> None:
        """Close every port. The JACK input port goes first, before our other clients leave
        and change the graph (see the top comment)."""
        for key in list(self._open):
            self._detach(key)
        if self._virtual is not None:
            self._virtual.delete()
        if self._patchbay is not None:
            self._patchbay.close()
        if self._probe is not None:
            self._probe.delete()
        self._virtual = self._probe = self._patchbay = None
