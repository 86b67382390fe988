"""A look that moves inside its section, so a long section does not freeze: the camera's
distance and orbit, the palette's hue and the feedback's zoom, turn and strength drift away
from the look's own values, to a new place each phrase (4 bars, counted from the section's
start), eased from one place to the next with a smoothstep (no jump, no change of pace at a
phrase's edge). A calm section drifts less, a drop more (`AMOUNT`, by the section's tag).

Deterministic: the places are drawn from a generator seeded by the show's seed, one draw a
phrase whatever the frame rate, and the values are a pure function of time between them, so
a render (`--render SONG --autopilot --seed N`) moves the same way every time. The drift
writes the registry, as a morph does, so telemetry, the web page, the control window and a
recorded control track see it (a set recorded live renders again the same). It starts once
the look's morph is over (the morph is the look arriving), leaves alone what the command
line pinned, and lets go of what the performer touched, for good, until the autopilot plays
its next look (`release`). Main thread only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from swarm_instrument.control.parameters.registry import BY_NAME
from swarm_instrument.show.autopilot.choreography import SECTION_TAGS

# name: (how it drifts, how far at most at amount 1): "times" multiplies the look's value by
# 2**(±far), "plus" adds ±far to it.
DRIFTS: dict[str, tuple[str, float]] = {
    "camera_distance": ("times", 0.3),  # 0.81x to 1.23x: in and out
    "orbit_speed": ("plus", 0.45),  # the orbit slower and faster (a still camera starts)
    "hue_shift": ("plus", 40.0),  # degrees
    "feedback": ("plus", 0.06),  # only where the look has feedback (FEEDBACK_FROM)
    "feedback_zoom": ("plus", 0.006),
    "feedback_rotate": ("plus", 0.004),
}
AMOUNT = {"calm": 0.6, "groove": 1.0, "build": 1.0, "peak": 1.3}
FEEDBACK_FROM = 0.05  # a look without feedback gets none from the drift


def smoothstep(x: float) -> float:
    x = min(max(x, 0.0), 1.0)
    return x * x * (3.0 - 2.0 * x)


class Evolution:
    """The drift of the look the autopilot played last (see the module)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng([int(seed) % 2**32, 29])
        self.base: dict[str, float] = {}  # the look's own values of what drifts
        self.amount = 1.0
        self.anchor = 0.0  # the section's start: its phrases are counted from it
        self.phrase = 8.0  # seconds
        self.keys: list[tuple[float, dict[str, float]]] = []  # places at phrase edges
        self.pending = False  # a new look: the drift starts when its morph is over
        self.let_go: set[str] = set()

    def new_look(self, values: Mapping[str, Any], section_start: float, phrase_s: float,
                 label: str) -> None:
        """The autopilot played a look (`values`: its parameters) in a section labelled
        `label` that began at `section_start`, whose phrases last `phrase_s` seconds."""
        self.base = {name: float(values[name]) for name in DRIFTS if name in values}
        if self.base.get("feedback", 0.0) < FEEDBACK_FROM:
            self.base.pop("feedback", None)
        self.amount = AMOUNT.get(SECTION_TAGS.get(label, "groove"), 1.0)
        self.anchor, self.phrase = float(section_start), max(float(phrase_s), 0.5)
        self.keys, self.pending, self.let_go = [], True, set()

    def stop(self) -> None:
        """No drift until the next look (the autopilot switched off): values stay put."""
        self.base, self.keys, self.pending = {}, [], False

    def release(self, names: Iterable[str] | None) -> None:
        """The performer played `names` (None: the whole look): theirs until the next look."""
        played = set(DRIFTS) if names is None else set(names)
        if "crossfade" in played:  # the fader moves the whole look
            played = set(DRIFTS)
        self.let_go |= played & set(DRIFTS)

    def step(self, params: Any, now: float, morphing: bool, kept: Iterable[str]) -> set[str]:
        """Once a frame: the drifting values written into `params`; the names written."""
        if not self.base or morphing:
            return set()
        if self.pending:  # the look has arrived: from where it is now
            self.pending = False
            edge = self.anchor + self.phrase * np.ceil((now - self.anchor) / self.phrase)
            if edge - now < self.phrase / 2:  # not a rushed first move
                edge += self.phrase
            self.keys = [(now, {name: float(params[name]) for name in self.base}),
                         (float(edge), self._place())]
        while self.keys[-1][0] <= now:  # the places of the phrases come one at a time
            self.keys = [self.keys[-1], (self.keys[-1][0] + self.phrase, self._place())]
        (start, before), (end, after) = self.keys[-2], self.keys[-1]
        x = smoothstep((now - start) / (end - start))
        moved = set()
        for name in self.base:
            if name in self.let_go or name in kept:
                continue
            spec = BY_NAME[name]
            low, high = spec.play_range
            params[name] = min(max(before[name] + (after[name] - before[name]) * x, low), high)
            moved.add(name)
        return moved

    def _place(self) -> dict[str, float]:
        """The next phrase's place: one draw for every drift, whichever are moving."""
        draws = self.rng.uniform(-1.0, 1.0, len(DRIFTS))
        place = {}
        for (name, (how, far)), draw in zip(DRIFTS.items(), draws):
            if name in self.base:
                shift = far * self.amount * float(draw)
                base = self.base[name]
                place[name] = base * 2.0 ** shift if how == "times" else base + shift
        return place
