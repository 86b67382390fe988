"""The tone maps in numpy, as shaders/post_tonemap.glsl runs them: a reference for tests, and
their inverse, which gives the background the scene must hold for the screen to show the
colour chosen whatever the tone map and exposure. Pure: any thread.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

TONEMAPS = ("aces", "agx", "linear")  # the index is post_tonemap.glsl's TONEMAP_* value
HDR_MAX = 65000.0      # every stored value stays finite in a half float (max 65504)


def clamp_finite(value: float, low: float, high: float) -> float:
    value = float(value)
    if not math.isfinite(value):
        return low
    return min(max(value, low), high)


_AGX_INSET = np.array([[0.842479062253094, 0.0423282422610123, 0.0423756549057051],
                       [0.0784335999999992, 0.878468636469772, 0.0784336],
                       [0.0792237451477643, 0.0791661274605434, 0.879142973793104]]).T


_AGX_OUTSET = np.array([[1.19687900512017, -0.0528968517574562, -0.0529716355144438],
                        [-0.0980208811401368, 1.15190312990417, -0.0980434501171241],
                        [-0.0990297440797205, -0.0989611768448433, 1.15107367264116]]).T


_AGX_MIN_EV, _AGX_MAX_EV = -12.47393, 4.026069


def tonemap_reference(color: np.ndarray, tonemap: str) -> np.ndarray:
    """What post_tonemap.glsl's `tonemap` gives for linear HDR `color` (..., 3): linear display
    values in 0..1."""
    x = np.maximum(np.asarray(color, float), 0.0)
    if tonemap == "linear":
        return np.clip(x, 0.0, 1.0)
    if tonemap == "aces":
        return np.clip((x * (2.51 * x + 0.03)) / (x * (2.43 * x + 0.59) + 0.14), 0.0, 1.0)
    value = np.clip(np.log2(np.maximum(x @ _AGX_INSET.T, 1e-10)), _AGX_MIN_EV, _AGX_MAX_EV)
    v = (value - _AGX_MIN_EV) / (_AGX_MAX_EV - _AGX_MIN_EV)
    v2 = v * v
    v4 = v2 * v2
    curve = (15.5 * v4 * v2 - 40.14 * v4 * v + 31.96 * v4 - 6.868 * v2 * v + 0.4298 * v2
             + 0.1191 * v - 0.00232)
    curve = (curve + 0.00232) / (0.99858 + 0.00232)
    return np.power(np.clip(curve @ _AGX_OUTSET.T, 0.0, 1.0), 2.2)


def scene_color_for(shown: tuple[float, float, float], tonemap: str,
                    exposure: float) -> tuple[float, float, float]:
    """The linear scene colour that the display pass (exposure, `tonemap`) turns into `shown`
    (linear display light): what the renderer clears and fades to, so the background on screen
    is the one chosen whatever the tone map and exposure. Black stays black."""
    exposure = clamp_finite(exposure, 0.1, 8.0)
    return tuple(c / exposure for c in _tonemap_inverse(tuple(shown), tonemap))


@lru_cache(maxsize=16)
def _tonemap_inverse(shown: tuple[float, ...], tonemap: str) -> tuple[float, ...]:
    """u with tonemap(u) = shown, by multiplicative iteration (AgX mixes the channels, so
    not channel by channel); once a colour and tone map: exposure only scales it."""
    target = np.clip(np.asarray(shown, float), 0.0, 0.95)
    guess = target.copy()
    for _ in range(60):
        got = tonemap_reference(guess, tonemap)
        ratio = np.where(got > 1e-12, target / np.maximum(got, 1e-12), 1.0)
        guess = np.where(target > 0.0, guess * ratio ** 0.7, 0.0)
    return tuple(float(c) for c in np.clip(guess, 0.0, HDR_MAX))
