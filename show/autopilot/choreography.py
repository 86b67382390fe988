"""The autopilot's choices: which look each section gets, and how the show moves into it.

Pure; main thread only. A section's label asks for a tag (control/looks/presets.py TAGS):
intro, break and outro a calm look, a groove a groove, a build a build look, a drop a peak.
Among the looks with that tag the choice is random but seeded (the same song and seed give
the same choices) and never the look already playing; with no look of the tag, any other
look. How it moves:
- a build morphs into its look over the whole build, so it arrives as the drop comes;
- a drop cuts (no morph) on its first downbeat, with a separation burst;
- a calm section (intro, break, outro) settles over two bars; a groove over one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

SECTION_TAGS = {"intro": "calm", "break": "calm", "outro": "calm", "groove": "groove",
                "build": "build", "drop": "peak"}
SETTLE_BARS = {"calm": 2.0, "groove": 1.0}


@dataclass(frozen=True)
class Look:
    """A look the autopilot may choose: its name and tags (a preset's)."""

    name: str
    tags: tuple[str, ...]


@dataclass(frozen=True)
class Cue:
    """A change the autopilot plays: at `t` (s, the song's time: a section's downbeat) the
    show moves into `look` over `morph` seconds (0: a cut), with a burst if `burst`."""

    t: float
    section: str
    look: str
    morph: float
    burst: bool


class Choreographer:
    """Chooses each section's look in turn (offline from a plan, live as sections come)."""

    def __init__(self, looks: Iterable[Look], seed: int = 0) -> None:
        self.looks = sorted(looks, key=lambda look: look.name)
        if not self.looks:
            raise ValueError("the autopilot needs at least one look")
        self.rng = np.random.default_rng(seed)
        self.playing: str | None = None

    def choose(self, label: str) -> str:
        """A look for a section labelled `label`: one with its tag that is not playing."""
        tag = SECTION_TAGS.get(label, "groove")
        others = [look for look in self.looks if look.name != self.playing]
        tagged = [look for look in others if tag in look.tags]
        pool = tagged or others or self.looks
        choice = pool[int(self.rng.integers(len(pool)))].name
        self.playing = choice
        return choice

    def cue(self, start: float, end: float | None, label: str, bar_seconds: float) -> Cue:
        """The cue of a section from `start` to `end` (None: not known yet, live)."""
        look = self.choose(label)
        tag = SECTION_TAGS.get(label, "groove")
        if label == "build":
            morph = (end - start) if end is not None else 4 * bar_seconds
        elif label == "drop":
            morph = 0.0
        else:
            morph = SETTLE_BARS.get(tag, 1.0) * bar_seconds
        return Cue(float(start), label, look, float(morph), label == "drop")


def plan(sections: Sequence[tuple[float, float, str]], looks: Iterable[Look], seed: int,
         bar_seconds: float) -> list[Cue]:
    """A whole song's cues from its sections ((start, end, label), in order)."""
    choreographer = Choreographer(looks, seed)
    return [choreographer.cue(start, end, label, bar_seconds)
            for start, end, label in sections]
