"""Modulation routes: the sound and the beat push swarm parameters, e.g. an onset kicks
separation, a sine over four beats breathes the cohesion.

Sources, each 0..1: the audio's `level`, `low`, `mid`, `high` and `onset`; musical time's
`beat` (1 on the beat, falling to 0 over it), `bar` (the same over a bar), `phase` (0..1 each
beat); and LFOs whose period is the route's `beats` (default 1): `sine`, `triangle`, `saw`,
`square` and `random` (sample and hold: a new value each period, the same one every run).

Main thread only. A route is plain data (source, parameter, amount, beats) that presets store
as JSON.
`modulate` returns this frame's values for the routed parameters and leaves the registry alone:
the caller hands the dict to `Swarm.step(values=...)`, so a knob turned by hand is never
overwritten by the audio and modulation stops cleanly when the routes go.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from swarm_instrument.control.parameters.registry import ParamError, param

AUDIO_SOURCES = ("level", "low", "mid", "high", "onset")
TEMPO_SOURCES = ("beat", "bar", "phase")
LFOS = ("sine", "triangle", "saw", "square", "random")
SOURCES = AUDIO_SOURCES + TEMPO_SOURCES + LFOS
SOURCE_HELP = {
    "level": "loudness after auto-gain, 0..1",
    "low": "low band (20-250 Hz), 0..1",
    "mid": "mid band (250-2500 Hz), 0..1",
    "high": "high band (2.5-16 kHz), 0..1",
    "onset": "1 at each onset, falling to 0 in 0.25 s",
    "beat": "1 on each beat, falling to 0 over the beat",
    "bar": "1 on each bar's first beat, falling to 0 over the bar",
    "phase": "0..1 through each beat",
    "sine": "a sine wave, one period every `beats` beats",
    "triangle": "a triangle wave over `beats` beats",
    "saw": "a rising saw over `beats` beats",
    "square": "1 for the first half of every `beats` beats, 0 for the second",
    "random": "a new random value every `beats` beats (sample and hold)",
}
ROUTE_KEYS = ("source", "param", "amount", "beats")
REQUIRED_KEYS = ("source", "param", "amount")
MIN_BEATS, MAX_BEATS = 1 / 16, 256.0


class RouteError(ParamError):
    """A route that cannot be used; the message names the route and the bad key."""


@dataclass(frozen=True)
class Route:
    """`param` moves by `amount` (in the parameter's own units) times `source` (0..1); an LFO
    source repeats every `beats` beats."""

    source: str
    param: str
    amount: float
    beats: float = 1.0

    def __post_init__(self) -> None:
        check_route(self.source, self.param, self.amount)
        check_beats(self.beats)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"source": self.source, "param": self.param,
                                "amount": self.amount}
        if self.beats != 1.0:
            data["beats"] = self.beats
        return data

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
        for key in REQUIRED_KEYS:
            if key not in data:
                raise RouteError(f"{where}: missing key '{key}'")
        return cls(*check_route(data["source"], data["param"], data["amount"], where),
                   check_beats(data.get("beats", 1.0), where))


def check_beats(beats: Any, where: str = "route") -> float:
    """An LFO's period in beats: a finite number from 1/16 to 256."""
    if isinstance(beats, bool) or not isinstance(beats, (int, float)) or not (
            MIN_BEATS <= beats <= MAX_BEATS):
        raise RouteError(f"{where}: 'beats' must be a number of beats from 1/16 to "
                         f"{MAX_BEATS:g}, got {beats!r}")
    return float(beats)


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


def route_key(route: Route) -> tuple[str, str, float]:
    """What makes two routes the same route: source, parameter and period (the amount is how
    much of it)."""
    return route.source, route.param, route.beats


def describe_route(route: Route) -> str:
    """'low -> bloom 1.0' (', every 4 beats' for an LFO's period) for messages."""
    period = f", every {route.beats:g} beats" if route.beats != 1.0 else ""
    return f"{route.source} -> {route.param} {route.amount:g}{period}"


def merge_routes(routes: Iterable[Route]) -> list[Route]:
    """One route a source, parameter and period, its amount the sum of theirs: the same
    modulation (`modulate` adds routes up), in the order each first appeared."""
    amounts: dict[tuple[str, str, float], float] = {}
    for route in routes:
        amounts[route_key(route)] = amounts.get(route_key(route), 0.0) + route.amount
    return [Route(source, name, amount, beats)
            for (source, name, beats), amount in amounts.items()]


def lfo(shape: str, beat: float, period: float) -> float:
    """An LFO's value 0..1 at beat count `beat`, repeating every `period` beats. "random" is
    sample and hold: a value a period, the same for the same period every run (a render
    repeats)."""
    cycles = beat / period
    x = cycles % 1.0
    if shape == "sine":
        return 0.5 - 0.5 * math.cos(2.0 * math.pi * x)  # 0 on the beat, 1 half way
    if shape == "triangle":
        return 1.0 - abs(2.0 * x - 1.0)
    if shape == "saw":
        return x
    if shape == "square":
        return 1.0 if x < 0.5 else 0.0
    if shape == "random":
        index = math.floor(cycles) & 0xFFFFFFFF
        return ((index * 2654435761 + 0x9E3779B9) & 0xFFFFFFFF) / 0xFFFFFFFF
    raise ValueError(f"unknown LFO shape {shape!r}")


def tempo_sources(beat: float, bar_phase: float) -> dict[str, float]:
    """Musical time's sources from the beat count and the position in the bar."""
    phase = beat % 1.0
    return {"beat": 1.0 - phase, "bar": 1.0 - bar_phase, "phase": phase}


def modulate(routes: Iterable[Route], sources: Mapping[str, float],
             base_values: Mapping[str, Any], beat: float = 0.0) -> dict[str, float]:
    """This frame's values of the routed parameters: base + sum(amount * source), clamped.

    `sources` maps source names to 0..1 (`AudioFeatures.sources()` and `tempo_sources`);
    `beat` is the beat count the LFOs run on; `base_values` are the registry's current values
    (`Params.as_dict()`). Unrouted parameters are not in the result.
    """
    totals: dict[str, float] = {}
    for route in routes:
        if route.source in LFOS:
            value = lfo(route.source, beat, route.beats)
        else:
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


BURST_SECONDS = 0.6
BURST_BOOST = 3.0  # a full burst adds this much separation_weight, fading over BURST_SECONDS


class Burst:
    """A separation burst (a pad, OSC /swarm/burst): separation_weight up by BURST_BOOST x
    strength, fading out over BURST_SECONDS of the show's time. Main thread only."""

    def __init__(self) -> None:
        self.strength, self.start = 0.0, -math.inf

    def trigger(self, strength: float, now: float) -> None:
        self.strength, self.start = min(max(float(strength), 0.0), 1.0), now

    def apply(self, modulated: dict[str, Any], base: Mapping[str, Any], now: float) -> None:
        """Add this moment's boost to `modulated` (this frame's modulated values) in place."""
        age = now - self.start
        if 0.0 <= age < BURST_SECONDS:
            weight = modulated.get("separation_weight", base["separation_weight"])
            boosted = weight + BURST_BOOST * self.strength * (1.0 - age / BURST_SECONDS)
            modulated["separation_weight"] = param("separation_weight").clamp(boosted)
