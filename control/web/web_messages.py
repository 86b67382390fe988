"""What the web remote's page and the show say to each other, as plain data
(control/web/web_remote.py carries it): a page's message is OSC's address and arguments as a JSON
array, read with the same meaning and the same checks as OSC (control/osc/osc_input.py `interpret`);
the show describes its parameters once (`describe_params`) and sends values as the page shows them
(`plain_value`).

    ["/swarm/max_speed/norm", 0.5]   a slider over the performance range, on its curve
    ["/swarm/separation", false]     a value in the parameter's units (a switch, a choice,
    ["/swarm/fast_color", "#ff8800"] a colour, a number)
    ["/swarm/preset", 3]             recall slot 3 with the morph
    ["/swarm/tap"]  ["/swarm/downbeat"]  ["/swarm/respawn"]  ["/swarm/burst", 1]

Pure functions, any thread; every refusal a WebError that quotes outside text only through
printable().
"""

from __future__ import annotations

import json
import math
from typing import Any

from swarm_instrument.control.actions import Action
from swarm_instrument.control.osc.osc_input import MAX_TEXT, interpret
from swarm_instrument.control.osc.osc_wire import MAX_ARGUMENTS, OscError, printable
from swarm_instrument.control.parameters.groups import grouped
from swarm_instrument.control.parameters.registry import REGISTRY

MAX_MESSAGE = 1024  # characters: the longest message the page sends is ~60


class WebError(ValueError):
    """A refused message or request; the message says why (printable, never the token)."""


def _refuse_constant(name: str) -> Any:
    raise WebError(f"{name} is not a number; send a finite number")


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > 30:  # no parameter needs more digits; int() would be costly
        raise WebError(f"a number of {len(text)} digits; no value needs more than 30")
    return int(text)


def parse_message(data: str | bytes) -> Action:
    """The Action a text message asks for: a JSON array [address, arguments...] read as OSC
    reads a message. WebError says why not, quoting the message only through printable()."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        raise WebError(f"a binary message of {len(data)} bytes; send JSON text")
    if len(data) > MAX_MESSAGE:
        raise WebError(f"a message of {len(data)} characters; at most {MAX_MESSAGE}")
    try:
        message = json.loads(data, parse_constant=_refuse_constant, parse_int=_integer)
    except WebError:
        raise
    except (ValueError, RecursionError) as exc:
        raise WebError(f"not JSON ({printable(str(exc), 60)}): {printable(data)}") from None
    if not isinstance(message, list) or not message or not isinstance(message[0], str):
        raise WebError(f"expected [\"/swarm/...\", arguments...], got {printable(data)}")
    address, args = message[0], message[1:]
    if len(args) > MAX_ARGUMENTS:
        raise WebError(f"{printable(address)}: {len(args)} arguments; at most {MAX_ARGUMENTS}")
    for number, value in enumerate(args, 1):
        if isinstance(value, float) and not math.isfinite(value):
            raise WebError(f"{printable(address)}: argument {number} is not finite")
        if isinstance(value, str) and len(value) > MAX_TEXT:
            raise WebError(f"{printable(address)}: argument {number} is a string of "
                           f"{len(value)} characters; no value is longer than {MAX_TEXT}")
        if not isinstance(value, (bool, int, float, str)):
            kind = "null" if value is None else type(value).__name__
            raise WebError(f"{printable(address)}: argument {number} is {kind}, not a value "
                           "(a number, true/false or a string)")
    try:
        return interpret(address, args)
    except OscError as exc:
        raise WebError(str(exc)) from None


def describe_params() -> dict[str, Any]:
    """What the page builds itself from: every parameter with its kind, group, range,
    performance range, curve, choices and meaning, in groups (control/parameters/groups.py)."""
    by_name = {p.name: p for p in REGISTRY}
    params = []
    groups = []
    for group, names in grouped():
        groups.append({"name": group, "params": names})
        for name in names:
            spec = by_name[name]
            entry: dict[str, Any] = {"name": name, "kind": spec.kind, "group": group,
                                     "description": spec.description,
                                     "default": plain_value(spec.default)}
            if spec.kind in ("float", "int"):
                low, high = spec.play_range
                entry.update(lo=spec.lo, hi=spec.hi, play=[low, high], curve=spec.curve)
            if spec.kind == "choice":
                entry["choices"] = list(spec.choices)
            params.append(entry)
    return {"groups": groups, "params": params}


def plain_value(value: Any) -> Any:
    """A parameter's value as the page shows it: a colour as "#rrggbb"."""
    if isinstance(value, tuple) and len(value) == 3:
        return "#" + "".join(f"{round(min(max(c, 0.0), 1.0) * 255):02x}" for c in value)
    return value
