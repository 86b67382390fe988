"""One loop for every way the show runs: a show played headless at a fixed step with
--record-control, then rendered again from that control track at the same size and rate, gives
the same frames, bit for bit; and the loop's clocks are what they say."""

from __future__ import annotations

import pytest

from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.loop import (
    FixedStep,
    Loop,
    Offscreen,
    SongClock,
    WallClock,
    latches_twice,
)
from swarm_instrument.show.show import Show
from swarm_instrument.visual.sim.agents import MAX_DT

from conftest import run_instrument
from pictures import read_png

FPS = 30
FRAMES = 45
COMMON = ("--size", "160x90", "--count", "700", "--seed", "5")


@pytest.mark.slow  # the command renders twice
def test_a_recorded_set_renders_again_into_the_same_frames(tmp_path):
    track, live, rendered = tmp_path / "set.jsonl", tmp_path / "live.png", tmp_path / "r.png"
    played = run_instrument("--headless", "--no-midi", "--frames", str(FRAMES), "--dt",
                            repr(1 / FPS), *COMMON, "--preset", "lure-rush",
                            "--record-control", str(track), "--screenshot", str(live))
    assert played.returncode == 0, played.stderr
    again = run_instrument("--render", "--control", str(track), "--out", str(tmp_path / "v.mp4"),
                           "--fps", str(FPS), "--frames", str(FRAMES), *COMMON,
                           "--screenshot", str(rendered))
    assert again.returncode == 0, again.stderr
    first, second = read_png(live), read_png(rendered)
    assert (first.max(axis=2) > 40).mean() > 0.01, "nothing drawn"
    assert (first == second).all(), (
        f"{(first != second).any(axis=2).mean():.2%} of the pixels differ between the live "
        "set and its render")


def test_the_clocks_step_as_they_say():
    fixed = FixedStep(0.25, start=10.0)
    assert [(t.now, t.dt, t.steps) for t in (fixed.next(), fixed.next())] == [
        (10.0, 0.25, 1), (10.25, 0.25, 1)]
    song = SongClock(24.0, substeps=2)  # 24 fps: two steps of 1/48 s, song time i / 24
    ticks = [song.next() for _ in range(3)]
    assert [t.now for t in ticks] == pytest.approx([0.0, 1 / 24, 2 / 24])
    assert all(t.dt == pytest.approx(1 / 48) and t.steps == 2 for t in ticks)
    times = iter([5.0, 5.01, 7.0])
    wall = WallClock(time_source=lambda: next(times))
    assert [wall.next().dt for _ in range(3)] == pytest.approx([0.0, 0.01, MAX_DT])  # clamped
    assert WallClock(fixed_dt=0.02, time_source=lambda: 1.0).next().dt == 0.02


@pytest.mark.parametrize("live", [True, False])
def test_a_live_frame_is_done_on_the_gpu_before_the_next_begins(ctx, monkeypatch, live):
    """Unpaced, a headless live show ran ahead of the GPU by as much work as the driver would
    queue: its inputs shown that late, and a killed show's teardown on the H200's host waited
    1-2.7 s for it all before the restarted show could draw. A render keeps its overlap."""
    show = Show(ctx, Params({"count": 300}), ShowOptions(live=live, fixed_dt=1 / 60))
    events: list[str] = []
    # The frame's end is waited for (Loop.end_wait); live, its scene too, before the late
    # latch (Show.scene_wait): visual/gpu/fence.py GpuWait, asleep on a GPU.
    loop = Loop(show, FixedStep(1 / 60), before=lambda tick: events.append("frame"))
    for name, wait in (("finish", loop.end_wait), ("scene", show.scene_wait)):
        monkeypatch.setattr(wait, "wait", lambda name=name, wait=wait.wait: (
            events.append(name), wait())[1])
    assert latches_twice(show) == live  # live: the scene waited for, the inputs read again
    try:
        loop.run(Offscreen(show, (64, 36)), frames=4)
    finally:
        show.release()
    assert events == (["frame", "scene", "finish"] * 4 if live else ["frame"] * 4)
