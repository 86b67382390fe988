"""One Ctrl+C ends a supervised show cleanly, every time: SIGINT to the whole process group (as a
terminal sends it) of `instrument.py` playing real JACK audio and JACK MIDI, at varying moments
of the show, 20 times. Each run must exit 0 with no traceback or library assertion, and leave
the screenshot and the final telemetry record it was asked for. SIGTERM the same."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, wait_for
from pictures import read_png
from telemetry import records

RUNS = 20


@pytest.mark.posix  # SIGINT and SIGTERM to a process group
@pytest.mark.slow  # 20 shows started and stopped
def test_ctrl_c_to_the_group_ends_a_supervised_show_cleanly_every_time(jack, tmp_path):
    env = {**os.environ, "SWARM_STATE_DIR": str(tmp_path / "state"),
           "SWARM_RECOVERY_FILE": str(tmp_path / "state" / "recovery.json")}
    for run in range(RUNS):
        shot, telemetry = tmp_path / f"shot-{run}.png", tmp_path / f"t-{run}.jsonl"
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "instrument.py"), "--headless", "--size", "96x54",
             "--count", "300", "--midi-api", "jack", "--screenshot", str(shot),
             "--telemetry", str(telemetry)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True)  # a group of its own, as a terminal's job is
        try:
            first = wait_for(lambda: records(telemetry), "the show's first frame",
                             process=process)[0]
            if run == 0:  # the ports are really open: what a stop must close cleanly (the
                # audio worker opens its stream beside the first frames: awaited here)
                opened = wait_for(lambda: [r for r in records(telemetry)
                                           if r["audio"]["state"] == "ok"],
                                  "the audio input open", process=process)[0]
                assert opened["audio"]["device"], opened["audio"]
                assert first["midi"]["api"] == "jack", first["midi"]
            time.sleep((run % 5) * 0.15)  # land in different moments of the frame loop
            stop = signal.SIGTERM if run % 10 == 9 else signal.SIGINT
            os.killpg(process.pid, stop)
            out, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
        where = f"run {run} ({signal.Signals(stop).name})"
        assert process.returncode == 0, f"{where}: exit {process.returncode}\n{err[-2000:]}"
        assert "Traceback" not in err and "Assertion" not in err, f"{where}:\n{err[-2000:]}"
        assert "restarting in" not in out + err, where
        assert read_png(shot).shape == (54, 96, 3), where
        final = records(telemetry)[-1]
        frames = int(re.search(r"instrument: (\d+) frames, ", out).group(1))
        assert final["frame"] == frames, f"{where}: the final record is missing"
