"""Real time on any GPU (issue 31): the governor (show/governor.py) lowers the render scale, then
the post chain, then the count, then a crowd's neighbours while frames are too slow, and
raises them back in the reverse order when there is room; a raise that does not fit goes back
down and rests; a lowering that does not lighten the frame is undone; a performer pins any of
them; the HUD and telemetry say what is lowered; the show never plays in slow motion because
frames are slow. Timings are given (a fake clock): nothing here depends on this machine's speed."""

from __future__ import annotations

import numpy as np
import pyglet
import pytest

from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.governor import MIN_AGENTS, NEIGHBOR_CAP, Governor
from swarm_instrument.show.look_state import Looks
from swarm_instrument.show.loop import MAX_STEPS, Loop, Offscreen, WallClock
from swarm_instrument.show.show import Show
from swarm_instrument.visual.gpu.uniforms import SWARM_PARAMS
from swarm_instrument.visual.sim.agents import MAX_DT
from swarm_instrument.visual.ui.frame_pacing import MARGIN_S, FramePacer, schedule_at

BUDGET = 1 / 60


class Machine:
    """A GPU whose frame costs (in target frames) `sim` for the whole count, `pixels` at full
    render scale (by the scale squared) and `post` for the post chain where it runs."""

    def __init__(self, sim: float, pixels: float, post: float = 0.0,
                 crowd: float = 1.0, capped: float | None = None) -> None:
        self.sim, self.pixels, self.post, self.crowd = sim, pixels, post, crowd
        self.capped = sim if capped is None else capped

    def work(self, governor: Governor, params: Params) -> float:
        """`crowd` 2: the simulation's cost grows with the count squared (a crowded swarm);
        its neighbours capped, it costs `capped` for the whole count, growing with the count
        (or what it costs uncapped, where that is less: a cap adds no work)."""
        post = self.post if params["post"] == "on" and not governor.post_held(params) else 0.0
        count = governor.count(params) / params["count"]
        sim = self.sim * count ** self.crowd
        if governor.neighbor_cap(params) != params["neighbor_cap"]:
            sim = min(sim, self.capped * count)
        return BUDGET * (sim + self.pixels * governor.render_scale(params) ** 2 + post)


class Frames:
    """Frames of a `Machine` reported to a governor, at the target's pace when they fit."""

    def __init__(self, governor: Governor, params: Params) -> None:
        self.governor, self.params = governor, params
        self.now = 100.0
        self.changes: list[str] = []

    def play(self, seconds: float, machine: Machine) -> None:
        end = self.now + seconds
        while self.now < end:
            work = machine.work(self.governor, self.params)
            interval = max(BUDGET, work)
            self.now += interval
            change = self.governor.observe(self.now, interval, work, self.params,
                                           self.params["post"] == "on")
            if change:
                self.changes.append(change)

    @property
    def levels(self) -> tuple[float, bool, int]:
        g, p = self.governor, self.params
        return g.render_scale(p), g.post_held(p), g.count(p)

    def levers(self) -> list[str]:
        """The levers each change moved, in order."""
        return [change.split(" ")[0] for change in self.changes]


@pytest.fixture
def frames():
    governor = Governor()
    governor.display_fps = 60.0
    return Frames(governor, Params({"count": 16384, "post": "on"}))


def test_frames_on_time_change_nothing(frames):
    frames.play(5.0, Machine(sim=0.5, pixels=0.4, post=0.05))
    assert frames.levels == (1.0, False, 16384) and not frames.changes
    assert frames.governor.hud_line(frames.params) is None


def test_a_gpu_short_of_pixels_gets_a_lower_render_scale_and_nothing_else(frames):
    frames.play(10.0, Machine(sim=0.2, pixels=1.6, post=0.1))
    scale, post_held, count = frames.levels
    assert scale < 1.0 and not post_held and count == 16384
    assert set(frames.levers()) == {"render"}
    assert frames.governor.hud_line(frames.params) == (
        f"governor (60 fps): render scale {scale:g}")


def test_too_slow_lowers_the_render_scale_then_the_post_chain_then_the_count(frames):
    frames.play(20.0, Machine(sim=1.2, pixels=0.6, post=0.5))
    scale, post_held, count = frames.levels
    assert scale < 1.0 and post_held and count < 16384
    levers = frames.levers()
    assert levers.index("render") < levers.index("post") < levers.index("count")
    state = frames.governor.state(frames.params)
    assert state["lowered"] == ["render_scale", "post", "count"] and state["active"]
    assert Machine(sim=1.2, pixels=0.6, post=0.5).work(frames.governor, frames.params) <= \
        BUDGET * 1.1  # held


def test_far_too_slow_goes_down_as_far_as_the_ratio_says_at_once(frames):
    """Software GL at a few frames a second: the count by the ratio's powers of two, not one
    halving a step; the target is reached within a few seconds."""
    machine = Machine(sim=8.0, pixels=0.6)
    frames.play(4.0, machine)
    assert machine.work(frames.governor, frames.params) <= BUDGET * 1.1, frames.changes
    lowered = [change for change in frames.changes if change.startswith("count") and
               "x the target's)" in change]
    assert len(lowered) <= 2, frames.changes  # by the ratio's powers of two, not halvings


def test_room_raises_them_back_in_the_reverse_order(frames):
    frames.play(20.0, Machine(sim=1.2, pixels=0.6, post=0.5))
    frames.changes.clear()
    frames.play(60.0, Machine(sim=0.3, pixels=0.2, post=0.1))  # a lighter look: room
    assert frames.levels == (1.0, False, 16384)
    levers = frames.levers()
    assert levers == sorted(levers, key=["count", "post", "render"].index), levers


def test_a_raise_that_does_not_fit_goes_back_and_rests(frames):
    """A crowded swarm: twice the agents cost four times the work, so the cost learnt from
    halving the count says it fits back when it does not; it is tried where there is room,
    goes back down at once, and is tried again only after a rest (and its cost learnt)."""
    machine = Machine(sim=1.2, pixels=0.05, crowd=2.0)  # 16384: 1.25 frames, 8192: 0.35
    frames.play(3.0, machine)
    assert frames.levels[2] == 8192
    frames.changes.clear()
    frames.play(40.0, machine)
    raises = [change for change in frames.changes if change.startswith("count back")]
    backs = [change for change in frames.changes if "after it came back" in change]
    assert 1 <= len(raises) <= 4 and len(backs) == len(raises), frames.changes
    assert frames.levels[2] == 8192


def test_a_lowering_that_does_not_lighten_the_frame_is_undone(frames):
    """A render scale that does not make the frame lighter is not what makes it slow (the
    simulation is): it goes back to full, and the next lever goes down instead."""
    frames.play(3.0, Machine(sim=1.5, pixels=0.0))
    assert frames.levels[0] == 1.0 and frames.levels[2] < 16384
    assert any("did not lighten" in change for change in frames.changes)


def test_a_stall_lowers_the_count_first_and_within_a_few_frames(frames):
    """A look turned into a crowd (its space shrunk, its neighbours widened): frames a hundred
    times the target's, the simulation's cost by the count squared. The count goes first, after
    two such frames, and the frames are on time again within five seconds of show; before,
    the render scale went first and each judgement waited for four frames (51 s at 0.3 fps
    in the window here)."""
    machine = Machine(sim=100.0, pixels=0.3, crowd=2.0)  # 1.67 s frames; 1/16: 0.39 + 0.3
    frames.play(5.0, machine)
    assert frames.levers()[0] == "count", frames.changes
    assert machine.work(frames.governor, frames.params) <= BUDGET, frames.changes
    assert frames.levels[2] == 16384 // 16


CROWD = {"count": 16384, "post": "on", "contain_radius": 5.0, "neighbor_radius": 12.0}


def test_a_crowd_that_stalls_at_the_count_s_floor_gets_its_neighbours_capped():
    """A crowd whose sixteenth still stalls (16,384 agents all within each other's radius:
    268 million pairs, a sixteenth of them a million): the count goes first, then the
    neighbours are capped, and the frames are on time again; the HUD, telemetry and the
    swarm's values say so. Before, the frames stayed at the floor's 0.2 s until the performer
    turned the knobs back."""
    frames = Frames(Governor(), Params(CROWD))
    machine = Machine(sim=3000.0, pixels=0.3, crowd=2.0, capped=2.0)  # 50 s; 1/16: 0.2 s
    frames.play(120.0, machine)  # two frames of 50 s, then the count's floor
    assert frames.levers()[:2] == ["count", "neighbours"], frames.changes
    assert machine.work(frames.governor, frames.params) <= BUDGET * 1.1, frames.changes
    governor, params = frames.governor, frames.params
    assert governor.neighbor_cap(params) == NEIGHBOR_CAP and params["neighbor_cap"] == 0
    assert governor.state(params)["neighbor_cap"] == NEIGHBOR_CAP
    assert "neighbors" in governor.state(params)["lowered"]
    assert f"neighbours capped at {NEIGHBOR_CAP}" in governor.hud_line(params)
    values = params.as_dict()
    assert governor.governed(values, params)["neighbor_cap"] == NEIGHBOR_CAP
    assert values["neighbor_cap"] == 0  # the performer's values are not changed
    params["neighbor_cap"] = 16  # a performer's cap under the governor's is kept
    assert governor.neighbor_cap(params) == 16


def test_capped_neighbours_come_back_only_when_the_crowd_thins():
    """Uncapped again in the same crowd, the frames would stall for seconds: the neighbours
    are never tried back there (the count may come back, capped it grows with the count alone).
    The performer thins the crowd (the neighbour radius from 12 to 0.5): they come back, and
    the frames stay on time."""
    frames = Frames(Governor(), Params(CROWD))
    machine = Machine(sim=3000.0, pixels=0.3, crowd=2.0, capped=2.0)
    frames.play(120.0, machine)
    frames.changes.clear()
    frames.play(120.0, machine)
    assert not any(change.startswith("neighbours back") for change in frames.changes), \
        frames.changes
    assert frames.governor.neighbor_cap(frames.params) == NEIGHBOR_CAP
    frames.params["neighbor_radius"] = 0.5  # (0.5 / 5)^3 of the space: a thousandth
    thin = Machine(sim=3.0, pixels=0.3, crowd=2.0, capped=2.0)
    frames.changes.clear()
    frames.play(60.0, thin)
    assert any(change.startswith("neighbours back") for change in frames.changes), \
        frames.changes
    assert frames.governor.neighbor_cap(frames.params) == 0
    assert not any("after it came back" in change for change in frames.changes), frames.changes
    assert thin.work(frames.governor, frames.params) <= BUDGET * 1.1


def test_pinned_neighbours_stay_as_set():
    frames = Frames(Governor(), Params({**CROWD, "pin_neighbors": True}))
    frames.play(120.0, Machine(sim=3000.0, pixels=0.3, crowd=2.0, capped=2.0))
    assert "neighbours" not in frames.levers() and frames.levels[2] == 16384 // 16
    frames.params["pin_neighbors"] = False
    frames.play(5.0, Machine(sim=3000.0, pixels=0.3, crowd=2.0, capped=2.0))
    assert frames.governor.neighbor_cap(frames.params) == NEIGHBOR_CAP
    frames.params["pin_neighbors"] = True  # pinned while capped: the performer's at once
    frames.play(BUDGET, Machine(sim=3000.0, pixels=0.3, crowd=2.0, capped=2.0))
    assert frames.governor.neighbor_cap(frames.params) == 0
    assert "neighbors pinned" in frames.changes[-1]


def test_a_frame_of_seconds_is_judged_alone():
    """65,536 agents all within each other's radius on software GL: 47 s frames, where the
    stall's second frame kept the show dark for as long again. A frame of over STALL_ALONE_S
    of work is judged at once: the count goes down after it, then the neighbours."""
    governor, params = Governor(software=True), Params({**CROWD, "count": 65536})
    assert governor.observe(100.0, 47.0, 47.0, params, False) == "count 1/16 (frames " \
        "1410.0x the target's)"
    frames = Frames(governor, params)
    frames.now = 100.0
    frames.play(5.0, Machine(sim=47 * 30, pixels=0.3, crowd=2.0, capped=1.0))
    assert governor.neighbor_cap(params) == NEIGHBOR_CAP, frames.changes


def test_a_frame_of_seconds_after_frames_on_time_is_judged_by_itself(frames):
    """A knob turned mid-show crowds the swarm: the first frame of seconds is not outvoted
    by the frames on time before it."""
    frames.play(0.3, Machine(sim=0.5, pixels=0.3))  # on time, not yet judged
    frames.now += 3.0
    change = frames.governor.observe(frames.now, 3.0, 3.0, frames.params, True)
    assert change is not None and change.startswith("count 1/16"), change


def test_one_slow_frame_is_no_stall(frames):
    """A single frame of a second (a hitch) among frames on time changes nothing."""
    machine = Machine(sim=0.5, pixels=0.3)
    frames.play(2.0, machine)
    frames.now += 1.0
    assert frames.governor.observe(frames.now, 1.0, 1.0, frames.params, True) is None
    frames.play(0.2, machine)
    assert frames.levels == (1.0, False, 16384) and not frames.changes, frames.changes


def test_pins_keep_a_lever_where_the_performer_set_it(frames):
    frames.params["pin_render_scale"] = True
    frames.play(20.0, Machine(sim=1.2, pixels=0.6, post=0.5))
    scale, post_held, count = frames.levels
    assert scale == 1.0 and post_held and count < 16384
    frames.params["pin_count"] = True  # pinned while lowered: back to the performer's at once
    frames.play(BUDGET, Machine(sim=1.2, pixels=0.6, post=0.5))
    assert frames.levels[2] == 16384 and "count pinned" in frames.changes[-1]
    frames.play(10.0, Machine(sim=1.2, pixels=0.6, post=0.5))
    assert frames.levels == (1.0, True, 16384)
    assert frames.governor.hud_line(frames.params) == (
        "governor (60 fps): post held off  pinned: render_scale, count")


def test_the_target_is_the_display_s_rate_software_gl_s_30_or_target_fps():
    governor, params = Governor(), Params()
    governor.display_fps = 144.0
    assert governor.target_fps(params) == 144.0
    assert Governor(software=True).target_fps(params) == 30.0
    params["target_fps"] = 50.0
    assert governor.target_fps(params) == Governor(software=True).target_fps(params) == 50.0


def test_the_count_never_goes_below_its_floor():
    governor, params = Governor(), Params({"count": 700})
    frames = Frames(governor, params)
    frames.play(10.0, Machine(sim=5.0, pixels=0.1))
    assert frames.levels[2] == MIN_AGENTS
    params["count"] = 300  # fewer than the floor: left as asked
    assert governor.count(params) == 300


def test_recalls_leave_the_governor_s_settings_alone():
    params = Params({"target_fps": 30.0, "pin_count": True})
    looks = Looks(params)
    assert {"target_fps", "pin_render_scale", "pin_post", "pin_count",
            "pin_neighbors"} <= looks.kept


def test_the_show_draws_with_the_governor_s_levels(ctx):
    show = Show(ctx, Params({"count": 4096, "post": "on", "bloom": 0.8}),
                ShowOptions(seed=2, fixed_dt=1 / 60, live=False))
    try:
        loop, sink = Loop(show, WallClock(fixed_dt=1 / 60)), Offscreen(show, (160, 90))
        loop.frame(*sink.target())
        assert show.renderer.scene_size == (160, 90) and show.renderer.post_on
        show.governor.level.update({"render_scale": 4, "post": 1, "count": 2, "neighbors": 1})
        loop.frame(*sink.target())
        assert show.swarm.count == 1024 and show.renderer.scene_size == (80, 45)
        block = show.swarm._params.buffer.read()  # the step's uniforms, as the GPU read them
        at = SWARM_PARAMS.offsets["neighbor_cap"]
        assert int.from_bytes(block[at:at + 4], "little") == NEIGHBOR_CAP
        assert not show.renderer.post_on and "governor" in show.renderer.post_state
        record = show.telemetry()
        assert record["agents"] == 1024 and record["params"]["count"] == 4096
        assert record["governor"]["lowered"] == ["render_scale", "post", "count", "neighbors"]
        assert record["params"]["neighbor_cap"] == 0
        assert any(line.startswith("governor (") for line in show.hud_lines())
        show.respawn()  # a respawn spawns the governed count
        assert show.swarm.count == 1024
        pixels = np.frombuffer(sink.pixels(), np.uint8)
        assert pixels.max() > 40, "the scaled picture reaches the whole frame"
    finally:
        show.release()


def test_slow_frames_step_their_time_so_ten_seconds_of_show_take_ten_seconds():
    now = [0.0]
    clock = WallClock(time_source=lambda: now[0])
    show_time = 0.0
    for interval in [1 / 60] * 60 + [0.1] * 50 + [1 / 12] * 48 + [0.045] * 22:
        now[0] += interval
        tick = clock.next()
        show_time += tick.dt * tick.steps
        assert tick.dt <= MAX_DT + 1e-12
    assert now[0] == pytest.approx(show_time + 1 / 60)  # all but the first frame's
    now[0] += 0.5  # a hitch longer than MAX_STEPS steps: the rest is let go
    tick = clock.next()
    assert tick.steps == MAX_STEPS and tick.dt == pytest.approx(MAX_DT)


def test_the_pacer_aims_each_frame_at_a_refresh_as_late_as_its_work_allows():
    pacer = FramePacer(1 / 60, swap_waits=True)
    assert pacer.next_start(1 / 60, now=5.0) == 5.0  # the first frame: at once
    pacer.frame(start=5.0, worked=5.004, shown=5.0167)
    start = pacer.next_start(1 / 60, now=5.017)
    assert start == pytest.approx(5.0167 + 1 / 60 - 0.004 - MARGIN_S)
    pacer.frame(start, start + 0.012, 5.0167 + 1 / 60)  # a heavier frame: starts earlier
    later = 5.0167 + 2 / 60 - 0.012 - MARGIN_S
    assert pacer.next_start(1 / 60, now=5.034) == pytest.approx(later)
    at_30 = pacer.next_start(1 / 30, now=5.034)  # 30 fps on 60 Hz: every other refresh
    assert at_30 == pytest.approx(later + 1 / 60)


def test_a_frame_scheduled_from_its_own_end_starts_at_its_time_not_its_work_early():
    """pyglet's clock, as the window's event loop runs it: a tick at the frame's start, the
    frame's work, the next frame scheduled at the pacer's time; it is called then, not a
    frame's work early (pyglet counts a delay from its last tick)."""
    now = [1.0]
    clock = pyglet.clock.Clock(time_function=lambda: now[0])
    calls = []
    clock.update_time()  # the event loop's tick: the frame starts
    now[0] = 1.028  # its work done
    schedule_at(lambda dt: calls.append(now[0]), 1.0 + 1 / 30, clock)
    for t in (1.029, 1.030, 1.033):  # the loop idles and ticks: not yet
        now[0] = t
        clock.update_time()
        clock.call_scheduled_functions(0.0)
    assert calls == []
    now[0] = 1.034
    clock.update_time()
    clock.call_scheduled_functions(0.0)
    assert calls == [1.034]


def test_without_vsync_frames_start_at_an_even_pace_and_a_late_one_at_once():
    pacer = FramePacer(1 / 60, swap_waits=False)
    pacer.frame(start=1.0, worked=1.02, shown=1.021)
    assert pacer.next_start(1 / 30, now=1.021) == pytest.approx(1.0 + 1 / 30)
    pacer.frame(start=1.0 + 1 / 30, worked=1.2, shown=1.2)  # far too long: no burst after it
    assert pacer.next_start(1 / 30, now=1.2) == 1.2
