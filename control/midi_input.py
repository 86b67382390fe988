"""MIDI input ports through python-rtmidi: opening them, queueing their messages, hot-plug.

Two threads touch it. rtmidi's own thread (for JACK, the JACK process thread) calls
`_on_message`, which only puts (bytes, time) on a queue and never raises or blocks. Everything
else runs on the main thread: `poll(now)` once a frame (it does work about once a second) and
`drain()` once a frame. rtmidi is imported lazily, so a machine without it (the GPU box) still
runs the instrument, with no MIDI and one message saying why.
"""

from __future__ import annotations

import queue
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

API_CHOICES = ("alsa", "jack")
POLL_INTERVAL_S = 1.0
QUEUE_SIZE = 4096  # about 1.4 s of a saturated 31.25 kbaud cable; beyond that we drop
LOCAL_PORT_NAME = "in"


class MidiUnavailable(RuntimeError):
    """No MIDI: rtmidi missing, the API not compiled in, or its system (ALSA sequencer, JACK
    server) not running. The message says which and what to try."""


def _report_stderr(text: str) -> None:
    print(f"midi: {text}", file=sys.stderr)


def _rtmidi() -> Any:
    try:
        import rtmidi  # lazy on purpose, see the top comment
    except ImportError as exc:
        raise MidiUnavailable(f"python-rtmidi is not installed ({exc}); pip install "
                              "python-rtmidi to use MIDI") from None
    return rtmidi


def _api_constant(rtmidi: Any, name: str) -> int:
    return {"alsa": rtmidi.API_LINUX_ALSA, "jack": rtmidi.API_UNIX_JACK}[name]


def _why(name: str, exc: Exception) -> str:
    if name == "jack":
        return (f"JACK MIDI is not available ({exc}): start a JACK server (jackd, or "
                "jackd -d dummy without sound hardware) or choose --midi-api alsa")
    return (f"the ALSA sequencer is not available ({exc}): it needs /dev/snd/seq (kernel "
            "module snd-seq: sudo modprobe snd-seq), or choose --midi-api jack")


def open_api(api: str | None, client_name: str) -> tuple[Any, str, Any]:
    """(rtmidi module, API name, a MidiIn on it). `api` None tries the platform's usual order
    (ALSA, then JACK on Linux) and takes the first that works and has inputs, else the first
    that works. Raises MidiUnavailable saying why for each API tried."""
    rtmidi = _rtmidi()
    if api is not None and api not in API_CHOICES:
        raise MidiUnavailable(f"unknown MIDI API '{api}'; choose one of {', '.join(API_CHOICES)}")
    compiled = set(rtmidi.get_compiled_api())
    names = [api] if api else [n for n in API_CHOICES if _api_constant(rtmidi, n) in compiled]
    if not names:
        raise MidiUnavailable("this python-rtmidi has neither ALSA nor JACK support")
    problems, working = [], []
    for name in names:
        constant = _api_constant(rtmidi, name)
        if constant not in compiled:
            raise MidiUnavailable(f"this python-rtmidi was built without {name.upper()} "
                                  "support; choose another --midi-api")
        try:
            midi_in = rtmidi.MidiIn(constant, client_name)
        except Exception as exc:  # noqa: BLE001 - rtmidi raises RuntimeError and its own errors
            problems.append(_why(name, exc))
            continue
        if midi_in.get_port_count() > 0 or api is not None:
            for _, other in working:
                other.delete()
            return rtmidi, name, midi_in
        working.append((name, midi_in))
    if working:
        for _, other in working[1:]:
            other.delete()
        return rtmidi, working[0][0], working[0][1]
    raise MidiUnavailable("; ".join(problems))


_ALSA_ADDRESS = re.compile(r"\s+\d+:\d+$")


def port_key(name: str) -> str:
    """A port's name without ALSA's trailing 'client:port' numbers, which change when a device
    is plugged back in: hot-plug matches ports by this."""
    return _ALSA_ADDRESS.sub("", name)


def list_midi_ports(api: str | None = None, client_name: str = "swarm-instrument-list") -> str:
    """The text `--list-midi` prints: each input with the index `--midi-port` takes."""
    try:
        _, name, midi_in = open_api(api, client_name)
    except MidiUnavailable as exc:
        return f"MIDI unavailable: {exc}"
    try:
        ports = midi_in.get_ports()
    finally:
        midi_in.delete()
    if not ports:
        return f"MIDI inputs ({name.upper()}): none"
    lines = [f"MIDI inputs ({name.upper()}):"]
    lines += [f"  {index}: {port}" for index, port in enumerate(ports)]
    return "\n".join(lines)


@dataclass
class _OpenPort:
    key: str
    midi_in: Any


class MidiInput:
    """The instrument's MIDI inputs: chosen ports (index or name substring; None: every input)
    and an optional virtual port, reopened by name when a device comes back."""

    def __init__(self, ports: Sequence[str | int] | None = None, virtual: str | None = None,
                 api: str | None = None, client_name: str = "swarm-instrument",
                 report: Callable[[str], None] = _report_stderr,
                 poll_interval: float = POLL_INTERVAL_S) -> None:
        self.client_name = client_name
        self.report = report
        self.poll_interval = poll_interval
        self.api: str | None = None
        self._lasting_problem: str | None = None
        self._scan_problem: str | None = None
        self.dropped = 0
        self._queue: queue.Queue[tuple[bytes, float]] = queue.Queue(QUEUE_SIZE)
        self._open: dict[str, _OpenPort] = {}
        self._lost: list[str] = []
        self._patterns: list[str] | None = None  # None: every input
        self._exact: set[str] = set()
        self._reported: set[str] = set()
        self._last_poll: float | None = None
        self._virtual_name = virtual
        self._virtual: Any = None
        self._probe: Any = None
        self._rtmidi: Any = None
        try:
            self._rtmidi, self.api, self._probe = open_api(api, f"{client_name}-probe")
        except MidiUnavailable as exc:
            self._problem(str(exc))
            return
        self._select(ports)
        if virtual:
            self._open_virtual(virtual)
        self._scan()

    # ----- main thread -----

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

    def _select(self, ports: Sequence[str | int] | None) -> None:
        """Indexes are resolved to names now (then matched by name); substrings stay patterns."""
        if ports is None:
            return
        self._patterns = []
        listed = self._probe.get_ports()
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

    def _open_virtual(self, name: str) -> None:
        try:
            self._virtual = self._rtmidi.MidiIn(_api_constant(self._rtmidi, self.api),
                                                self.client_name)
            self._virtual.ignore_types(sysex=True, timing=True, active_sense=True)
            self._virtual.set_callback(self._on_message)
            self._virtual.open_virtual_port(name)
        except Exception as exc:  # noqa: BLE001 - a device problem must not stop the show
            self._virtual = None
            self._problem(f"cannot open virtual MIDI input '{name}' ({exc})")

    def _open_port(self, key: str) -> None:
        midi_in = None
        try:
            midi_in = self._rtmidi.MidiIn(_api_constant(self._rtmidi, self.api),
                                          self.client_name)
            names = [port_key(name) for name in midi_in.get_ports()]
            if key not in names:
                midi_in.delete()
                return  # gone again between the scan and now; the next scan retries
            midi_in.ignore_types(sysex=True, timing=True, active_sense=True)
            midi_in.set_callback(self._on_message)
            midi_in.open_port(names.index(key), LOCAL_PORT_NAME)
        except Exception as exc:  # noqa: BLE001 - a device problem must not stop the show
            if midi_in is not None:
                midi_in.delete()
            self._problem(f"cannot open MIDI input '{key}' ({exc}); retrying each second",
                          lasting=False)
            return
        self._open[key] = _OpenPort(key, midi_in)
        if key in self._lost:
            self._lost.remove(key)
        self.report(f"opened MIDI input '{key}'")

    def _close_port(self, key: str) -> None:
        port = self._open.pop(key)
        try:
            port.midi_in.cancel_callback()
            port.midi_in.close_port()
        finally:
            port.midi_in.delete()

    def _scan(self) -> None:
        """Close ports that vanished, open wanted ones that (re)appeared."""
        self._scan_problem = None
        try:
            present = {port_key(name) for name in self._probe.get_ports()}
        except Exception as exc:  # noqa: BLE001 - a device problem must not stop the show
            self._problem(f"cannot list MIDI ports ({exc})", lasting=False)
            return
        for key in [key for key in self._open if key not in present]:
            self._close_port(key)
            self._lost.append(key)
            self.report(f"MIDI input '{key}' went away; waiting for it to come back")
        for key in sorted(present):
            if key not in self._open and self._wanted(key):
                self._open_port(key)

    def poll(self, now: float) -> None:
        """Call each frame with a monotonic time; rescans the ports about once a second."""
        if self._probe is None:
            return
        if self._last_poll is not None and now - self._last_poll < self.poll_interval:
            return
        self._last_poll = now
        self._scan()

    def drain(self) -> list[tuple[bytes, float]]:
        """The messages queued since the last call, oldest first: (bytes, monotonic time)."""
        messages = []
        while True:
            try:
                messages.append(self._queue.get_nowait())
            except queue.Empty:
                return messages

    @property
    def problem(self) -> str | None:
        return self._scan_problem or self._lasting_problem

    @property
    def ports_open(self) -> list[str]:
        names = list(self._open)
        if self._virtual is not None:
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
        for key in list(self._open):
            self._close_port(key)
        if self._virtual is not None:
            self._virtual.cancel_callback()
            self._virtual.close_port()
            self._virtual.delete()
        if self._probe is not None:
            self._probe.delete()
        self._virtual = self._probe = None

    # ----- rtmidi's thread -----

    def _on_message(self, event: tuple[list[int], float], data: Any = None) -> None:
        """rtmidi callback: copy and enqueue, nothing else; a full queue drops the message."""
        try:
            self._queue.put_nowait((bytes(event[0]), time.monotonic()))
        except Exception:  # noqa: BLE001 - a callback never raises: queue full, odd bytes
            self.dropped += 1
