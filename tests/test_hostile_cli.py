"""Hostile command lines and live input: every bad value is refused before the first frame in
one line naming the option (exit 2, no traceback, no hang); counts the machine cannot hold live
are capped, not frozen on; text from outside never reaches the terminal as escapes; the show
never outlives its supervisor."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pythonosc.udp_client import SimpleUDPClient

from swarm_instrument.visual.gpu.context import is_software
from swarm_instrument.visual.gpu.limits import SOFTWARE_LIVE_COUNT

from conftest import ROOT, free_port, quick_sample, run_instrument, wait_for
from telemetry import last_record

QUICK = ("--headless", "--frames", "1", "--size", "64x64", "--count", "64")


def one_line_refusal(result: subprocess.CompletedProcess, *names: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout[-500:], result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("instrument: error: "), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("args, names", quick_sample([
    (["--seed", "-1"], ["--seed", "0 to 4294967295"]),
    (["--seed", "99999999999"], ["--seed"]),
    (["--obstacle", "0,0,0,nan"], ["--obstacle", "finite"]),
    (["--obstacle", "0,0,0,inf"], ["--obstacle"]),
    (["--obstacle", "1e309,0,0,1"], ["--obstacle"]),
    (["--obstacle", "0,0,0,-1"], ["RADIUS above 0"]),
    (["--obstacle", "0,0,0,1"] * 9, ["--obstacle: at most 8"]),
    (["--screenshot", "/proc/version"], ["--screenshot", ".png"]),
    (["--screenshot", "/proc/nope.png"], ["--screenshot"]),
    (["--size", "16384x16384"], ["--size 16384x16384", "2 GiB"]),
    (["--size", "3x3"], ["--size"]),
    (["--cout", "5"], ["did you mean --count?"]),
    (["--midi-map", "/nonexistent/map.json"], ["/nonexistent/map.json", "no such file"]),
    (["--audio-file", "/nonexistent/song.mp3"], ["--audio-file", "no such file"]),
    pytest.param(["--audio-file", "/dev/zero"], ["--audio-file", "/dev/zero"],
                 marks=pytest.mark.posix),
    pytest.param(["--state-in", "/dev/urandom"], ["/dev/urandom", "device"],
                 marks=pytest.mark.posix),
    (["--web", "nohost.invalid:8080"], ["--web", "'nohost.invalid:8080'", "cannot be resolved"]),
    (["--web", "8080:0.0.0.0"], ["--web", "'8080:0.0.0.0'", "HOST:PORT"]),
    (["--audio-start", "1:75"], ["--audio-start", "'1:75'", "minutes:seconds"]),
    (["--audio-start", "-3"], ["--audio-start", "'-3'"]),
    (["--audio-start", "nan"], ["--audio-start"]),
    (["--audio-start", "1:30"], ["--audio-start", "only with --audio-file"]),
    (["--mute"], ["--mute", "only with --audio-file"]),
]))
def test_bad_values_are_refused_before_the_first_frame(args, names):
    result = run_instrument(*QUICK, *args, timeout=60)  # a hang fails at the timeout
    one_line_refusal(result, *names)
    assert " frames, " not in result.stdout, result.stdout  # no frame ran: refused first


def test_a_start_past_the_songs_end_is_refused_and_a_restart_past_it_plays(tmp_path):
    """--audio-start after the file's last sample: one line with both times, before a frame.
    A supervisor's restart (--audio-start-clock) may land past the end: the file loops."""
    import numpy as np

    from swarm_instrument.audio.files.wav_writer import write_wav

    song = tmp_path / "short.wav"
    write_wav(song, np.zeros(48000 * 3, np.float32), 48000)
    result = run_instrument(*QUICK, "--audio-file", str(song), "--mute", "--audio-start",
                            "0:04", timeout=60)
    one_line_refusal(result, "--audio-start 0:04.0", "past the end of short.wav", "0:03.0")
    result = run_instrument(*QUICK, "--audio-file", str(song), "--mute", "--audio-start", "4",
                            "--audio-start-clock", "0", timeout=60)
    assert result.returncode == 0, result.stderr


LIMITS = [  # every numeric option: (a bad command line, what its one line must say)
    (["--count", "100000000"], ["--count", "expected 1 to 16777216 agents, got 100000000"]),
    (["--count", "0"], ["--count", "1 to 16777216", "got 0"]),
    (["--count", "many"], ["--count", "1 to 16777216", "got 'many'"]),
    (["--frames", "0"], ["--frames", "1 or more", "got 0"]),
    (["--frames", "1.5"], ["--frames", "1 or more", "got '1.5'"]),
    (["--dt", "0.5"], ["--dt", "above 0 and at most 1/30 s (0.033333", "got '0.5'"]),
    (["--dt", "nan"], ["--dt", "got 'nan'"]),
    (["--seed", "4294967296"], ["--seed", "0 to 4294967295", "got 4294967296"]),
    (["--screen", "-1"], ["--screen", "(0, 1, ...)", "got -1"]),
    (["--screen", "left"], ["--screen", "got 'left'"]),
    (["--output-screen", "-2"], ["--output-screen", "got -2"]),
    (["--control-screen", "x"], ["--control-screen", "got 'x'"]),
    (["--size", "20000x100"], ["--size", "16 to 16384 pixels", "got 20000x100"]),
    (["--fps", "0"], ["--fps", "1 to 1000", "got '0'"]),
    (["--fps", "inf"], ["--fps", "1 to 1000", "got 'inf'"]),
    (["--crf", "52"], ["--crf", "0 to 51", "got '52'"]),
    (["--obstacle", "0,0,2000000,1"], ["--obstacle", "-1000000 to 1000000",
                                       "got '0,0,2000000,1'"]),
    (["--osc", "70000"], ["--osc", "1 to 65535", "got 70000"]),
    (["--out-ndi", "Swarm,fps=0"], ["--out-ndi", "fps=0", "1 to 1000"]),
]


@pytest.mark.parametrize("argv, parts", LIMITS, ids=lambda v: " ".join(v) if v and
                         v[0].startswith("--") else None)
def test_every_numeric_option_names_itself_its_value_and_its_limits(argv, parts, capsys):
    """One line on stderr, nothing before it, exit 2: the option, the value given and the
    limits in plain digits (issue 26: "'count' = 100000000 is out of range [1, 1.67772e+07]",
    after the start look's line)."""
    from swarm_instrument.show.cli.arguments import build_parser

    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    said = capsys.readouterr()
    assert said.out == ""
    lines = said.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("instrument: error: "), said.err
    for part in parts:
        assert part in lines[0], lines[0]
    assert "e+" not in lines[0] and "e-0" not in lines[0], lines[0]


def test_a_count_out_of_range_is_the_only_line_of_a_plain_start():
    """The window's path (no --headless; no display here): the error, and nothing before it."""
    result = run_instrument("--count", "100000000", env={
        k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")},
        timeout=60)
    one_line_refusal(result, "--count", "1 to 16777216", "100000000")
    assert result.stdout == ""


@pytest.mark.slow  # the command, four times
def test_output_paths_are_checked_at_start_not_after_the_last_frame(tmp_path):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    for option, value in (("--screenshot", folder), ("--state-out", folder),
                          ("--telemetry", folder), ("--state-out", tmp_path / "x.txt")):
        line = one_line_refusal(run_instrument(*QUICK, option, str(value)), option)
        assert "frames" not in line  # refused before any frame ran
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-folder"]  # nothing written


@pytest.mark.posix  # a FIFO
def test_fifos_on_the_command_line_never_hang(fifo):
    for option in ("--preset", "--midi-map", "--state-in", "--audio-file"):
        one_line_refusal(run_instrument(*QUICK, option, str(fifo), timeout=30), str(fifo))


def test_limits_asked_of_the_driver_name_the_figure():
    from swarm_instrument.visual.gpu.limits import MachineLimits

    small = MachineLimits(max_side=4096, memory_bytes=256 * 2**20, software=False,
                          memory_source="the GPU")
    assert "at most 4096 pixels a side" in small.size_problem((8192, 4096))
    assert "GiB of frame buffers" in small.size_problem((4096, 4096))  # 47 bytes a pixel
    assert small.size_problem((1920, 1080)) is None
    assert "need 3.3 GiB" in small.count_problem(16_777_216, live=False)  # 212 bytes each
    assert small.count_problem(1_000_000, live=True) is None  # a GPU: memory is the limit
    assert small.live_count == int(256 * 2**20 * 0.8 // 212)


def test_a_count_that_crowds_its_space_is_said_at_start_with_the_radii_that_do_not(
        ctx, caplog):
    """Four million agents in the default look's sphere: about 520 neighbours each (2.2
    billion pairs a step, a second a frame on an H100); the start says so in one line with
    the radii that keep the look's density (the cube root of the count over 16,384: the radii
    bench_frame measures four million agents with). A count the look holds is not said."""
    import logging

    from swarm_instrument import instrument
    from swarm_instrument.control.parameters.registry import Params
    from swarm_instrument.show.cli.live_show import check_machine
    from swarm_instrument.visual.sim.agents import crowding_note, neighbours_each

    crowded = Params({"count": 4_194_304})
    assert neighbours_each(crowded) == pytest.approx(524.3, abs=0.1)
    line = crowding_note(crowded)
    assert line.startswith("count 4,194,304: about 524 neighbours an agent")
    assert "2.2 billion pairs" in line and "contain_radius 381 and spawn_radius 190" in line
    spread = Params({"count": 4_194_304, "contain_radius": 381, "spawn_radius": 190})
    assert crowding_note(spread) is None and neighbours_each(spread) == pytest.approx(2.0, 0.05)
    assert crowding_note(Params({"count": 262_144})) is None  # the count knob's top
    flat = Params({"count": 16_384, "contain_radius": 40, "dimensions": 2, "boundary": "wrap"})
    assert crowding_note(flat) is None  # the flat look: 92 each at its own count

    args = instrument.build_parser().parse_args(["--headless", "--frames", "1", "--count",
                                                 "200000", "--size", "64x64"])
    with caplog.at_level(logging.INFO):
        check_machine(ctx, args, Params({"count": 200_000, "contain_radius": 20}), (64, 64))
    assert [r.message for r in caplog.records if "neighbours an agent" in r.message] == [
        crowding_note(Params({"count": 200_000, "contain_radius": 20}))]


def test_more_agents_than_software_gl_holds_live_is_refused_at_start(ctx):
    if not is_software(ctx):
        pytest.skip("software GL's live limit (a GPU's is its memory: test_limits)")
    line = one_line_refusal(run_instrument("--headless", "--no-supervisor", "--no-midi",
                                           "--size", "64x64", "--count", "16777216"))
    assert f"{SOFTWARE_LIVE_COUNT:,}" in line and "--frames" in line


def test_an_existing_video_is_not_overwritten(tmp_path):
    video = tmp_path / "set.mp4"
    video.write_bytes(b"an hour of render")
    line = one_line_refusal(run_instrument("--render", "--control", "/nonexistent.jsonl",
                                           "--out", str(video)))
    assert video.read_bytes() == b"an hour of render" and line


def test_escapes_in_outside_text_are_shown_not_sent(tmp_path):
    hostile = tmp_path / "\x1b]0;OWNED\x07\x1b[2J.json"
    result = run_instrument(*QUICK, "--preset", str(hostile))
    line = one_line_refusal(result)
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "\\x1b]0;OWNED\\x07" in line


@pytest.mark.posix  # Ctrl+C (SIGINT) ends the show
def test_a_live_count_the_machine_cannot_hold_is_capped_and_the_show_plays_on(tmp_path):
    port = free_port()
    telemetry = tmp_path / "t.jsonl"
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "instrument.py"), "--headless", "--no-supervisor",
         "--no-midi", "--size", "64x64", "--count", "256", "--osc", f"127.0.0.1:{port}",
         "--telemetry", str(telemetry)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        wait_for(lambda: (r := last_record(telemetry)) and r["frame"] > 0, "the first frame")
        SimpleUDPClient("127.0.0.1", port).send_message("/swarm/count", 16777216)
        # the count capped; the agents what the governor holds of it (all, or fewer while
        # frames are too slow for 30 fps)
        capped = wait_for(lambda: (r := last_record(telemetry)) and
                          r["params"]["count"] == SOFTWARE_LIVE_COUNT and
                          r["agents"] == r["governor"]["count"] <= SOFTWARE_LIVE_COUNT and r,
                          "the capped count")
        assert capped["governor"]["count_asked"] == SOFTWARE_LIVE_COUNT
        wait_for(lambda: last_record(telemetry)["frame"] > capped["frame"] + 2,
                 "frames after the cap")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        out, err = process.communicate(timeout=30)
    assert f"count 16,777,216: more than this machine holds live; capped at " \
           f"{SOFTWARE_LIVE_COUNT:,}" in out
    assert "Traceback" not in err


@pytest.mark.posix  # the supervisor (POSIX), signal 0 to probe the show
@pytest.mark.linux  # /proc tells a zombie
def test_the_show_ends_when_its_supervisor_is_killed(tmp_path):
    port = free_port()
    env = {**os.environ, "SWARM_STATE_DIR": str(tmp_path),
           "SWARM_RECOVERY_FILE": str(tmp_path / "recovery.json")}
    supervisor = subprocess.Popen(
        [sys.executable, str(ROOT / "instrument.py"), "--headless", "--size", "64x64",
         "--count", "128", "--no-midi", "--osc", f"127.0.0.1:{port}"], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        record = tmp_path / "last-telemetry.json"
        child = wait_for(lambda: (r := last_record(record)) and r["pid"], "the show to start")
        supervisor.kill()
        supervisor.wait(timeout=10)

        def gone() -> bool:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                return True
            try:  # a zombie counts as gone: it no longer renders nor holds the port
                return Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"
            except OSError:
                return True

        wait_for(gone, "the show to end with its supervisor", timeout=30)

        def port_free() -> bool:
            # the leader shows Z while the process's other threads (llvmpipe's, the audio
            # helper's) may still be ending, and they share its open files: the socket closes
            # with the last of them, so this waits for it rather than binding at once
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as again:
                try:
                    again.bind(("127.0.0.1", port))
                except OSError:
                    return False
                return True

        wait_for(port_free, "the OSC port to be free again", timeout=10)
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
