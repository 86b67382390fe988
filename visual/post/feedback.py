"""The post chain's feedback, frame by frame: how far the previous picture is warped (zoom,
rotation, drift) and how much of it fades, from the settings and the frame's time. Pure
numbers (visual/post/post_chain.py writes them into PostParams); any thread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from swarm_instrument.visual.post.tonemap import clamp_finite

if TYPE_CHECKING:
    from swarm_instrument.visual.post.post_settings import PostSettings

MAX_FRAME_STEPS = 4.0  # a long frame moves the feedback at most this many 60 fps frames


@dataclass(frozen=True)
class FeedbackStep:
    """One frame's feedback warp: the previous image is read at
    `matrix @ (uv - 0.5) + 0.5 + offset` and faded by `fade`."""

    fade: float
    matrix: tuple[float, float, float, float]  # column-major 2x2, as GLSL's mat2
    offset: tuple[float, float]


def feedback_step(settings: PostSettings, dt: float, size: tuple[int, int]) -> FeedbackStep:
    """This frame's warp and fade: the per-60-fps-frame amounts raised to (or times) dt x 60,
    so two frames of dt/2 move the image as one frame of dt does. The zoom and rotation turn
    about the centre in square pixels (aspect corrected), as the eye sees them."""
    steps = clamp_finite(dt * 60.0, 0.0, MAX_FRAME_STEPS)
    fade = clamp_finite(settings.feedback, 0.0, 0.98) ** steps
    scale = (1.0 + clamp_finite(settings.feedback_zoom, -0.1, 0.1)) ** steps
    angle = clamp_finite(settings.feedback_rotate, -0.1, 0.1) * steps
    aspect = size[0] / max(size[1], 1)
    # Output uv -> the uv it came from: A^-1 R(-angle) A / scale, A = diag(aspect, 1).
    cos, sin = math.cos(angle) / scale, math.sin(angle) / scale
    matrix = (cos, -sin * aspect, sin / aspect, cos)  # columns (m00, m10), (m01, m11)
    drift = settings.feedback_drift
    offset = (-clamp_finite(drift[0], -0.05, 0.05) * steps,
              -clamp_finite(drift[1], -0.05, 0.05) * steps)
    return FeedbackStep(fade, matrix, offset)
