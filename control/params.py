"""The one parameter registry: every knob of the instrument, its default, range and meaning.

Presets, MIDI, audio modulation, the HUD and telemetry all read and write parameters through a
`Params` object built from `REGISTRY`; nothing else keeps a copy. Main thread only.
Names and defaults come from seed 000 (`ComputeSwarm`) and seed 002 (switches, wrap, 2D).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

MAX_COUNT = 1 << 24  # agent ids are stored as float32 on the GPU: exact below 2^24


class ParamError(ValueError):
    """A parameter name or value that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class Param:
    name: str
    default: Any
    kind: str  # "float", "int", "bool", "choice" or "color"
    description: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[Any, ...] = ()

    def validate(self, value: Any, where: str = "") -> Any:
        """Return `value` converted to this parameter's type, or raise ParamError naming it."""
        at = f"{where}: " if where else ""
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, (int, float)) and value in (0, 1):
                return bool(value)
            raise ParamError(f"{at}'{self.name}' must be true or false, got {value!r}")
        if self.kind == "choice":
            for choice in self.choices:
                if value == choice or (isinstance(value, str) and str(choice) == value):
                    return choice
            options = ", ".join(repr(c) for c in self.choices)
            raise ParamError(f"{at}'{self.name}' must be one of {options}, got {value!r}")
        if self.kind == "color":
            return _color(value, f"{at}'{self.name}'")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParamError(f"{at}'{self.name}' must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ParamError(f"{at}'{self.name}' must be finite, got {value!r}")
        if self.kind == "int":
            if float(value) != int(value):
                raise ParamError(f"{at}'{self.name}' must be a whole number, got {value!r}")
            value = int(value)
        else:
            value = float(value)
        if not (self.lo <= value <= self.hi):
            raise ParamError(
                f"{at}'{self.name}' = {value!r} is out of range [{self.lo:g}, {self.hi:g}]"
            )
        return value


def _color(value: Any, what: str) -> tuple[float, float, float]:
    """An RGB colour from [r, g, b] in 0..1 or "#rrggbb" (what presets and MIDI hand over)."""
    if isinstance(value, str):
        text = value.strip()
        digits = text[1:] if text.startswith("#") else text
        if len(digits) == 6:
            try:
                return tuple(int(digits[k:k + 2], 16) / 255.0 for k in (0, 2, 4))
            except ValueError:
                pass
        raise ParamError(f"{what} must be \"#rrggbb\" or [r, g, b] in 0..1, got {value!r}")
    if (not isinstance(value, (list, tuple)) or len(value) != 3
            or any(isinstance(c, bool) or not isinstance(c, (int, float)) for c in value)):
        raise ParamError(f"{what} must be \"#rrggbb\" or [r, g, b] in 0..1, got {value!r}")
    if not all(math.isfinite(c) and 0.0 <= c <= 1.0 for c in value):
        raise ParamError(f"{what} components must be within 0..1, got {value!r}")
    return tuple(float(c) for c in value)


def _f(name: str, default: float, lo: float, hi: float, description: str) -> Param:
    return Param(name, float(default), "float", description, float(lo), float(hi))


def _switch(name: str, description: str) -> Param:
    return Param(name, True, "bool", description)


REGISTRY: tuple[Param, ...] = (
    Param("count", 16384, "int", "number of agents", 1, MAX_COUNT),
    _f("spawn_radius", 30, 0, 100000, "radius of the sphere agents are spawned in"),
    _f("contain_radius", 60, 0.1, 100000,
       "sphere radius the containment force keeps agents in (half the box side with wrap)"),
    _f("neighbor_radius", 3, 0.01, 1000, "agents closer than this are neighbours"),
    _f("separation_radius", 1, 0, 1000, "neighbours closer than this push apart (1/d^2)"),
    _f("separation_weight", 1.5, 0, 100, "weight of separation: no clumping"),
    _f("alignment_weight", 1, 0, 100, "weight of alignment: schooling"),
    _f("cohesion_weight", 0.8, 0, 100, "weight of cohesion: the group holds together"),
    _f("seek_weight", 0.4, 0, 100, "weight of seeking the lure"),
    _f("max_speed", 8, 0, 10000, "top speed, units a second"),
    _f("max_force", 12, 0, 100000, "largest steering change per rule, units a second squared"),
    _f("audio_speed_boost", 2, 0, 100, "max_speed grows by level x this with the audio"),
    _f("obstacle_weight", 3, 0, 100, "weight of the push away from obstacle spheres"),
    _f("morph_seconds", 2, 0, 60,
       "a recalled preset blends in over this many seconds (0: at once)"),
    _f("crossfade", 0, 0, 1,
       "blend between presets crossfade_a (0) and crossfade_b (1): put a MIDI fader here"),
    Param("crossfade_a", 1, "int", "the preset slot at crossfade 0", 1, 9),
    Param("crossfade_b", 2, "int", "the preset slot at crossfade 1", 1, 9),
    Param("neighbor_cap", 0, "int",
          "grid path: at most this many nearby agents examined per agent, so a crowd in one "
          "cell cannot stall the frame; 0: all of them (the seed)", 0, 1_000_000),
    _switch("separation", "separation rule on"),
    _switch("alignment", "alignment rule on"),
    _switch("cohesion", "cohesion rule on"),
    _switch("seek", "seek rule on (steer towards the lure)"),
    _switch("containment", "containment force on (sphere boundary)"),
    Param("boundary", "sphere", "choice",
          "sphere: pushed back inside contain_radius; wrap: a box that wraps around",
          choices=("sphere", "wrap")),
    Param("dimensions", 3, "choice", "3: a volume; 2: a flat swarm with z fixed at 0",
          choices=(3, 2)),
    Param("slow_color", (0.05, 0.40, 0.62), "color",
          "colour of the slowest agents (speed 0): [r, g, b] in 0..1 or \"#rrggbb\""),
    Param("fast_color", (1.0, 0.66, 0.30), "color",
          "colour of agents at max_speed (and above, with the audio boost)"),
    Param("telegraph_color", (1.0, 0.18, 0.30), "color",
          "the tell: the swarm flashes towards this colour when seek_weight jumps up"),
    _f("trail", 0, 0, 0.99,
       "0: a clean frame each time; towards 0.99: the last frames fade slowly (trails)"),
    _f("lure_radius", 10, 0, 100000, "agents within this distance of the lure are counted"),
    _f("agent_size", 0.6, 0.01, 100, "length scale of each agent's cone, in swarm units"),
    _f("lod_pixels", 6, 0, 1000,
       "agents smaller than this on screen (pixels) are one triangle instead of a cone; 0: "
       "always cones"),
)

BY_NAME: dict[str, Param] = {p.name: p for p in REGISTRY}


def param(name: str) -> Param:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ParamError(f"unknown parameter '{name}' (known: {', '.join(BY_NAME)})") from None


class Params:
    """Current values of every registered parameter."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = {p.name: p.default for p in REGISTRY}
        if values:
            self.update(values)

    def __getitem__(self, name: str) -> Any:
        return self._values[param(name).name]

    def __setitem__(self, name: str, value: Any) -> None:
        self._values[name] = param(name).validate(value)

    def update(self, values: Mapping[str, Any], where: str = "") -> None:
        """Validate every value first, then apply them all: a bad one changes nothing."""
        checked = {}
        for name, value in values.items():
            if name not in BY_NAME:
                at = f"{where}: " if where else ""
                raise ParamError(f"{at}unknown parameter '{name}' (known: {', '.join(BY_NAME)})")
            checked[name] = BY_NAME[name].validate(value, where)
        self._values.update(checked)

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def names(self) -> Iterable[str]:
        return self._values.keys()
