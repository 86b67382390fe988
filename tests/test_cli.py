"""`instrument.py --headless` as a user runs it: options, state files, presets, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from swarm_instrument.control.looks.swarm_state import load_state
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.visual.sim.agents import spawn_state
from swarm_instrument.visual.sim.lure import Lure

import reference
from conftest import quick_sample
from conftest import run_instrument as instrument


@pytest.mark.slow  # the command, played
def test_fixed_steps_reproduce_the_seed_kernel(tmp_path):
    """--dt 0.02 --frames 3 from --seed 5: the state written equals three numpy steps of the
    seed's kernel from the same spawn, towards the wandering lure."""
    out = tmp_path / "state.npz"
    seeds_defaults = tmp_path / "defaults.json"  # every parameter at the registry's default
    seeds_defaults.write_text('{"params": {}}')  # (a plain start opens on the start look)
    result = instrument("--headless", "--frames", "3", "--dt", "0.02", "--seed", "5",
                        "--count", "600", "--neighbors", "brute", "--state-out", str(out),
                        "--preset", str(seeds_defaults))
    assert result.returncode == 0, result.stderr
    assert "3 frames" in result.stdout and str(out) in result.stdout
    position, velocity = load_state(out)
    assert position.shape == (600, 3) and position.dtype == np.float32

    params = Params({"count": 600})
    x, v = spawn_state(600, params, 5)
    lure = Lure(params["contain_radius"])
    for frame in range(3):
        x, v, margin = reference.step(x, v, params, 0.02, target=lure.position(frame * 0.02))
    certain = margin > 1e-3
    np.testing.assert_allclose(position[certain], x[certain], atol=1e-3)
    np.testing.assert_allclose(velocity[certain], v[certain], atol=1e-3)


@pytest.mark.slow  # the command, played several times
def test_state_round_trip_and_same_seed_same_start(tmp_path):
    a, b, c = (tmp_path / name for name in ("a.npz", "b.npz", "c.npz"))
    for path, seed in ((a, "1"), (b, "1"), (c, "2")):
        result = instrument("--headless", "--frames", "1", "--dt", "0.001", "--count", "300",
                            "--seed", seed, "--state-out", str(path))
        assert result.returncode == 0, result.stderr
    xa, _ = load_state(a)
    xb, _ = load_state(b)
    xc, _ = load_state(c)
    np.testing.assert_allclose(xa, xb, atol=1e-5)
    assert np.abs(xa - xc).max() > 1
    # --state-in sets the count and continues from the file.
    d = tmp_path / "d.npz"
    result = instrument("--headless", "--frames", "2", "--dt", "0.01", "--state-in", str(a),
                        "--neighbors", "grid", "--state-out", str(d))
    assert result.returncode == 0, result.stderr
    assert "300 agents" in result.stdout
    xd, _ = load_state(d)
    assert xd.shape == (300, 3)
    assert 0 < np.abs(xd - xa).max() < 1.0


@pytest.mark.slow  # the command, played
def test_preset_params_apply(tmp_path):
    preset = tmp_path / "look.json"
    preset.write_text(json.dumps({"params": {"count": 123, "boundary": "wrap",
                                             "dimensions": 2, "contain_radius": 10}}))
    out = tmp_path / "s.npz"
    result = instrument("--headless", "--frames", "2", "--dt", "0.03", "--preset", str(preset),
                        "--state-out", str(out))
    assert result.returncode == 0, result.stderr
    position, _ = load_state(out)
    assert position.shape == (123, 3)
    assert np.all(position[:, 2] == 0)
    assert np.all(np.abs(position) <= 10 + 1e-4)


@pytest.mark.parametrize("content, expected", quick_sample([
    ('{"params": {"max_sped": 3}}', "unknown parameter 'max_sped'"),
    ('{"params": {"max_speed": -1}}', "'max_speed' = -1.0 is out of range"),
    ('{"params": {"boundary": "torus"}}', "'boundary' must be one of"),
    ('{"params": {"count": 2.5}}', "'count' must be a whole number"),
    ('{"params": {"seek": "yes"}}', "'seek' must be true or false"),
    ('{"params": ', "the file ends early at line 1"),
    ('{"params": {}} x', "not valid JSON at line 1"),
    ('[1, 2]', "a preset is a JSON object"),
    (('{"routes": [{"source": "low", "param": "bloom", "amount": 1},'
      ' {"source": "low", "param": "bloom", "amount": 2}]}'),
     "routes[0] (low -> bloom 1) and routes[1] (low -> bloom 2) route the same source"),
]))
def test_bad_preset_is_one_clear_line(tmp_path, content, expected):
    preset = tmp_path / "bad.json"
    preset.write_text(content)
    result = instrument("--headless", "--frames", "1", "--preset", str(preset))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(preset) in lines[0] and expected in lines[0], lines


@pytest.mark.slow  # the command, played several times
def test_bad_state_files_are_named(tmp_path):
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    wrong_shape = tmp_path / "shape.npz"
    np.savez(wrong_shape, position=np.zeros((4, 2)), velocity=np.zeros((4, 2)))
    with_nan = tmp_path / "nan.npz"
    np.savez(with_nan, position=np.full((4, 3), np.nan), velocity=np.zeros((4, 3)))
    missing = tmp_path / "missing.npz"
    np.savez(missing, position=np.zeros((4, 3)))
    cases = [(junk, "not an .npz file"), (wrong_shape, "shape (N, 3)"), (with_nan, "NaN"),
             (missing, "missing array 'velocity'"), (tmp_path / "nope.npz", "no such file")]
    for path, expected in cases:
        result = instrument("--headless", "--frames", "1", "--state-in", str(path))
        assert result.returncode == 2, (path, result.stderr)
        assert "Traceback" not in result.stderr
        assert str(path) in result.stderr and expected in result.stderr, result.stderr


def test_unwritable_state_out_fails_before_running(tmp_path):
    result = instrument("--headless", "--frames", "1",
                        "--state-out", str(tmp_path / "no" / "such" / "dir" / "s.npz"))
    assert result.returncode == 2
    assert "cannot write into" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow  # the command, several times
def test_bad_command_line_values(tmp_path):
    for args, expected in ((["--dt", "0.5"], "--dt"), (["--count", "0"], "--count"),
                           (["--neighbors", "octree"], "--neighbors"),
                           (["--obstacle", "1,2,3"], "--obstacle")):
        result = instrument("--headless", "--frames", "1", *args)
        assert result.returncode == 2 and expected in result.stderr, result.stderr


@pytest.mark.slow  # the command, played
def test_obstacles_from_the_command_line(tmp_path):
    out = tmp_path / "s.npz"
    result = instrument("--headless", "--frames", "60", "--dt", "0.03", "--count", "400",
                        "--obstacle", "0,0,0,12", "--state-out", str(out))
    assert result.returncode == 0, result.stderr
    position, _ = load_state(out)
    # The spawn sphere (radius 30) holds agents inside the obstacle at first; they are pushed out.
    inside_at_start = (np.linalg.norm(spawn_state(400, Params(), 0)[0], axis=1) < 12).sum()
    inside_now = (np.linalg.norm(position, axis=1) < 12).sum()
    assert inside_at_start > 20 and inside_now <= 3
