"""What a frame's passes read, worked out from the parameters and the camera: the FrameParams
block's values (visual/gpu/uniforms.py), the post chain's settings, the background as the
scene holds it, the light and the telegraph's colour shift. Pure: numbers in, numbers out
(the renderers write them: visual/render/renderer.py and its GL 4.1 twin). Main thread.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from swarm_instrument.visual.post.post_settings import PostSettings
from swarm_instrument.visual.post.tonemap import scene_color_for
from swarm_instrument.visual.render.camera import OrbitCamera, plane_rows
from swarm_instrument.visual.render.counts import SumScales
from swarm_instrument.visual.render.meshes import SHAPES, lod_distance
from swarm_instrument.visual.render.palettes import (
    COLOR_BY,
    MAX_STOPS,
    palette_stops,
    srgb_to_linear,
)

Values = Mapping[str, Any]

BACKGROUND = (0.035, 0.04, 0.07)  # near black, a hint of blue (as shown: sRGB)
TELEGRAPH_JUMP = 0.25       # seek_weight rising more than this in one frame is the tell
TELEGRAPH_SECONDS = 0.5     # how long the colour shift takes to fade out
FOG_START, FOG_END = 1.2, 3.5  # fog, in multiples of the camera's distance to its target
# Colour = mix(slow, fast, smoothstep(SPEED_RAMP, speed / max_speed)): a flock cruises at
# about 0.4-0.7 of max_speed, in the lower middle of the ramp, so bursts (and the audio speed
# boost, which lets agents pass max_speed) glow towards the fast colour.
SPEED_RAMP = (0.25, 0.95)
LURE_COLOR = (1.0, 0.95, 0.85)
STREAK_LENGTH = 4.0  # a streak at 1.5 x max_speed is this many agent sizes long (agent.vert)
# Additive blending: an agent with n neighbours adds ADDITIVE_CROWD / (ADDITIVE_CROWD + n) of its
# light, so a dense core stays coloured (agent.vert).
ADDITIVE_CROWD = 12.0


def glsl_vec(values: Sequence[float]) -> str:
    """A GLSL vector literal for a #define: (0.25, 0.95) -> vec2(0.25, 0.95)."""
    return f"vec{len(values)}({', '.join(repr(float(v)) for v in values)})"


def agent_defines() -> dict[str, str]:
    """agent_color.glsl's constants, for the draw programs and the splat alike."""
    return {"SPEED_RAMP": glsl_vec(SPEED_RAMP), "ADDITIVE_CROWD": f"{ADDITIVE_CROWD:.1f}"}


class Telegraph:
    """Seed 000's telegraph: when seek_weight jumps (the swarm is about to rush the lure) the
    agents shift towards the telegraph colour, fading out over TELEGRAPH_SECONDS."""

    def __init__(self) -> None:
        self._last_seek: float | None = None
        self._start = -math.inf
        self.strength = 0.0  # 0..1, this frame's

    def update(self, seek_weight: float, time: float) -> float:
        if self._last_seek is not None and seek_weight - self._last_seek > TELEGRAPH_JUMP:
            self._start = time
        self._last_seek = seek_weight
        age = time - self._start
        fade = 1.0 - age / TELEGRAPH_SECONDS if age >= 0.0 else 0.0
        self.strength = max(0.0, min(1.0, fade)) ** 2
        return self.strength


def scene_background(background: Sequence[float], p: Values) -> tuple[float, float, float]:
    """The background in the HDR image: the linear colour that this frame's exposure and tone
    map show as `background` (sRGB), so the screen shows exactly the colour chosen."""
    return _scene_background(tuple(background), str(p.get("tonemap", "aces")),
                             float(p.get("exposure", 1.0)))


@lru_cache(maxsize=64)
def _scene_background(background: tuple[float, ...], tonemap: str, exposure: float
                      ) -> tuple[float, float, float]:
    """`scene_background`, worked out once a colour, tone map and exposure (twice a frame)."""
    return scene_color_for(srgb_to_linear(background), tonemap, exposure)


@lru_cache(maxsize=64)
def palette_colors(stops: tuple[tuple[float, float, float], ...]
                   ) -> tuple[tuple[float, float, float, float], ...]:
    """FrameParams' palette_colors: the stops in linear light, padded to MAX_STOPS (worked
    out once a palette: it changes when the performer changes it, not every frame)."""
    return (tuple((*srgb_to_linear(stop), 0.0) for stop in stops)
            + ((0.0, 0.0, 0.0, 0.0),) * (MAX_STOPS - len(stops)))


def post_settings(p: Values, background: Sequence[float], on: bool) -> PostSettings:
    """This frame's post chain. Off (software GL's default), bloom and feedback are skipped;
    exposure and the tone map always apply (one pass, as cheap as a copy)."""
    return PostSettings(
        exposure=float(p.get("exposure", 1.0)), tonemap=str(p.get("tonemap", "aces")),
        bloom=float(p.get("bloom", 0.0)) if on else 0.0,
        bloom_radius=float(p.get("bloom_radius", 0.6)),
        bloom_threshold=float(p.get("bloom_threshold", 1.0)),
        feedback=float(p.get("feedback", 0.0)) if on else 0.0,
        feedback_zoom=float(p.get("feedback_zoom", 0.0)),
        feedback_rotate=float(p.get("feedback_rotate", 0.0)),
        feedback_drift=(float(p.get("feedback_drift_x", 0.0)),
                        float(p.get("feedback_drift_y", 0.0))),
        background=tuple(background))


class PostSwitch:
    """Whether a renderer's frame runs bloom and feedback, and what the HUD says of it: `post`
    (on, off, auto: on with a GPU), software GL, and the governor's hold (show/governor.py)."""

    software: bool
    post_on: bool
    post_held: bool

    def post_active(self, values: Mapping[str, Any]) -> bool:
        """Whether bloom and feedback would run: `post` on, or auto on a GPU (not software
        GL), whether or not the governor holds them off (`post_held`)."""
        choice = values.get("post", "auto")
        return choice == "on" or (choice == "auto" and not self.software)

    def post_settings(self, p: Mapping[str, Any], background: Sequence[float]) -> PostSettings:
        """This frame's post chain (bloom and feedback only where `post_active`)."""
        self.post_on = on = self.post_active(p) and not self.post_held
        return post_settings(p, background, on)

    @property
    def post_state(self) -> str:
        """The HUD's and telemetry's word on the post chain."""
        if self.post_on:
            return "on"
        if self.post_held:
            return "held off by the governor (pin_post keeps it)"
        return "off (software GL: post on turns it on)" if self.software else "off"


def frame_block(p: Values, camera: OrbitCamera, size: tuple[int, int], lure: Sequence[float],
                scales: SumScales, *, background: Sequence[float], telegraph: float,
                far_base: int) -> dict[str, Any]:
    """FrameParams' derived fields for one frame (`background`: the scene's, linear)."""
    aspect = size[0] / max(size[1], 1)
    # Plain floats throughout (numpy's calls on 4x4 and 3-vectors cost more than the maths).
    eye = camera.eye_point()  # worked out once: the matrix, the planes and the light share it
    view_projection = camera.view_projection_rows(aspect, eye)
    agent_size = float(p["agent_size"])
    stops = palette_stops(p)
    streak = p.get("shape") == "streak"
    return {
        "view_projection": view_projection,
        "planes": plane_rows(view_projection),
        "eye": eye,
        "light": light_direction(camera, eye),
        # A streak is a line several agent sizes long however small it is: a point would lose
        # it, so streaks keep their quad at any distance.
        "lod_distance": 1e30 if streak else lod_distance(
            agent_size, float(p["lod_pixels"]), size[1], camera.fov_y),
        "point_scale": size[1] / (2.0 * math.tan(math.radians(camera.fov_y) / 2.0)),
        "lure": lure,
        "center": scales.center,
        "spread_max": scales.reach * scales.reach,
        "spread_scale": scales.spread_scale,
        "reach": scales.reach,
        "offset_scale": scales.offset_scale,
        "background": tuple(background),
        "telegraph": telegraph,
        "fog_range": (FOG_START * camera.distance, FOG_END * camera.distance),
        "cull_scale": (1.0 + 1.5 * float(p.get("size_by_speed", 0.0)))
                      * (STREAK_LENGTH if streak else 1.0),
        "shape_index": SHAPES.index(p.get("shape", "cone")),
        "color_by_index": COLOR_BY.index(p.get("color_by", "speed")),
        "palette_stops": len(stops),
        "additive": int(p.get("blend") == "additive"),
        "depth_range": (max(camera.distance - scales.reach, 0.0),
                        camera.distance + scales.reach),
        "viewport": size,
        "palette_colors": palette_colors(tuple(stops)),
        "agent_count": scales.count,
        "far_base": far_base,
        "lure_pixels": max(12.0, size[1] / 40.0),
    }


def light_direction(camera: OrbitCamera, eye: np.ndarray) -> tuple[float, float, float]:
    """A light above and a little behind the camera's shoulder: lit faces face the viewer.
    Plain floats (numpy on 3-vectors costs more than the arithmetic)."""
    target = camera.target
    back = [float(eye[k]) - float(target[k]) for k in range(3)]
    length = math.sqrt(back[0] ** 2 + back[1] ** 2 + back[2] ** 2)
    back = [v / length for v in back]
    side = [back[2], 0.0, -back[0]]  # (0, 1, 0) x back
    length = math.sqrt(side[0] ** 2 + side[2] ** 2)
    side = [side[0] / length, 0.0, side[2] / length] if length > 1e-9 else [1.0, 0.0, 0.0]
    light = [0.55 * back[0] + 0.35 * side[0], 0.55 * back[1] + 0.75,
             0.55 * back[2] + 0.35 * side[2]]
    length = math.sqrt(light[0] ** 2 + light[1] ** 2 + light[2] ** 2)
    return (light[0] / length, light[1] / length, light[2] / length)
