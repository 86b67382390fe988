"""The audio's beats as a tempo clock: the beat tracker's plain data (audio/analysis/beats.py, on
the audio source as `beat_info`) read as a `TempoSource` for the show's `Tempo`. Main thread."""

from __future__ import annotations

from typing import Any

from swarm_instrument.control.musical_time.tempo import TempoReading


class AudioTempo:
    """`reading(now)`: the tracker's tempo and beat count, or None while it has none (no
    beats yet, silence). The source's `beat_info` holds bpm, beat, at and confidence."""

    name = "audio"

    def __init__(self, audio: Any) -> None:
        self.audio = audio

    def reading(self, now: float) -> TempoReading | None:
        info = getattr(self.audio, "beat_info", None)
        if info is None:
            return None
        return TempoReading(float(info.bpm), float(info.beat), float(info.at), self.name,
                            float(info.confidence))
