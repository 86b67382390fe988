"""The agents' palettes: gradients of 2 to 5 colour stops, sampled in the shader (agent.vert) at
a place 0..1 chosen by `color_by`. `colors` is the performer's own two (slow_color to
fast_color); the others are bundled; `hue_shift` turns any of them round the colour wheel.
Pure data and functions: any thread.
"""

from __future__ import annotations

import colorsys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

MAX_STOPS = 5

PALETTES: dict[str, tuple[tuple[float, float, float], ...]] = {
    "ember": ((0.10, 0.01, 0.02), (0.60, 0.06, 0.02), (1.00, 0.30, 0.04), (1.00, 0.58, 0.12),
              (1.00, 0.82, 0.40)),
    "ocean": ((0.00, 0.05, 0.16), (0.00, 0.25, 0.45), (0.05, 0.60, 0.70), (0.60, 0.95, 0.90)),
    "aurora": ((0.02, 0.12, 0.25), (0.00, 0.70, 0.45), (0.35, 0.95, 0.50), (0.60, 0.30, 0.90)),
    "neon": ((1.00, 0.10, 0.60), (0.50, 0.10, 1.00), (0.10, 0.80, 1.00)),
    "sunset": ((0.25, 0.05, 0.35), (0.85, 0.15, 0.35), (1.00, 0.50, 0.20), (1.00, 0.85, 0.45)),
    "ice": ((0.10, 0.15, 0.35), (0.40, 0.60, 0.90), (0.90, 0.97, 1.00)),
    "mono": ((0.15, 0.15, 0.17), (1.00, 1.00, 1.00)),
}
COLOR_BY = ("speed", "heading", "depth", "density")


def palette_stops(values: Mapping[str, Any]) -> list[tuple[float, float, float]]:
    """The stops of this frame's palette (`palette`, or slow_color and fast_color), turned
    round the colour wheel by `hue_shift` degrees."""
    name = values.get("palette", "colors")
    if name in PALETTES:
        stops = [tuple(map(float, stop)) for stop in PALETTES[name]]
    else:
        stops = [tuple(map(float, values["slow_color"])),
                 tuple(map(float, values["fast_color"]))]
    degrees = float(values.get("hue_shift", 0.0))
    return [turn_hue(stop, degrees) for stop in stops] if degrees else stops


def turn_hue(color: Sequence[float], degrees: float) -> tuple[float, float, float]:
    """A colour's hue turned by `degrees`, its lightness and saturation kept (HLS)."""
    hue, lightness, saturation = colorsys.rgb_to_hls(*(float(c) for c in color))
    return colorsys.hls_to_rgb((hue + degrees / 360.0) % 1.0, lightness, saturation)


def srgb_to_linear(color: Sequence[float]) -> tuple[float, ...]:
    """A colour as a screen shows it (sRGB, 0..1) in linear light (IEC 61966-2-1), what the
    HDR image holds: the inverse of post_tonemap.glsl's srgb_encode."""
    out = []
    for c in color:
        c = min(max(float(c), 0.0), 1.0)
        out.append(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
    return tuple(out)


def sample(stops: Sequence[Sequence[float]], x: float | np.ndarray) -> np.ndarray:
    """The palette at x in 0..1, as the shader samples it (linear between stops): the numpy
    reference the tests compare the GPU with."""
    stops = np.asarray(stops, float)
    x = np.clip(np.asarray(x, float), 0.0, 1.0) * (len(stops) - 1)
    i = np.minimum(np.floor(x).astype(int), len(stops) - 2)
    f = (x - i)[..., None]
    return stops[i] * (1.0 - f) + stops[i + 1] * f
