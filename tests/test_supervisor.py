"""The supervisor: the show comes back after SIGKILL or a hang, with a crash report; repeated
crashes lead to safe mode; Ctrl+C ends both processes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import wave
from pathlib import Path

import numpy as np
import pytest

import swarm_instrument.show.supervision.supervisor as supervisor_module
from swarm_instrument.show.supervision.child_exit import exiting
from swarm_instrument.show.supervision.heartbeat import SongPosition, beat_bytes
from swarm_instrument.show.supervision.supervisor import Supervisor, crash_logger
from swarm_instrument.visual.gpu import context as gl_context
from swarm_instrument.visual.gpu.context import prepare_headless_context, prepared_or_new_context

from conftest import ROOT, wait_for
from telemetry import last_record


def read_pid(path: Path) -> int | None:
    """The pid in the supervisor's last-telemetry.json, once there is a whole record."""
    record = last_record(path)
    return record.get("pid") if record else None


@pytest.fixture
def supervised(tmp_path):
    env = {**os.environ, "SWARM_STATE_DIR": str(tmp_path),
           "SWARM_RECOVERY_FILE": str(tmp_path / "recovery.json")}
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "instrument.py"), "--headless", "--size", "96x54",
         "--count", "300", "--no-midi"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield process, tmp_path
    stop(process)


def stop(process: subprocess.Popen) -> None:
    """Ctrl+C for a supervised show still running; killed if it does not end."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.mark.posix  # SIGKILL, SIGSTOP and SIGINT
def test_the_show_comes_back_after_sigkill_and_a_hang(supervised):
    process, state = supervised
    record = state / "last-telemetry.json"
    first = wait_for(lambda: read_pid(record), "the show's first telemetry")
    assert first != process.pid  # the show runs in a child process

    os.kill(first, signal.SIGKILL)
    second = wait_for(lambda: (pid := read_pid(record)) not in (None, first) and pid,
                      "the show to come back after SIGKILL")
    log = (state / "crash.log").read_text()
    assert "killed by signal 9" in log and '"pid": %d' % first in log

    os.kill(second, signal.SIGSTOP)  # frozen: no frames, no heartbeat
    third = wait_for(lambda: (pid := read_pid(record)) not in (None, first, second) and pid,
                     "the show to come back after hanging")
    assert "stopped answering" in (state / "crash.log").read_text()
    assert process.poll() is None

    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0
    with pytest.raises(ProcessLookupError):
        os.kill(third, 0)  # the child ended with it


@pytest.mark.posix  # the supervisor: POSIX pipes and process groups (not on Windows)
def test_repeated_crashes_back_off_stop_resuming_and_end_in_safe_mode(tmp_path):
    """A show that dies at once, again and again: the second start resumes, at once; the
    resumed state died quickly too, so the third starts fresh (the default look) and so does
    the fourth, in --safe-mode. The delays between them double from 0.5 s."""
    starts = tmp_path / "starts.txt"
    crasher = ("import sys, time; open(sys.argv[1], 'a').write(f'{time.monotonic()} ' + "
               "' '.join(sys.argv[2:]) + '\\n'); "
               "sys.exit(3 if sys.argv[2:].count('--safe-mode') == 0 else 0)")
    said: list[str] = []
    supervisor = Supervisor([], state_dir=tmp_path, say=said.append,
                            program=[sys.executable, "-c", crasher, str(starts)])
    assert supervisor.run() == 0  # the safe-mode child exits 0: the supervisor ends
    lines = starts.read_text().splitlines()
    assert len(lines) == 4
    assert "--resume" not in lines[0] and "--resume" in lines[1]
    assert all("--resume" not in line and "--fresh" in line for line in lines[2:])
    assert all("--safe-mode" not in line for line in lines[:3]) and "--safe-mode" in lines[3]
    assert (tmp_path / "crash.log").read_text().count("exited with code 3") == 3
    times = [float(line.split()[0]) for line in lines]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert gaps[1] >= 0.5 and gaps[2] >= 1.0  # backing off after the first, at once
    assert [line.split("restarting in ")[1][:5] for line in said] == ["0.0 s", "0.5 s", "1.0 s"]
    assert "from the default look" in said[1]


@pytest.mark.posix  # the supervisor: POSIX pipes and process groups (not on Windows)
def test_a_show_that_played_a_while_comes_back_at_once(tmp_path, monkeypatch):
    """A crash after the show played longer than QUICK_S is a stage accident, not a show that
    cannot start: each is started again without waiting (the delays are for quick crashes
    that follow each other)."""
    monkeypatch.setattr(supervisor_module, "QUICK_S", 0.0)  # every run "played a while"
    starts = tmp_path / "starts.txt"
    crasher = ("import sys; open(sys.argv[1], 'a').write('x'); "
               "sys.exit(3 if len(open(sys.argv[1]).read()) < 3 else 0)")
    said: list[str] = []
    supervisor = Supervisor([], state_dir=tmp_path, say=said.append,
                            program=[sys.executable, "-c", crasher, str(starts)])
    assert supervisor.run() == 0
    assert starts.read_text() == "xxx"
    assert [line.split("restarting in ")[1][:5] for line in said] == ["0.0 s", "0.0 s"], said


SPARING_SHOW = """
import json, os, sys, time
log = sys.argv[1]
born = time.monotonic()
args = sys.argv[2:]
if args == ["--spare-for-supervisor"]:  # the spare: waits for its command line
    line = sys.stdin.readline()
    if not line:
        open(log, "a").write(f"dropped {os.getpid()}\\n")
        sys.exit(0)
    args = json.loads(line)
shows = open(log).read().count("show ") if os.path.exists(log) else 0
open(log, "a").write(f"show {os.getpid()} born {born} played {time.monotonic()} {args}\\n")
os.write(int(args[args.index("--heartbeat-fd") + 1]), b".")  # a frame played
time.sleep(0.5)
sys.exit(3 if shows == 0 else 0)  # the first show dies, the second ends well
"""


@pytest.mark.posix  # the supervisor: POSIX pipes and process groups (not on Windows)
def test_a_spare_process_plays_the_show_that_died(tmp_path):
    """With a spare, the show that comes back is a process started while the first played
    (its imports done ahead of need), handed its command line when the first died; the spare
    made after it is dropped when the supervisor ends."""
    log = tmp_path / "shows.txt"
    said: list[str] = []
    supervisor = Supervisor([], state_dir=tmp_path, say=said.append, spare=True,
                            program=[sys.executable, "-c", SPARING_SHOW, str(log)])
    assert supervisor.run() == 0
    lines = log.read_text().splitlines()
    shows = [line.split() for line in lines if line.startswith("show ")]
    assert len(shows) == 2 and supervisor.spares_taken == 1, lines
    first_played, second_born = float(shows[0][5]), float(shows[1][3])
    assert second_born < first_played + 0.5  # started while the first played (it died at +0.5)
    assert "--resume" in lines[1] and "--heartbeat-fd" in lines[1]
    assert lines[-1].startswith("dropped ")  # the next spare, made once the second played
    assert "restarting in 0.0 s" in said[0]


def test_the_crash_log_rotates(tmp_path):
    logger = crash_logger(tmp_path)
    for _ in range(1200):
        logger.info("x" * 1000)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert "crash.log" in files and "crash.log.1" in files
    assert all(p.stat().st_size <= 1_001_000 for p in tmp_path.iterdir())


@pytest.mark.slow  # the command, played twice
def test_safe_mode_runs_on_the_bundled_shaders(tmp_path):
    broken = tmp_path / "shaders"
    shutil.copytree(ROOT / "shaders", broken)
    (broken / "common.glsl").write_text("not glsl at all\n")
    env = {**os.environ, "SWARM_SHADERS": str(broken), "SWARM_STATE_DIR": str(tmp_path)}
    args = [sys.executable, str(ROOT / "instrument.py"), "--headless", "--frames", "3",
            "--size", "96x54", "--count", "300"]
    failing = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert failing.returncode != 0 and "common.glsl" in failing.stderr
    safe = subprocess.run(args + ["--safe-mode"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert safe.returncode == 0, safe.stderr
    assert "safe mode" in safe.stdout and "3 frames" in safe.stdout


def test_windows_runs_the_show_unsupervised_and_says_so():
    """The supervisor needs POSIX pipes and process groups: on Windows an open-ended show runs
    in its own process with one line that says so; elsewhere it is supervised, and a bounded
    run (--frames) never is."""
    from swarm_instrument import instrument

    open_ended = instrument.build_parser().parse_args(["--headless"])
    assert instrument.supervision(open_ended, platform="linux") == (True, None)
    supervise, note = instrument.supervision(open_ended, platform="win32")
    assert not supervise and "not on Windows" in note and "--resume" in note
    bounded = instrument.build_parser().parse_args(["--headless", "--frames", "5"])
    assert instrument.supervision(bounded, platform="win32") == (False, None)


@pytest.mark.linux  # /proc/PID/stat
@pytest.mark.posix  # SIGKILL
def test_a_dying_child_is_seen_before_it_is_reaped():
    """A GL process's teardown after SIGKILL takes 1.5-1.9 s on the H200's host before
    waitpid answers: the supervisor reads the kernel's PF_EXITING and the status instead."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert exiting(child.pid) is None  # alive
        child.send_signal(signal.SIGKILL)
        assert wait_for(lambda: exiting(child.pid), "the kill seen") == -signal.SIGKILL
    finally:
        child.kill()
        child.wait()
    assert exiting(child.pid) is None  # reaped: nothing left to say
    ended = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    assert wait_for(lambda: exiting(ended.pid), "the exit seen") == 3
    assert ended.wait() == 3


def test_the_spare_s_gl_context_is_the_one_its_headless_show_takes():
    """The spare makes a headless show's context ahead of need (show/supervision/spare.py):
    the show takes that one, once; a second show makes its own."""
    prepare_headless_context("4.1")
    prepared = gl_context._PREPARED[-1][1]
    taken = prepared_or_new_context("4.1")
    assert taken is prepared and not gl_context._PREPARED
    fresh = prepared_or_new_context("4.1")
    assert fresh is not taken
    fresh.release()
    taken.release()


def write_tone(path: Path, seconds: float, rate: int = 48000) -> Path:
    t = np.arange(int(seconds * rate)) / rate
    samples = (0.3 * np.sin(2 * np.pi * 220 * t) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples.tobytes())
    return path


@pytest.mark.posix  # SIGKILL
def test_a_song_played_from_a_file_goes_on_where_it_was_after_a_crash(tmp_path):
    """Rehearsing with --audio-file: the show killed mid-song comes back playing the song
    where it would have been, not from its start (it started over, the music too)."""
    song = write_tone(tmp_path / "song.wav", 120.0)
    env = {**os.environ, "SWARM_STATE_DIR": str(tmp_path),
           "SWARM_RECOVERY_FILE": str(tmp_path / "recovery.json")}
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "instrument.py"), "--headless", "--size", "96x54",
         "--count", "300", "--no-midi", "--audio-file", str(song), "--mute",
         "--audio-start", "0:20"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    record = tmp_path / "last-telemetry.json"

    def playing(pid_not=None):
        last = last_record(record)
        if not last or last.get("pid") == pid_not or "position_s" not in last["audio"]:
            return None
        return last

    try:
        first = wait_for(lambda: (r := playing()) and r["audio"]["position_s"] > 22.0 and r,
                         "the song to play from 0:20 past 0:22")
        os.kill(first["pid"], signal.SIGKILL)
        killed = time.monotonic()
        second = wait_for(lambda: playing(first["pid"]), "the show to come back")
        elapsed = time.monotonic() - killed
        position = second["audio"]["position_s"]
        # where the song was at its last heartbeat (at most a second before the kill), plus
        # the time since: never back at 0:20 or the start
        assert first["audio"]["position_s"] - 1.5 < position - elapsed <= \
            first["audio"]["position_s"] + 2.5, (first["audio"], second["audio"], elapsed)
    finally:
        stop(process)


def test_the_heartbeat_says_the_song_s_position_and_nothing_else_passes_for_one():
    clock = iter([5.0, 9.0])
    song = SongPosition(clock=lambda: next(clock))
    assert beat_bytes(None) == beat_bytes(float("nan")) == beat_bytes(-1.0) == b"."
    song.heard(b"..." + b"@@1e9.@12." + b"@x.")  # only whole positions count
    assert song.restart_args() == ["--audio-start", "12.000", "--audio-start-clock", "5.0"]
    song.heard(beat_bytes(93.25) + b"." + beat_bytes(94.2504))
    assert song.restart_args()[:2] == ["--audio-start", "94.250"] and song.heard_at == 9.0
    song.heard(b".")  # a beat without a position keeps the last one
    assert song.seconds == 94.25
