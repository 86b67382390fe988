"""The post chain's settings for one frame (`PostSettings`) and the PostParams block's values
made from them (`block_values`), clamped to what the chain takes. Pure numbers
(visual/post/post_chain.py writes them); any thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from swarm_instrument.visual.post.feedback import feedback_step
from swarm_instrument.visual.post.tonemap import TONEMAPS, clamp_finite

HISTORY_MAX = 16.0     # the feedback history is read back clamped to this (HDR units)


@dataclass(frozen=True)
class PostSettings:
    """One frame's post parameters. Numbers outside their ranges are clamped when used (so a
    wild controller cannot break the chain); a name that is not a choice is a ValueError."""

    exposure: float = 1.0           # linear multiplier before tone mapping, 0.1..8
    tonemap: str = "aces"           # "aces" (Narkowicz 2015) | "agx" | "linear" (clamp)
    bloom: float = 0.0              # bloom intensity, 0..2; 0 skips the bloom passes
    bloom_radius: float = 0.6       # 0..1: the mix per level, from tight (0) to wide (1)
    bloom_threshold: float = 1.0    # soft threshold in HDR units, 0..4 (knee: half of it)
    feedback: float = 0.0           # 0..0.98: how much of the previous frame stays; 0 skips it
    feedback_zoom: float = 0.0      # -0.1..0.1 a 60 fps frame (> 0: the old image grows)
    feedback_rotate: float = 0.0    # radians a 60 fps frame, -0.1..0.1
    feedback_drift: tuple[float, float] = (0.0, 0.0)  # uv a 60 fps frame, -0.05..0.05 each
    background: tuple[float, float, float] = (0.0, 0.0, 0.0)  # what feedback fades towards
    dither: bool = True             # +-1 step of an 8-bit target against banding in glows

    def __post_init__(self) -> None:
        if self.tonemap not in TONEMAPS:
            raise ValueError(f"unknown tonemap {self.tonemap!r}: use one of "
                             f"{', '.join(TONEMAPS)}")

    @property
    def bloom_on(self) -> bool:
        return clamp_finite(self.bloom, 0.0, 2.0) > 0.0

    @property
    def feedback_on(self) -> bool:
        return clamp_finite(self.feedback, 0.0, 0.98) > 0.0


def block_values(settings: PostSettings, dt: float, size: tuple[int, int]) -> dict[str, Any]:
    """This frame's PostParams, every value clamped to what the chain takes."""
    step = feedback_step(settings, dt, size)
    try:
        clamped = _clamped(settings)
    except TypeError:  # a field that is not hashable (a list for a tuple): worked out anew
        clamped = _clamped.__wrapped__(settings)
    return {**clamped, "feedback_fade": step.fade, "warp": step.matrix,
            "warp_offset": step.offset}


@lru_cache(maxsize=64)
def _clamped(settings: PostSettings) -> dict[str, Any]:
    """PostParams' values that follow from the settings alone, clamped (once a look: the
    settings change when the performer changes them, not every frame). Not to be changed."""
    threshold = clamp_finite(settings.bloom_threshold, 0.0, 4.0)
    return {"exposure": clamp_finite(settings.exposure, 0.1, 8.0),
            "dither": 1.0 if settings.dither else 0.0,
            "bloom_intensity": clamp_finite(settings.bloom, 0.0, 2.0),
            "threshold": threshold, "knee": 0.5 * threshold,
            "bloom_mix": clamp_finite(settings.bloom_radius, 0.0, 1.0),
            "feedback_background": tuple(clamp_finite(c, 0.0, HISTORY_MAX)
                                         for c in settings.background)}
