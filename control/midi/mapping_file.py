"""MIDI mapping files: read (every problem one line naming the file and the line or key) and
written atomically, one binding or action a line. Main thread only."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from swarm_instrument.control.looks.atomic import atomic_write_text
from swarm_instrument.control.looks.files import FileProblem, read_json
from swarm_instrument.control.midi.mapping import (
    ACTIONS,
    ActionRule,
    Binding,
    EntryError,
    MappingError,
    MidiMapping,
)

_BINDING_KEYS = ("channel", "controller", "fine_controller", "param", "curve", "invert",
                 "lo", "hi")


_ACTION_KEYS = ("note", "program", "channel", "action", "preset")


_TOP_KEYS = ("about", "bindings", "actions")


def _unknown_keys(entry: dict, known: Iterable[str], where: str) -> None:
    for key in entry:
        if key not in known:
            raise MappingError(f"{where}: unknown key '{key}' (known: {', '.join(known)})")


def _entries(data: dict, name: str, keys: tuple[str, ...], source: str, example: str):
    """(where, entry) for each object of the list `data[name]`, checked to be an object with
    only `keys`; `where` names it in messages."""
    entries = data.get(name, [])
    if not isinstance(entries, list):
        raise MappingError(f"{source}: {name}: must be a list of objects")
    for number, entry in enumerate(entries):
        where = f"{source}: {name}[{number}]"
        if not isinstance(entry, dict):
            raise MappingError(f"{where}: must be an object like {example}")
        _unknown_keys(entry, keys, where)
        yield where, entry


def mapping_from_json(data: Any, source: str) -> MidiMapping:
    """Build a mapping from parsed JSON; errors name `source` and the key path."""
    if not isinstance(data, dict):
        raise MappingError(f"{source}: a MIDI mapping is a JSON object with \"bindings\" and "
                           "\"actions\" lists")
    _unknown_keys(data, _TOP_KEYS, source)
    about = data.get("about", "")
    if not isinstance(about, str):
        raise MappingError(f"{source}: about: must be text")
    bindings = []
    for where, entry in _entries(data, "bindings", _BINDING_KEYS, source,
                                 '{"channel": 1, "controller": 70, "param": "max_speed"}'):
        for key in ("channel", "controller", "param"):
            if key not in entry:
                raise MappingError(f"{where}: missing '{key}'")
        try:
            bindings.append(Binding(**entry))
        except EntryError as exc:
            raise MappingError(f"{where}.{exc.key}: {exc}") from None
    actions = []
    for where, entry in _entries(data, "actions", _ACTION_KEYS, source,
                                 '{"note": 36, "action": "respawn"}'):
        if ("note" in entry) == ("program" in entry):
            raise MappingError(f"{where}: needs exactly one of \"note\" or \"program\"")
        if "action" not in entry:
            raise MappingError(f"{where}: missing 'action' ({', '.join(ACTIONS)})")
        trigger = "note" if "note" in entry else "program"
        number_value = entry[trigger]
        try:
            actions.append(ActionRule(
                trigger, None if number_value == "any" else number_value, entry["action"],
                entry.get("channel"), entry.get("preset")))
        except EntryError as exc:
            raise MappingError(f"{where}.{exc.key}: {exc}"
                               + (" (or \"any\")" if exc.key == trigger else "")) from None
    try:
        return MidiMapping(tuple(bindings), tuple(actions), about)
    except EntryError as exc:
        raise MappingError(f"{source}: bindings{exc.key}: {exc}") from None


def mapping_to_json(mapping: MidiMapping) -> dict[str, Any]:
    """The file form of a mapping; defaults are left out so files stay short."""
    bindings = []
    for b in mapping.bindings:
        entry: dict[str, Any] = {"channel": b.channel, "controller": b.controller}
        if b.fine_controller is not None:
            entry["fine_controller"] = b.fine_controller
        entry["param"] = b.param
        if b.curve is not None:
            entry["curve"] = b.curve
        if b.invert:
            entry["invert"] = True
        for key in ("lo", "hi"):
            if getattr(b, key) is not None:
                entry[key] = getattr(b, key)
        bindings.append(entry)
    actions = []
    for rule in mapping.actions:
        entry = {rule.trigger: "any" if rule.number is None else rule.number}
        if rule.channel is not None:
            entry["channel"] = rule.channel
        entry["action"] = rule.action
        if rule.preset is not None:
            entry["preset"] = rule.preset
        actions.append(entry)
    data: dict[str, Any] = {}
    if mapping.about:
        data["about"] = mapping.about
    data["bindings"] = bindings
    data["actions"] = actions
    return data


def _format(data: dict[str, Any]) -> str:
    """JSON with one binding or action a line: easy to read and to diff."""
    lines = ["{"]
    items = list(data.items())
    for number, (key, value) in enumerate(items):
        comma = "," if number < len(items) - 1 else ""
        if isinstance(value, list):
            lines.append(f"  {json.dumps(key)}: [")
            lines += [f"    {json.dumps(entry)}" + ("," if i < len(value) - 1 else "")
                      for i, entry in enumerate(value)]
            lines.append(f"  ]{comma}")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)}{comma}")
    return "\n".join(lines + ["}", ""])


def load_mapping(path: str | os.PathLike) -> MidiMapping:
    """Read a mapping file; a MappingError names the file and the line (bad JSON) or the key."""
    try:
        data = read_json(path)
    except FileProblem as exc:
        raise MappingError(str(exc)) from None
    return mapping_from_json(data, str(path))


def save_mapping(path: str | os.PathLike, mapping: MidiMapping) -> None:
    """Write atomically (control/looks/atomic.py: a temporary file in the same folder, fsync, one
    rename), keeping the file it replaces as PATH.bak: a crash or a full disk never leaves a
    half-written mapping."""
    try:
        atomic_write_text(path, _format(mapping_to_json(mapping)), backup=True)
    except FileProblem as exc:
        raise MappingError(str(exc)) from None
