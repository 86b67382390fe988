"""The autopilot in the show: the song's form (audio/form/) turned into looks (choreography.py)
and played on the show's clock.

Main thread only. For a render (`--render SONG --autopilot`) the whole song is analysed
before the first frame (`for_song`): the beat tracker's beats made a steady grid, the
sections found and labelled, a cue planned for each; each frame `update(show, now)` plays
the cues whose time has come (the first frame at or after a section's downbeat), through
the same path as a recall (`Looks.go_to`) and a burst (`Action("separation_burst")`), and
tells the recorder (`record_autopilot`, when one is listening); between cues the look drifts
(evolution.py: the camera, the hue, the feedback, a new place each phrase). The looks are the
bundled presets and the user's tagged preset files; a file that cannot be read is left out
with one line.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from swarm_instrument.audio.form.beat_features import (
    beat_features,
    frame_features,
    steady_grid,
    tracker_beats,
)
from swarm_instrument.audio.form.sections import Section, find_sections
from swarm_instrument.control.actions import Action
from swarm_instrument.control.looks.preset_bank import preset_files
from swarm_instrument.control.looks.presets import Preset, PresetError, load_preset
from swarm_instrument.show.autopilot.choreography import PHRASE_BARS, Cue, Look, plan
from swarm_instrument.show.autopilot.evolution import Evolution

log = logging.getLogger(__name__)


def autopilot_looks(folders: Iterable[Path]) -> list[Preset]:
    """The presets the autopilot chooses from: every tagged preset in `folders` (a name seen
    before is left out: the bundled folder comes first). A file that cannot be read is left
    out, said in one line naming it."""
    looks: dict[str, Preset] = {}
    for folder in folders:
        for path in preset_files(Path(folder)):
            try:
                preset = load_preset(path)
            except PresetError as exc:
                log.info(f"autopilot: {exc}; left out of the autopilot's looks")
                continue
            if preset.tags and preset.name not in looks:
                looks[preset.name] = preset
    return list(looks.values())


def song_sections(samples: np.ndarray, rate: float) -> tuple[list[Section], float]:
    """The song's sections and its bar's length (s), from the whole song (offline)."""
    mono = np.asarray(samples, np.float32)
    if mono.ndim == 2:
        mono = mono.mean(axis=1, dtype=np.float32)
    duration = len(mono) / rate
    grid = steady_grid(tracker_beats(mono, rate), duration)
    if len(grid) < 2:  # no beat heard: one section, bars of two seconds
        return [Section(0.0, duration, 0, 0, "groove", 0.5, 0.0)], 2.0
    times, frames = frame_features(mono, rate)
    sections = find_sections(grid, beat_features(times, frames, grid), duration)
    return sections, 4 * float(np.median(np.diff(grid)))


class Autopilot:
    """Plays a plan of cues on the show's clock; its state for telemetry and the HUD."""

    def __init__(self, cues: list[Cue], presets: Iterable[Preset],
                 sections: list[Section] | None = None, bar_seconds: float = 2.0,
                 seed: int = 0, frame_s: float = 0.0) -> None:
        """`frame_s`: the render's frame period; a cue plays on the frame nearest its time
        (half a frame off at most: 17 ms at 30 fps, where the frame at or after it was up to
        33 ms late); 0: at or after it."""
        self.cues = cues
        self.lead = frame_s / 2.0
        self.evolution = Evolution(seed)  # the look moving inside its section
        self.presets = {preset.name: preset for preset in presets}
        self.sections = sections or []
        self.bar_seconds = bar_seconds
        self.played = 0  # cues played so far
        self.look: str | None = None
        self.section: str | None = None
        self.section_start: float | None = None

    @classmethod
    def for_song(cls, samples: np.ndarray, rate: float, presets: list[Preset],
                 seed: int, how_often: str = "section", frame_s: float = 0.0) -> Autopilot:
        sections, bar = song_sections(samples, rate)
        looks = [Look(p.name, p.tags) for p in presets]
        cues = plan([(s.start, s.end, s.label) for s in sections], looks, seed, bar,
                    how_often)
        shown = ", ".join(f"{s.label} {s.start:.1f} s" for s in sections)
        log.info(f"autopilot: {len(sections)} sections ({shown}); {len(looks)} looks")
        return cls(cues, presets, sections, bar, seed, frame_s)

    def update(self, show: Any, now: float) -> None:
        """Play every cue due by `now` (the song's time of the frame about to be made), or
        by the frame's end half-way to the next with `frame_s`."""
        while self.played < len(self.cues) and self.cues[self.played].t < now + self.lead + 1e-9:
            cue = self.cues[self.played]
            self.played += 1
            show.looks.go_to(self.presets[cue.look], cue.morph, show.show_time)
            if cue.burst:
                show.act(Action("separation_burst", 1.0))
            if not cue.phrase:  # a phrase's change is no new section
                self.section_start = cue.t
            self.look, self.section = cue.look, cue.section
            self.evolution.new_look(self.presets[cue.look].values, self.section_start,
                                    PHRASE_BARS * self.bar_seconds, cue.section)
            recorder = getattr(show, "recorder", None)
            record = getattr(recorder, "record_autopilot", None)
            if record is not None:
                record(show.show_time, cue.section, cue.look)
            how = "cut" if cue.morph == 0 else f"morph {cue.morph:.1f} s"
            log.info(f"autopilot: {cue.section} at {cue.t:.2f} s: {cue.look} ({how}"
                     f"{', burst' if cue.burst else ''})")
        show.looks.evolving = self.evolution.step(show.params, now, show.looks.morph is not None,
                                                  show.looks.kept)

    def telemetry(self, now: float) -> dict[str, Any]:
        """The `autopilot` object of telemetry: on, the section and its start, the phrase
        position (bar of four and beat, from the section's start), the look, the next
        planned change and who is in control."""
        upcoming = self.cues[self.played] if self.played < len(self.cues) else None
        phrase = None
        if self.section_start is not None and self.bar_seconds > 0:
            beats = (now - self.section_start) / (self.bar_seconds / 4)
            phrase = {"bar": int(math.floor(beats / 4)) % 4 + 1,
                      "beat": round(beats % 4 + 1, 3)}
        return {"on": True, "section": self.section,
                "section_start": None if self.section_start is None
                else round(self.section_start, 3),
                "phrase": phrase, "look": self.look, "control": "autopilot",
                "next": None if upcoming is None else {
                    "t": round(upcoming.t, 3), "section": upcoming.section,
                    "look": upcoming.look}}
