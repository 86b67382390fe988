"""The audio's beats as a tempo clock: the beat tracker's plain data (audio/analysis/beats.py, on
the audio source as `beat_info`) read as a `TempoSource` for the show's `Tempo`; and the half /
double buttons, which move the tracker's tempo range. Main thread."""

from __future__ import annotations

from typing import Any

from swarm_instrument.control.musical_time.tempo import TempoReading
from swarm_instrument.control.parameters.registry import Params, param


def move_tempo_range(params: Params, factor: float) -> str:
    """Half (0.5) / double (2): the tempo range moves an octave, so the audio's tracker reads
    the music at half or double its tempo from its next estimate (within 0.2 s), as DJ
    software's buttons do; past the registry's ends it stays. What happened, to say."""
    low, high = sorted((params["tempo_min"], params["tempo_max"]))
    low, high = low * factor, high * factor
    if low < param("tempo_min").lo or high > param("tempo_max").hi:
        return f"tempo range {low:g}-{high:g} BPM is past the ends; kept"
    params.update({"tempo_min": low, "tempo_max": high})
    return f"tempo range {low:g}-{high:g} BPM"


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
        bar_start = getattr(info, "bar_start", None)
        return TempoReading(float(info.bpm), float(info.beat), float(info.at), self.name,
                            float(info.confidence),
                            bar_start=None if bar_start is None else float(bar_start))
