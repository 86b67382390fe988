"""Control tracks: a live set's inputs saved with their times, to render it again offline.

A control track is a JSON-lines file. The first line is a header, every other line one event:

    {"format": "swarm-control", "version": 1, "rate": 48000, "seed": 0, "count": 16384,
     "neighbors": "grid", "params": {...every parameter at the start...}, "routes": [...],
     "audio_file": "song.wav" or null}
    {"t": 0.016, "kind": "audio", "level": 0.41, "low": 0.3, "mid": 0.2, "high": 0.1,
     "onset": 0.0, "hit": false}
    {"t": 3.2, "kind": "param", "name": "max_speed", "value": 12.5}
    {"t": 9.0, "kind": "preset", "name": "calm.json", "params": {...}, "routes": [...]}
    {"t": 9.5, "kind": "midi", "data": [176, 70, 64]}
    {"t": 11.0, "kind": "action", "action": "respawn", "value": 100}
    {"t": 60.0, "kind": "end"}

`t` is seconds since the set's first frame; `rate` the live audio's sample rate (Hz). Audio
events carry the modulation sources (`AudioFeatures.sources()`), so a set played without
recording its sound can still be rendered.

Playback rules (the offline render, visual/offline.py):
- param and preset events apply at their times, in file order; so do the actions that set
  no parameter (respawn, separation_burst): a recalled preset's values are already in the
  param events, so recall_preset is only a log;
- audio events drive the swarm only when no song is given (`--render` without SONG): the
  latest event at or before a frame's time holds until the next; with a song, the song's own
  analysis drives it and audio events are ignored;
- midi events are a log of what came in: their effect is already in the param and action
  events, so they are not mapped again (a mapping changed since could not double-apply);
- a Standard MIDI File (`.mid`) loads as midi events only (`ControlTrack.load` reads it through
  mido); the render sends those through the MIDI mapping, knobs to parameters and notes to
  actions, as live MIDI would be.

Threads: `ControlRecorder`'s record methods run on the main thread (the frame loop) and only
put a dict on a queue; its own writer thread turns them into lines and writes the file, so a
slow disk never holds up a frame. `ControlTrack` is plain data for the main thread.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from control.actions import MAPPABLE
from control.files import FileProblem, read_bytes
from control.modulation import SOURCES, routes_from_json
from control.params import BY_NAME, ParamError, Params

FORMAT = "swarm-control"
VERSION = 1
KINDS = ("audio", "param", "preset", "midi", "action", "end")
AUDIO_KEYS = SOURCES  # what an audio event records: the modulation sources
ACTION_KINDS = MAPPABLE
TRACK_LIMIT = 1 << 30  # an hour's set at 60 fps is ~50 MB: a gigabyte is not a control track
FLUSH_SECONDS = 0.5  # the writer flushes at least this often, so a crash loses at most this


class ControlTrackError(FileProblem):
    """A control track (or MIDI file) that cannot be used: names the file, line and key."""


@dataclass(frozen=True)
class Event:
    """One timed event; `data` holds the kind's own fields (name/value, level/low/...)."""

    t: float
    kind: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)


def _number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(
        value)


# ----- recording ------------------------------------------------------------------------------

class ControlRecorder:
    """Records a live set's control events to a JSON-lines file without blocking the frame.

    The main thread calls `capture(show, t)` once a frame (audio features and every parameter
    that changed since the last frame, whatever changed it: MIDI, keys, a preset) and the
    `record_*` methods where MIDI messages, actions and preset recalls happen; each is a
    dict put on an unbounded queue. The writer thread formats and writes them and flushes
    every FLUSH_SECONDS. A write that fails is kept in `error` (say it once); recording stops
    and the show goes on. `close()` writes an end event and waits for the file.
    """

    def __init__(self, path: str | os.PathLike, *, params: Params, routes: Sequence[Any] = (),
                 seed: int = 0, neighbors: str = "grid", rate: float = 48000.0,
                 audio_file: str | None = None) -> None:
        self.path = Path(path)
        folder = self.path.resolve().parent
        if self.path.is_dir():
            raise ControlTrackError(f"{path}: is a folder; give a file name for the control "
                                    "track, e.g. set.jsonl")
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            raise ControlTrackError(f"{path}: cannot write into {folder} (the control track); "
                                    "choose a folder you can write to")
        try:
            # The writer thread owns the stream and closes it.
            self._stream = open(self.path, "w", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise ControlTrackError(f"{path}: cannot open the control track "
                                    f"({exc.strerror})") from None
        self.error: str | None = None
        self.events = 0
        self._last_t = 0.0
        self._params = _plain(params.as_dict())
        self._routes = [_route_json(r) for r in routes]
        header = {"format": FORMAT, "version": VERSION, "rate": float(rate), "seed": int(seed),
                  "count": int(params["count"]), "neighbors": neighbors,
                  "params": dict(self._params), "routes": list(self._routes),
                  "audio_file": str(audio_file) if audio_file else None}
        self._closed = False
        self._queue: queue.SimpleQueue[dict | None] = queue.SimpleQueue()
        self._queue.put(header)
        self._thread = threading.Thread(target=self._write_loop, name="control-recorder",
                                        daemon=True)
        self._thread.start()

    # -- main thread --------------------------------------------------------------------------
    def _put(self, t: float, kind: str, fields: dict[str, Any]) -> None:
        if self._closed:
            return
        self._last_t = max(self._last_t, float(t))
        self.events += 1
        # Microseconds, rounded down: an event never moves past the frame it happened in.
        self._queue.put({"t": math.floor(float(t) * 1e6) / 1e6, "kind": kind, **fields})

    def capture(self, show: Any, t: float) -> None:
        """Once a frame, after `show.update`: the audio features, the changed parameters and
        the routes when they changed (a preset recall or morph), whatever changed them."""
        self.record_audio(t, show.audio.features)
        self.record_params(t, show.params)
        self.record_routes(t, getattr(show, "routes", ()))

    def record_audio(self, t: float, features: Any) -> None:
        """An `AudioFeatures` (or anything with `sources()` and `onset`)."""
        sources = features.sources()
        fields = {key: round(float(sources.get(key, 0.0)), 5) for key in AUDIO_KEYS}
        fields["hit"] = bool(getattr(features, "onset", False))
        self._put(t, "audio", fields)

    def record_params(self, t: float, params: Params) -> None:
        """A param event for each parameter whose value differs from the last one recorded."""
        now = _plain(params.as_dict())
        for name, value in now.items():
            if self._params.get(name) != value:
                self._put(t, "param", {"name": name, "value": value})
        self._params = now

    def record_routes(self, t: float, routes: Sequence[Any]) -> None:
        """A preset event with no values when the modulation routes differ from the last
        recorded ones (playback sets the routes)."""
        now = [_route_json(r) for r in routes]
        if now != self._routes:
            self._routes = now
            self._put(t, "preset", {"name": "", "params": {}, "routes": now})

    def record_preset(self, t: float, name: str, params: Mapping[str, Any],
                      routes: Sequence[Any] = ()) -> None:
        """A preset recalled live: the values it set and its routes (self-contained, so the
        track renders without the preset file). Optional (`capture` records the same
        changes as param events), but it names the preset in the track."""
        values = _plain(dict(params))
        self._params.update(values)
        self._routes = [_route_json(r) for r in routes]
        self._put(t, "preset", {"name": str(name), "params": values, "routes": self._routes})

    def record_action(self, t: float, action: str, value: float | None = None) -> None:
        """A show action (control.actions.Action: respawn, separation_burst with its strength
        0..1, recall_preset with its slot); other kinds change nothing to render and are
        skipped (their effect is in the param events)."""
        if action not in ACTION_KINDS:
            return
        self._put(t, "action", {"action": str(action), "value": value})

    def close(self, end: float | None = None) -> None:
        """Write the end event (at `end`, the show's time after its last frame, so the track
        lasts as long as the set played; default: the last event's time), let the writer
        finish and close the file."""
        if self._closed:
            return
        self._put(max(self._last_t, end) if end is not None else self._last_t, "end", {})
        self._closed = True
        self._queue.put(None)
        self._thread.join(timeout=10.0)

    # -- writer thread ------------------------------------------------------------------------
    def _write_loop(self) -> None:
        last_flush = time.monotonic()
        stream = self._stream
        while True:
            try:
                item = self._queue.get(timeout=FLUSH_SECONDS)
            except queue.Empty:
                item = ...  # nothing new: only flush
            if item is None:
                break
            if stream is None:
                continue  # a write failed: drain and drop until closed
            try:
                if item is not ...:
                    stream.write(json.dumps(item, separators=(",", ":")) + "\n")
                if time.monotonic() - last_flush >= FLUSH_SECONDS:
                    stream.flush()
                    last_flush = time.monotonic()
            except (OSError, ValueError) as exc:
                self.error = f"control track stopped: {self.path}: {exc}"
                stream = None
        try:
            if stream is not None:
                stream.flush()
            self._stream.close()
        except OSError as exc:
            self.error = self.error or f"control track: {self.path}: {exc}"


def _plain(values: Mapping[str, Any]) -> dict[str, Any]:
    """Parameter values as JSON has them (colours as lists), so comparisons match a loaded
    file's."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in values.items()}


def _route_json(route: Any) -> dict[str, Any]:
    return route.to_dict() if hasattr(route, "to_dict") else dict(route)


# ----- playback -------------------------------------------------------------------------------

@dataclass
class ControlTrack:
    """A loaded control track: the header and its events sorted by time (stable)."""

    path: Path
    events: list[Event]
    header: dict[str, Any] = field(default_factory=dict)
    from_midi_file: bool = False

    def __post_init__(self) -> None:
        self.events.sort(key=lambda e: e.t)
        self._times = [e.t for e in self.events]
        self._audio = [e for e in self.events if e.kind == "audio"]
        self._audio_times = [e.t for e in self._audio]

    @classmethod
    def load(cls, path: str | os.PathLike) -> ControlTrack:
        """Read a control track (.jsonl) or a Standard MIDI File (.mid); every problem is a
        ControlTrackError naming the file, the line and the key."""
        path = Path(path)
        from control.midi_file import MIDI_SUFFIXES, load_midi_file  # it builds our Events

        if path.suffix.lower() in MIDI_SUFFIXES:
            return cls(path, load_midi_file(path), {}, from_midi_file=True)
        try:  # a regular file under a size cap: a FIFO or /dev/zero is refused, not waited on
            raw = read_bytes(path, TRACK_LIMIT, "control track")
        except FileProblem as exc:
            raise ControlTrackError(str(exc)) from None
        if raw[:4] == b"MThd":
            return cls(path, load_midi_file(path), {}, from_midi_file=True)
        try:
            lines = raw.decode("utf-8").splitlines()
        except UnicodeDecodeError:
            raise ControlTrackError(f"{path}: not a control track (not text); record one with "
                                    "--record-control, or give a .mid file") from None
        header: dict[str, Any] | None = None
        events: list[Event] = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ControlTrackError(f"{where}: not valid JSON ({exc.msg}, column "
                                        f"{exc.colno})") from None
            if header is None:
                header = _check_header(item, where)
                continue
            events.append(_check_event(item, where))
        if header is None:
            raise ControlTrackError(f"{path}: empty; a control track starts with a "
                                    f"{{\"format\": \"{FORMAT}\", ...}} line")
        return cls(path, events, header)

    # -- the header ----------------------------------------------------------------------------
    @property
    def start_params(self) -> dict[str, Any]:
        return dict(self.header.get("params") or {})

    @property
    def routes(self) -> list[Any]:

        return routes_from_json(self.header.get("routes") or [])

    @property
    def has_audio(self) -> bool:
        return bool(self._audio)

    @property
    def duration(self) -> float:
        """The end event's time, else the last event's (0 for an empty track)."""
        ends = [e.t for e in self.events if e.kind == "end"]
        if ends:
            return max(ends)
        return self._times[-1] if self._times else 0.0

    # -- queries -------------------------------------------------------------------------------
    def events_between(self, t0: float, t1: float) -> list[Event]:
        """Events with t0 < t <= t1, in order: call with each frame's previous and own time
        (t0 = -inf for the first frame) and every event is handed out exactly once."""
        lo = bisect.bisect_right(self._times, t0)
        hi = bisect.bisect_right(self._times, t1)
        return self.events[lo:hi]

    def values_at(self, t: float) -> dict[str, Any]:
        """Every parameter set by the header and the param / preset events up to time t (the
        values in effect then), for seeking and checks."""
        values = self.start_params
        for event in self.events_between(-math.inf, t):
            if event.kind == "param":
                values[event.get("name")] = event.get("value")
            elif event.kind == "preset":
                values.update(event.get("params") or {})
        return values

    def audio_at(self, t: float) -> Event | None:
        """The latest audio event at or before t (sample and hold), or None before the first."""
        index = bisect.bisect_right(self._audio_times, t)
        return self._audio[index - 1] if index else None

    def midi_messages(self) -> list[tuple[float, bytes]]:
        return [(e.t, bytes(e.get("data"))) for e in self.events if e.kind == "midi"]


def _check_header(item: Any, where: str) -> dict[str, Any]:
    if not isinstance(item, dict) or item.get("format") != FORMAT:
        raise ControlTrackError(f"{where}: not a control track (the first line must be "
                                f"{{\"format\": \"{FORMAT}\", \"version\": {VERSION}, ...}}); "
                                "record one with --record-control")
    version = item.get("version")
    if version != VERSION:
        raise ControlTrackError(f"{where}: version {version!r} is not supported (this "
                                f"instrument reads version {VERSION}); update the instrument")
    params = item.get("params", {})
    if not isinstance(params, dict):
        raise ControlTrackError(f"{where}: \"params\" must be an object of parameter values")
    try:
        Params().update(params, where=f"{where}: params")
    except ParamError as exc:
        raise ControlTrackError(str(exc)) from None

    try:
        routes_from_json(item.get("routes", []), where=f"{where}: routes")
    except ParamError as exc:
        raise ControlTrackError(str(exc)) from None
    for key in ("seed", "count"):
        if key in item and (isinstance(item[key], bool) or not isinstance(item[key], int)):
            raise ControlTrackError(f"{where}: \"{key}\" must be a whole number")
    return item


def _check_event(item: Any, where: str) -> Event:
    """One event line, validated so a bad value is named here, not in the middle of a render."""
    if not isinstance(item, dict):
        raise ControlTrackError(f"{where}: an event is an object with \"t\" and \"kind\"")
    t, kind = item.get("t"), item.get("kind")
    if not _number(t) or t < 0:
        raise ControlTrackError(f"{where}: \"t\" must be seconds >= 0, got {t!r}")
    if kind not in KINDS:
        raise ControlTrackError(f"{where}: \"kind\" must be one of {', '.join(KINDS)}, "
                                f"got {kind!r}")
    data = {k: v for k, v in item.items() if k not in ("t", "kind")}
    if kind == "audio":
        for key in AUDIO_KEYS:
            value = data.get(key, 0.0)
            if not _number(value) or not 0.0 <= value <= 1.0:
                raise ControlTrackError(f"{where}: audio \"{key}\" must be 0..1, got {value!r}")
    elif kind == "param":
        name = data.get("name")
        if name not in BY_NAME:
            raise ControlTrackError(f"{where}: unknown parameter {name!r}")
        try:
            data["value"] = BY_NAME[name].validate(data.get("value"), where)
        except ParamError as exc:
            raise ControlTrackError(str(exc)) from None
    elif kind == "preset":
        values = data.get("params", {})
        if not isinstance(values, dict):
            raise ControlTrackError(f"{where}: preset \"params\" must be an object")
        try:
            Params().update(values, where=f"{where}: preset params")

            routes_from_json(data.get("routes", []), where=f"{where}: preset routes")
        except ParamError as exc:
            raise ControlTrackError(str(exc)) from None
    elif kind == "midi":
        message = data.get("data")
        if not isinstance(message, list) or not message or not all(
                isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255
                for b in message):
            raise ControlTrackError(f"{where}: midi \"data\" must be a list of bytes 0-255, "
                                    f"got {message!r}")
    elif kind == "action":
        if data.get("action") not in ACTION_KINDS:
            raise ControlTrackError(f"{where}: \"action\" must be one of "
                                    f"{', '.join(ACTION_KINDS)}, got {data.get('action')!r}")
        value = data.get("value")
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value < 0):
            raise ControlTrackError(f"{where}: action \"value\" must be a number from 0 or null")
    return Event(float(t), kind, data)


# ----- MIDI files -----------------------------------------------------------------------------


def open_recorder(args: Any, params: Params, routes: Sequence[Any], audio: Any = None
                  ) -> ControlRecorder | None:
    """The recorder `--record-control PATH` asks for (None without it), with the set's
    starting parameters, routes, seed, neighbour mode and audio rate in its header. Call it
    after the show is built (the count is final) and before the first frame."""
    path = getattr(args, "record_control", None)
    if not path:
        return None
    seed = getattr(args, "seed", None) or 0
    return ControlRecorder(path, params=params, routes=routes, seed=seed,
                           neighbors=getattr(args, "neighbors", "grid"),
                           rate=float(getattr(audio, "rate", 48000.0) or 48000.0),
                           audio_file=getattr(args, "audio_file", None))
