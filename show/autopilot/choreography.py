"""The autopilot's choices: which look each section gets, and how the show moves into it.

Pure; main thread only. A section's label asks for a tag (control/looks/presets.py TAGS):
intro, break and outro a calm look, a groove a groove, a build a build look, a drop a peak.
Among the looks with that tag the choice is random but seeded (the same song and seed give
the same choices) and never the look already playing; with no look of the tag, any other
look. How it moves:
- a build morphs into its look over the whole build, so it arrives as the drop comes;
- a drop cuts (no morph) on its first downbeat, with a separation burst;
- a calm section (intro, break, outro) settles over two bars; a groove over one.

How often (`RATES`, `--autopilot-rate`): "section" changes the look at each section;
"rarely" only where the section asks for another tag than the one playing (a groove after a
groove keeps its look); "phrase" also at every phrase (4 bars) inside a section, into
another look of the same tag (over a bar; a drop's cut, without a burst), so a long section
does not freeze.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

SECTION_TAGS = {"intro": "calm", "break": "calm", "outro": "calm", "groove": "groove",
                "build": "build", "drop": "peak"}
SETTLE_BARS = {"calm": 2.0, "groove": 1.0}
RATES = ("rarely", "section", "phrase")
PHRASE_BARS = 4


@dataclass(frozen=True)
class Look:
    """A look the autopilot may choose: its name and tags (a preset's)."""

    name: str
    tags: tuple[str, ...]


@dataclass(frozen=True)
class Cue:
    """A change the autopilot plays: at `t` (s, the song's time: a section's downbeat) the
    show moves into `look` over `morph` seconds (0: a cut), with a burst if `burst`; `phrase`
    a change inside a section (the rate "phrase"), not a new section."""

    t: float
    section: str
    look: str
    morph: float
    burst: bool
    phrase: bool = False


class Choreographer:
    """Chooses each section's look in turn (offline from a plan, live as sections come)."""

    def __init__(self, looks: Iterable[Look], seed: int = 0, rate: str = "section") -> None:
        self.looks = sorted(looks, key=lambda look: look.name)
        if not self.looks:
            raise ValueError("the autopilot needs at least one look")
        if rate not in RATES:
            raise ValueError(f"the rate of change is one of {', '.join(RATES)}, not {rate!r}")
        self.rng = np.random.default_rng(seed)
        self.rate = rate
        self.playing: str | None = None
        self.tag: str | None = None  # the tag the playing look was chosen for

    def choose(self, label: str) -> str:
        """A look for a section labelled `label`: one with its tag that is not playing."""
        tag = SECTION_TAGS.get(label, "groove")
        others = [look for look in self.looks if look.name != self.playing]
        tagged = [look for look in others if tag in look.tags]
        pool = tagged or others or self.looks
        choice = pool[int(self.rng.integers(len(pool)))].name
        self.playing, self.tag = choice, tag
        return choice

    def cue(self, start: float, end: float | None, label: str, bar_seconds: float
            ) -> Cue | None:
        """The cue of a section from `start` to `end` (None: not known yet, live); None
        when the rate is "rarely" and the look playing was chosen for this tag."""
        tag = SECTION_TAGS.get(label, "groove")
        if self.rate == "rarely" and tag == self.tag:
            return None
        look = self.choose(label)
        if label == "build":
            morph = (end - start) if end is not None else 4 * bar_seconds
        elif label == "drop":
            morph = 0.0
        else:
            morph = SETTLE_BARS.get(tag, 1.0) * bar_seconds
        return Cue(float(start), label, look, float(morph), label == "drop")

    def phrase_cue(self, at: float, label: str, bar_seconds: float) -> Cue | None:
        """At a phrase inside a section, with the rate "phrase": another look of the same
        tag (over a bar; a drop cuts, without a burst). None at other rates, and in a build
        (its morph is under way)."""
        if self.rate != "phrase" or label == "build":
            return None
        look = self.choose(label)
        return Cue(float(at), label, look, 0.0 if label == "drop" else bar_seconds, False,
                   phrase=True)


def plan(sections: Sequence[tuple[float, float, str]], looks: Iterable[Look], seed: int,
         bar_seconds: float, rate: str = "section") -> list[Cue]:
    """A whole song's cues from its sections ((start, end, label), in order)."""
    choreographer = Choreographer(looks, seed, rate)
    phrase = PHRASE_BARS * bar_seconds
    cues: list[Cue | None] = []
    for start, end, label in sections:
        cues.append(choreographer.cue(start, end, label, bar_seconds))
        at = start + phrase
        while at < end - phrase / 2:  # a phrase inside, not a sliver before the next section
            cues.append(choreographer.phrase_cue(at, label, bar_seconds))
            at += phrase
    return [cue for cue in cues if cue is not None]
