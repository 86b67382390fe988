"""Presets: whole looks (every parameter plus the modulation routes) as files, and the slots.

Main thread only. A preset file is readable JSON:

    {"format": "swarm-preset", "version": 1, "name": "calm-school", "about": "...",
     "params": {every registry parameter: value}, "routes": [{"source", "param", "amount"}]}

A parameter missing from "params" takes the registry default, so presets written before a
parameter existed keep working (a file with neither "format" nor "version", the README's older
form, reads as version 1). Colours are [r, g, b] lists. Recovery files (control/looks/recovery.py)
add "state" (the preset name, the seed, ...). Every problem is a `PresetError` naming the file
and the key, and a file is checked whole before anything is applied: a bad file changes
nothing. Blending one look into another is control/parameters/morph.py.
"""
from __future__ import annotations

import difflib
import json
import logging
import math
import os
import re
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swarm_instrument.control.looks.atomic import atomic_write_text
from swarm_instrument.control.looks.files import FileProblem, read_json
from swarm_instrument.control.parameters.modulation import (
    Route,
    RouteError,
    describe_route,
    merge_routes,
    route_key,
    routes_from_json,
    routes_to_json,
)
from swarm_instrument.control.parameters.registry import (
    BY_NAME,
    REGISTRY,
    Param,
    ParamError,
    Params,
)

FORMAT = "swarm-preset"
VERSION = 1  # the newest format this instrument reads and the one it writes
log = logging.getLogger(__name__)
SLOT_FILE = re.compile(r"^([1-9])-(.+)\.json$")  # bundled: "1-calm-school.json" fills slot 1
TOP_KEYS = ("format", "version", "name", "about", "tags", "params", "routes", "state")
# What a look is for, read by the autopilot (show/autopilot/) to choose a look by the
# section's energy: a quiet intro or a break, a groove, a build, a drop's peak.
TAGS = ("calm", "groove", "build", "peak")


class PresetError(FileProblem):
    """A preset that cannot be used: the message names the file and the key, and what to do."""


@dataclass
class Preset:
    """A whole look: every registry parameter (Params' types: colours are tuples) and routes."""

    name: str
    values: dict[str, Any]
    routes: list[Route] = field(default_factory=list)
    about: str = ""
    state: dict[str, Any] = field(default_factory=dict)  # recovery extras (seed, preset, ...)
    tags: tuple[str, ...] = ()  # TAGS: what the look is for (the autopilot chooses by them)
    path: Path | None = None  # the file it came from; None when made from the live state
    notes: list[str] = field(default_factory=list)  # what reading it set right, to be said


# ---- the file format ---------------------------------------------------------------------------

def parse_preset(data: Any, where: str, default_name: str = "preset") -> Preset:
    """Check a decoded JSON document completely and build the Preset, or raise PresetError
    naming `where` (the file) and the key. Pure: no files, no Params touched."""
    if not isinstance(data, dict):
        raise PresetError(f"{where}: a preset is a JSON object {{\"format\": \"{FORMAT}\", "
                          f"\"version\": {VERSION}, \"name\": ..., \"params\": {{...}}, "
                          f"\"routes\": [...]}}, not {_json_kind(data)}")
    for key in data:
        if key not in TOP_KEYS:
            hint = ""
            if key in ("bindings", "actions"):
                hint = "; this looks like a MIDI mapping, not a preset"
            raise PresetError(f"{where}: unknown key '{key}'{did_you_mean(key, TOP_KEYS)} "
                              f"(a preset has {', '.join(TOP_KEYS)}){hint}")
    if "format" in data and data["format"] != FORMAT:
        raise PresetError(f"{where}: 'format' is {_shown(data['format'])}, not \"{FORMAT}\": "
                          "this is not a preset file")
    version = data.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise PresetError(f"{where}: 'version' must be a whole number from 1, got "
                          f"{_shown(version)}")
    if version > VERSION:
        raise PresetError(f"{where}: 'version' {version} is from a newer instrument (this one "
                          f"reads version {VERSION}); update the instrument to use it")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name.strip():
        raise PresetError(f"{where}: 'name' must be a non-empty string, got {_shown(name)}")
    about = data.get("about", "")
    if not isinstance(about, str):
        raise PresetError(f"{where}: 'about' must be a string, got {_shown(about)}")
    tags = parse_tags(data.get("tags", []), where)
    state = data.get("state", {})
    if not isinstance(state, dict):
        raise PresetError(f"{where}: 'state' must be an object, got {_json_kind(state)}")
    raw = data.get("params", {})
    if not isinstance(raw, dict):
        raise PresetError(f"{where}: 'params' must be an object of parameter names to values, "
                          f"not {_json_kind(raw)}")
    values = {p.name: p.default for p in REGISTRY}
    for key, value in raw.items():
        if key not in BY_NAME:
            raise PresetError(f"{where}: params: unknown parameter '{key}'"
                              f"{did_you_mean(key, BY_NAME)}; remove it or check the spelling")
        try:
            values[key] = BY_NAME[key].validate(value, f"{where}: params")
        except ParamError as exc:
            raise PresetError(str(exc)) from None
    try:
        routes = routes_from_json(data.get("routes", []), where=f"{where}: routes")
    except RouteError as exc:
        raise PresetError(str(exc)) from None
    routes, notes = unique_routes(routes, where)
    return Preset(name.strip(), values, routes, about, dict(state), notes=notes, tags=tags)


def parse_tags(raw: Any, where: str) -> tuple[str, ...]:
    """A preset's "tags": a list of TAGS, each once; PresetError names the file and the tag."""
    if not isinstance(raw, list) or not all(isinstance(tag, str) for tag in raw):
        raise PresetError(f"{where}: 'tags' must be a list of words from {', '.join(TAGS)}, "
                          f"got {_shown(raw)}")
    for tag in raw:
        if tag not in TAGS:
            raise PresetError(f"{where}: tags: unknown tag {_shown(tag)}{did_you_mean(tag, TAGS)}"
                              f"; a look's tags are {', '.join(TAGS)}")
    if len(set(raw)) != len(raw):
        raise PresetError(f"{where}: tags: {_shown(raw)} names a tag twice; keep each once")
    return tuple(raw)


def unique_routes(routes: list[Route], where: str) -> tuple[list[Route], list[str]]:
    """A preset's routes with each source, parameter and period once. A route repeated exactly
    (a copy-paste, or a save that wrote it again) is kept once, with a note naming it; the
    same route with other amounts is refused (PresetError names both): which was meant cannot
    be told, and routes add up, so the file should say the one amount it wants."""
    first: dict[tuple[str, str, float], int] = {}
    repeats: dict[int, int] = {}
    for index, route in enumerate(routes):
        seen = first.setdefault(route_key(route), index)
        if seen == index:
            continue
        if routes[seen].amount != route.amount:
            raise PresetError(
                f"{where}: routes[{seen}] ({describe_route(routes[seen])}) and routes[{index}] "
                f"({describe_route(route)}) route the same source to the same parameter; keep "
                f"one, with the amount meant (routes add up: together they give "
                f"{routes[seen].amount + route.amount:g})")
        repeats[seen] = repeats.get(seen, 1) + 1
    notes = [f"{where}: routes: '{describe_route(routes[index])}' is there {times} times; "
             "kept once (saving the look writes it once)" for index, times in repeats.items()]
    return [routes[index] for index in sorted(first.values())], notes


def load_preset(path: str | os.PathLike) -> Preset:
    """Read and check a preset file whole; PresetError names the file and the key."""
    path = Path(path)
    data = _read_json(path)
    preset = parse_preset(data, str(path), default_name=name_from_file(path))
    preset.path = path
    for note in preset.notes:
        if note not in _SAID:  # once a run: a slot's file is read at every recall
            _SAID.add(note)
            log.info(f"preset: {note}")
    return preset


_SAID: set[str] = set()  # notes already said


def preset_to_json(preset: Preset) -> dict[str, Any]:
    """The file's object: every registry parameter in registry order, colours as lists."""
    data: dict[str, Any] = {"format": FORMAT, "version": VERSION, "name": preset.name}
    if preset.about:
        data["about"] = preset.about
    if preset.tags:
        data["tags"] = list(preset.tags)
    data["params"] = {p.name: _to_json_value(preset.values.get(p.name, p.default))
                      for p in REGISTRY}
    data["routes"] = routes_to_json(preset.routes)
    if preset.state:
        data["state"] = preset.state
    return data


def format_preset(preset: Preset) -> str:
    """The file's text: one parameter and one route a line, so a person can read and diff it."""
    data = preset_to_json(preset)

    def dump(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)

    lines = ["{"]
    for key, value in data.items():
        if key == "params":
            items = [f"    {dump(k)}: {dump(v)}" for k, v in value.items()]
            lines.append('  "params": {\n' + ",\n".join(items) + "\n  },")
        elif key == "routes" and value:
            items = [f"    {dump(route)}" for route in value]
            lines.append('  "routes": [\n' + ",\n".join(items) + "\n  ],")
        else:
            lines.append(f"  {dump(key)}: {dump(value)},")
    lines[-1] = lines[-1].rstrip(",")
    return "\n".join(lines) + "\n}\n"


def save_preset(path: str | os.PathLike, preset: Preset, backup: bool = True) -> Path:
    """Write `preset` atomically (the previous file kept as PATH.bak). Raises PresetError."""
    try:
        text = format_preset(preset)
    except (TypeError, ValueError) as exc:  # a "state" entry JSON cannot hold
        raise PresetError(f"{path}: cannot save preset '{preset.name}': {exc}") from None
    try:
        return atomic_write_text(path, text, backup=backup)
    except FileProblem as exc:
        raise PresetError(str(exc)) from None


# ---- the live state ----------------------------------------------------------------------------

def preset_from_show(name: str, params: Params, routes: Iterable[Route],
                     about: str = "") -> Preset:
    """The current look as a preset (Ctrl+number, the recovery file). Its routes are what
    plays: one a source, parameter and period (summed as modulation sums them), so a save
    never writes a route twice."""
    return Preset(name, params.as_dict(), merge_routes(routes), about)


def apply_preset(preset: Preset, params: Params, keep: Collection[str] = ()) -> list[Route]:
    """Set every parameter from `preset` except those in `keep` (e.g. a --count the machine
    needs); returns the routes for `show.routes`. All values are checked before any is set."""
    where = str(preset.path) if preset.path else f"preset '{preset.name}'"
    try:
        params.update({k: v for k, v in preset.values.items() if k not in keep}, where=where)
    except ParamError as exc:
        raise PresetError(str(exc)) from None
    return list(preset.routes)


def differences(preset: Preset, params: Params, routes: Iterable[Route],
                keep: Collection[str] = ()) -> list[str]:
    """Names of the parameters that differ from `preset` (and "routes"), for the HUD's
    "changed since recall"; `keep` names are not compared."""
    current = params.as_dict()
    changed = [p.name for p in REGISTRY if p.name not in keep
               and not _same(p, current[p.name], preset.values.get(p.name, p.default))]
    if _route_counts(routes) != _route_counts(preset.routes):
        changed.append("routes")
    return changed


def differs(preset: Preset, params: Params, routes: Iterable[Route],
            keep: Collection[str] = ()) -> bool:
    """True when the live state is no longer the recalled preset (the HUD's '*')."""
    return bool(differences(preset, params, routes, keep))


# ---- slots and names ---------------------------------------------------------------------------


# ---- helpers -----------------------------------------------------------------------------------

def _read_json(path: Path) -> Any:
    """The file's JSON (control.looks.files.read_json: truncation, duplicates, .bak hint), or
    PresetError."""
    try:
        return read_json(path)
    except FileProblem as exc:
        raise PresetError(str(exc)) from None


def _same(p: Param, a: Any, b: Any) -> bool:
    """Equal, allowing float rounding (a morph's last step, a value through JSON)."""
    if p.kind == "float":
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if p.kind == "color":
        return all(math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12) for x, y in zip(a, b))
    return a == b


def _route_counts(routes: Iterable[Route]) -> Counter:
    return Counter((r.source, r.param, round(r.amount, 9), r.beats) for r in routes)


def _to_json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _shown(value: Any, limit: int = 60) -> str:
    """A value as the message shows it: its repr, cut so that a megabyte of text in a file
    still gives a line that can be read."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 3]}..."


def _json_kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "true/false",
             int: "a number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def did_you_mean(word: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.75)
    return f" (did you mean '{close[0]}'?)" if close else ""

def name_from_file(path: Path) -> str:
    """"1-calm-school.json" -> "calm-school"; "slot-3.json" -> "slot-3". A file name that is
    not UTF-8 (Python keeps its bytes as lone surrogates) shows them escaped, so printing the
    name can never fail."""
    match = SLOT_FILE.match(path.name)
    name = match.group(2) if match else path.stem
    return name.encode("utf-8", "backslashreplace").decode("utf-8")
