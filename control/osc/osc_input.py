"""OSC input over UDP: a phone (TouchOSC, Open Stage Control), a sequencer or a second laptop
sets parameters and triggers what the MIDI pads trigger.

    /swarm/<param> value        a parameter in its own units: max_speed 12.0, separation true,
                                boundary "wrap", slow_color 0.1 0.4 0.9 (or "#1a66e6")
    /swarm/<param>/norm x       0..1 across the parameter's performance range (a fader)
    /swarm/preset n             recall slot n (1-9) with the morph
    /swarm/respawn              respawn the swarm
    /swarm/burst [x]            a separation burst, x in 0..1 (default 1)
    /swarm/tap                  tap tempo (four taps set the tempo and the phase)
    /swarm/downbeat             this beat is the first of the bar
    /swarm/tempo/half           the audio's tempo read at half (tempo_min, tempo_max halved)
    /swarm/tempo/double         ... at double (the range doubled), as DJ software's buttons
    /swarm/autopilot [0|1]      the autopilot off, on, or the other way
    /swarm/autopilot/resume     the autopilot takes the look back now (the performer's hold
                                over)

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
from typing import Any

from swarm_instrument.control.actions import Action
from swarm_instrument.control.osc.osc_wire import (
    MAX_DATAGRAM,
    MAX_MESSAGES_PER_FRAME,
    Budget,
    OscError,
    TimeTag,
    parse_packet,
    plain_reason,
    printable,
)
from swarm_instrument.control.parameters.registry import BY_NAME, Param, ParamError

PREFIX = "/swarm/"
MAX_DATAGRAMS_PER_FRAME = 256  # a phone's fader sends ~60 a second: room for a crowd of them
MAX_TEXT = 64  # the longest string taken as a value: "#rrggbb" and choice names are far shorter
DEFAULT_HOST = "0.0.0.0"
PATTERN_CHARACTERS = "*?[]{}"


# ---- quoting outside input (pure) -----------------------------------------------------------


class OscProblem(RuntimeError):
    """The OSC port cannot be opened; the message says which and what to do."""


# ---- parsing (pure) -------------------------------------------------------------------------


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
    if path in ("respawn", "tap", "downbeat"):
        if args:
            raise OscError(f"{printable(address)}: takes no arguments, got "
                           f"{', '.join(_show(a) for a in args)}")
        return Action(path)
    if path in ("tempo/half", "tempo/double", "autopilot/resume"):
        if args:
            raise OscError(f"{printable(address)}: takes no arguments, got "
                           f"{', '.join(_show(a) for a in args)}")
        first, _, second = path.partition("/")
        return Action(f"{first}_{second}" if first == "autopilot" else f"tempo_{second}")
    if path == "burst":
        strength = _number(address, args[0]) if args else 1.0
        if len(args) > 1 or not 0.0 <= strength <= 1.0:
            raise OscError(f"{printable(address)}: takes one strength in 0..1, got "
                           f"{', '.join(_show(a) for a in args)}")
        return Action("separation_burst", strength)
    if path == "outputs":  # [N] 0|1, or nothing: the other way
        if len(args) > 2:
            raise OscError(f"{printable(address)}: takes [output number] 0|1, or nothing")
        numbers = [_number(address, a) for a in args]
        if any(not n.is_integer() for n in numbers) or (numbers and numbers[-1] not in (0, 1)) \
                or (len(numbers) == 2 and not 1 <= numbers[0] <= 64):
            raise OscError(f"{printable(address)}: takes [output number 1-64] 0|1, or "
                           f"nothing; got {', '.join(_show(a) for a in args)}")
        values = {"output": int(numbers[0])} if len(numbers) == 2 else {}
        return Action("outputs", int(numbers[-1]) if numbers else None, values=values)
    if path == "autopilot":  # 0|1, or nothing: the other way
        if len(args) > 1 or (args and _number(address, args[0]) not in (0, 1)):
            raise OscError(f"{printable(address)}: takes 0|1, or nothing; got "
                           f"{', '.join(_show(a) for a in args)}")
        return Action("autopilot", int(_number(address, args[0])) if args else None)
    if path == "preset":
        slot = _number(address, _one(address, args))
        if not slot.is_integer() or not 1 <= slot <= 9:
            raise OscError(f"{printable(address)}: slots are 1-9, got {slot:g}")
        return Action("recall_preset", int(slot))
    name, _, suffix = path.partition("/")
    spec = BY_NAME.get(name)
    if spec is None or suffix not in ("", "norm"):
        raise _unknown(address, f"parameters: {PREFIX}<name>, {PREFIX}<name>/norm; "
                                "also preset, respawn, burst, tap, downbeat, tempo/half, "
                                "tempo/double, outputs, autopilot, autopilot/resume")
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
        raise ValueError(f"--osc {text!r}: the port must be 1 to 65535, got {number}")
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
        self.last_error = plain_reason(reason)

    def state(self) -> dict[str, Any]:
        return {"listening": f"{self.host}:{self.port}", "received": self.received,
                "applied": self.applied, "rejected": self.rejected, "dropped": self.dropped,
                "last_error": self.last_error, "last_address": self.last_address}

    def close(self) -> None:
        self._sock.close()
