"""Presets: save, recall and morph whole looks (every parameter plus the audio routes).

Main thread only. The frame's update step recalls (`PresetBank.recall`), morphs
(`Morph.values_at`) and crossfades (`crossfade`); the recovery file is written from the frame
loop every few seconds (`RecoveryWriter.maybe_save`). Nothing here touches the GPU.

A preset file is readable JSON:

    {"format": "swarm-preset", "version": 1, "name": "calm-school", "about": "...",
     "params": {every registry parameter: value}, "routes": [{"source", "param", "amount"}]}

A parameter missing from "params" takes the registry default, so presets written before a
parameter existed keep working (a file with neither "format" nor "version", the README's older
form, reads as version 1). Colours are [r, g, b] lists. Recovery files add "state" (the preset
name, the seed, ...). Every problem is a `PresetError` naming the file and the key, and a file
is checked whole before anything is applied: a bad file changes nothing.

Morph rule: continuous values (floats, each colour channel) glide along a smoothstep curve;
discrete values (switches, choices such as `boundary` and `dimensions`, and whole numbers: the
agent `count`, slot numbers, caps) switch at the START of a morph. The performer sees the cue
answered at once (a new count, a flat swarm for dimensions 2) and the rest of the look then
settles around it; a jump at the end of a smooth glide would read as a glitch. The fader's
crossfade switches them at x = 0.5.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from control.modulation import Route, RouteError, routes_from_json, routes_to_json
from control.atomic import atomic_write_text, remove_stale_temporaries
from control.files import FileProblem, read_json
from control.params import BY_NAME, REGISTRY, Param, ParamError, Params

FORMAT = "swarm-preset"
VERSION = 1  # the newest format this instrument reads and the one it writes
TOP_KEYS = ("format", "version", "name", "about", "params", "routes", "state")
SLOTS = range(1, 10)  # number keys 1-9; MIDI program change p recalls slot p + 1
BUNDLED_DIR = Path(__file__).resolve().parent.parent / "presets"
USER_DIR_ENV = "SWARM_PRESETS_DIR"
RECOVERY_ENV = "SWARM_RECOVERY_FILE"
STATE_DIR_ENV = "SWARM_STATE_DIR"  # also the supervisor's crash.log folder
_MAPPING_FILE = re.compile(r"^midi(-.+)?\.json$")  # presets/midi.json, midi-default.json
_SLOT_FILE = re.compile(r"^([1-9])-(.+)\.json$")  # bundled: "1-calm-school.json" fills slot 1


class PresetError(FileProblem):
    """A preset that cannot be used: the message names the file and the key, and what to do."""


class RecoveryDamaged(PresetError):
    """The recovery file exists but cannot be used; `load_recovery` has set it aside (renamed it
    beside itself, `set_aside`; None when that failed) so the next start does not trip on it
    again. The message is one line: the problem, then where the file went."""

    def __init__(self, message: str, set_aside: Path | None) -> None:
        super().__init__(message)
        self.set_aside = set_aside


@dataclass
class Preset:
    """A whole look: every registry parameter (Params' types: colours are tuples) and routes."""

    name: str
    values: dict[str, Any]
    routes: list[Route] = field(default_factory=list)
    about: str = ""
    state: dict[str, Any] = field(default_factory=dict)  # recovery extras (seed, preset, ...)
    path: Path | None = None  # the file it came from; None when made from the live state


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
            raise PresetError(f"{where}: unknown key '{key}'{_did_you_mean(key, TOP_KEYS)} "
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
                              f"{_did_you_mean(key, BY_NAME)}; remove it or check the spelling")
        try:
            values[key] = BY_NAME[key].validate(value, f"{where}: params")
        except ParamError as exc:
            raise PresetError(str(exc)) from None
    try:
        routes = routes_from_json(data.get("routes", []), where=f"{where}: routes")
    except RouteError as exc:
        raise PresetError(str(exc)) from None
    return Preset(name.strip(), values, routes, about, dict(state))


def load_preset(path: str | os.PathLike) -> Preset:
    """Read and check a preset file whole; PresetError names the file and the key."""
    path = Path(path)
    data = _read_json(path)
    preset = parse_preset(data, str(path), default_name=_name_from_file(path))
    preset.path = path
    return preset


def preset_to_json(preset: Preset) -> dict[str, Any]:
    """The file's object: every registry parameter in registry order, colours as lists."""
    data: dict[str, Any] = {"format": FORMAT, "version": VERSION, "name": preset.name}
    if preset.about:
        data["about"] = preset.about
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
    """The current look as a preset (Ctrl+number, the recovery file)."""
    return Preset(name, params.as_dict(), list(routes), about)


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


# ---- morph and crossfade -----------------------------------------------------------------------

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
    on the same source and parameter are merged into one. Exactly `a` at 0 and `b` at 1.
    """
    if weight <= 0.0:
        return list(a)
    if weight >= 1.0:
        return list(b)
    amounts: dict[tuple[str, str], float] = {}
    for routes, scale in ((a, 1.0 - weight), (b, weight)):
        for route in routes:
            key = (route.source, route.param)
            amounts[key] = amounts.get(key, 0.0) + route.amount * scale
    return [Route(source, name, amount) for (source, name), amount in amounts.items()]


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

# ---- slots and names ---------------------------------------------------------------------------

def user_presets_dir() -> Path:
    """Where Ctrl+number saves: $SWARM_PRESETS_DIR, else the user's config folder."""
    if os.environ.get(USER_DIR_ENV):
        return Path(os.environ[USER_DIR_ENV]).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(config) / "swarm-instrument" / "presets"


class PresetBank:
    """Slots 1-9 for the number keys and MIDI program changes.

    Bundled presets fill the slots by their file name's prefix (`presets/1-calm-school.json`
    is slot 1). A save (Ctrl+number) writes `slot-N.json` in the user's folder, never a
    bundled file, and that file then fills slot N instead of the bundled one. Files are read
    at each recall, so what is on disk is what plays.
    """

    def __init__(self, user_folder: str | os.PathLike | None = None,
                 bundled_folder: str | os.PathLike = BUNDLED_DIR) -> None:
        self.user_folder = Path(user_folder) if user_folder is not None else user_presets_dir()
        self.bundled_folder = Path(bundled_folder)
        # Temporaries a killed save left (only of the files written here: the folder may be
        # one the user shares with other things).
        remove_stale_temporaries(self.user_folder,
                                 names=[f"slot-{slot}.json" for slot in SLOTS] + ["midi.json"])

    def slot_path(self, slot: int) -> Path | None:
        """The file that fills `slot` (the user's first), or None for an empty slot. Anything
        named slot-N.json fills it, a FIFO or a dangling link included, so that a recall says
        what is wrong with it instead of silently playing the bundled preset."""
        _check_slot(slot)
        user = self.user_folder / f"slot-{slot}.json"
        if os.path.lexists(user):
            return user
        for path in _preset_files(self.bundled_folder):
            match = _SLOT_FILE.match(path.name)
            if match and int(match.group(1)) == slot:
                return path
        return None

    def recall(self, slot: int) -> Preset:
        """The preset in `slot`, checked whole; PresetError for an empty slot or a bad file."""
        path = self.slot_path(slot)
        if path is None:
            raise PresetError(f"slot {slot} is empty; Ctrl+{slot} saves the current look there "
                              f"(into {self.user_folder})")
        return load_preset(path)

    def save(self, slot: int, preset: Preset) -> Path:
        """Save into the user's `slot-N.json` (the previous one kept as .bak); creates the
        folder. Raises PresetError naming the file."""
        _check_slot(slot)
        path = self.user_folder / f"slot-{slot}.json"
        try:
            self.user_folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PresetError(f"{path}: cannot create the folder {self.user_folder} "
                              f"({exc.strerror}); set {USER_DIR_ENV} to a writable folder") \
                from None
        return save_preset(path, preset)

    def names(self) -> dict[int, str]:
        """Slot -> preset name for the filled slots (the HUD's list); a file that cannot be
        read shows its file name. Never raises."""
        names = {}
        for slot in SLOTS:
            path = self.slot_path(slot)
            if path is not None:
                names[slot] = _peek_name(path)
        return names

    def available(self) -> dict[str, Path]:
        """Every preset by name, the user's folder first: what `--preset NAME` accepts. Never
        raises: a file that cannot be read is listed by its file name only, so one bad file
        spoils only itself."""
        found: dict[str, Path] = {}
        for folder in (self.user_folder, self.bundled_folder):
            for path in _preset_files(folder):
                for name in (_peek_name(path), _name_from_file(path)):
                    found.setdefault(name.lower(), path)
        return found

    def resolve(self, name_or_path: str) -> Path:
        """`--preset NAME|PATH|SLOT`: an existing file or anything ending in .json is a path;
        a digit 1-9 is that slot; otherwise a preset's name (or file name), any case."""
        text = name_or_path.strip()
        candidate = Path(text).expanduser()
        if candidate.is_file() or (os.path.lexists(candidate) and not candidate.is_dir()):
            return candidate  # a FIFO or a device too: load_preset says what it is
        if text.lower().endswith(".json"):
            for folder in (self.user_folder, self.bundled_folder):  # "1-calm-school.json"
                if candidate.name == text and (folder / text).is_file():
                    return folder / text
            return candidate  # a path: load_preset says it is missing
        if text.isdigit() and int(text) in SLOTS:
            path = self.slot_path(int(text))
            if path is None:
                raise PresetError(f"--preset {text}: slot {text} is empty; "
                                  f"filled slots: {self._slot_list()}")
            return path
        found = self.available()
        if text.lower() in found:
            return found[text.lower()]
        names = sorted({_peek_name(path) for path in found.values()})
        raise PresetError(f"--preset {text}: no preset of that name{_did_you_mean(text, names)}"
                          f"; known: {', '.join(names) or 'none'} (in {self.user_folder} and "
                          f"{self.bundled_folder}), or give a path to a .json file")

    def _slot_list(self) -> str:
        return ", ".join(f"{slot} {name}" for slot, name in self.names().items()) or "none"


# ---- the recovery file -------------------------------------------------------------------------

def recovery_path() -> Path:
    """Where the live state is saved every few seconds: $SWARM_RECOVERY_FILE, else
    recovery.json in $SWARM_STATE_DIR (beside the supervisor's crash.log), else in
    $XDG_STATE_HOME/swarm-instrument, else in ~/.local/state/swarm-instrument."""
    if os.environ.get(RECOVERY_ENV):
        return Path(os.environ[RECOVERY_ENV]).expanduser()
    if os.environ.get(STATE_DIR_ENV):
        return Path(os.environ[STATE_DIR_ENV]).expanduser() / "recovery.json"
    state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(state) / "swarm-instrument" / "recovery.json"


class RecoveryWriter:
    """Saves the live state every `interval` seconds, for `--resume` after a crash.

    The file is written on a thread of its own (an atomic write ends with fsync, which took up
    to 44 ms here: a dropped frame or two if the frame loop did it); the frame only formats the
    text and hands it over, the latest replacing one not yet written. Never raises: a failed
    write is returned by the next `maybe_save` (once, until a write succeeds again) and kept in
    `error` for the HUD; the show goes on. The first write of a session keeps the previous
    session's file as recovery.json.bak, so starting without --resume by mistake does not lose
    it at once; later writes skip the backup. Nothing is written while nothing has changed.
    """

    def __init__(self, path: str | os.PathLike | None = None, interval: float = 3.0) -> None:
        self.path = Path(path) if path is not None else recovery_path()
        remove_stale_temporaries(self.path.parent, names=(self.path.name,))
        self.interval = interval
        self.error: str | None = None
        self.writes = 0
        self._said: str | None = None  # the error last returned, so each is said once
        self._last_time = -math.inf
        self._last_text: str | None = None  # the text last written or handed over
        self._pending: str | None = None
        self._busy = False
        self._closed = False
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None

    def maybe_save(self, now: float, params: Params, routes: Iterable[Route],
                   extra: Mapping[str, Any] | None = None) -> str | None:
        """Hand the state to the writer if `interval` seconds have passed since the last try
        (`now` from any monotonic clock). `extra` goes into "state"; its "preset" entry names
        the file. Returns a write's error message the first time it is known."""
        if now - self._last_time >= self.interval:
            self._last_time = now
            try:
                text = self._format(params, routes, extra)
            except Exception as exc:  # noqa: BLE001 - the show must go on; the HUD says why
                self._fail(f"{self.path}: cannot save the recovery file ({exc})")
            else:
                with self._lock:
                    if text != self._last_text or self.error is not None:
                        self._last_text = self._pending = text
                        self._start()
                        self._lock.notify_all()
        return self._news()

    def save(self, params: Params, routes: Iterable[Route],
             extra: Mapping[str, Any] | None = None) -> str | None:
        """Save now, on this thread (at exit, in tests). Returns an error message the first
        time a write fails."""
        self.flush()
        try:
            text = self._format(params, routes, extra)
        except Exception as exc:  # noqa: BLE001
            self._fail(f"{self.path}: cannot save the recovery file ({exc})")
            return self._news()
        if text != self._last_text or self.error is not None:
            self._last_text = text
            self._write(text)
        return self._news()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until the state handed over is written (or failed); False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: self._pending is None and not self._busy,
                                       timeout)

    def close(self) -> None:
        """Write what is pending, then stop the writer thread."""
        self.flush()
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10.0)

    def _format(self, params: Params, routes: Iterable[Route],
                extra: Mapping[str, Any] | None) -> str:
        extra = dict(extra or {})
        name = str(extra.get("preset") or "recovery")
        preset = Preset(name, params.as_dict(), list(routes),
                        "the live state, saved while playing; --resume starts from it", extra)
        return format_preset(preset)

    def _write(self, text: str) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, text, backup=self.writes == 0)
        except Exception as exc:  # noqa: BLE001 - the show must go on; the HUD says why
            self._fail(str(exc) if isinstance(exc, FileProblem) else
                       f"{self.path}: cannot save the recovery file ({exc})")
            return
        self.writes += 1
        self.error = None
        self._said = None

    def _fail(self, message: str) -> None:
        self.error = message

    def _news(self) -> str | None:
        error = self.error
        if error is None or error == self._said:
            return None
        self._said = error
        return error

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="recovery-writer",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._pending is not None or self._closed)
                if self._pending is None:
                    return
                text, self._pending, self._busy = self._pending, None, True
            try:
                self._write(text)
            finally:
                with self._lock:
                    self._busy = False
                    self._lock.notify_all()


def load_recovery(path: str | os.PathLike | None = None) -> Preset:
    """The state `--resume` starts from.

    Raises PresetError when there is no recovery file. A file that is there but cannot be used
    (damaged, truncated, a FIFO, too deep, from a newer instrument...) raises RecoveryDamaged,
    a PresetError, after renaming it to PATH.damaged-YYYYmmdd-HHMMSS beside itself: a show
    restarted with --resume would otherwise trip on it again at every start. The caller prints
    the message (one line: the problem and where the file went) and starts without it.
    """
    path = Path(path) if path is not None else recovery_path()
    if not os.path.lexists(path):
        raise PresetError(f"{path}: no recovery file, so nothing to resume (the instrument "
                          "saves one every few seconds while it plays)")
    try:
        return load_preset(path)
    except PresetError as exc:
        aside, why = _set_aside(path)
        if aside is None:
            raise RecoveryDamaged(f"{exc}; could not set it aside ({why}): remove it", None) \
                from None
        raise RecoveryDamaged(f"{exc}; set aside as {aside}", aside) from None


def _set_aside(path: Path) -> tuple[Path | None, str]:
    """Rename `path` to PATH.damaged-<local time>[-N], never over an existing name; the link
    itself when it is a symbolic link. (new path, "") or (None, why not)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for number in range(1, 100):
        suffix = f".damaged-{stamp}" + (f"-{number}" if number > 1 else "")
        aside = path.with_name(path.name + suffix)
        if os.path.lexists(aside):
            continue
        try:
            os.rename(path, aside)
        except OSError as exc:
            return None, exc.strerror or str(exc)
        return aside, ""
    return None, "too many set-aside copies already"


# ---- helpers -----------------------------------------------------------------------------------

def _read_json(path: Path) -> Any:
    """The file's JSON (control.files.read_json: truncation, duplicates, .bak hint), or
    PresetError."""
    try:
        return read_json(path)
    except FileProblem as exc:
        raise PresetError(str(exc)) from None


def _preset_files(folder: Path) -> list[Path]:
    """The preset files in a folder, sorted: *.json except the MIDI mappings (midi.json,
    midi-*.json, which live beside the presets) and hidden files."""
    try:
        return sorted(path for path in folder.glob("*.json") if path.is_file()
                      and not path.name.startswith(".") and not _MAPPING_FILE.match(path.name))
    except OSError:
        return []


def _name_from_file(path: Path) -> str:
    """"1-calm-school.json" -> "calm-school"; "slot-3.json" -> "slot-3". A file name that is
    not UTF-8 (Python keeps its bytes as lone surrogates) shows them escaped, so printing the
    name can never fail."""
    match = _SLOT_FILE.match(path.name)
    name = match.group(2) if match else path.stem
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def _peek_name(path: Path) -> str:
    """A file's "name", without checking the rest. Never raises (listing names must not
    fail): a file that cannot be read, through the same safe reader as a recall, gives its
    file name."""
    try:
        data = read_json(path)
    except FileProblem:
        return _name_from_file(path)
    name = data.get("name") if isinstance(data, dict) else None
    if isinstance(name, str) and name.strip():
        return name.strip()
    return _name_from_file(path)


def _check_slot(slot: int) -> None:
    if isinstance(slot, bool) or not isinstance(slot, int) or slot not in SLOTS:
        raise PresetError(f"slot {slot!r}: slots are 1 to 9")


def _same(p: Param, a: Any, b: Any) -> bool:
    """Equal, allowing float rounding (a morph's last step, a value through JSON)."""
    if p.kind == "float":
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if p.kind == "color":
        return all(math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12) for x, y in zip(a, b))
    return a == b


def _route_counts(routes: Iterable[Route]) -> Counter:
    return Counter((r.source, r.param, round(r.amount, 9)) for r in routes)


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


def _did_you_mean(word: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.75)
    return f" (did you mean '{close[0]}'?)" if close else ""
