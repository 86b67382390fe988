"""OSC 1.0's wire format, parsed strictly: every datagram is hostile until it parses. Messages and
bundles (nested at most MAX_BUNDLE_DEPTH deep) with padding, sizes and type tags checked, work
bounded by a frame's Budget; every refusal an OscError whose reason quotes the datagram made
printable (escapes shown, never sent to a terminal). Pure functions, any thread."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_ARGUMENTS = 16  # our addresses take at most 3 (a colour); 16 leaves room for odd senders


MAX_MESSAGES_PER_FRAME = 256  # the costliest (16 arguments) takes ~17 us: ~4.5 ms a frame at most
MAX_DATAGRAM = 65536  # more than UDP over IPv4 carries (65,507 bytes)


MAX_BUNDLE_DEPTH = 8


QUOTE_LIMIT = 60  # characters of outside input a reason quotes


REASON_LIMIT = 200  # characters of a whole reason (the HUD cuts further)


BUNDLE = b"#bundle\0"


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


def plain_reason(reason: str, limit: int = REASON_LIMIT) -> str:
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
        super().__init__(plain_reason(reason))


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
