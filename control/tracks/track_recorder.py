"""Recording a live set as a control track (--record-control): the audio features, parameter and
preset changes and actions with their times, and each frame's clock, one JSON object a line,
written on a thread of its own so the frame never waits on the disk (flushed at least every
FLUSH_SECONDS)."""

from __future__ import annotations

import json
import math
import os
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.control.tracks.control_track import (
    ACTION_KINDS,
    AUDIO_KEYS,
    FORMAT,
    PHASED,
    VERSION,
)
from swarm_instrument.control.tracks.track_events import ControlTrackError

FLUSH_SECONDS = 0.5  # the writer flushes at least this often, so a crash loses at most this


class ControlRecorder:
    """Records a live set's control events to a JSON-lines file without blocking the frame.

    The main thread calls `capture(show, t)` once a frame (audio features and every parameter
    that changed since the last frame, whatever changed it: MIDI, keys, a preset) and the
    `record_*` methods where MIDI messages, actions and preset recalls happen; the loop
    (show/loop.py) calls `begin_frame`, `latching` and `end_frame` around each frame, so the
    track holds each frame's clock and says where each input came in (between frames, at the
    update or at the late read: its `came`); each is a dict put on an unbounded queue. The
    writer thread formats and writes them and flushes every FLUSH_SECONDS. A write that fails
    is kept in `error` (say it once); recording stops and the show goes on. `close()` writes
    an end event and waits for the file.
    """

    def __init__(self, path: str | os.PathLike, *, params: Params, routes: Sequence[Any] = (),
                 seed: int = 0, neighbors: str = "grid", rate: float = 48000.0,
                 audio_file: str | None = None, audio_samples: int | None = None,
                 count_limit: int | None = None) -> None:
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
        # Where the events now recorded came in: None (the frame's update, or no frames told),
        # "advance" (the swarm's steps: a count capped), "late" (the late read, show/show.py
        # latch) or "between" (after a frame's draw: a key, the pointer, the window's scroll).
        self._phase: str | None = None
        self._tick: tuple[float, float, int] = (0.0, 0.0, 1)
        self._size: list[int] | None = None
        self._values: Any = None  # the frame's values as the late read began
        self._params = _plain(params.as_dict())
        self._routes = [_route_json(r) for r in routes]
        header = {"format": FORMAT, "version": VERSION, "rate": float(rate), "seed": int(seed),
                  "count": int(params["count"]), "neighbors": neighbors,
                  "params": dict(self._params), "routes": list(self._routes),
                  "audio_file": str(audio_file) if audio_file else None}
        if audio_file and audio_samples is not None:
            header["audio_samples"] = int(audio_samples)  # the file's length: the same file?
        if count_limit is not None:  # the most agents this machine held live (a cap)
            header["count_limit"] = int(count_limit)
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
        event = {"t": math.floor(float(t) * 1e6) / 1e6, "kind": kind, **fields}
        if self._phase is not None and kind in PHASED:
            event["came"] = self._phase
        self._queue.put(event)

    # -- the loop's frame (show/loop.py) ----------------------------------------------------
    def begin_frame(self, show: Any, tick: Any) -> None:
        """A frame begins (`tick`: its `now`, `dt` and `steps`): the parameters and routes
        changed since the last frame ended (a key, a nudge) are recorded as come between."""
        self.record_params(show.show_time, show.params)
        self.record_routes(show.show_time, getattr(show, "routes", ()))
        self._tick = (float(tick.now), float(tick.dt), int(tick.steps))
        self._phase = None

    def latching(self, show: Any) -> None:
        """The frame's late read of its inputs begins (show/show.py latch): what the swarm's
        steps changed first (a count capped: the show's own doing, said as such)."""
        self._phase = "advance"
        self.record_params(show.show_time, show.params)
        self.record_routes(show.show_time, getattr(show, "routes", ()))
        self._phase = "late"
        self._values = getattr(show, "values", None)

    def end_frame(self, show: Any) -> None:
        """The frame is drawn: what the late read changed, then a frame event with the
        frame's clock (`now`, `dt`, `steps`, `late`: the late read's time), the governor's
        lowered levers and the frame's size when it changed, so a render can play the set's
        own frames again (show/offline/replay.py)."""
        self.record_params(show.show_time, show.params)
        self.record_routes(show.show_time, getattr(show, "routes", ()))
        now, dt, steps = self._tick
        fields: dict[str, Any] = {"now": now, "dt": dt, "steps": steps,
                                  "late": float(show.now)}
        if getattr(show, "values", None) is not self._values:  # made again: something came
            fields["latched"] = True
        governor = getattr(show, "governor", None)
        lowered = {lever: int(level) for lever, level in getattr(governor, "level", {}).items()
                   if level}
        if lowered:
            fields["governor"] = lowered
        size = getattr(getattr(show, "renderer", None), "last_size", None)
        if size is not None and list(size) != self._size:
            self._size = fields["size"] = [int(size[0]), int(size[1])]
        self._put(show.show_time, "frame", fields)
        self._phase = "between"

    def capture(self, show: Any, t: float) -> None:
        """Once a frame, after `show.update`: the audio features, the changed parameters and
        the routes when they changed (a preset recall or morph), whatever changed them."""
        ring = getattr(show.audio, "ring", None)
        self.record_audio(t, show.audio.features, getattr(ring, "written", None))
        self.record_params(t, show.params)
        self.record_routes(t, getattr(show, "routes", ()))

    def record_audio(self, t: float, features: Any, heard: int | None = None) -> None:
        """An `AudioFeatures` (or anything with `sources()` and `onset`); `heard`: the samples
        the source had played by then (a sound file's: a replay plays it to the same one)."""
        sources = features.sources()
        fields: dict[str, Any] = {key: round(float(sources.get(key, 0.0)), 5)
                                  for key in AUDIO_KEYS}
        fields["hit"] = bool(getattr(features, "onset", False))
        if heard is not None:
            fields["heard"] = int(heard)
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

    def record_action(self, t: float, action: str, value: float | None = None,
                      values: Mapping[str, Any] | None = None) -> None:
        """A show action (control.actions.Action: respawn, separation_burst with its strength
        0..1, recall_preset with its slot, pause, lure with its `point` in `values`) or the
        window's zoom (`value`: the factor); other kinds change nothing to render and are
        skipped (their effect is in the param events)."""
        if action not in ACTION_KINDS:
            return
        fields: dict[str, Any] = {"action": str(action), "value": value}
        if action == "lure":
            fields["point"] = [float(v) for v in (values or {}).get("point", ())]
        self._put(t, "action", fields)

    def record_autopilot(self, t: float, section: str, look: str) -> None:
        """A change the autopilot made: the section it follows and the look it chose (the
        look's values follow as preset and param events)."""
        self._put(t, "autopilot", {"section": str(section), "look": str(look)})

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


def open_recorder(args: Any, params: Params, routes: Sequence[Any], audio: Any = None,
                  count_limit: int | None = None) -> ControlRecorder | None:
    """The recorder `--record-control PATH` asks for (None without it), with the set's
    starting parameters, routes, seed, neighbour mode, audio rate and the machine's live count
    limit in its header. Call it after the show is built (the count is final) and before the
    first frame."""
    path = getattr(args, "record_control", None)
    if not path:
        return None
    seed = getattr(args, "seed", None) or 0
    rate = float(getattr(audio, "rate", 48000.0) or 48000.0)
    duration = getattr(audio, "duration", None)  # a sound file's (--audio-file)
    return ControlRecorder(path, params=params, routes=routes, seed=seed,
                           neighbors=getattr(args, "neighbors", "grid"), rate=rate,
                           audio_file=getattr(args, "audio_file", None),
                           audio_samples=None if duration is None else round(duration * rate),
                           count_limit=count_limit)
