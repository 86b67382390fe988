"""Audio driving the swarm end to end: a sound file through `instrument.py`, as a performer
rehearses with --audio-file, and modulation routes from a preset."""

from __future__ import annotations

import json

import numpy as np
import pytest

from swarm_instrument.audio.files.wav_writer import write_wav
from swarm_instrument.control.looks.swarm_state import load_state

from conftest import run_instrument as instrument

RATE = 48000


def run_with(tmp_path, name: str, samples: np.ndarray, *extra: str):
    wav = tmp_path / f"{name}.wav"
    write_wav(wav, samples.astype(np.float32), RATE)
    state, telemetry = tmp_path / f"{name}.npz", tmp_path / f"{name}.jsonl"
    result = instrument("--headless", "--frames", "25", "--dt", "0.03", "--count", "1500",
                        "--size", "160x90", "--audio-file", str(wav), "--mute",
                        "--state-out", str(state), "--telemetry", str(telemetry), *extra)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in telemetry.read_text().splitlines()]
    return load_state(state), records[-1]


@pytest.mark.slow  # the command, played twice
def test_a_loud_file_makes_the_swarm_faster(tmp_path):
    seconds = 20
    noise = np.random.default_rng(0).normal(scale=0.3, size=seconds * RATE)
    (_, loud_v), loud = run_with(tmp_path, "loud", noise)
    (_, quiet_v), quiet = run_with(tmp_path, "quiet", np.zeros(seconds * RATE))
    assert loud["audio"]["state"] == "file" and loud["audio"]["level"] > 0.5
    assert quiet["audio"]["level"] == 0.0
    assert loud["speed_scale"] > 1.5 and quiet["speed_scale"] == 1.0
    loud_speed = np.linalg.norm(loud_v, axis=1).mean()
    quiet_speed = np.linalg.norm(quiet_v, axis=1).mean()
    assert loud_speed > 1.3 * quiet_speed
    assert np.linalg.norm(quiet_v, axis=1).max() <= 8.0 + 1e-3  # max_speed without a boost


@pytest.mark.slow  # the command, played
def test_preset_routes_modulate_parameters(tmp_path):
    preset = tmp_path / "pulse.json"
    preset.write_text(json.dumps({
        "params": {"audio_speed_boost": 0},
        "routes": [{"source": "level", "param": "separation_weight", "amount": 3.0}]}))
    noise = np.random.default_rng(1).normal(scale=0.3, size=20 * RATE)
    _, record = run_with(tmp_path, "routed", noise, "--preset", str(preset))
    assert record["speed_scale"] == 1.0  # no boost in this preset
    assert record["modulated"]["separation_weight"] > 1.5 + 1.5  # base 1.5 + 3 x level
    assert record["params"]["separation_weight"] == 1.5  # the registry keeps the base value


def test_a_bad_route_is_named(tmp_path):
    preset = tmp_path / "bad.json"
    preset.write_text(json.dumps({"routes": [{"source": "level", "param": "nope",
                                              "amount": 1}]}))
    result = instrument("--headless", "--frames", "1", "--preset", str(preset))
    assert result.returncode == 2 and str(preset) in result.stderr and "nope" in result.stderr


def test_a_missing_audio_file_stops_before_the_show(tmp_path):
    """The performer asked for that file: a show without it would be the wrong show."""
    missing = tmp_path / "missing.mp3"
    result = instrument("--headless", "--frames", "3", "--size", "160x90", "--count", "500",
                        "--audio-file", str(missing))
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{missing}: no such file" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "frames" not in result.stdout


@pytest.mark.slow  # the command plays, then renders
def test_a_live_set_recorded_then_rendered(tmp_path):
    """--record-control on a live (headless) set, then --render --control: the video has the
    set's length and the recorded preset's parameters drive it."""
    track, video = tmp_path / "set.jsonl", tmp_path / "set.mp4"
    live = instrument("--headless", "--frames", "24", "--dt", "0.0333", "--size", "96x54",
                      "--count", "400", "--no-midi", "--preset", "flat-wrap",
                      "--record-control", str(track))
    assert live.returncode == 0, live.stderr
    assert f"control track written to {track}" in live.stdout
    header = json.loads(track.read_text().splitlines()[0])
    assert header["format"] == "swarm-control" and header["params"]["dimensions"] == 2
    render = instrument("--render", "--control", str(track), "--out", str(video),
                        "--size", "96x54", "--fps", "30", "--no-midi")
    assert render.returncode == 0, render.stderr
    assert "written to" in render.stdout and video.stat().st_size > 0
