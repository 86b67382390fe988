"""Modulation routes: audio features push swarm parameters, e.g. an onset kicks separation.

Main thread only. A route is plain data (source, parameter, amount) that presets store as JSON.
`modulate` returns this frame's values for the routed parameters and leaves the registry alone:
the caller hands the dict to `Swarm.step(values=...)`, so a knob turned by hand is never
overwritten by the audio and modulation stops cleanly when the routes go.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from control.params import ParamError, param

SOURCES = ("level", "low", "mid", "high", "onset")
SOURCE_HELP = {
    "level": "loudness after auto-gain, 0..1",
    "low": "low band (20-250 Hz), 0..1",
    "mid": "mid band (250-2500 Hz), 0..1",
    "high": "high band (2.5-16 kHz), 0..1",
    "onset": "1 at each onset, falling to 0 in 0.25 s",
}
ROUTE_KEYS = ("source", "param", "amount")


class RouteError(ParamError):
    """A route that cannot be used; the message names the route and the bad key."""


@dataclass(frozen=True)
class Route:
    """`param` moves by `amount` (in the parameter's own units) times `source` (0..1)."""

    source: str
    param: str
    amount: float

    def __post_init__(self) -> None:
        check_route(self.source, self.param, self.amount)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "param": self.param, "amount": self.amount}

    @classmethod
    def from_dict(cls, data: Any, where: str = "route") -> Route:
        """Build a route from a preset's JSON object; RouteError names the bad key."""
        if not isinstance(data, Mapping):
            raise RouteError(f"{where}: a route is an object with keys {', '.join(ROUTE_KEYS)}, "
                             f"got {data!r}")
        for key in data:
            if key not in ROUTE_KEYS:
                raise RouteError(f"{where}: unknown key '{key}' (a route has "
                                 f"{', '.join(ROUTE_KEYS)})")
        for key in ROUTE_KEYS:
            if key not in data:
                raise RouteError(f"{where}: missing key '{key}'")
        return cls(*check_route(data["source"], data["param"], data["amount"], where))


def check_route(source: Any, name: Any, amount: Any,
                where: str = "route") -> tuple[str, str, float]:
    """Validate one route's fields; returns them cleaned or raises RouteError naming the key."""
    if source not in SOURCES:
        raise RouteError(f"{where}: 'source' must be one of {', '.join(SOURCES)}, got {source!r}")
    if not isinstance(name, str):
        raise RouteError(f"{where}: 'param' must be a parameter name, got {name!r}")
    try:
        target = param(name)
    except ParamError as exc:
        raise RouteError(f"{where}: 'param': {exc}") from None
    if target.kind != "float":
        raise RouteError(f"{where}: 'param' '{name}' is a {target.kind} parameter; only "
                         "continuous (float) parameters can be modulated")
    if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not math.isfinite(
            amount):
        raise RouteError(f"{where}: 'amount' must be a finite number, got {amount!r}")
    return source, name, float(amount)


def routes_from_json(data: Any, where: str = "routes") -> list[Route]:
    """A preset's "routes" list -> Route objects; the error names the route's index."""
    if not isinstance(data, list):
        raise RouteError(f"{where}: must be a list of routes, got {type(data).__name__}")
    return [Route.from_dict(item, f"{where}[{i}]") for i, item in enumerate(data)]


def routes_to_json(routes: Iterable[Route]) -> list[dict[str, Any]]:
    return [route.to_dict() for route in routes]


def modulate(routes: Iterable[Route], sources: Mapping[str, float],
             base_values: Mapping[str, Any]) -> dict[str, float]:
    """This frame's values of the routed parameters: base + sum(amount * source), clamped.

    `sources` maps source names to 0..1 (`AudioFeatures.sources()`); `base_values` are the
    registry's current values (`Params.as_dict()`). Unrouted parameters are not in the result.
    """
    totals: dict[str, float] = {}
    for route in routes:
        value = float(sources.get(route.source, 0.0))
        if not math.isfinite(value):
            value = 0.0
        totals[route.param] = totals.get(route.param, 0.0) + route.amount * value
    result = {}
    for name, offset in totals.items():
        target = param(name)
        base = float(base_values.get(name, target.default))
        result[name] = target.clamp(base + offset)
    return result
