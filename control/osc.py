"""OSC input over UDP: a phone (TouchOSC, Open Stage Control), a sequencer or a second laptop
sets parameters and triggers what the MIDI pads trigger.

    /swarm/<param> value        a parameter in its own units: max_speed 12.0, separation true,
                                boundary "wrap", slow_color 0.1 0.4 0.9 (or "#1a66e6")
    /swarm/<param>/norm x       0..1 across the parameter's performance range (a fader)
    /swarm/preset n             recall slot n (1-9) with the morph
    /swarm/respawn              respawn the swarm
    /swarm/burst [x]            a separation burst, x in 0..1 (default 1)

Every datagram is hostile until parsed: the parser is strict OSC 1.0 (padding, lengths, type
tags; bundles nested at most 8 deep, their time tags ignored: everything applies on the next
frame), and a message that is malformed, unknown, of the wrong type or out of range is counted
and its reason kept, never raised into the show. The socket is non-blocking and read from the
frame loop, at most MAX_PER_FRAME datagrams a frame: a flood costs bounded work per frame and
the kernel drops the rest. Main thread only; no thread of its own.
"""

from __future__ import annotations

import math
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from control.params import BY_NAME, Param, ParamError

PREFIX = "/swarm/"
MAX_PER_FRAME = 256
MAX_DATAGRAM = 65536
MAX_BUNDLE_DEPTH = 8
DEFAULT_HOST = "0.0.0.0"


class OscError(ValueError):
    """A datagram or message that cannot be used; the message says why."""


class OscProblem(RuntimeError):
    """The OSC port cannot be opened; the message says which and what to do."""


# ---- parsing (pure) -------------------------------------------------------------------------

def _string(data: bytes, at: int) -> tuple[str, int]:
    end = data.find(b"\0", at)
    if end < 0:
        raise OscError(f"string at byte {at} has no terminating zero")
    try:
        text = data[at:end].decode("ascii")
    except UnicodeDecodeError:
        raise OscError(f"string at byte {at} is not ASCII") from None
    after = (end + 4) & ~3  # the zero, then padding to a multiple of four
    if after > len(data):
        raise OscError(f"string at byte {at} runs past the end")
    return text, after


def _take(data: bytes, at: int, size: int, what: str) -> int:
    if at + size > len(data):
        raise OscError(f"{what} at byte {at} runs past the end ({len(data)} bytes)")
    return at + size


def parse_message(data: bytes) -> tuple[str, list[Any]]:
    """(address, arguments) of one OSC message; OscError for anything malformed."""
    if len(data) % 4:
        raise OscError(f"message of {len(data)} bytes, not a multiple of 4")
    address, at = _string(data, 0)
    if not address.startswith("/"):
        raise OscError(f"address {address[:40]!r} does not start with '/'")
    if at == len(data):
        return address, []  # old senders omit the type tags of a message without arguments
    tags, at = _string(data, at)
    if not tags.startswith(","):
        raise OscError(f"{address}: type tags {tags[:20]!r} do not start with ','")
    args: list[Any] = []
    for tag in tags[1:]:
        if tag == "i":
            end = _take(data, at, 4, f"{address}: argument 'i'")
            args.append(struct.unpack(">i", data[at:end])[0])
            at = end
        elif tag == "f":
            end = _take(data, at, 4, f"{address}: argument 'f'")
            # The shortest decimal that is this float32: a fader's 0.7 stays 0.7, not
            # 0.699999988 in the HUD and in a preset saved afterwards.
            args.append(float(str(np.frombuffer(data[at:end], ">f4")[0])))
            at = end
        elif tag in "hdt":
            end = _take(data, at, 8, f"{address}: argument '{tag}'")
            args.append(struct.unpack({"h": ">q", "d": ">d", "t": ">Q"}[tag], data[at:end])[0])
            at = end
        elif tag in "sS":
            value, at = _string(data, at)
            args.append(value)
        elif tag == "b":
            end = _take(data, at, 4, f"{address}: blob size")
            size = struct.unpack(">i", data[at:end])[0]
            if size < 0:
                raise OscError(f"{address}: blob of negative size {size}")
            start, at = end, _take(data, end, (size + 3) & ~3, f"{address}: blob")
            args.append(bytes(data[start:start + size]))
        elif tag in "TFNI":
            args.append({"T": True, "F": False, "N": None, "I": math.inf}[tag])
        else:
            raise OscError(f"{address}: unknown type tag {tag!r}")
    if at != len(data):
        raise OscError(f"{address}: {len(data) - at} bytes after the last argument")
    return address, args


def parse_packet(data: bytes, depth: int = 0) -> list[tuple[str, list[Any]]]:
    """Every message in a datagram (a message, or a bundle of them, nested), in order."""
    if not data.startswith(b"#bundle\0"):
        return [parse_message(data)]
    if depth >= MAX_BUNDLE_DEPTH:
        raise OscError(f"bundles nested more than {MAX_BUNDLE_DEPTH} deep")
    at = _take(data, 8, 8, "bundle time tag")
    messages = []
    while at < len(data):
        end = _take(data, at, 4, "bundle element size")
        size = struct.unpack(">i", data[at:end])[0]
        if size <= 0 or size % 4:
            raise OscError(f"bundle element of size {size} at byte {at}")
        at = _take(data, end, size, "bundle element")
        messages.extend(parse_packet(data[end:at], depth + 1))
    return messages


# ---- meaning (pure) -------------------------------------------------------------------------

@dataclass(frozen=True)
class Command:
    """What a message asks: kind "set" (values), "preset" (slot), "respawn" or "burst"."""

    kind: str
    values: dict[str, Any] = field(default_factory=dict)
    slot: int = 0
    strength: float = 1.0


def _number(address: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OscError(f"{address}: needs a number, got {value!r}")
    if not math.isfinite(value):
        raise OscError(f"{address}: needs a finite number, got {value!r}")
    return float(value)


def _one(address: str, args: list[Any]) -> Any:
    if len(args) != 1:
        raise OscError(f"{address}: needs one argument, got {len(args)}")
    return args[0]


def _value(spec: Param, address: str, args: list[Any]) -> Any:
    if spec.kind == "color":
        if len(args) == 1 and isinstance(args[0], str):
            return args[0]  # "#rrggbb"
        if len(args) != 3:
            raise OscError(f"{address}: needs three numbers (r g b, 0..1), got {len(args)}")
        return [_number(address, a) for a in args]
    value = _one(address, args)
    if spec.kind in ("float", "int"):
        value = _number(address, value)
        if spec.kind == "int" and value.is_integer():
            value = int(value)
    return value


def interpret(address: str, args: list[Any]) -> Command:
    """The Command a message asks for; OscError says why not (unknown address, wrong type or
    count of arguments, out of range: the registry's own message)."""
    if not address.startswith(PREFIX):
        raise OscError(f"{address[:60]}: unknown address (ours start with {PREFIX})")
    path = address[len(PREFIX):]
    if path == "respawn":
        return Command("respawn")
    if path == "burst":
        strength = _number(address, args[0]) if args else 1.0
        if len(args) > 1 or not 0.0 <= strength <= 1.0:
            raise OscError(f"{address}: takes one strength in 0..1, got {args!r}")
        return Command("burst", strength=strength)
    if path == "preset":
        slot = _number(address, _one(address, args))
        if not slot.is_integer() or not 1 <= slot <= 9:
            raise OscError(f"{address}: slots are 1-9, got {slot:g}")
        return Command("preset", slot=int(slot))
    name, _, suffix = path.partition("/")
    spec = BY_NAME.get(name)
    if spec is None or suffix not in ("", "norm"):
        raise OscError(f"{address[:60]}: unknown address (parameters: {PREFIX}<name>, "
                       f"{PREFIX}<name>/norm; also preset, respawn, burst)")
    if suffix == "norm":  # a fader over the performance range, on the parameter's curve
        if spec.kind == "color":
            raise OscError(f"{address}: /norm takes one number; '{name}' is a colour")
        x = _number(address, _one(address, args))
        if not 0.0 <= x <= 1.0:
            raise OscError(f"{address}: takes 0..1, got {x:g}")
        value: Any = spec.from_norm(x)
    else:
        value = _value(spec, address, args)
    try:
        return Command("set", values={name: spec.validate(value)})
    except ParamError as exc:
        raise OscError(f"{address}: {exc}") from None


# ---- the socket ---------------------------------------------------------------------------

def parse_endpoint(text: str) -> tuple[str, int]:
    """`PORT` or `HOST:PORT` (the command line's --osc) -> (host, port); ValueError says why."""
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"--osc {text!r}: expected PORT or HOST:PORT, e.g. 9000") from None
    if not 1 <= number <= 65535:
        raise ValueError(f"--osc {text!r}: the port must be 1-65535")
    return (host or DEFAULT_HOST), number


class OscInput:
    """A non-blocking UDP socket read once a frame. `poll()` returns the frame's Commands."""

    def __init__(self, host: str = DEFAULT_HOST, port: int = 9000) -> None:
        self.host, self.port = host, port
        self.received = 0  # datagrams read
        self.rejected = 0  # messages (or whole datagrams) refused
        self.applied = 0
        self.last_error: str | None = None
        self.last_address: str | None = None
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # Room for a burst (a fader sweep, a bundle-happy sender) between two frames; the
            # kernel caps it at net.core.rmem_max.
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            self._sock.bind((host, port))
        except OSError as exc:
            self._sock.close()
            raise OscProblem(
                f"OSC: cannot listen on {host}:{port} ({exc.strerror or exc}); another program "
                "may hold the port: choose another with --osc PORT, or drop --osc") from None
        self._sock.setblocking(False)
        self.port = self._sock.getsockname()[1]  # the real one when port 0 asked for any

    def poll(self) -> list[Command]:
        commands: list[Command] = []
        for _ in range(MAX_PER_FRAME):
            try:
                data = self._sock.recv(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:  # e.g. ICMP errors surfacing on Linux: the next read goes on
                self._reject(f"socket: {exc}")
                continue
            self.received += 1
            try:
                messages = parse_packet(data)
            except OscError as exc:
                self._reject(f"datagram of {len(data)} bytes: {exc}")
                continue
            for address, args in messages:
                try:
                    commands.append(interpret(address, args))
                    self.last_address = address
                except OscError as exc:
                    self._reject(str(exc))
        self.applied += len(commands)
        return commands

    def _reject(self, reason: str) -> None:
        self.rejected += 1
        self.last_error = reason[:200]

    def state(self) -> dict[str, Any]:
        return {"listening": f"{self.host}:{self.port}", "received": self.received,
                "applied": self.applied, "rejected": self.rejected,
                "last_error": self.last_error, "last_address": self.last_address}

    def close(self) -> None:
        self._sock.close()
