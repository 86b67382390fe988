"""A show on a machine too slow for it (software GL at a few frames a second), played by the
one loop with the wall clock (a fake one, so nothing here depends on this machine's speed):
telemetry and the HUD say when it falls behind real time and when it keeps up again, and the
lure's three idle seconds are the performer's seconds, not the clamped steps'."""

from __future__ import annotations

import io

import numpy as np
import pytest

from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.loop import MAX_STEPS, FixedStep, Loop, Offscreen, WallClock
from swarm_instrument.show.offline.progress import RunProgress
from swarm_instrument.show.pace import Pace
from swarm_instrument.show.show import Show
from swarm_instrument.visual.sim.agents import MAX_DT
from swarm_instrument.visual.sim.lure import wander_point


class FakeWall:
    """The wall clock, moved by the test."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def slow_show(ctx):
    show = Show(ctx, Params({"count": 300}), ShowOptions())
    wall = FakeWall()
    loop = Loop(show, WallClock(time_source=wall), wall=wall)
    sink = Offscreen(show, (64, 36))

    def play(seconds: float, fps: float) -> None:
        for _ in range(round(seconds * fps)):
            wall.now += 1.0 / fps
            loop.frame(*sink.target())

    yield show, play, wall
    show.release()


def behind_line(show: Show) -> str | None:
    first = show.hud_lines()[0]  # the frame rate's line
    return first[first.index("behind real time"):] if "behind real time" in first else None


def test_telemetry_and_the_hud_say_when_the_show_falls_behind_real_time(slow_show):
    show, play, _ = slow_show
    play(3.0, 60)  # a GPU that keeps up
    record = show.telemetry()["real_time"]
    assert record == {"behind": False, "speed": pytest.approx(1.0), "lag_s": pytest.approx(0.0)}
    assert behind_line(show) is None
    play(3.0, 15)  # slow frames (67 ms) catch up in two steps each: still real time
    assert show.telemetry()["real_time"]["speed"] == pytest.approx(1.0)
    play(4.0, 5)  # software GL: 200 ms frames, each at most MAX_STEPS steps of 1/30 s
    record = show.telemetry()["real_time"]
    caught = MAX_STEPS * MAX_DT
    assert record["behind"] and record["speed"] == pytest.approx(caught / 0.2, abs=1e-3)
    assert record["lag_s"] == pytest.approx(4.0 - 20 * caught, abs=1e-3)  # what the cap cut
    line = behind_line(show)
    assert line is not None and "0.67x" in line and "1.3 s lost" in line
    play(2.5, 60)  # it keeps up again: the time lost stays lost, the line goes
    record = show.telemetry()["real_time"]
    assert not record["behind"] and record["speed"] == pytest.approx(1.0)
    assert record["lag_s"] == pytest.approx(4.0 - 20 * caught, abs=1e-3)
    assert behind_line(show) is None


def test_a_single_hitch_is_not_falling_behind():
    pace, now, show_time = Pace(), 0.0, 0.0
    for frame in range(300):
        elapsed = 0.2 if frame == 200 else 1 / 60  # one 200 ms frame among 60 fps ones
        now += elapsed
        show_time += min(elapsed, MAX_DT)
        pace.tick(now, show_time)
        assert not pace.behind, frame


def test_fixed_steps_never_fall_behind_whatever_the_frames_take(ctx):
    """A fixed step's clock (a render's song time is one too) is the show's own time."""
    show = Show(ctx, Params({"count": 300}), ShowOptions())
    try:
        loop = Loop(show, FixedStep(0.1))
        sink = Offscreen(show, (64, 36))
        for _ in range(30):
            loop.frame(*sink.target())  # each as slow as this machine makes it
        assert show.telemetry()["real_time"] == {"behind": False, "speed": 1.0, "lag_s": 0.0}
    finally:
        show.release()


def test_the_lure_lets_go_after_three_seconds_of_the_clock_not_of_clamped_steps(slow_show):
    """At 5 fps three seconds of the performer's are two of steps: the influencer still takes
    over after three (seed 002), blending in over two, on the clock."""
    show, play, _ = slow_show
    play(1.0, 5)
    point = (12.0, -4.0, 3.0)
    show.move_lure(point)
    play(2.8, 5)
    assert show.telemetry()["lure"]["held"]
    np.testing.assert_allclose(show.lure_position(), point)
    assert show.sim_time < 3.0  # the steps were capped: less simulated than the clock's 3.8 s
    play(0.6, 5)  # 3.4 s of the clock: blending towards the wander path
    position = show.lure_position()
    assert not np.allclose(position, point)
    play(1.8, 5)  # 5.2 s: wandering, the path on simulated time
    assert not show.telemetry()["lure"]["held"]
    np.testing.assert_allclose(show.lure_position(),
                               wander_point(show.sim_time, show.params["contain_radius"]))


def test_the_no_display_run_says_how_long_it_will_take_and_shows_its_progress(said):
    """`python instrument.py` with no display plays 300 frames headless: timed from the end
    of the first (its shaders compiled), it says how long the whole will take once a second
    and three frames are timed, and its line on stderr counts down to the last frame."""
    clock, stream = FakeWall(0.0), io.StringIO()
    run = RunProgress(300, "no display", stream, clock=clock)
    clock.now = 6.0  # the first frame: context, shaders, first dispatches
    run.frame(1)
    for done in range(2, 301):
        clock.now += 0.25
        run.frame(done)
        if done == 4:  # three frames, 0.75 s: too few to tell
            assert not [line for line in said if "take about" in line]
    run.finish()
    [estimate] = [line for line in said if "take about" in line]
    assert estimate == ("no display: the 300 frames take about 1:15 here (250 ms a frame), "
                        "1:14 to go; progress on stderr")
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("no display [") and "1/300 frames" in lines[0]
    assert "0:00 elapsed, --:-- left" in lines[0]
    assert len(lines) == 16 and "1:10 left" in lines[1]  # a line every 5 s into a pipe
    assert "300/300 frames 100%" in lines[-1] and "4.0 fps  1:15 elapsed, 0:00 left" in lines[-1]
