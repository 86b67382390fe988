"""A light CPU (issue 31): what a frame costs the main thread is counted, so it cannot silently
grow back. The Python calls a steady frame makes (sys.setprofile's count: the same on any
machine), the fences it inserts, the uniform blocks packed in one call with the same bytes as
field by field, and the CPU time by stage that telemetry reports."""

from __future__ import annotations

import gc
import sys

import numpy as np
import pytest

from swarm_instrument import instrument
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.show.cli import live_show
from swarm_instrument.show.cli.live_show import LiveShow
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.frame_cpu import STAGES, FrameCpu
from swarm_instrument.show.loop import FixedStep, Loop, Offscreen
from swarm_instrument.show.show import Show
from swarm_instrument.show.supervision.supervisor import StopSignals
from swarm_instrument.visual.gpu import timers
from swarm_instrument.visual.gpu.fence import fences_for
from swarm_instrument.visual.gpu.uniforms import FRAME_PARAMS, POST_PARAMS, SWARM_PARAMS
from swarm_instrument.visual.post.post_settings import PostSettings, block_values
from swarm_instrument.visual.render.camera import OrbitCamera, look_at
from swarm_instrument.visual.render.counts import SumScales
from swarm_instrument.visual.render.frame_values import frame_block

# A steady frame of the show (silence, no MIDI, the default look) made 325 Python calls and
# 332 calls into C when these were set (2026-12-03, second round; 444 and 539 before it, 842
# and 981 before issue 31's work). A GPU's frame (its timers and the whole post chain at
# 960x540: six bloom levels) made 410 and 427 (604 and 508 before the second round).
PYTHON_CALLS = 360
C_CALLS = 380
GPU_PYTHON_CALLS = 450
GPU_C_CALLS = 470


def steady_show(ctx, params: dict, size: tuple[int, int]):
    show = Show(ctx, Params(params), ShowOptions(seed=1, fixed_dt=1 / 60, live=False))
    loop = Loop(show, FixedStep(1 / 60))
    sink = Offscreen(show, size)
    for _ in range(30):  # shader variants, the grid, the first counts: not a steady frame
        loop.frame(*sink.target())
    return show, lambda: loop.frame(*sink.target())


@pytest.fixture
def played(ctx):
    show, frame = steady_show(ctx, {"count": 1024}, (64, 36))
    yield show, frame
    show.release()


def calls_a_frame(frame, frames: int = 20) -> dict[str, float]:
    """Python calls and calls into C a frame, counted by sys.setprofile, and that no module is
    imported meanwhile (an import inside a frame is a hitch: numpy's first median imported
    numpy.ma, 12 ms). The garbage is collected first and not during (a live show collects
    between frames, show/idle_gc.py): an earlier test's objects finalised inside the count are
    not the frame's calls."""
    counts = {"call": 0, "c_call": 0}

    def count(_frame, event, _arg):
        if event in counts:
            counts[event] += 1

    gc.collect()
    gc.disable()
    modules = set(sys.modules)
    sys.setprofile(count)
    try:
        for _ in range(frames):
            frame()
    finally:
        sys.setprofile(None)
        gc.enable()
    assert set(sys.modules) == modules, set(sys.modules) - modules
    return {event: n / frames for event, n in counts.items()}


def test_a_steady_frame_makes_no_more_python_calls_than_it_did(ctx, monkeypatch):
    """Software GL's default frame (no GPU timers, no bloom or feedback), on any machine:
    a GPU's adds those, counted below."""
    monkeypatch.setattr(timers, "is_software", lambda _ctx: True)
    show, frame = steady_show(ctx, {"count": 1024, "post": "off"}, (64, 36))
    try:
        per_frame = calls_a_frame(frame)
    finally:
        show.release()
    assert per_frame["call"] <= PYTHON_CALLS, per_frame
    assert per_frame["c_call"] <= C_CALLS, per_frame


def test_a_gpu_s_frame_makes_no_more_python_calls_than_it_did(ctx, monkeypatch):
    """What a GPU's frame adds (its timers, bloom and feedback) counted the same way: software
    GL has no timers and runs no bloom by default, so both are turned on here. Its frames are
    slow here, so the frame clock looks for hitches (a median) in them too."""
    monkeypatch.setattr(timers, "is_software", lambda _ctx: False)
    show, frame = steady_show(ctx, {"count": 1024, "post": "on", "bloom": 0.8,
                                    "feedback": 0.85, "feedback_zoom": 0.01}, (960, 540))
    try:
        per_frame = calls_a_frame(frame, frames=8)
    finally:
        show.release()
    assert show.renderer.post_on
    assert per_frame["call"] <= GPU_PYTHON_CALLS, per_frame
    assert per_frame["c_call"] <= GPU_C_CALLS, per_frame


def test_a_frame_inserts_one_fence_however_many_gpu_timers_it_runs(ctx, monkeypatch):
    """The GPU timers (the simulation's, the cull's, the draw's, the post chain's) wait for
    the frame's own fence (the counts' readback) instead of each inserting one: a fence
    costs the CPU. Software GL has no timers: made available here to count."""
    monkeypatch.setattr(timers, "is_software", lambda _ctx: False)
    show = Show(ctx, Params({"count": 1024}), ShowOptions(seed=1, fixed_dt=1 / 60, live=False))
    try:
        assert show._sim_timer.available and show.renderer._cull_timer.available
        loop, sink = Loop(show, FixedStep(1 / 60)), Offscreen(show, (64, 36))
        for _ in range(8):
            loop.frame(*sink.target())
        fences = fences_for(ctx)
        ctx.finish()
        before, frames = fences.issued, 16
        for _ in range(frames):
            loop.frame(*sink.target())
        # A GPU's swarm measures its crowd one step in eight (a fence each); software GL's
        # takes one lane and never measures.
        crowd = frames // 8 if show.swarm.tuning["lanes"] == "auto" else 0
        assert fences.issued - before == frames + crowd
        ctx.finish()
        loop.frame(*sink.target())
        assert show.gpu_ms["simulate"] is not None and show.gpu_ms["cull"] is not None
    finally:
        show.release()


def test_the_blocks_pack_in_one_call_into_the_bytes_field_by_field_gives():
    values = Params({"shape": "streak", "palette": "aurora"}).as_dict()
    camera = OrbitCamera(mode="top")
    camera.time = 12.5
    derived = frame_block(values, camera, (1920, 1080), (1.0, -2.0, 3.5),
                          SumScales.for_frame(5000, (0.5, 0.25, -1.0), 60.0),
                          background=(0.01, 0.02, 0.03), telegraph=0.4, far_base=5000)
    assert FRAME_PARAMS.pack(values, derived) == FRAME_PARAMS.pack_fields(values, derived)
    post = block_values(PostSettings(bloom=0.8, feedback=0.85, feedback_zoom=0.01), 1 / 60,
                        (1920, 1080))
    assert POST_PARAMS.pack({}, post) == POST_PARAMS.pack_fields({}, post)
    swarm = {"target": np.array([1.0, 2.0, 3.0]), "dt": 1 / 60, "center": (0.0, 0.0, 0.0),
             "grid_origin": (-9.0, -9.0, -9.0), "grid_inv_cell": 1 / 3, "grid_dims": (6, 6, 6),
             "agent_count": 5000, "speed_limit": 9.5, "rules": 31, "wrap": True,
             "step_index": 77, "obstacle_count": 1, "obstacles": [(1.0, 2.0, 3.0, 4.0)]}
    assert SWARM_PARAMS.pack(values, swarm) == SWARM_PARAMS.pack_fields(values, swarm)


def test_look_at_in_plain_floats_is_glu_look_at():
    eye, target = np.array([3.0, 4.0, 12.0]), np.array([0.5, -1.0, 2.0])
    view = look_at(eye, target)
    forward = (target - eye) / np.linalg.norm(target - eye)
    side = np.cross(forward, [0.0, 1.0, 0.0])
    side /= np.linalg.norm(side)
    np.testing.assert_allclose(view[0, :3], side, atol=1e-15)
    np.testing.assert_allclose(view[2, :3], -forward, atol=1e-15)
    np.testing.assert_allclose(view @ [*eye, 1.0], [0.0, 0.0, 0.0, 1.0], atol=1e-12)
    straight_down = look_at((0.0, 10.0, 0.0), (0.0, 0.0, 0.0))
    assert np.isfinite(straight_down).all()


def test_telemetry_reports_the_cpu_time_of_each_stage(played):
    show, frame = played
    for _ in range(5):
        frame()
    cpu = show.telemetry()["cpu_ms"]
    assert set(cpu) == {*STAGES, "frame", "between"} and cpu["frame"] > 0.0
    assert cpu["update"] > 0.0 and cpu["draw"] > 0.0
    assert "CPU ms" in show.hud_lines()[1]


class Surface:
    """A control surface that notes the frames it was handed the show's state at."""

    def __init__(self) -> None:
        self.published: list[int] = []

    def poll(self, values):
        return []

    def publish(self, show, now):
        self.published.append(show.frame)

    def close(self):
        pass


def test_the_surfaces_are_handed_the_state_once_the_frame_is_shown_not_in_it(ctx,
                                                                              monkeypatch):
    """The web page's and the control window's state (every parameter's text, the meters,
    the HUD's lines: 0.4 ms a frame here for the control window) is made after the frame is
    shown, in the live run's idle, so that it costs the frame and its inputs' way to the
    picture nothing; and it is made from the frame just shown."""
    args = instrument.build_parser().parse_args(["--headless", "--no-midi", "--count", "300"])
    params, routes, preset = instrument.build_params(args)
    monkeypatch.setattr(live_show, "check_machine", lambda *_: 300)
    live = LiveShow(args, params, routes, preset, StopSignals())
    show = live.build(ctx, (64, 36))
    surface = Surface()
    show.surfaces.append(surface)
    try:
        sink = Offscreen(show, (64, 36))
        live.loop.frame(*sink.target())
        live.loop.frame(*sink.target())
        assert surface.published == []
        live.loop.run(sink, frames=3)  # the live loop: each frame shown, then its idle
        assert surface.published == [3, 4, 5]
    finally:
        live.finish(None)


def test_the_stage_record_is_the_clock_s_differences():
    readings = iter([0.0, 0.001, 0.003, 0.0035, 0.0065, 0.0105])
    cpu = FrameCpu(keep=4, clock=lambda: next(readings))
    stamps = [cpu.clock() for _ in range(len(STAGES) + 1)]
    cpu.record(stamps)
    assert cpu.medians() == pytest.approx({"update": 1.0, "advance": 2.0, "latch": 0.5,
                                           "draw": 3.0, "after": 4.0, "frame": 10.5})
    assert cpu.last_ms() == pytest.approx(10.5)


def test_the_cpu_between_frames_is_counted_beside_the_frame_s():
    """What the main thread does between one frame's end and the next one's start (the HUD,
    the swap, the idle's work, the control window) is counted as `between`, not in the
    frame: work moved out of the frame is not lost from the figures."""
    now = [0.0]
    cpu = FrameCpu(keep=8, clock=lambda: now[0])
    for between in (0.002, 0.004, 0.003, 0.0):  # after each frame
        stamps = []
        for _ in range(len(STAGES) + 1):
            stamps.append(now[0])
            now[0] += 0.001  # each stage 1 ms
        cpu.record(stamps)
        now[0] += between - 0.001  # the last stamp was the frame's end
    medians = cpu.medians()
    assert medians["frame"] == pytest.approx(5.0)
    assert medians["between"] == pytest.approx(3.0)  # 2, 4 and 3 ms: the last frame's none


def test_frames_waited_for_read_back_without_a_gl_fence(ctx):
    """A live loop waits for each frame on the GPU (as a swap does), so what a frame reads
    back (the cull's counts, the GPU timers) needs no GL fence: a serial alone, passed at the
    wait; each frame's counts are the frame before's. A render overlaps, and fences."""
    show = Show(ctx, Params({"count": 1024}), ShowOptions(seed=1, fixed_dt=1 / 60, live=False))
    try:
        fences = fences_for(ctx)
        loop, sink = Loop(show, FixedStep(1 / 60)), Offscreen(show, (64, 36))
        made, issued = fences.gl_fences, fences.issued
        loop.run(sink, frames=12, govern=True)  # waited for, as a live show's frames
        assert fences.gl_fences == made and fences.issued > issued
        renderer = show.renderer
        assert renderer.frames == 12 and renderer.counts_frame == renderer.frames - 2
        assert renderer.counts is not None and renderer.counts.visible > 0
        assert not fences.finishing
        loop.run(sink, frames=4)  # a render's frames: GL fences again
        assert fences.gl_fences >= made + 4
    finally:
        show.release()


def test_a_gpu_timer_times_one_use_in_every_few(ctx, monkeypatch):
    """The GPU timers begin a query one use in `every` (the HUD shows their figures four times a
    second): the uses between cost no GL call, and the figure is the timed use's."""
    import moderngl

    monkeypatch.setattr(timers, "is_software", lambda _ctx: False)
    begun = []
    enter = moderngl.Query.__enter__
    monkeypatch.setattr(moderngl.Query, "__enter__",
                        lambda query: begun.append(query) or enter(query))
    timer = timers.GpuTimer(ctx, every=4)
    target = ctx.simple_framebuffer((8, 8))
    for _ in range(8):
        with timer:
            target.clear(0.5, 0.5, 0.5, 1.0)
    assert len(begun) == 2
    assert timer.flush() is not None and timer.last_ms >= 0.0
    every_use = timers.GpuTimer(ctx, every=1)
    for _ in range(3):
        with every_use:
            target.clear()
    assert len(begun) == 5
    every_use.flush()
    target.release()


def test_the_agents_counts_change_four_times_a_second_and_a_pause_at_once(ctx, monkeypatch):
    """The agents line's counts (visible, near the lure) change every frame as the swarm
    moves: laid out again each frame, its line cost the window 0.55 ms of CPU in 78 % of its
    frames (llvmpipe), after the frame's late latch. They are read four times a second, as the
    frame rate's; PAUSED, a key's answer, shows in the next frame."""
    from swarm_instrument.show.report import hud_lines

    show = Show(ctx, Params({"count": 300}), ShowOptions(seed=1))
    near = [5]
    monkeypatch.setattr(type(show.renderer), "near_lure", property(lambda self: near[0]))
    try:
        def agents(now: float) -> str:
            show.clock.tick(now)
            return next(line for line in hud_lines(show) if line.startswith("agents "))

        assert agents(0.0).endswith("near lure 5")
        near[0] = 6
        assert agents(1 / 60).endswith("near lure 5")  # held
        show.paused = True
        assert agents(2 / 60).endswith("near lure 5  PAUSED")  # the pause at once
        assert agents(0.3).endswith("near lure 6  PAUSED")  # the counts a readout later
    finally:
        show.release()
