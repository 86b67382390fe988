"""Blending looks: a recall's morph over `morph_seconds` and the crossfade fader between two
slots. Pure functions and plain data; main thread only.

Morph rule: continuous values (floats, each colour channel) glide along a smoothstep curve;
discrete values (switches, choices such as `boundary` and `dimensions`, and whole numbers: the
agent `count`, slot numbers, caps) switch at the START of a morph. The performer sees the cue
answered at once (a new count, a flat swarm for dimensions 2) and the rest of the look then
settles around it; a jump at the end of a smooth glide would read as a glitch. The fader's
crossfade switches them at x = 0.5.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from swarm_instrument.control.looks.presets import Preset
from swarm_instrument.control.parameters.modulation import Route
from swarm_instrument.control.parameters.registry import BY_NAME, REGISTRY, Param


def is_stepped(p: Param) -> bool:
    """Values that are never half-way: switches, choices and whole numbers (the registry's are
    a count, slot numbers and a cap: a count between two would respawn the swarm twice)."""
    return p.kind in ("bool", "choice", "int")


def blend_value(p: Param, a: Any, b: Any, weight: float) -> Any:
    """`a` towards `b` by `weight` (0..1); exact at 0 and 1. Floats and colours (per channel)
    blend; an int blends rounded, for a caller that wants it (morph and crossfade step them)."""
    if weight <= 0.0 or a == b:
        return a
    if weight >= 1.0:
        return b
    if p.kind == "color":
        return tuple(min(max(x * (1.0 - weight) + y * weight, 0.0), 1.0) for x, y in zip(a, b))
    return p.clamp(a * (1.0 - weight) + b * weight)


def blend_routes(a: Iterable[Route], b: Iterable[Route], weight: float) -> list[Route]:
    """Routes that fade from `a` to `b`: a's amounts times (1 - weight) plus b's times weight.

    Routes add up in `modulate`, so this is exactly the blend of the two modulations; routes
    on the same source, parameter and period are merged into one. Exactly `a` at 0 and `b` at
    1.
    """
    if weight <= 0.0:
        return list(a)
    if weight >= 1.0:
        return list(b)
    amounts: dict[tuple[str, str, float], float] = {}
    for routes, scale in ((a, 1.0 - weight), (b, weight)):
        for route in routes:
            key = (route.source, route.param, route.beats)
            amounts[key] = amounts.get(key, 0.0) + route.amount * scale
    return [Route(source, name, amount, beats)
            for (source, name, beats), amount in amounts.items()]


def crossfade(a: Preset, b: Preset, x: float, keep: Collection[str] = ()) -> dict[str, Any]:
    """The MIDI fader between two presets: every parameter (less `keep`) at x in 0..1.

    Continuous values are linear in x (the hand is the curve); switches, choices and whole
    numbers (count) are a's below 0.5 and b's from 0.5. Their routes fade with
    `blend_routes(a.routes, b.routes, x)`.
    """
    x = min(max(float(x), 0.0), 1.0) if math.isfinite(x) else 0.0
    values = {}
    for p in REGISTRY:
        if p.name in keep:
            continue
        va, vb = a.values.get(p.name, p.default), b.values.get(p.name, p.default)
        values[p.name] = (vb if x >= 0.5 else va) if is_stepped(p) else blend_value(p, va, vb, x)
    return values


def smoothstep(x: float) -> float:
    """0 -> 1 with zero speed at both ends, so a morph eases in and out (0.5 at 0.5)."""
    x = min(max(x, 0.0), 1.0)
    return x * x * (3.0 - 2.0 * x)


class Morph:
    """A recall over `seconds` instead of a jump (seconds <= 0: a jump).

    `start` is the live state (`params.as_dict()`), `target` a Preset (or a mapping of the
    parameters to change). `values_at(t)` gives every parameter (less `keep`) t seconds in;
    stepped values (switches, choices, whole numbers such as count) are the target's from
    t = 0 (the module's rule).
    Apply them with `params.update(...)` each frame and `routes_at(t)` to `show.routes`.
    """

    def __init__(self, start: Mapping[str, Any], target: Preset | Mapping[str, Any],
                 seconds: float, *, start_routes: Iterable[Route] = (),
                 target_routes: Iterable[Route] | None = None,
                 keep: Collection[str] = ()) -> None:
        if isinstance(target, Preset):
            self.name = target.name
            goal = target.values
            target_routes = target.routes if target_routes is None else target_routes
        else:
            self.name = None
            goal = target
        self.keep = frozenset(keep)
        self.start = {p.name: p.validate(start.get(p.name, p.default)) for p in REGISTRY
                      if p.name not in self.keep}
        self.target = {}
        for name, value in self.start.items():
            self.target[name] = BY_NAME[name].validate(goal[name]) if name in goal else value
        self.start_routes = list(start_routes)
        self.target_routes = list(self.start_routes if target_routes is None else target_routes)
        self.seconds = max(float(seconds), 0.0) if math.isfinite(seconds) else 0.0
        self.changing = frozenset(n for n in self.start if self.start[n] != self.target[n])

    def progress_at(self, t: float) -> float:
        """0..1, linear in time (telemetry's morph progress)."""
        if self.seconds <= 0.0:
            return 1.0
        return min(max(t / self.seconds, 0.0), 1.0)

    def values_at(self, t: float) -> dict[str, Any]:
        """Every parameter (less `keep`) `t` seconds into the morph; exactly the target's at
        the end. Pure: the same t always gives the same values."""
        weight = smoothstep(self.progress_at(t))
        values = dict(self.start)
        for name in self.changing:
            p = BY_NAME[name]
            start, target = self.start[name], self.target[name]
            values[name] = target if is_stepped(p) else blend_value(p, start, target, weight)
        return values

    def let_go(self, names: Collection[str]) -> None:
        """Stop driving `names`: a performer's knob, key or OSC message moved them during the
        morph, and what the performer plays wins over the preset being blended in."""
        for name in names:
            self.start.pop(name, None)
            self.target.pop(name, None)
        self.changing = self.changing - frozenset(names)

    def routes_at(self, t: float) -> list[Route]:
        return blend_routes(self.start_routes, self.target_routes,
                            smoothstep(self.progress_at(t)))
