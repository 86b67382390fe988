"""The instrument's MIDI as one object: input ports, the controller and the mapping files.

Main thread only (rtmidi queues messages in C; MidiInput reads them once a frame). Each
frame's update step calls `Midi.update(now)` and acts on the actions it returns; the HUD and
telemetry read `state()`. Learn saves the mapping at once, so a learned knob survives a crash.
System messages (MIDI clock, start, stop, continue, song position: status 0xF1 and up, SysEx
aside) go to `clock`, a MidiClock the show's Tempo follows, never to the mapping.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from importlib.resources import files
from os import PathLike
from pathlib import Path
from typing import Any, Protocol

from swarm_instrument.control.looks.preset_bank import user_presets_dir
from swarm_instrument.control.midi.controller import Action, MidiController
from swarm_instrument.control.midi.mapping import MappingError, MidiMapping
from swarm_instrument.control.midi.mapping_file import load_mapping, save_mapping
from swarm_instrument.control.midi.ports import MidiInput
from swarm_instrument.control.musical_time.midi_clock import MidiClock
from swarm_instrument.control.parameters.registry import Params

PRESETS = Path(str(files("swarm_instrument").joinpath("presets")))  # package data
DEFAULT_MAPPING = PRESETS / "midi-default.json"  # shipped: an 8-knob controller


def user_mapping() -> Path:
    """Where learn writes the mapping, read at start when present: beside the user's saved
    presets (never in the installed folder; SWARM_PRESETS_DIR moves both). Looked up when
    needed, not at import, so the environment of the moment counts."""
    return user_presets_dir() / "midi.json"


LEARNED: Any = object()  # save_path's default: user_mapping() when the Midi is made


class MessageSource(Protocol):
    """What Midi needs from an input; MidiInput is the real one, tests pass a fake."""

    def poll(self, now: float) -> None: ...
    def drain(self) -> list[tuple[bytes, float]]: ...
    def status(self) -> dict[str, Any]: ...
    def close(self) -> None: ...


log = logging.getLogger(__name__)


def _is_system(message: Any) -> bool:
    """A system common or realtime message (0xF1-0xFF) as bytes: the clock's, not the
    mapping's. SysEx (0xF0) and anything odd stay with the controller, which counts them."""
    return isinstance(message, (bytes, bytearray)) and len(message) > 0 and message[0] > 0xF0


def _report(text: str) -> None:
    """What MIDI tells the performer, through this module's logger (tests may pass their own
    `report` to read it)."""
    log.info(f"midi: {text}")


class Midi:
    """Input + controller + mapping files, for the frame loop."""

    def __init__(self, params: Params, source: MessageSource | None,
                 mapping_path: str | PathLike | None = None,
                 save_path: str | PathLike | None = LEARNED,
                 report: Callable[[str], None] = _report) -> None:
        """`mapping_path` None: the learned mapping at `save_path` if there is one, else the
        shipped default. A file that fails to load is reported and the default used instead."""
        self.source = source
        self.report = report
        if save_path is LEARNED:
            save_path = user_mapping()
        self.save_path = Path(save_path) if save_path is not None else None
        self.save_error: str | None = None
        self.mapping_path, mapping = self._first_mapping(mapping_path)
        self.controller = MidiController(params, mapping)
        self.clock = MidiClock()

    def _first_mapping(self, path: str | PathLike | None) -> tuple[Path | None, MidiMapping]:
        candidates: list[Path] = []
        if path is not None:
            candidates.append(Path(path))
        elif self.save_path is not None and self.save_path.exists():
            candidates.append(self.save_path)
        candidates.append(DEFAULT_MAPPING)
        for candidate in candidates:
            try:
                return candidate, load_mapping(candidate)
            except MappingError as exc:
                self.report(f"{exc}; MIDI mapping not loaded")
        return None, MidiMapping()

    @classmethod
    def open(cls, params: Params, ports: Sequence[str | int] | None = None,
             virtual: str | None = None, api: str | None = None,
             mapping_path: str | PathLike | None = None,
             save_path: str | PathLike | None = LEARNED,
             client_name: str = "swarm-instrument",
             report: Callable[[str], None] = _report) -> Midi:
        """Open the ports (--midi-port selectors, None for every input; --midi-virtual NAME;
        --midi-api) and load the mapping. Without rtmidi or a MIDI system it still returns a
        Midi, one that reports why once and receives nothing."""
        source = MidiInput(ports, virtual, api, client_name, report)
        return cls(params, source, mapping_path, save_path, report)

    def update(self, now: float) -> list[Action]:
        """Once a frame: hot-plug poll, then every queued message through the mapping, or to
        the clock for system messages (the clock's own time: each message's arrival)."""
        actions: list[Action] = []
        if self.source is None:
            return actions
        self.source.poll(now)
        for message, when in self.source.drain():
            if _is_system(message):
                self.clock.handle(message, when)
            else:
                actions += self.controller.handle(message, when)
        if any(action.kind == "learned" for action in actions):
            self.save()
        return actions

    def save(self) -> None:
        """Write the mapping in use to save_path; a failure is reported, never raised."""
        if self.save_path is None:
            return
        try:
            save_mapping(self.save_path, self.controller.mapping)
            self.save_error = None
        except MappingError as exc:
            self.save_error = str(exc)
            self.report(f"{exc}; the learned mapping is in use but not saved")

    def start_learn(self, name: str) -> None:
        self.controller.start_learn(name)

    def cancel_learn(self) -> None:
        self.controller.cancel_learn()

    def preset_recalled(self) -> None:
        """Call after applying a preset so knobs pick up its values instead of jumping."""
        self.controller.arm_pickup()

    def state(self) -> dict[str, Any]:
        """Telemetry's `midi` object: ports, counts, last message, learn and pickup state."""
        state: dict[str, Any] = {"api": None, "ports_open": [], "state": "MIDI off"}
        if self.source is not None:
            state.update(self.source.status())
        state.update(self.controller.state())
        state["clock"] = self.clock.state()
        state["mapping_file"] = str(self.mapping_path) if self.mapping_path else None
        state["save_error"] = self.save_error
        return state

    def close(self) -> None:
        if self.source is not None:
            self.source.close()
            self.source = None
