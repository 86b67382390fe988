"""The MIDI mapping: which knob drives which parameter, and the maths from knob to value.

Pure functions and plain data, no device and no thread of its own: the main thread's
`MidiController` uses them, and so do the mapping files (`load_mapping`, `save_mapping`).

Knob position: a 7-bit value v reads as x = v / 127, a 14-bit (MSB, LSB) pair as
x = (MSB * 128 + LSB) / 16383, so both reach exactly 0 and 1. `invert` turns x into 1 - x.
A knob spans the parameter's performance range on its curve (control/parameters/registry.py: the
same range OSC's /norm and the HUD's keys use) unless the binding sets `lo` / `hi` / `curve`.
Curves from x in [0, 1] to a value in [lo, hi] (`control.parameters.registry.curve_value`):
- "linear": lo + x * (hi - lo).
- "exp" with lo > 0: lo * (hi / lo) ** x, geometric: equal turns multiply the value by equal
  ratios, which suits radii and speeds that matter in proportion.
- "exp" with lo <= 0 (a geometric curve cannot start at 0): lo + x**2 * (hi - lo), squared:
  fine control near the bottom, the same idea for ranges that start at zero.
int parameters round to the nearest whole number; bool parameters are on in the upper half of
the knob (x >= 0.5, so 7-bit values 64-127); choice parameters split the knob into equal parts,
one per choice, in the registry's order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from swarm_instrument.control.actions import MAPPABLE
from swarm_instrument.control.looks.files import FileProblem
from swarm_instrument.control.parameters.registry import (
    CURVES,
    Param,
    ParamError,
    curve_position,
    curve_value,
    param,
    plain,
)

KNOB_KINDS = ("float", "int", "bool", "choice")  # a colour is three numbers: not one knob
ACTIONS = MAPPABLE  # what a note or a program change may do (control/actions.py)
STEPS_7BIT = 127
STEPS_14BIT = 16383


class MappingError(FileProblem):
    """A mapping (file or entry) that cannot be used; the message names the file and key."""


class EntryError(ValueError):
    """A bad field of one entry; `key` is the field, so a file loader can name its path."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def _check_int(key: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise EntryError(key, f"must be a whole number from {lo} to {hi}, got {value!r}")
    return value


@dataclass(frozen=True)
class Binding:
    """One knob (a controller on a channel, channels counted 1-16) driving one parameter.

    `fine_controller` makes it a 14-bit knob: `controller` sends the MSB, `fine_controller`
    the LSB (by convention controller + 32). `lo` / `hi` / `curve` replace the parameter's
    performance range and curve (None: the registry's, which already plays a weight that may
    go to 100 over 0-5; a binding with its own lo / hi but no curve is linear).
    """

    channel: int
    controller: int
    param: str
    curve: str | None = None
    invert: bool = False
    fine_controller: int | None = None
    lo: float | None = None
    hi: float | None = None

    def __post_init__(self) -> None:
        _check_int("channel", self.channel, 1, 16)
        _check_int("controller", self.controller, 0, 127)
        if self.fine_controller is not None:
            _check_int("fine_controller", self.fine_controller, 0, 127)
            if self.fine_controller == self.controller:
                raise EntryError("fine_controller", "must differ from 'controller' (it is the "
                                  "LSB of a 14-bit pair, usually controller + 32)")
        if not isinstance(self.param, str):
            raise EntryError("param", f"must be a parameter name, got {self.param!r}")
        try:
            spec = param(self.param)
        except ParamError as exc:
            raise EntryError("param", str(exc)) from None
        if spec.kind not in KNOB_KINDS:
            raise EntryError("param", f"'{spec.name}' is a {spec.kind} parameter; a knob can "
                              f"drive {', '.join(KNOB_KINDS)} parameters")
        if self.curve is not None and self.curve not in CURVES:
            raise EntryError("curve", f"must be one of {', '.join(CURVES)}, got {self.curve!r}")
        if not isinstance(self.invert, bool):
            raise EntryError("invert", f"must be true or false, got {self.invert!r}")
        if spec.kind in ("bool", "choice"):
            for key in ("lo", "hi"):
                if getattr(self, key) is not None:
                    raise EntryError(key, f"'{spec.name}' is a {spec.kind} parameter: it has "
                                      "no range to narrow")
            return
        for key in ("lo", "hi"):
            value = getattr(self, key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    math.isfinite(value) and spec.lo <= value <= spec.hi):
                raise EntryError(key, f"must be a number within '{spec.name}''s range "
                                  f"[{plain(spec.lo)}, {plain(spec.hi)}], got {value!r}")
        if not self.range[0] < self.range[1]:
            raise EntryError("hi", f"must be above lo (got lo {self.range[0]:g}, hi "
                              f"{self.range[1]:g}); use \"invert\": true to turn the knob round")

    @property
    def spec(self) -> Param:
        return param(self.param)

    @property
    def range(self) -> tuple[float, float]:
        play_lo, play_hi = self.spec.play_range
        lo = play_lo if self.lo is None else float(self.lo)
        hi = play_hi if self.hi is None else float(self.hi)
        return lo, hi

    @property
    def shape(self) -> str:
        """The curve in use: the binding's; else linear where the binding sets its own range
        (what a file that says lo / hi without a curve always meant); else the parameter's."""
        if self.curve is not None:
            return self.curve
        return "linear" if (self.lo, self.hi) != (None, None) else self.spec.curve

    @property
    def steps(self) -> int:
        """Knob steps from 0 to 1: the resolution that 'touching' a value is measured in."""
        return STEPS_7BIT if self.fine_controller is None else STEPS_14BIT

    def label(self) -> str:
        fine = f"/{self.fine_controller}" if self.fine_controller is not None else ""
        return f"ch{self.channel} CC{self.controller}{fine}"

    def value(self, position: float) -> Any:
        """The parameter value for a knob position in [0, 1]."""
        x = min(max(position, 0.0), 1.0)
        if self.invert:
            x = 1.0 - x
        spec = self.spec
        if spec.kind == "bool":
            return x >= 0.5
        if spec.kind == "choice":
            return spec.choices[min(int(x * len(spec.choices)), len(spec.choices) - 1)]
        lo, hi = self.range
        value = min(max(curve_value(x, lo, hi, self.shape), lo), hi)  # pow may overshoot
        if spec.kind == "int":
            return int(min(max(round(value), math.ceil(lo)), math.floor(hi)))
        return value

    def position(self, value: Any) -> float:
        """The knob position in [0, 1] that gives `value` (clamped into the knob's range);
        for bool and choice, the middle of the value's part of the knob."""
        return self.window(value)[0]

    def window(self, value: Any) -> tuple[float, float]:
        """(position, tolerance): a knob within tolerance of position 'touches' `value`.

        Continuous values: half a knob step. bool and choice: half the value's part of the
        knob, so being anywhere on the right part counts.
        """
        spec = self.spec
        if spec.kind in ("bool", "choice"):
            options = (False, True) if spec.kind == "bool" else spec.choices
            index = options.index(value) if value in options else 0
            x, tolerance = (index + 0.5) / len(options), 0.5 / len(options)
        else:
            lo, hi = self.range
            x = curve_position(min(max(float(value), lo), hi), lo, hi, self.shape)
            tolerance = 0.5 / self.steps
        x = min(max(x, 0.0), 1.0)
        return (1.0 - x if self.invert else x), tolerance


def position_7bit(value: int) -> float:
    return value / STEPS_7BIT


def position_14bit(msb: int, lsb: int) -> float:
    return (msb * 128 + lsb) / STEPS_14BIT


@dataclass(frozen=True)
class ActionRule:
    """A note or program change that triggers an action. `number` None means any note or
    program; `channel` None means any channel. For "recall_preset", `preset` fixes the preset
    index; without it a program change recalls preset number = program (0-based)."""

    trigger: str  # "note" or "program"
    number: int | None
    action: str
    channel: int | None = None
    preset: int | None = None

    def __post_init__(self) -> None:
        if self.trigger not in ("note", "program"):
            raise EntryError("trigger", "an action needs a \"note\" or a \"program\" key")
        if self.number is not None:
            _check_int(self.trigger, self.number, 0, 127)
        if self.action not in ACTIONS:
            raise EntryError("action", f"must be one of {', '.join(ACTIONS)}, "
                              f"got {self.action!r}")
        if self.channel is not None:
            _check_int("channel", self.channel, 1, 16)
        if self.preset is not None:
            if self.action != "recall_preset":
                raise EntryError("preset", "only a recall_preset action takes a preset")
            _check_int("preset", self.preset, 0, 127)

    def matches(self, trigger: str, channel: int, number: int) -> bool:
        return (self.trigger == trigger and self.number in (None, number)
                and self.channel in (None, channel))


@dataclass(frozen=True)
class MidiMapping:
    """Bindings plus note / program actions. Immutable: learn builds a new mapping, so the
    one in use is never half-changed."""

    bindings: tuple[Binding, ...] = ()
    actions: tuple[ActionRule, ...] = ()
    about: str = ""
    _index: dict[tuple[int, int], tuple[Binding, bool]] = field(
        init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        index: dict[tuple[int, int], tuple[Binding, bool]] = {}
        for number, binding in enumerate(self.bindings):
            keys = [((binding.channel, binding.controller), False)]
            if binding.fine_controller is not None:
                keys.append(((binding.channel, binding.fine_controller), True))
            for key, fine in keys:
                if key in index:
                    other = index[key][0]
                    raise EntryError(
                        f"[{number}]", f"ch{key[0]} CC{key[1]} is already bound to "
                        f"'{other.param}' ({other.label()}); a controller drives one parameter")
                index[key] = (binding, fine)
        object.__setattr__(self, "_index", index)

    def lookup(self, channel: int, controller: int) -> tuple[Binding, bool] | None:
        """(binding, is_lsb) for a controller, or None when it is not bound."""
        return self._index.get((channel, controller))

    def binding_for(self, name: str) -> Binding | None:
        return next((b for b in self.bindings if b.param == name), None)

    def with_binding(self, binding: Binding) -> MidiMapping:
        """A copy where `binding` replaces the parameter's old binding and anything else on its
        controllers: learn moves a parameter to the knob just turned."""
        taken = {(binding.channel, binding.controller)}
        if binding.fine_controller is not None:
            taken.add((binding.channel, binding.fine_controller))

        def clashes(other: Binding) -> bool:
            mine = {(other.channel, other.controller)}
            if other.fine_controller is not None:
                mine.add((other.channel, other.fine_controller))
            return other.param == binding.param or bool(mine & taken)

        kept = tuple(b for b in self.bindings if not clashes(b))
        return replace(self, bindings=kept + (binding,))

    def actions_for(self, trigger: str, channel: int, number: int) -> list[ActionRule]:
        return [rule for rule in self.actions if rule.matches(trigger, channel, number)]


# ----- files -----


@dataclass
class Pickup:
    """Soft takeover for one knob: after `arm()`, the knob changes its parameter only once it
    has crossed or touched the parameter's current value, so nothing jumps on stage."""

    picked_up: bool = True
    last_position: float | None = None

    def arm(self) -> None:
        self.picked_up = False
        self.last_position = None

    def follow(self, position: float, target: float, tolerance: float = 0.0) -> bool:
        """Record the knob at `position`; True when it now drives the parameter, whose current
        value sits at `target` on the knob. The first position after arm() only counts if it
        touches; after that, moving from one side of the target to the other picks it up."""
        if not self.picked_up:
            touching = abs(position - target) <= tolerance
            last = self.last_position
            crossed = last is not None and (last - target) * (position - target) <= 0
            self.picked_up = touching or crossed
        self.last_position = position
        return self.picked_up
