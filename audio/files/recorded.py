"""The audio features of a recorded set (a control track, control/tracks/control_track.py) played
back as an audio source, for a set rendered without its sound. Main thread only."""

from __future__ import annotations

import math
from typing import Any

from swarm_instrument.audio.analysis.features import AudioFeatures, Bands
from swarm_instrument.audio.base import AudioFrameSource


class RecordedAudio(AudioFrameSource):
    """`update(t)` holds the track's latest audio event at or before t and counts the onsets
    ("hit") up to t. `track` is a control track: `header`, `path`, `audio_at(t)` and
    `events_between(t0, t1)` (events with `kind` and `get`)."""

    def __init__(self, track: Any) -> None:
        super().__init__(float(track.header.get("rate") or 48000.0), track.path.name,
                         "recorded")
        self.track = track
        self._last_t = -math.inf
        self._onsets = 0

    def update(self, now: float) -> AudioFeatures:
        hits = sum(1 for e in self.track.events_between(self._last_t, now)
                   if e.kind == "audio" and e.get("hit"))
        self._last_t = now
        self._onsets += hits
        event = self.track.audio_at(now)
        self._has_data = event is not None
        if event is None:
            self.features = AudioFeatures(onsets=self._onsets)
        else:
            self.features = AudioFeatures(
                level=float(event.get("level", 0.0)),
                bands=Bands(float(event.get("low", 0.0)), float(event.get("mid", 0.0)),
                            float(event.get("high", 0.0))),
                onset=hits > 0, onset_envelope=float(event.get("onset", 0.0)),
                onsets=self._onsets)
        return self.features
