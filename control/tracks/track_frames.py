"""A recorded set's frames: for each frame the set drew (a frame event of a control track,
control/tracks/control_track.py), its clock and the events that came in with it, split by where
they came in, so a render can draw the frames again as they were played
(show/offline/replay.py). Plain data, any thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from swarm_instrument.control.tracks.track_events import Event


@dataclass
class RecordedFrame:
    """One frame of a live set, as the loop played it (show/loop.py)."""

    now: float  # the update's time, in the loop's clock
    dt: float  # each simulation step
    steps: int
    late: float  # the late read's time (show/show.py latch)
    latched: bool = False  # the late read made the frame's values again (something came)
    heard: int | None = None  # the samples the sound file had played by the update
    governor: dict[str, int] = field(default_factory=dict)  # the levers lowered
    size: tuple[int, int] | None = None  # the frame's size (the last one said)
    between: list[Event] = field(default_factory=list)  # came after the frame before's draw
    update: list[Event] = field(default_factory=list)  # came at the update
    late_events: list[Event] = field(default_factory=list)  # came at the late read
    advanced: list[Event] = field(default_factory=list)  # the show's own, as it stepped


def recorded_frames(events: Iterable[Event]) -> list[RecordedFrame]:
    """The frames of a track's events (in their order): each frame event closes a frame and
    the events since the one before are its own. Events after the last frame event came after
    the last frame was drawn: no frame shows them, so none is made."""
    frames: list[RecordedFrame] = []
    phases: dict[str | None, list[Event]] = {"between": [], None: [], "late": [], "advance": []}
    heard: int | None = None
    size: tuple[int, int] | None = None
    for event in events:
        if event.kind == "frame":
            if event.get("size"):
                size = (int(event.get("size")[0]), int(event.get("size")[1]))
            frames.append(RecordedFrame(
                float(event.get("now")), float(event.get("dt")), int(event.get("steps")),
                float(event.get("late")), bool(event.get("latched")), heard,
                dict(event.get("governor") or {}), size,
                phases["between"], phases[None], phases["late"], phases["advance"]))
            phases = {"between": [], None: [], "late": [], "advance": []}
            heard = None
        elif event.kind == "audio":
            heard = event.get("heard", heard)
        elif event.kind != "end":
            phases[event.get("came")].append(event)
    return frames
