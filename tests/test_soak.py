"""The soak benchmark (issue 8) runs a show with audio and random MIDI, and an hour of it can
span processes: --wall-limit saves a checkpoint, --resume goes on from it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def soak(*args):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_soak.py"),
                           "--count", "256",
                           "--size", "96x64", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # the soak, in two processes
def test_soak_stops_at_its_wall_limit_and_goes_on_in_a_new_process(tmp_path):
    checkpoint, report = tmp_path / "soak.npz", tmp_path / "soak.json"
    # A zero limit stops after the first frame, however fast the GPU.
    first = soak("--minutes", "0.05", "--wall-limit", "0", "--checkpoint", str(checkpoint))
    assert first.returncode == 3, first.stderr
    assert f"--resume {checkpoint}" in first.stdout
    second = soak("--resume", str(checkpoint), "--json", str(report))
    assert second.returncode == 0, second.stderr
    result = json.loads(report.read_text())
    assert result["frames"] == 180 and result["processes"] == 2
    assert [s["frames"] for s in result["segments"]] == [[0, 1], [1, 180]]
    assert result["failures"] == [] and result["state_finite"]
    assert result["midi_messages"] > 100  # the random knobs really played
    assert 0 < result["frame_ms"]["50"] <= result["frame_ms"]["99"]


def test_soak_refuses_a_damaged_checkpoint(tmp_path):
    bad = tmp_path / "soak.npz"
    bad.write_bytes(b"not a checkpoint")
    result = soak("--resume", str(bad))
    assert result.returncode != 0 and f"cannot resume from {bad}" in result.stderr
