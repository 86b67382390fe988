"""The parameter registry (seed defaults, validation) and the lure / influencer."""

from __future__ import annotations

import numpy as np
import pytest

from swarm_instrument.control.parameters.registry import BY_NAME, ParamError, Params
from swarm_instrument.visual.sim.lure import Lure, wander_point

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
    from swarm_instrument.show.report import FrameClock

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


def test_every_number_has_a_performance_range_inside_its_hard_limits():
    from swarm_instrument.control.parameters.registry import REGISTRY

    for spec in REGISTRY:
        if spec.kind not in ("float", "int"):
            continue
        lo, hi = spec.play_range
        assert spec.lo <= lo < hi <= spec.hi, spec.name
        # a fader's ends are the range's ends, and the middle lies between them
        assert spec.from_norm(0.0) == pytest.approx(lo) and spec.from_norm(1.0) == pytest.approx(hi)
        assert lo <= spec.from_norm(0.5) <= hi
        for x in (0.0, 0.25, 0.5, 0.75, 1.0):  # to_norm undoes from_norm
            if spec.kind == "float":
                assert spec.to_norm(spec.from_norm(x)) == pytest.approx(x, abs=1e-9), spec.name
    # The ones the issue named: a fader at half no longer asks max_speed for 5000.
    assert BY_NAME["max_speed"].from_norm(0.5) == pytest.approx(40 ** 0.5)
    assert BY_NAME["count"].from_norm(0.5) == 8192  # geometric over 256..262144


def test_a_nudge_moves_along_the_range_and_never_pulls_a_value_into_it():
    from swarm_instrument.control.parameters.registry import NUDGE_COARSE, NUDGE_FINE

    weight = BY_NAME["alignment_weight"]  # linear over 0..4
    assert weight.nudge(1.0, NUDGE_FINE) == pytest.approx(1.04)
    assert weight.nudge(1.0, -NUDGE_COARSE) == pytest.approx(0.6)
    assert weight.nudge(4.0, NUDGE_FINE) == 4.0 and weight.nudge(0.0, -NUDGE_FINE) == 0.0
    assert weight.nudge(50.0, NUDGE_FINE) == 50.0  # set above the range: Right keeps it
    assert weight.nudge(50.0, -NUDGE_FINE) == pytest.approx(3.96)  # Left brings it back in
    speed = BY_NAME["max_speed"]  # geometric over 1..40: equal steps, equal ratios
    assert speed.nudge(8.0, NUDGE_COARSE) / 8.0 == pytest.approx(40 ** 0.1)
    cap = BY_NAME["neighbor_cap"]  # an int step smaller than one still moves it by one
    assert cap.nudge(0, NUDGE_FINE) >= 1
    assert BY_NAME["separation"].nudge(True, NUDGE_FINE) is False
    assert BY_NAME["boundary"].nudge("sphere", NUDGE_FINE) == "wrap"
    assert BY_NAME["boundary"].nudge("sphere", -NUDGE_FINE) == "wrap"
