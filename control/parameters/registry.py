"""The one parameter registry: every knob of the instrument, its default, range and meaning.

Presets, MIDI, audio modulation, the HUD and telemetry all read and write parameters through a
`Params` object built from `REGISTRY`; nothing else keeps a copy. Main thread only.
Names and defaults come from seed 000 (`ComputeSwarm`) and seed 002 (switches, wrap, 2D).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

MAX_COUNT = 1 << 24  # agent ids are stored as float32 on the GPU: exact below 2^24
CURVES = ("linear", "exp")
NUDGE_FINE = 0.01  # Left/Right move the chosen parameter by this much of its performance range
NUDGE_COARSE = 0.1  # with Shift


def plain(value: float) -> str:
    """A number as a person writes it, for messages: 16777216, 0.99, 0.00001 (never
    1.67772e+07 or 1e-05)."""
    if isinstance(value, int) or (math.isfinite(value) and float(value).is_integer()):
        return str(int(value))
    if not math.isfinite(value):
        return str(value)
    return format(Decimal(repr(float(value))), "f")


class ParamError(ValueError):
    """A parameter name or value that cannot be used; the message says which and why."""


class UnknownParam(ParamError, KeyError):
    """A name the registry does not have (a KeyError too, as a mapping's missing key)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@dataclass(frozen=True)
class Param:
    name: str
    default: Any
    kind: str  # "float", "int", "bool", "choice" or "color"
    description: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[Any, ...] = ()
    # The performance range: what a knob, a fader, OSC's /norm and the HUD's keys span, inside
    # the hard limits [lo, hi] (which only say what the simulation can take). None: lo..hi.
    play: tuple[float, float] | None = None
    curve: str = "linear"  # how 0..1 spreads over `play`: see curve_value

    @property
    def play_range(self) -> tuple[float, float]:
        return self.play if self.play is not None else (self.lo, self.hi)

    def clamp(self, value: float) -> float:
        """A number pulled into the hard limits: the one clamp modulation, bursts and blends
        use (a knob, a fader and OSC stay inside the performance range by construction)."""
        if not math.isfinite(value):
            return self.default
        value = min(max(value, self.lo), self.hi)
        return round(value) if self.kind == "int" else value

    def from_norm(self, x: float) -> Any:
        """The value at position x in 0..1 of a knob or fader over the performance range:
        bool on in the upper half, a choice per equal part, numbers along `curve`."""
        x = min(max(float(x), 0.0), 1.0) if math.isfinite(x) else 0.0
        if self.kind == "bool":
            return x >= 0.5
        if self.kind == "choice":
            return self.choices[min(int(x * len(self.choices)), len(self.choices) - 1)]
        if self.kind == "color":
            raise ParamError(f"'{self.name}' is a colour: three numbers, not one position")
        lo, hi = self.play_range
        value = min(max(curve_value(x, lo, hi, self.curve), lo), hi)
        if self.kind == "int":
            return int(min(max(round(value), math.ceil(lo)), math.floor(hi)))
        return value

    def to_norm(self, value: Any) -> float:
        """Where `value` sits on a knob over the performance range (clamped into 0..1); a bool
        or a choice gives the middle of its part."""
        if self.kind in ("bool", "choice"):
            options = (False, True) if self.kind == "bool" else self.choices
            index = options.index(value) if value in options else 0
            return (index + 0.5) / len(options)
        lo, hi = self.play_range
        return curve_position(min(max(float(value), lo), hi), lo, hi, self.curve)

    def nudge(self, value: Any, steps: float) -> Any:
        """`value` moved by `steps` fractions of the performance range along its curve (the
        HUD's Left/Right: NUDGE_FINE, with Shift NUDGE_COARSE); a switch flips, a choice takes
        the next one. A value beyond the range is not pulled into it by a nudge away from it."""
        if steps == 0:
            return value
        if self.kind == "bool":
            return not value
        if self.kind == "choice":
            index = self.choices.index(value) if value in self.choices else 0
            return self.choices[(index + (1 if steps > 0 else -1)) % len(self.choices)]
        lo, hi = self.play_range
        if (value >= hi and steps > 0) or (value <= lo and steps < 0):
            return value
        moved = self.from_norm(self.to_norm(value) + steps)
        if self.kind == "int" and moved == value:  # a step smaller than one: move by one
            moved = min(max(value + (1 if steps > 0 else -1), int(lo)), int(hi))
        return moved

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
                f"{at}'{self.name}' = {value!r} is out of range [{plain(self.lo)}, "
                f"{plain(self.hi)}]"
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


def curve_value(x: float, lo: float, hi: float, curve: str) -> float:
    """x in 0..1 -> a value in lo..hi. "linear": lo + x (hi - lo). "exp" with lo > 0:
    lo (hi / lo)^x, geometric: equal turns multiply the value by equal ratios (radii, speeds,
    counts). "exp" with lo <= 0 (no geometric curve starts at 0): lo + x^2 (hi - lo), fine
    near the bottom."""
    if curve == "linear":
        return lo + x * (hi - lo)
    if lo > 0:
        return lo * (hi / lo) ** x
    return lo + x * x * (hi - lo)


def curve_position(value: float, lo: float, hi: float, curve: str) -> float:
    """The inverse of curve_value for a value within lo..hi, clamped into 0..1."""
    if hi <= lo:
        return 0.0
    if curve == "linear":
        x = (value - lo) / (hi - lo)
    elif lo > 0:
        x = math.log(max(value, lo) / lo) / math.log(hi / lo)
    else:
        x = math.sqrt(max(value - lo, 0.0) / (hi - lo))
    return min(max(x, 0.0), 1.0)


def _f(name: str, default: float, lo: float, hi: float, description: str,
       play: tuple[float, float] | None = None, curve: str = "linear") -> Param:
    return Param(name, float(default), "float", description, float(lo), float(hi),
                 play=None if play is None else (float(play[0]), float(play[1])), curve=curve)


def _switch(name: str, description: str) -> Param:
    return Param(name, True, "bool", description)


REGISTRY: tuple[Param, ...] = (
    Param("count", 16384, "int", "number of agents", 1, MAX_COUNT, play=(256, 262144),
          curve="exp"),
    _f("spawn_radius", 30, 0, 100000, "radius of the sphere agents are spawned in",
       (2, 200), "exp"),
    _f("contain_radius", 60, 0.1, 100000,
       "sphere radius the containment force keeps agents in (half the box side with wrap)",
       (5, 300), "exp"),
    _f("neighbor_radius", 3, 0.01, 1000, "agents closer than this are neighbours",
       (0.5, 12), "exp"),
    _f("separation_radius", 1, 0, 1000, "neighbours closer than this push apart (1/d^2)",
       (0.1, 4), "exp"),
    _f("separation_weight", 1.5, 0, 100, "weight of separation: no clumping", (0, 5)),
    _f("alignment_weight", 1, 0, 100, "weight of alignment: schooling", (0, 4)),
    _f("cohesion_weight", 0.8, 0, 100, "weight of cohesion: the group holds together",
       (0, 4)),
    _f("seek_weight", 0.4, 0, 100, "weight of seeking the lure", (0, 4)),
    _f("max_speed", 8, 0, 10000, "top speed, units a second", (1, 40), "exp"),
    _f("max_force", 12, 0, 100000, "largest steering change per rule, units a second squared",
       (1, 100), "exp"),
    _f("audio_speed_boost", 2, 0, 100, "max_speed grows by level x this with the audio",
       (0, 8)),
    _f("obstacle_weight", 3, 0, 100, "weight of the push away from obstacle spheres", (0, 10)),
    _f("morph_seconds", 2, 0, 60,
       "a recalled preset blends in over this many seconds (0: at once)", (0, 10), "exp"),
    _f("crossfade", 0, 0, 1,
       "blend between presets crossfade_a (0) and crossfade_b (1): put a MIDI fader here"),
    Param("crossfade_a", 1, "int", "the preset slot at crossfade 0", 1, 9),
    Param("crossfade_b", 2, "int", "the preset slot at crossfade 1", 1, 9),
    Param("neighbor_cap", 0, "int",
          "grid path: at most this many nearby agents examined per agent, so a crowd in one "
          "cell cannot stall the frame; 0: all of them (the seed)", 0, 1_000_000,
          play=(0, 1000), curve="exp"),
    _switch("separation", "separation rule on"),
    _switch("alignment", "alignment rule on"),
    _switch("cohesion", "cohesion rule on"),
    _switch("seek", "seek rule on (steer towards the lure)"),
    _switch("containment", "containment force on (sphere boundary)"),
    Param("quantize", "off", "choice",
          "preset recalls, respawns and bursts wait for the next beat or bar (off: at once)",
          choices=("off", "beat", "bar")),
    Param("tempo_source", "auto", "choice",
          "which clock leads musical time: auto (Link, then MIDI clock, then tap, then the "
          "audio's beats) or one of them", choices=("auto", "link", "midi clock", "tap", "audio")),
    _f("bpm", 120, 20, 400, "a tempo to propose (a knob): tap tempo takes it, and a Link "
       "session is asked for it; the tempo in use is the leading clock's", (60, 200)),
    _f("tempo_min", 70, 20, 400, "the audio's beat tracker reads the tempo at or above this "
       "(BPM): drum and bass as 174 with 70-180, as 87 with 40-100; half/double buttons move "
       "the range by an octave", (40, 200)),
    _f("tempo_max", 180, 20, 400, "... and at or below this (BPM); keep the range an octave "
       "wide at least (the narrower one takes the tempo nearest it)", (60, 400)),
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
    _f("lure_radius", 10, 0, 100000, "agents within this distance of the lure are counted",
       (1, 100), "exp"),
    _f("agent_size", 0.6, 0.01, 100, "length scale of each agent's cone, in swarm units",
       (0.1, 4), "exp"),
    _f("lod_pixels", 6, 0, 1000,
       "agents smaller than this on screen (pixels) are one point instead of their mesh; 0: "
       "always cones", (0, 20)),
    # ---- the look: agents ----
    Param("shape", "cone", "choice",
          "each agent: cone (lit, 3D), arrow (a lit dart), streak (a line of light stretched "
          "along its velocity), glow (a soft glowing point)",
          choices=("cone", "arrow", "streak", "glow")),
    Param("blend", "opaque", "choice",
          "opaque: solid agents hiding those behind; additive: light that adds up (glow)",
          choices=("opaque", "additive")),
    Param("palette", "colors", "choice",
          "the agents' colours: colors (slow_color to fast_color) or a bundled gradient",
          choices=("colors", "ember", "ocean", "aurora", "neon", "sunset", "ice", "mono")),
    _f("hue_shift", 0, -180, 180, "turns the palette's colours round the colour wheel by this "
       "many degrees (0: as they are); the autopilot drifts it inside a section", (-180, 180)),
    Param("color_by", "speed", "choice",
          "what picks the colour along the palette: speed, heading (direction of travel), "
          "depth (distance from the camera) or density (neighbours nearby)",
          choices=("speed", "heading", "depth", "density")),
    _f("glow", 1, 0, 20, "the agents' brightness: above 1 they shine into the bloom",
       (0.2, 6), "exp"),
    _f("size_by_speed", 0, 0, 4, "fast agents grow by this much (0: all the same size)",
       (0, 2)),
    _f("fog", 0.65, 0, 1, "how far distant agents fade into the background", (0, 1)),
    # ---- the look: the picture ----
    Param("post", "auto", "choice",
          "the HDR post chain (tone map, bloom, feedback): auto is on with a GPU, off on "
          "software OpenGL (too slow there)", choices=("auto", "on", "off")),
    _f("exposure", 1, 0.05, 16, "brightness of the picture before tone mapping", (0.25, 4),
       "exp"),
    Param("tonemap", "aces", "choice",
          "the filmic curve from HDR to the screen: aces, agx (softer, truer hues) or linear",
          choices=("aces", "agx", "linear")),
    _f("bloom", 0.6, 0, 4, "strength of the glow around bright agents (0: none)", (0, 2)),
    _f("bloom_radius", 0.6, 0, 1, "how far the glow spreads", (0, 1)),
    _f("bloom_threshold", 1, 0, 8, "brightness where the glow starts (soft knee)", (0, 4)),
    _f("feedback", 0, 0, 0.98,
       "the last picture drawn again under the new one, warped and fading (Milkdrop's "
       "feedback); 0: off", (0, 0.95)),
    _f("feedback_zoom", 0.01, -0.1, 0.1, "feedback: the old picture grows (or shrinks) by "
       "this much a frame at 60 fps", (-0.05, 0.05)),
    _f("feedback_rotate", 0, -0.1, 0.1, "feedback: the old picture turns by this many "
       "radians a frame at 60 fps", (-0.03, 0.03)),
    _f("feedback_drift_x", 0, -0.05, 0.05, "feedback: sideways drift a frame (of the width)",
       (-0.01, 0.01)),
    _f("feedback_drift_y", 0, -0.05, 0.05, "feedback: upward drift a frame (of the height)",
       (-0.01, 0.01)),
    # ---- the look: the camera ----
    Param("camera", "orbit", "choice",
          "orbit: circles the swarm; follow: rides behind the swarm's heading; fly: flies "
          "through the swarm; top: looks straight down (for 2D)",
          choices=("orbit", "follow", "fly", "top")),
    _f("camera_distance", 1, 0.2, 5, "the camera's distance, times what frames the swarm",
       (0.3, 3), "exp"),
    _f("orbit_speed", 1, -10, 10, "how fast the camera circles (1: the usual, 0: still)",
       (-3, 3)),
    # ---- the frame rate: what this machine draws (show/governor.py), not how a look looks ----
    _f("target_fps", 0, 0, 240, "the frame rate the governor holds by lowering the render "
       "scale, then the post chain, then the count, then a crowd's neighbours (and back when "
       "there is room); 0: the display's (software GL: 30)", (0, 144)),
    Param("pin_render_scale", False, "bool",
          "the governor leaves the picture at the window's size (render scale 1)"),
    Param("pin_post", False, "bool", "the governor leaves the post chain as post says"),
    Param("pin_count", False, "bool", "the governor leaves the count at count"),
    Param("pin_neighbors", False, "bool",
          "the governor leaves neighbor_cap as set (it caps a crowd's neighbours last)"),
)

BY_NAME: dict[str, Param] = {p.name: p for p in REGISTRY}
for _p in REGISTRY:  # a performance range lies inside the hard limits, on a known curve
    assert _p.curve in CURVES and (_p.play is None or _p.lo <= _p.play[0] < _p.play[1] <= _p.hi)


def param(name: str) -> Param:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ParamError(f"unknown parameter '{name}' (known: {', '.join(BY_NAME)})") from None


class Params(Mapping[str, Any]):
    """Current values of every registered parameter: a read-only mapping to whoever reads it
    (`visual/` reads plain values by name), set only through `[name] = value` and `update`,
    which validate."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = {p.name: p.default for p in REGISTRY}
        if values:
            self.update(values)

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise UnknownParam(f"unknown parameter '{name}' (known: {', '.join(BY_NAME)})") \
                from None

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

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def names(self) -> Iterable[str]:
        return self._values.keys()
