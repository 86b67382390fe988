"""A recorded set drawn again frame for frame: `--render SONG --control set.jsonl`, where the
track holds the set's frames (control/tracks/track_frames.py) and SONG is the file it played.

Each frame runs at its recorded clock (`ReplayClock`: now, dt, steps and the late read's time,
as show/loop.py's WallClock gave them live); the sound file plays muted, each frame to the
sample the set had played by then (`ReplayedFile`); the governor's levers are where they were;
and every recorded input comes in where it came in live: what came between frames before the
frame's update, the rest through `ReplayInput`, a control surface the show reads at its update
and at its late read, as it read the performer's. Parameters and routes are set as they were
(by a knob, a morph, a crossfade or the autopilot: the track holds their values), actions
carried out as they were (a respawn, a burst, a tap at its recorded time, a pause, the lure,
the zoom). The autopilot decides nothing again: its looks are those events, and
`RecordedAutopilot` only tells telemetry what it chose. With a show as reproducible as the
live one was (--record-control makes it so, show/cli/options.py), the frames are the set's
own, bit for bit.

The video (`--fps`) is a screen recording of the set: its frame i shows, at i / fps from the
set's first frame, the latest frame the set had drawn by then (`video_slots`).

`apply_recorded` applies one event; a render on the video's own clock (`--retime`, a track
without frames: show/offline/offline_render.py) uses it too. Main thread only.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swarm_instrument.audio.files.playback import AudioFile
from swarm_instrument.control.actions import Action
from swarm_instrument.control.parameters.modulation import routes_from_json
from swarm_instrument.control.tracks.track_frames import RecordedFrame
from swarm_instrument.show.loop import Tick

log = logging.getLogger(__name__)
# Actions that only a log keeps: their effect is in the param events beside them.
LOGGED = ("recall_preset", "tempo_half", "tempo_double")


def apply_recorded(show: Any, event: Any, *, live_clock: bool = True) -> Action | None:
    """Carry out one recorded event on `show` as the set did. A param event comes back as a
    "set" action for the caller to hand the show (gathered, so one read carries them as the
    live read did); everything else is done here. `live_clock`: the show runs on the set's
    own clock (a replay), so a tap lands at its recorded time; on a song's clock it lands at
    the event's time. A burst recorded before strengths were 0..1 holds the note's velocity
    1-127."""
    kind = event.kind
    if kind == "param":
        return Action("set", values={event.get("name"): event.get("value")})
    if kind == "preset":
        show.params.update(event.get("params") or {})
        show.looks.routes = routes_from_json(event.get("routes") or [])
    elif kind == "autopilot":
        played = getattr(show.autopilot, "played", None)
        if played is not None:
            played(event)
    elif kind == "action":
        action, value = event.get("action"), event.get("value")
        if action == "zoom":
            show.camera.zoom(float(value))
        elif action == "tap":
            show.carry_out(Action("tap", value if live_clock and value is not None else event.t))
        elif action == "separation_burst":
            strength = 1.0 if value is None else value / 127.0 if value > 1 else float(value)
            show.carry_out(Action("separation_burst", strength))
        elif action == "lure":
            show.carry_out(Action("lure", values={"point": tuple(event.get("point"))}))
        elif action == "autopilot" and not hasattr(show.autopilot, "switch"):
            pass  # no autopilot here to tell
        elif action not in LOGGED:  # respawn, downbeat, pause, autopilot
            show.carry_out(Action(action, value))
    return None


def apply_all(show: Any, events: Sequence[Any], *, live_clock: bool = True) -> Action | None:
    """`apply_recorded` for each of `events` in order; their param events as one "set"."""
    values: dict[str, Any] = {}
    for event in events:
        if values and event.kind in ("preset", "action"):  # what was set before it, first
            show.carry_out(Action("set", values=values))
            values = {}
        action = apply_recorded(show, event, live_clock=live_clock)
        if action is not None:
            values.update(action.values)
    return Action("set", values=values) if values else None


class ReplayedFile(AudioFile):
    """--audio-file as the set heard it: the file played muted, each frame up to the sample
    the set had played by that frame's update (`heard`: live, the clock or the sound card's
    callback decided it). Without a recorded count it plays by the clock, as live."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path, mute=True)
        self.take_messages()  # "playing muted": no news in a render
        self.heard: int | None = None  # this frame's, set before its update

    def _advance_by_clock(self, now: float) -> None:
        if self.heard is None:
            super()._advance_by_clock(now)
            return
        ring = self.ring
        while ring.written < self.heard and not self._ended:
            step = min(self.heard - ring.written, ring.max_block)
            if self._take(step, None) < step:
                break


class RecordedAutopilot:
    """The autopilot of a replayed set: what it chose and when (telemetry, the HUD); it
    chooses nothing (the looks are the track's param and preset events)."""

    def __init__(self) -> None:
        self.on = True
        self.section: str | None = None
        self.look: str | None = None
        self.changed_at: float | None = None

    def update(self, show: Any, now: float) -> None:
        """Nothing to decide: the track's events play the looks."""

    def played(self, event: Any) -> None:
        self.section, self.look, self.changed_at = event.get("section"), event.get("look"), \
            event.t

    def switch(self, action: Action, now: float) -> None:
        self.on = (not self.on) if action.value is None else bool(action.value)

    def telemetry(self, now: float) -> dict[str, Any]:
        return {"on": self.on, "section": self.section, "look": self.look,
                "changed_at": self.changed_at, "control": "autopilot" if self.on else "off",
                "recorded": True}


class ReplayInput:
    """The set's recorded inputs as a control surface (show/inputs/input_poll.py reads it with
    the others): its first read in a frame is the update's, its second the late read's.
    `start(frame)` carries out what came between frames, before the frame's update."""

    def __init__(self, show: Any, name: str) -> None:
        self.show = show
        self.name = name
        self.frame: RecordedFrame | None = None
        self.frames = 0
        self._reads = 0

    def start(self, frame: RecordedFrame) -> None:
        self.frame, self._reads = frame, 0
        self.frames += 1
        action = apply_all(self.show, frame.between)
        if action is not None:
            self.show.act(action)

    def poll(self, values: dict[str, Any]) -> list[Action]:
        frame, read = self.frame, self._reads
        self._reads += 1
        if frame is None or read > 1:
            return []
        action = apply_all(self.show, frame.update if read == 0 else frame.late_events)
        if read == 1 and frame.latched and action is None:
            # The live late read made the frame's values again (something came: a selection,
            # a value that changed nothing): an empty set has the show do the same.
            action = Action("set", values={})
        return [action] if action is not None else []

    def publish(self, show: Any, now: float) -> None:
        """Nothing to show: no one is looking at a track."""

    def state(self) -> dict[str, Any]:
        return {"replay": self.name, "frames": self.frames}

    def close(self) -> None:
        self.frame = None


class ReplayClock:
    """The set's own frame times, as its loop's clock gave them."""

    def __init__(self, frames: Sequence[RecordedFrame]) -> None:
        self.frames = frames
        self.index = -1

    @property
    def frame(self) -> RecordedFrame:
        return self.frames[self.index]

    def next(self) -> Tick:
        self.index += 1
        frame = self.frames[self.index]
        return Tick(frame.now, frame.dt, frame.steps)

    def late(self, tick: Tick) -> float:
        return self.frames[self.index].late


def video_slots(frames: Sequence[RecordedFrame], fps: float, limit: int | None = None
                ) -> list[range]:
    """For each recorded frame, the video frames that show it: video frame i (at i / fps from
    the first frame's time) shows the latest frame drawn by then; the last frame is shown
    once at least. `limit`: at most that many video frames (the frames past it are left
    out, and so are the recorded frames none of them shows)."""
    if not frames:
        return []
    origin = frames[0].now
    starts = [math.ceil((frame.now - origin) * fps - 1e-6) for frame in frames]
    ends = starts[1:] + [starts[-1] + 1]
    slots = [range(start, max(start, end)) for start, end in zip(starts, ends)]
    if limit is not None:
        slots = [range(s.start, min(s.stop, limit)) for s in slots if s.start < limit]
    return slots


@dataclass
class Replay:
    """A recorded set's frames to draw, and which video frames show each."""

    frames: list[RecordedFrame]
    slots: list[range]
    name: str
    count_limit: int | None = None  # the most agents the set's machine held live
    input: ReplayInput | None = None

    @classmethod
    def plan(cls, track: Any, fps: float, limit: int | None = None) -> Replay:
        """The frames of `track` (a ControlTrack) that the video's first `limit` frames show,
        at `fps`."""
        slots = video_slots(track.frames, fps, limit)
        return cls(list(track.frames[:len(slots)]), slots, track.path.name,
                   track.header.get("count_limit"))

    @property
    def video_frames(self) -> int:
        return self.slots[-1].stop if self.slots else 0

    def time_of(self, index: int) -> float:
        """Seconds from the set's first frame to frame `index`."""
        return self.frames[index].now - self.frames[0].now

    def attach(self, show: Any) -> ReplayClock:
        """Make `show` play the set: its recorded autopilot, its inputs, its machine's count
        limit (a count asked beyond it was capped live); the clock to run."""
        show.options.count_limit = self.count_limit
        show.autopilot = RecordedAutopilot()
        self.input = ReplayInput(show, self.name)
        show.surfaces.append(self.input)
        return ReplayClock(self.frames)

    def before(self, show: Any, clock: ReplayClock) -> None:
        """Before each frame's update: the file's count, the governor's levers, what came
        between frames."""
        frame = clock.frame
        if isinstance(show.audio, ReplayedFile):
            show.audio.heard = frame.heard
        show.governor.level.update(dict.fromkeys(show.governor.level, 0) | frame.governor)
        assert self.input is not None
        self.input.start(frame)
