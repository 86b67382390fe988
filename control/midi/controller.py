"""Applies MIDI messages to the parameters: knobs through the mapping with pickup, notes and
program changes as actions, and MIDI learn.

Main thread only: rtmidi queues raw messages in C, the frame's update step reads them
(control/midi/ports.py) and hands each one to `MidiController.handle`. No device here, so
tests drive it with plain byte strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from swarm_instrument.control.actions import Action
from swarm_instrument.control.midi.mapping import (
    KNOB_KINDS,
    Binding,
    MidiMapping,
    Pickup,
    position_7bit,
    position_14bit,
)
from swarm_instrument.control.parameters.registry import ParamError, Params, param

# After learn binds controller n (0-31), its LSB n + 32 arriving this soon after on the same
# channel shows a 14-bit knob, and the binding becomes a 14-bit one.
LEARN_FINE_WINDOW_S = 0.1

# Bytes in each channel message, by status high nibble: note off, note on, poly aftertouch,
# control change, program change, channel pressure, pitch bend.
_LENGTHS = {0x80: 3, 0x90: 3, 0xA0: 3, 0xB0: 3, 0xC0: 2, 0xD0: 2, 0xE0: 3}
_NAMES = {0x80: "note off", 0x90: "note", 0xA0: "aftertouch", 0xB0: "CC", 0xC0: "program",
          0xD0: "pressure", 0xE0: "pitch bend"}


@dataclass
class _Knob:
    """What the controller remembers about one bound knob."""

    pickup: Pickup
    msb: int | None = None
    seen_lsb: bool = False
    position: float | None = None


def describe(message: Sequence[int]) -> str:
    """A short human reading of a message for the HUD and telemetry."""
    if not message:
        return "empty"
    status = message[0]
    kind = status & 0xF0
    if kind in _NAMES and 0x80 <= status < 0xF0:
        data = " ".join(str(byte) for byte in message[1:])
        return f"ch{(status & 0x0F) + 1} {_NAMES[kind]} {data}".rstrip()
    if status == 0xF0:
        return f"sysex ({len(message)} bytes)"
    return " ".join(f"{byte:02X}" if isinstance(byte, int) else "??" for byte in message[:8])


def parse(message: Sequence[int]) -> tuple[int, int, tuple[int, ...]] | None:
    """(kind, channel 1-16, data bytes) of a well-formed channel message, else None: SysEx,
    system messages, running-status fragments and wrong lengths are not for us."""
    if not message or any(not isinstance(b, int) or not 0 <= b <= 255 for b in message):
        return None
    status = message[0]
    if not 0x80 <= status < 0xF0:
        return None
    kind = status & 0xF0
    if len(message) != _LENGTHS[kind] or any(b >= 0x80 for b in message[1:]):
        return None
    return kind, (status & 0x0F) + 1, tuple(message[1:])


class MidiController:
    """Turns messages into parameter changes and actions; owns the mapping in use."""

    def __init__(self, params: Params, mapping: MidiMapping, armed: bool = True) -> None:
        """`armed`: start with every knob waiting for pickup, since at start the knobs' positions
        are unknown and the parameters come from a preset."""
        self.params = params
        self.mapping = mapping
        self._knobs: dict[tuple[int, int], _Knob] = {}
        self._armed_default = armed
        self.received = 0
        self.ignored = 0
        self.last_message: str | None = None
        self._learning: str | None = None
        self._learned: tuple[Binding, float] | None = None
        self.last_learned: str | None = None

    # ----- mapping -----

    def arm_pickup(self) -> None:
        """Call after a preset recall: every knob must cross its parameter's new value before it
        changes it."""
        for knob in self._knobs.values():
            knob.pickup.arm()
        self._armed_default = True

    def _knob(self, binding: Binding) -> _Knob:
        key = (binding.channel, binding.controller)
        knob = self._knobs.get(key)
        if knob is None:
            knob = self._knobs[key] = _Knob(Pickup())
            if self._armed_default:
                knob.pickup.arm()
        return knob

    # ----- learn -----

    def start_learn(self, name: str) -> None:
        """The next controller moved binds to parameter `name` (ParamError if it is unknown or
        no knob can drive it, as with colours)."""
        spec = param(name)
        if spec.kind not in KNOB_KINDS:
            raise ParamError(f"'{name}' is a {spec.kind} parameter; MIDI learn binds "
                             f"{', '.join(KNOB_KINDS)} parameters")
        self._learning = spec.name
        self._learned = None

    def cancel_learn(self) -> None:
        self._learning = None

    @property
    def learning(self) -> str | None:
        return self._learning

    def _learn(self, channel: int, controller: int, value: int, now: float) -> list[Action]:
        name = self._learning
        assert name is not None
        old = self.mapping.binding_for(name)
        keep: dict[str, Any] = {}
        if old is not None:
            keep = {"curve": old.curve, "invert": old.invert, "lo": old.lo, "hi": old.hi}
        binding = Binding(channel, controller, name, **keep)
        self._bind(binding, position_7bit(value))
        self._learning = None
        self._learned = (binding, now)
        return [Action("learned", param=name)]

    def _bind(self, binding: Binding, position: float) -> None:
        self.mapping = self.mapping.with_binding(binding)
        live = {(b.channel, b.controller) for b in self.mapping.bindings}
        self._knobs = {key: knob for key, knob in self._knobs.items() if key in live}
        knob = self._knobs[(binding.channel, binding.controller)] = _Knob(Pickup())
        knob.pickup.arm()
        knob.pickup.last_position = knob.position = position
        self.last_learned = f"{binding.param} <- {binding.label()}"

    def _learn_fine(self, channel: int, controller: int, now: float) -> list[Action] | None:
        """Make the binding just learned a 14-bit one if its LSB follows within the window."""
        assert self._learned is not None
        binding, when = self._learned
        if now - when > LEARN_FINE_WINDOW_S:
            self._learned = None
            return None
        if (channel, controller) != (binding.channel, binding.controller + 32) or \
                binding.controller >= 32 or binding.fine_controller is not None:
            return None
        knob = self._knobs.get((binding.channel, binding.controller))
        position = knob.position if knob and knob.position is not None else 0.0
        self._bind(Binding(binding.channel, binding.controller, binding.param, binding.curve,
                           binding.invert, controller, binding.lo, binding.hi), position)
        self._learned = None
        return [Action("learned", param=binding.param)]

    # ----- messages -----

    def handle(self, message: Sequence[int], now: float) -> list[Action]:
        """Apply one message (complete, with its status byte, as rtmidi delivers it) received
        at time `now` (seconds, monotonic). Never raises on bad input: it is counted and
        ignored."""
        self.received += 1
        try:
            self.last_message = describe(message)
        except TypeError:
            self.last_message = "unreadable"
        parsed = parse(message) if isinstance(message, (bytes, bytearray, list, tuple)) else None
        if parsed is None:
            self.ignored += 1
            return []
        kind, channel, data = parsed
        if kind == 0xB0:
            return self._control_change(channel, data[0], data[1], now)
        if kind == 0x90 and data[1] > 0:
            return [self._action(rule, data[1])
                    for rule in self.mapping.actions_for("note", channel, data[0])]
        if kind == 0xC0:
            return [self._action(rule, data[0])
                    for rule in self.mapping.actions_for("program", channel, data[0])]
        return []

    @staticmethod
    def _action(rule: Any, value: int) -> Action:
        """A note's or program change's action: a burst as strong as the note's velocity
        (0..1); a recall of slot program + 1 (program change 0 recalls slot 1) unless the rule
        fixes the preset index."""
        if rule.action == "recall_preset":
            return Action("recall_preset", (rule.preset if rule.preset is not None else value) + 1)
        if rule.action == "separation_burst":
            return Action("separation_burst", value / 127.0)
        return Action(rule.action)

    def _control_change(self, channel: int, controller: int, value: int,
                        now: float) -> list[Action]:
        if self._learning is not None:
            return self._learn(channel, controller, value, now)
        if self._learned is not None:
            upgraded = self._learn_fine(channel, controller, now)
            if upgraded is not None:
                return upgraded
        found = self.mapping.lookup(channel, controller)
        if found is None:
            return []
        binding, is_lsb = found
        knob = self._knob(binding)
        if is_lsb:
            # An LSB refines the last MSB (MIDI 1.0 lets a device send the LSB alone when only
            # it changed); with no MSB yet there is nothing to refine.
            if knob.msb is None:
                return []
            knob.seen_lsb = True
            position = position_14bit(knob.msb, value)
        else:
            knob.msb = value
            # An MSB resets the LSB to 0; a 14-bit binding on a knob that never sends an LSB
            # reads the MSB as 7 bits so it still reaches both ends.
            position = position_14bit(value, 0) if knob.seen_lsb else position_7bit(value)
        self._move(binding, knob, position)
        return []

    def _move(self, binding: Binding, knob: _Knob, position: float) -> None:
        knob.position = position
        target, tolerance = binding.window(self.params[binding.param])
        if knob.pickup.follow(position, target, tolerance):
            try:
                self.params[binding.param] = binding.value(position)
            except ParamError:
                pass  # the binding's range is checked against the registry; cannot happen

    # ----- telemetry -----

    def waiting_knobs(self) -> dict[str, dict[str, Any]]:
        """Knobs moved but not yet picked up: param -> the value the knob points at and its
        position 0-1, for the HUD to show beside the parameter's value."""
        waiting = {}
        for binding in self.mapping.bindings:
            knob = self._knobs.get((binding.channel, binding.controller))
            if knob and not knob.pickup.picked_up and knob.position is not None:
                waiting[binding.param] = {"knob": binding.value(knob.position),
                                          "position": round(knob.position, 4)}
        return waiting

    def state(self) -> dict[str, Any]:
        """The controller's part of telemetry's `midi` object."""
        return {
            "messages": self.received,
            "ignored": self.ignored,
            "last_message": self.last_message,
            "learn": {"active": self._learning is not None, "param": self._learning,
                      "last_bound": self.last_learned},
            "pickup": self.waiting_knobs(),
            "bindings": len(self.mapping.bindings),
        }
