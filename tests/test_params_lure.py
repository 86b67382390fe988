"""The parameter registry (seed defaults, validation) and the lure / influencer."""

from __future__ import annotations

import numpy as np
import pytest

from control.params import BY_NAME, ParamError, Params
from visual.lure import Lure, wander_point

SEED_DEFAULTS = {
    "count": 16384, "spawn_radius": 30, "contain_radius": 60, "neighbor_radius": 3,
    "separation_radius": 1, "separation_weight": 1.5, "alignment_weight": 1,
    "cohesion_weight": 0.8, "seek_weight": 0.4, "max_speed": 8, "max_force": 12,
    "audio_speed_boost": 2, "separation": True, "alignment": True, "cohesion": True,
    "seek": True, "containment": True, "boundary": "sphere", "dimensions": 3,
}


def test_defaults_are_the_seeds():
    params = Params()
    for name, value in SEED_DEFAULTS.items():
        assert params[name] == value, name
    for spec in BY_NAME.values():
        assert spec.description, f"{spec.name} has no description"


def test_a_bad_update_changes_nothing():
    params = Params()
    with pytest.raises(ParamError, match="'max_speed' = -3.0 is out of range"):
        params.update({"seek_weight": 2.0, "max_speed": -3})
    assert params["seek_weight"] == 0.4
    with pytest.raises(ParamError, match="unknown parameter 'nope'"):
        params["nope"] = 1
    with pytest.raises(ParamError, match="finite"):
        params["max_speed"] = float("nan")
    params.update({"boundary": "wrap", "dimensions": "2", "count": 10.0})
    assert params["boundary"] == "wrap" and params["dimensions"] == 2 and params["count"] == 10


def test_the_influencer_wanders_inside_the_volume():
    points = np.array([wander_point(t, 60.0) for t in np.arange(0, 600, 0.5)])
    assert np.linalg.norm(points, axis=1).max() <= 0.6 * 60 + 1e-9
    assert np.ptp(points, axis=0).min() > 20  # it goes places on every axis
    steps = np.linalg.norm(np.diff(points, axis=0), axis=1)
    assert steps.max() < 10  # smooth: no jumps between half-second samples
    flat = np.array([wander_point(t, 60.0, flat=True) for t in range(100)])
    assert np.all(flat[:, 2] == 0)


def test_a_moved_lure_holds_then_blends_back_to_wandering():
    lure = Lure(60.0, idle_seconds=3.0)
    assert lure.wandering
    lure.move_to((10.0, -5.0, 2.0), now=1.0)
    np.testing.assert_array_equal(lure.position(2.0), [10.0, -5.0, 2.0])
    np.testing.assert_array_equal(lure.position(3.9), [10.0, -5.0, 2.0])
    samples = [lure.position(t) for t in np.arange(4.0, 7.0, 0.05)]
    jumps = np.linalg.norm(np.diff(samples, axis=0), axis=1)
    assert jumps.max() < 2.0  # no jump when it lets go
    np.testing.assert_allclose(lure.position(7.5), wander_point(7.5, 60.0))
    assert lure.wandering


def test_a_hitch_is_a_slow_frame_and_a_slow_machine_is_not():
    from visual.app import FrameClock

    clock = FrameClock()
    t = 0.0
    for _ in range(100):
        t += 1 / 60
        assert not clock.tick(t)
    t += 0.2  # one 200 ms hitch among 16.7 ms frames
    assert clock.tick(t) and clock.slow_frames == 1
    assert abs(clock.last_slow_ms - 200) < 1e-6
    software = FrameClock()  # every frame 120 ms (llvmpipe): slow, but steady, not a hitch
    t = 0.0
    for _ in range(100):
        t += 0.12
        assert not software.tick(t)
