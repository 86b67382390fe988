"""OSC input over UDP: a phone (TouchOSC, Open Stage Control), a sequencer or a second laptop
sets parameters and triggers what the MIDI pads trigger.

    /swarm/<param> value        a parameter in its own units: max_speed 12.0, separation true,
                                boundary "wrap", slow_color 0.1 0.4 0.9 (or "#1a66e6")
    /swarm/<param>/norm x       0..1 across the parameter's performance range (a fader)
    /swarm/preset n             recall slot n (1-9) with the morph
    /swarm/respawn              respawn the swarm
    /swarm/burst [x]            a separation burst, x in 0..1 (default 1)

Every datagram is hostile until parsed, and the parser is strict OSC 1.0: every size a multiple
of four inside the datagram; padding after the address, the type tags, strings and blobs all
zero bytes; an address starts with '/', does not end with '/', has no '//' and only printable
ASCII without spaces; at most MAX_ARGUMENTS arguments (a longer type-tag string is refused
before any argument is read); bundle elements of positive sizes, bundles nested at most
MAX_BUNDLE_DEPTH deep, their time tags ignored (everything applies on the next frame). A value
is an i, h, f, d (numbers), T, F (switches) or s, S (strings, at most MAX_TEXT characters)
argument; N and I are no finite number, and a blob (b) or a time tag (t: never read as a
number) is refused at any address. A malformed datagram is refused whole; a message that is
unknown, of the wrong type or out of range is refused alone.

The socket is non-blocking and read from the frame loop (no thread), and a frame's work is
bounded whatever arrives: at most MAX_DATAGRAMS_PER_FRAME datagrams read and at most
MAX_MESSAGES_PER_FRAME messages decoded (a bundle inside a bundle counts as one). A bundle
holding more than the frame has left has the rest refused and counted as dropped: their sizes
are walked to count them, never decoded, never applied late. What a frame does not read waits
in the socket, and the kernel drops what overflows it.

Every refusal is counted (`rejected`, over-budget ones also in `dropped`) and its reason kept
in `last_error`, never raised into the show. Reasons quote what came in only through
`printable()` (control characters escaped, cut to QUOTE_LIMIT characters), and OscError escapes
whatever else is left, so an address like "/\\x1b]0;TITLE\\x07" cannot retitle or clear the
performer's terminal through the console or the HUD. Main thread only.
"""

from __future__ import annotations

import math
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from control.actions import Action
from control.params import BY_NAME, Param, ParamError

PREFIX = "/swarm/"
MAX_DATAGRAMS_PER_FRAME = 256  # a phone's fader sends ~60 a second: room for a crowd of them
MAX_MESSAGES_PER_FRAME = 256  # the costliest (16 arguments) takes ~17 us: ~4.5 ms a frame at most
MAX_ARGUMENTS = 16  # our addresses take at most 3 (a colour); 16 leaves room for odd senders
MAX_DATAGRAM = 65536  # more than UDP over IPv4 carries (65,507 bytes)
MAX_BUNDLE_DEPTH = 8
MAX_TEXT = 64  # the longest string taken as a value: "#rrggbb" and choice names are far shorter
QUOTE_LIMIT = 60  # characters of outside input a reason quotes
REASON_LIMIT = 200  # characters of a whole reason (the HUD cuts further)
DEFAULT_HOST = "0.0.0.0"
BUNDLE = b"#bundle\0"
PATTERN_CHARACTERS = "*?[]{}"


# ---- quoting outside input (pure) -----------------------------------------------------------

_NAMED_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    """One character as a terminal may safely show it: printable ASCII as is, anything else as
    a Python-style escape (\\x1b, \\u202e), never the byte itself."""
    if " " <= char <= "~":
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str | bytes, limit: int = QUOTE_LIMIT) -> str:
    """`text` from outside (an address, a string argument, raw bytes) as a reason may quote it:
    control and non-ASCII characters escaped as repr does (ESC as \\x1b, BEL as \\x07, a
    backslash doubled, so the escapes are unambiguous), at most `limit` characters, cut with
    '...'. The console and the HUD print reasons, and a terminal obeys escape sequences: an
    address must never be able to retitle, clear or recolour the performer's terminal. Work is
    O(limit) whatever the length of `text`."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text[:limit + 1]).decode("latin-1")  # one character a byte, escaped below
    head = text[:limit + 1]
    if len(head) <= limit and head.isascii() and head.isprintable() and "\\" not in head:
        return head  # the usual case, an address or a name, at C speed
    pieces: list[str] = []
    used, keep = 0, None
    for char in head:
        piece = _NAMED_ESCAPES.get(char) or _escape(char)
        if keep is None and used + len(piece) > limit - 3:
            keep = len(pieces)  # where a cut would go, leaving room for the '...'
        used += len(piece)
        if used > limit:
            return "".join(pieces[:keep]) + "..."
        pieces.append(piece)
    return "".join(pieces)


def _plain(reason: str, limit: int = REASON_LIMIT) -> str:
    """The last guard on a whole reason: any character still outside printable ASCII escaped
    (quoted pieces went through printable() already, so their backslashes stay as they are),
    cut to `limit` characters. Messages from the parameter registry or the OS pass here too."""
    if not (reason.isascii() and reason.isprintable()):
        reason = "".join(_escape(char) for char in reason[:limit + 1])
    return reason if len(reason) <= limit else reason[:limit - 3] + "..."


class OscError(ValueError):
    """A datagram or message that cannot be used; the message says why, in printable ASCII
    (whatever the text handed in: see `_plain`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(_plain(reason))


class OscProblem(RuntimeError):
    """The OSC port cannot be opened; the message says which and what to do."""


# ---- parsing (pure) -------------------------------------------------------------------------

@dataclass(frozen=True)
class TimeTag:
    """A 't' argument (NTP time: seconds since 1900 in the high 32 bits, the fraction in the
    low). Its own type, so that it is never taken for a number: 2^32 x seconds is no speed."""

    ntp: int


def _string(data: bytes, at: int, what: str) -> tuple[str, int]:
    """The OSC-string at byte `at` (ASCII, a zero, then zeros up to a multiple of four bytes)
    and where the next field starts."""
    end = data.find(b"\0", at)
    if end < 0:
        raise OscError(f"{what} at byte {at} has no terminating zero")
    after = (end + 4) & ~3  # the zero, then padding to a multiple of four
    if after > len(data):
        raise OscError(f"{what} at byte {at} runs past the end")
    if any(data[end + 1:after]):
        raise OscError(f"{what} at byte {at}: padding bytes are not zero")
    try:
        text = data[at:end].decode("ascii")
    except UnicodeDecodeError:
        raise OscError(f"{what} at byte {at} is not ASCII: "
                       f"'{printable(data[at:min(end, at + QUOTE_LIMIT + 1)])}'") from None
    return text, after


def _past(address: str, number: int, tag: str, at: int, size: int) -> OscError:
    """The reason for an argument that the datagram is too short to hold."""
    return OscError(f"{printable(address)}: argument {number} ('{tag}') at byte {at} runs past "
                    f"the end ({size} bytes)")


def _check_address(address: str) -> None:
    """OSC 1.0's address rules: '/'-separated parts of printable ASCII, none empty, no spaces.
    Ours never break them, so an address that does is a sender's bug or an attack."""
    if not address.startswith("/"):
        raise OscError(f"address '{printable(address)}' does not start with '/'")
    if not address.isprintable() or " " in address:
        raise OscError(f"address '{printable(address)}' has characters other than printable "
                       "ASCII (or a space)")
    if address.endswith("/"):
        raise OscError(f"address '{printable(address)}' ends with '/'")
    if "//" in address:
        raise OscError(f"address '{printable(address)}' has an empty part ('//')")


def parse_message(data: bytes) -> tuple[str, list[Any]]:
    """(address, arguments) of one OSC message; OscError for anything malformed. At most
    MAX_ARGUMENTS arguments: the type tags are counted before any argument is read, so a
    datagram of 60,000 tags costs no more than one of 17."""
    if len(data) % 4:
        raise OscError(f"message of {len(data)} bytes, not a multiple of 4")
    address, at = _string(data, 0, "address")
    _check_address(address)
    if at == len(data):
        return address, []  # old senders omit the type tags of a message without arguments
    if data[at] != 0x2C:  # ','
        raise OscError(f"{printable(address)}: type tags "
                       f"'{printable(data[at:at + QUOTE_LIMIT + 1])}' do not start with ','")
    end = data.find(b"\0", at)
    count = (end if end >= 0 else len(data)) - at - 1
    if count > MAX_ARGUMENTS:
        raise OscError(f"{printable(address)}: type tags for {count} arguments "
                       f"(at most {MAX_ARGUMENTS})")
    tags, at = _string(data, at, "type tags")
    size = len(data)
    args: list[Any] = []
    for number, tag in enumerate(tags[1:], 1):
        # Reasons are written only when needed: a good argument costs a few operations.
        if tag in "if":
            if at + 4 > size:
                raise _past(address, number, tag, at, size)
            if tag == "i":
                args.append(struct.unpack_from(">i", data, at)[0])
            else:
                # The shortest decimal that is this float32: a fader's 0.7 stays 0.7, not
                # 0.699999988 in the HUD and in a preset saved afterwards.
                args.append(float(str(np.float32(struct.unpack_from(">f", data, at)[0]))))
            at += 4
        elif tag in "hdt":
            if at + 8 > size:
                raise _past(address, number, tag, at, size)
            value = struct.unpack_from({"h": ">q", "d": ">d", "t": ">Q"}[tag], data, at)[0]
            args.append(TimeTag(value) if tag == "t" else value)
            at += 8
        elif tag in "sS":
            value, at = _string(data, at, f"{printable(address)}: argument {number} ('{tag}')")
            args.append(value)
        elif tag == "b":
            if at + 4 > size:
                raise _past(address, number, tag, at, size)
            length = struct.unpack_from(">i", data, at)[0]
            if length < 0:
                raise OscError(f"{printable(address)}: argument {number}: blob of negative "
                               f"size {length}")
            start, at = at + 4, at + 4 + ((length + 3) & ~3)
            if at > size:
                raise _past(address, number, tag, start - 4, size)
            if any(data[start + length:at]):
                raise OscError(f"{printable(address)}: argument {number}: padding bytes after "
                               "the blob are not zero")
            args.append(data[start:start + length])
        elif tag in "TFNI":
            args.append({"T": True, "F": False, "N": None, "I": math.inf}[tag])
        else:
            raise OscError(f"{printable(address)}: unknown type tag '{printable(tag)}'")
    if at != len(data):
        raise OscError(f"{printable(address)}: {len(data) - at} bytes after the last argument")
    return address, args


@dataclass
class Budget:
    """What a frame may still decode: each message, and each bundle inside a bundle, takes one
    (a bundle of empty bundles is work too). Shared by every datagram read in that frame."""

    left: int = MAX_MESSAGES_PER_FRAME


@dataclass
class Packet:
    """What one datagram held: its messages, in order, decoded while the budget lasted, and
    how many more it held past the budget (refused: sized, never decoded)."""

    messages: list[tuple[str, list[Any]]] = field(default_factory=list)
    dropped: int = 0


def parse_packet(data: bytes, budget: Budget | None = None) -> Packet:
    """Every message in a datagram (a message, or a bundle of them, nested), in order, within
    `budget` (a fresh frame's when None). OscError for anything malformed, the part past the
    budget included: its structure is checked (cheaply: sizes only) so that a datagram is
    either refused whole or taken as far as the budget goes."""
    budget = budget if budget is not None else Budget()
    packet = Packet()
    if data.startswith(BUNDLE):
        _bundle(data, 1, budget, packet)
    elif budget.left > 0:
        budget.left -= 1
        packet.messages.append(parse_message(data))
    else:
        packet.dropped = 1
    return packet


def _bundle(data: bytes, depth: int, budget: Budget, packet: Packet) -> None:
    """The elements of the bundle `data` (header and time tag first; the time tag ignored)
    into `packet`: decoded while `budget` lasts, only counted after."""
    if depth > MAX_BUNDLE_DEPTH:
        raise OscError(f"bundles nested more than {MAX_BUNDLE_DEPTH} deep")
    if len(data) < 16:
        raise OscError(f"bundle of {len(data)} bytes has no time tag")
    at = 16
    while at < len(data):
        if at + 4 > len(data):
            raise OscError(f"bundle element size at byte {at} runs past the end")
        size = struct.unpack_from(">i", data, at)[0]
        if size <= 0 or size % 4:
            raise OscError(f"bundle element of size {size} at byte {at}")
        start, at = at + 4, at + 4 + size
        if at > len(data):
            raise OscError(f"bundle element of {size} bytes at byte {start - 4} runs past the "
                           f"end ({len(data)} bytes)")
        if data.startswith(BUNDLE, start, at):
            if budget.left > 0:
                budget.left -= 1
            _bundle(data[start:at], depth + 1, budget, packet)
        elif budget.left > 0:
            budget.left -= 1
            packet.messages.append(parse_message(data[start:at]))
        else:
            packet.dropped += 1


# ---- meaning (pure) -------------------------------------------------------------------------

def _show(value: Any) -> str:
    """An argument as a reason quotes it: strings through printable(), a blob by its size."""
    if isinstance(value, str):
        return f"'{printable(value)}'"
    if isinstance(value, (bytes, bytearray)):
        return f"a blob of {len(value)} bytes"
    if isinstance(value, TimeTag):
        return "a time tag"
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    return printable(repr(value))


def _number(address: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OscError(f"{printable(address)}: needs a number, got {_show(value)}")
    if not math.isfinite(value):
        raise OscError(f"{printable(address)}: needs a finite number, got {value!r}")
    return float(value)


def _one(address: str, args: list[Any]) -> Any:
    if len(args) != 1:
        raise OscError(f"{printable(address)}: needs one argument, got {len(args)}")
    return args[0]


def _check_values(address: str, args: list[Any]) -> None:
    """Refuse arguments that are no parameter's value, each with its own reason, before they
    reach the registry (whose messages repr the value: a 60 KB string is not quoted there)."""
    for number, value in enumerate(args, 1):
        if isinstance(value, (int, float, str)) and not (isinstance(value, str)
                                                         and len(value) > MAX_TEXT):
            continue  # the usual case, checked without writing any reason
        where = f"{printable(address)}: argument {number}"
        if isinstance(value, TimeTag):
            raise OscError(f"{where} is a time tag ('t'), not a value (a time tag is not a "
                           "number; send i, f, d, h, T, F or s)")
        if isinstance(value, (bytes, bytearray)):
            raise OscError(f"{where} is a blob ('b') of {len(value)} bytes, not a value")
        if isinstance(value, str):
            raise OscError(f"{where} is a string of {len(value)} characters; no value is longer "
                           f"than {MAX_TEXT}")


def _unknown(address: str, known: str) -> OscError:
    """The reason for an address that is not ours: a pattern says so (we match exactly)."""
    if any(char in address for char in PATTERN_CHARACTERS):
        return OscError(f"{printable(address)}: address patterns (* ? [ ] {{ }}) are not "
                        "supported, send the full address")
    return OscError(f"{printable(address)}: unknown address ({known})")


def _value(spec: Param, address: str, args: list[Any]) -> Any:
    if spec.kind == "color":
        if len(args) == 1 and isinstance(args[0], str):
            return args[0]  # "#rrggbb"
        if len(args) != 3:
            raise OscError(f"{printable(address)}: needs three numbers (r g b, 0..1), "
                           f"got {len(args)}")
        return [_number(address, a) for a in args]
    value = _one(address, args)
    if spec.kind in ("float", "int"):
        value = _number(address, value)
        if spec.kind == "int" and value.is_integer():
            value = int(value)
    return value


def interpret(address: str, args: list[Any]) -> Action:
    """The Action a message asks for; OscError says why not (unknown address, wrong type or
    count of arguments, out of range: the registry's own message)."""
    if not address.startswith(PREFIX):
        raise _unknown(address, f"ours start with {PREFIX}")
    _check_values(address, args)
    path = address[len(PREFIX):]
    if path == "respawn":
        return Action("respawn")
    if path == "burst":
        strength = _number(address, args[0]) if args else 1.0
        if len(args) > 1 or not 0.0 <= strength <= 1.0:
            raise OscError(f"{printable(address)}: takes one strength in 0..1, got "
                           f"{', '.join(_show(a) for a in args)}")
        return Action("separation_burst", strength)
    if path == "preset":
        slot = _number(address, _one(address, args))
        if not slot.is_integer() or not 1 <= slot <= 9:
            raise OscError(f"{printable(address)}: slots are 1-9, got {slot:g}")
        return Action("recall_preset", int(slot))
    name, _, suffix = path.partition("/")
    spec = BY_NAME.get(name)
    if spec is None or suffix not in ("", "norm"):
        raise _unknown(address, f"parameters: {PREFIX}<name>, {PREFIX}<name>/norm; "
                                "also preset, respawn, burst")
    if suffix == "norm":  # a fader over the performance range, on the parameter's curve
        if spec.kind == "color":
            raise OscError(f"{printable(address)}: /norm takes one number; '{name}' is a colour")
        x = _number(address, _one(address, args))
        if not 0.0 <= x <= 1.0:
            raise OscError(f"{printable(address)}: takes 0..1, got {x:g}")
        value: Any = spec.from_norm(x)
    else:
        value = _value(spec, address, args)
    try:
        return Action("set", values={name: spec.validate(value)})
    except ParamError as exc:
        raise OscError(f"{printable(address)}: {exc}") from None


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
    """A non-blocking UDP socket read once a frame. `poll()` returns the frame's Actions."""

    def __init__(self, host: str = DEFAULT_HOST, port: int = 9000) -> None:
        self.host, self.port = host, port
        self.received = 0  # datagrams read
        self.rejected = 0  # messages (or whole datagrams) refused, for any reason
        self.dropped = 0  # of those, messages refused only for the frame's budget
        self.applied = 0
        self.last_error: str | None = None  # printable ASCII: see printable()
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

    def poll(self) -> list[Action]:
        """The frame's Actions, in arrival order. At most MAX_DATAGRAMS_PER_FRAME datagrams
        are read and MAX_MESSAGES_PER_FRAME messages decoded, so a flood costs a bounded few
        milliseconds a frame; what is not read waits in the socket for the next frame."""
        commands: list[Action] = []
        budget = Budget()
        for _ in range(MAX_DATAGRAMS_PER_FRAME):
            if budget.left <= 0:
                break
            try:
                data = self._sock.recv(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:  # e.g. ICMP errors surfacing on Linux: the next read goes on
                self._reject(f"socket: {exc}")
                continue
            self.received += 1
            try:
                packet = parse_packet(data, budget)
            except OscError as exc:
                self._reject(f"datagram of {len(data)} bytes: {exc}")
                continue
            for address, args in packet.messages:
                try:
                    commands.append(interpret(address, args))
                    self.last_address = address
                except OscError as exc:
                    self._reject(str(exc))
            if packet.dropped:
                self.dropped += packet.dropped
                self._reject(f"datagram of {len(data)} bytes: {packet.dropped} message(s) past "
                             f"this frame's {MAX_MESSAGES_PER_FRAME} refused (send fewer a "
                             "frame)", count=packet.dropped)
        self.applied += len(commands)
        return commands

    def _reject(self, reason: str, count: int = 1) -> None:
        self.rejected += count
        self.last_error = _plain(reason)

    def state(self) -> dict[str, Any]:
        return {"listening": f"{self.host}:{self.port}", "received": self.received,
                "applied": self.applied, "rejected": self.rejected, "dropped": self.dropped,
                "last_error": self.last_error, "last_address": self.last_address}

    def close(self) -> None:
        self._sock.close()
