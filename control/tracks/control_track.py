"""Control tracks: a live set's inputs saved with their times, to render it again offline.

A control track is a JSON-lines file. The first line is a header, every other line one event:

    {"format": "swarm-control", "version": 1, "rate": 48000, "seed": 0, "count": 16384,
     "neighbors": "grid", "params": {...every parameter at the start...}, "routes": [...],
     "audio_file": "song.wav" or null}
    {"t": 0.016, "kind": "audio", "level": 0.41, "low": 0.3, "mid": 0.2, "high": 0.1,
     "onset": 0.0, "hit": false, "heard": 768}
    {"t": 0.016, "kind": "frame", "now": 5021.25, "dt": 0.016, "steps": 1, "late": 5021.26,
     "size": [1920, 1080], "governor": {"render_scale": 1}}
    {"t": 3.2, "kind": "param", "name": "max_speed", "value": 12.5}
    {"t": 9.0, "kind": "preset", "name": "calm.json", "params": {...}, "routes": [...]}
    {"t": 9.5, "kind": "midi", "data": [176, 70, 64]}
    {"t": 11.0, "kind": "action", "action": "respawn", "value": 100, "came": "between"}
    {"t": 12.0, "kind": "action", "action": "lure", "value": null, "point": [1.0, 2.0, 0.0]}
    {"t": 15.0, "kind": "autopilot", "section": "drop", "look": "lure-rush"}
    {"t": 60.0, "kind": "end"}

`t` is seconds of the show's time (its frames' steps added up since the first frame); `rate`
the live audio's sample rate (Hz). Audio events carry the modulation sources
(`AudioFeatures.sources()`), so a set played without recording its sound can still be
rendered, and `heard`, the samples a sound file (`--audio-file`) had played by then.

A frame event closes each frame the set drew (control/tracks/track_frames.py reads them):
its clock as the loop gave it (`now`, `dt`, `steps`: show/loop.py's Tick, `now` in the loop's
own clock, perf_counter's; `late`: the time of its late read of the inputs, and `latched`
when that read made the frame's values again), the governor's lowered levers, and its size
in pixels when it changed. The events before it, since the frame
before, are that frame's: `came` says where an input came in, "between" (after the frame
before was drawn: a key, the pointer, the scroll wheel), "advance" (the show's own change as
the swarm stepped: a count capped to what the machine holds live, `count_limit` in the
header; a replay makes it again itself) or "late" (the late read just before the draw);
without `came`, at the frame's update.

Playback rules (the offline render, show/offline/):
- a set with frame events, rendered with its sound file (`--render SONG --control TRACK`),
  plays its own frames again (show/offline/replay.py): each frame at its recorded clock, the
  file played to its recorded `heard`, every event applied where it came in; an autopilot's
  changes are its events, not decided again;
- otherwise (`--retime`, no SONG, a track without frames) the frames are the video's:
  param and preset events apply at their times, in file order; so do the actions that set
  no parameter (respawn, separation_burst, pause, lure, zoom, tap, downbeat): a recalled
  preset's values are already in the param events, so recall_preset is only a log;
- audio events drive the swarm only when no song is given (`--render` without SONG): the
  latest event at or before a frame's time holds until the next; with a song, the song's own
  analysis drives it and audio events are ignored;
- autopilot events are a log of what the autopilot chose (the section and the look): the
  look's values are in the preset and param events beside them;
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swarm_instrument.control.actions import MAPPABLE
from swarm_instrument.control.looks.files import FileProblem, read_bytes
from swarm_instrument.control.parameters.modulation import SOURCES, routes_from_json
from swarm_instrument.control.parameters.registry import BY_NAME, ParamError, Params
from swarm_instrument.control.tracks.midi_track import MIDI_SUFFIXES, load_midi_file
from swarm_instrument.control.tracks.track_events import ControlTrackError, Event
from swarm_instrument.control.tracks.track_frames import RecordedFrame, recorded_frames

FORMAT = "swarm-control"
VERSION = 1
KINDS = ("audio", "param", "preset", "midi", "action", "autopilot", "frame", "end")
PHASED = ("param", "preset", "midi", "action", "autopilot")  # the kinds that may say `came`
PHASES = ("between", "advance", "late")  # where a change came in, other than at the update
SECTIONS = ("intro", "groove", "build", "drop", "break", "outro")  # the autopilot's labels
AUDIO_KEYS = SOURCES  # what an audio event records: the modulation sources
ACTION_KINDS = MAPPABLE + ("pause", "lure", "zoom")  # zoom: the window's scroll wheel
LEVERS = ("render_scale", "post", "count", "neighbors")  # the governor's (show/governor.py)
MAX_SIDE = 16384  # pixels: a frame's side
TRACK_LIMIT = 1 << 30  # an hour at 60 fps is ~75 MB (audio and frame events): a GB is no track


def _number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(
        value)


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
        self._frames: list[RecordedFrame] | None = None

    @classmethod
    def load(cls, path: str | os.PathLike) -> ControlTrack:
        """Read a control track (.jsonl) or a Standard MIDI File (.mid); every problem is a
        ControlTrackError naming the file, the line and the key."""
        path = Path(path)

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
    def frames(self) -> list[RecordedFrame]:
        """The frames the set drew, with their clocks and events (empty for a track recorded
        before frames were, or written by hand)."""
        if self._frames is None:
            self._frames = recorded_frames(self.events)
        return self._frames

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
    for key in ("seed", "count", "audio_samples", "count_limit"):
        if key in item and (isinstance(item[key], bool) or not isinstance(item[key], int)):
            raise ControlTrackError(f"{where}: \"{key}\" must be a whole number")
    if "rate" in item and not (_number(item["rate"]) and item["rate"] > 0):
        raise ControlTrackError(f"{where}: \"rate\" must be the audio's sample rate in Hz, got "
                                f"{item['rate']!r}")
    if item.get("audio_file") is not None and not isinstance(item["audio_file"], str):
        raise ControlTrackError(f"{where}: \"audio_file\" must be the sound file's name or "
                                "null")
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
    if "came" in data and (kind not in PHASED or data["came"] not in PHASES):
        raise ControlTrackError(f"{where}: \"came\" must be one of {', '.join(PHASES)} (on "
                                f"{', '.join(PHASED)} events), got {data['came']!r}")
    if kind == "audio":
        for key in AUDIO_KEYS:
            value = data.get(key, 0.0)
            if not _number(value) or not 0.0 <= value <= 1.0:
                raise ControlTrackError(f"{where}: audio \"{key}\" must be 0..1, got {value!r}")
        if "heard" in data and not _whole(data["heard"], 0):
            raise ControlTrackError(f"{where}: audio \"heard\" must be a count of samples, got "
                                    f"{data['heard']!r}")
    elif kind == "frame":
        _check_frame(data, where)
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
    elif kind == "autopilot":
        if data.get("section") not in SECTIONS:
            raise ControlTrackError(f"{where}: autopilot \"section\" must be one of "
                                    f"{', '.join(SECTIONS)}, got {data.get('section')!r}")
        if not isinstance(data.get("look"), str) or not data["look"].strip():
            raise ControlTrackError(f"{where}: autopilot \"look\" must be a look's name, got "
                                    f"{data.get('look')!r}")
    elif kind == "action":
        if data.get("action") not in ACTION_KINDS:
            raise ControlTrackError(f"{where}: \"action\" must be one of "
                                    f"{', '.join(ACTION_KINDS)}, got {data.get('action')!r}")
        value = data.get("value")
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value < 0):
            raise ControlTrackError(f"{where}: action \"value\" must be a number from 0 or null")
        point = data.get("point")
        if data["action"] == "lure" and not (isinstance(point, list) and len(point) == 3
                                             and all(_number(v) for v in point)):
            raise ControlTrackError(f"{where}: lure \"point\" must be [x, y, z], got {point!r}")
        if data["action"] == "zoom" and not (_number(value) and value > 0):
            raise ControlTrackError(f"{where}: zoom \"value\" must be a factor above 0, got "
                                    f"{value!r}")
    return Event(float(t), kind, data)


def _whole(value: Any, low: int, high: int | None = None) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool) and value >= low
            and (high is None or value <= high))


def _check_frame(data: dict[str, Any], where: str) -> None:
    """A frame event's clock, governor and size (see the module's comment)."""
    for key in ("now", "late"):
        if not _number(data.get(key)):
            raise ControlTrackError(f"{where}: frame \"{key}\" must be a time in seconds, got "
                                    f"{data.get(key)!r}")
    if not _number(data.get("dt")) or data["dt"] < 0:
        raise ControlTrackError(f"{where}: frame \"dt\" must be seconds >= 0, got "
                                f"{data.get('dt')!r}")
    if not _whole(data.get("steps"), 1, 1000):
        raise ControlTrackError(f"{where}: frame \"steps\" must be a whole number from 1, got "
                                f"{data.get('steps')!r}")
    governor = data.get("governor", {})
    if not isinstance(governor, dict) or not all(
            lever in LEVERS and _whole(level, 0, 16) for lever, level in governor.items()):
        raise ControlTrackError(f"{where}: frame \"governor\" must map {', '.join(LEVERS)} to "
                                f"levels 0-16, got {governor!r}")
    if not isinstance(data.get("latched", False), bool):
        raise ControlTrackError(f"{where}: frame \"latched\" must be true or false, got "
                                f"{data['latched']!r}")
    size = data.get("size")
    if size is not None and not (isinstance(size, list) and len(size) == 2
                                 and all(_whole(side, 1, MAX_SIDE) for side in size)):
        raise ControlTrackError(f"{where}: frame \"size\" must be [width, height] in pixels, "
                                f"got {size!r}")
