"""The MIDI systems under python-rtmidi: which API opens (ALSA, then JACK on Linux), said in one
line when none does (the lines ALSA and libjack print themselves collected, not shown); ports
listed and named without ALSA's changing numbers; and, for JACK, a small portless client that
connects devices to our one input port (see control/midi/ports.py). Main thread only."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

API_CHOICES = ("alsa", "jack")


JACK_MIDI_TYPE = b"8 bit raw midi"


_JACK_NO_START_SERVER = 0x01


_JACK_PORT_IS_INPUT = 0x1


_JACK_PORT_IS_OUTPUT = 0x2


class MidiUnavailable(RuntimeError):
    """No MIDI: rtmidi missing, the API not compiled in, or its system (ALSA sequencer, JACK
    server) not running. The message says which and what to try."""


def _rtmidi() -> Any:
    try:
        import rtmidi  # noqa: PLC0415 - optional: python-rtmidi may be missing (MIDI is then off, said once)
    except ImportError as exc:
        raise MidiUnavailable(f"python-rtmidi is not installed ({exc}); pip install "
                              "python-rtmidi to use MIDI") from None
    return rtmidi


def _api_constant(rtmidi: Any, name: str) -> int:
    return {"alsa": rtmidi.API_LINUX_ALSA, "jack": rtmidi.API_UNIX_JACK}[name]


def _why(name: str, exc: Exception) -> str:
    """Why one MIDI system cannot be opened, short: the show's console says it once."""
    if name == "jack":
        return "no JACK server (start jackd, or jackd -d dummy without sound hardware)"
    return "no ALSA sequencer (/dev/snd/seq: sudo modprobe snd-seq)"


@contextmanager
def library_noise(lines: list[str]) -> Iterator[None]:
    """Collect what C libraries print on stderr (fd 2) meanwhile into `lines` instead of the
    terminal: ALSA and libjack print six lines or so when rtmidi tries a system that is not
    there ("ALSA lib seq_hw.c...", "jack server is not running..."). The caller says it in one
    line of its own; the lines stay available for a bug report."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no fd 2 to borrow (a closed stderr): let it through
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines += sink.read(65536).decode("utf-8", "replace").splitlines()


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
    hidden_lines = 0
    for name in names:
        constant = _api_constant(rtmidi, name)
        if constant not in compiled:
            raise MidiUnavailable(f"this python-rtmidi was built without {name.upper()} "
                                  "support; choose another --midi-api")
        noise: list[str] = []
        try:
            with library_noise(noise):
                midi_in = rtmidi.MidiIn(constant, client_name)
        except Exception as exc:  # noqa: BLE001 - rtmidi raises RuntimeError and its own errors
            problems.append(_why(name, exc))
            continue
        finally:
            hidden_lines += len(noise)
        if midi_in.get_port_count() > 0 or api is not None:
            for _, other in working:
                other.delete()
            return rtmidi, name, midi_in
        working.append((name, midi_in))
    if working:
        for _, other in working[1:]:
            other.delete()
        return rtmidi, working[0][0], working[0][1]
    hidden = f" ({hidden_lines} library lines hidden)" if hidden_lines else ""
    other = [n for n in API_CHOICES if n != api][0] if api else None
    hint = f"--midi-api {other}, or --no-midi" if other else "--no-midi skips it"
    raise MidiUnavailable(f"{' and '.join(problems)}: MIDI is off; {hint}{hidden}")


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


def _loaded_libjack() -> str | None:
    """The libjack this process already uses (the python-rtmidi wheel bundles its own), so the
    patchbay shares it rather than loading a second copy."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                path = line.split()[-1]
                if re.search(r"/libjack(-[0-9a-f]+)?\.so", path):
                    return path
    except OSError:
        pass
    return ctypes.util.find_library("jack")


class _JackPatchbay:
    """A JACK client with no ports that is never activated: it only connects other clients'
    ports, so it receives no notifications and has nothing to race with."""

    def __init__(self, name: str) -> None:
        path = _loaded_libjack()
        if path is None:
            raise OSError("libjack not found")
        lib = ctypes.CDLL(path)
        lib.jack_client_open.restype = ctypes.c_void_p
        lib.jack_client_open.argtypes = [ctypes.c_char_p, ctypes.c_int,
                                         ctypes.POINTER(ctypes.c_int)]
        lib.jack_connect.restype = ctypes.c_int
        lib.jack_connect.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
        lib.jack_get_ports.restype = ctypes.POINTER(ctypes.c_char_p)
        lib.jack_get_ports.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                       ctypes.c_ulong]
        lib.jack_free.argtypes = [ctypes.c_void_p]
        lib.jack_client_close.argtypes = [ctypes.c_void_p]
        status = ctypes.c_int(0)
        client = lib.jack_client_open(name.encode(), _JACK_NO_START_SERVER, ctypes.byref(status))
        if not client:
            raise OSError(f"jack_client_open failed (status 0x{status.value:x})")
        self._lib, self._client = lib, client

    def midi_ports(self, flags: int) -> list[str]:
        """MIDI ports with these flags (JackPortIsInput / JackPortIsOutput), in one snapshot:
        rtmidi's get_ports() counts, then names one by one, and fails if a port goes between."""
        ports = self._lib.jack_get_ports(self._client, None, JACK_MIDI_TYPE, flags)
        if not ports:
            return []
        names = []
        index = 0
        while ports[index] is not None:
            names.append(ports[index].decode(errors="replace"))
            index += 1
        self._lib.jack_free(ctypes.cast(ports, ctypes.c_void_p))
        return names

    def connect(self, source: str, destination: str) -> int:
        """0 when connected now, EEXIST when it already was, another code on failure."""
        return self._lib.jack_connect(self._client, source.encode(), destination.encode())

    def close(self) -> None:
        if self._client:
            self._lib.jack_client_close(self._client)
            self._client = None
