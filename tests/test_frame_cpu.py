"""A light CPU (issue 31): what a frame costs the main thread is counted, so it cannot silently
grow back. The Python calls a steady frame makes (sys.setprofile's count: the same on any
machine), the fences it inserts, the uniform blocks packed in one call with the same bytes as
field by field, and the CPU time by stage that telemetry reports."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.frame_cpu import STAGES, FrameCpu
from swarm_instrument.show.loop import FixedStep, Loop, Offscreen
from swarm_instrument.show.show import Show
from swarm_instrument.visual.gpu import timers
from swarm_instrument.visual.gpu.fence import fences_for
from swarm_instrument.visual.gpu.uniforms import FRAME_PARAMS, POST_PARAMS, SWARM_PARAMS
from swarm_instrument.visual.post.post_chain import PostSettings, block_values
from swarm_instrument.visual.render.camera import OrbitCamera, look_at
from swarm_instrument.visual.render.counts import SumScales
from swarm_instrument.visual.render.frame_values import frame_block

# A steady frame of the show (silence, no MIDI, the default look) made 444 Python calls and
# 539 calls into C when these were set (2026-12-03; before issue 31's work: 842 and 981).
PYTHON_CALLS = 490
C_CALLS = 600


@pytest.fixture
def played(ctx):
    show = Show(ctx, Params({"count": 1024}), ShowOptions(seed=1, fixed_dt=1 / 60, live=False))
    loop = Loop(show, FixedStep(1 / 60))
    sink = Offscreen(show, (64, 36))
    for _ in range(30):  # shader variants, the grid, the first counts: not a steady frame
        loop.frame(*sink.target())
    yield show, lambda: loop.frame(*sink.target())
    show.release()


def test_a_steady_frame_makes_no_more_python_calls_than_it_did(played):
    show, frame = played
    counts = {"call": 0, "c_call": 0}

    def count(_frame, event, _arg):
        if event in counts:
            counts[event] += 1

    frames = 20
    sys.setprofile(count)
    try:
        for _ in range(frames):
            frame()
    finally:
        sys.setprofile(None)
    per_frame = {event: n / frames for event, n in counts.items()}
    assert per_frame["call"] <= PYTHON_CALLS, per_frame
    assert per_frame["c_call"] <= C_CALLS, per_frame


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
    assert set(cpu) == {*STAGES, "frame"} and cpu["frame"] > 0.0
    assert cpu["update"] > 0.0 and cpu["draw"] > 0.0
    assert "CPU ms" in show.hud_lines()[1]


def test_the_stage_record_is_the_clock_s_differences():
    readings = iter([0.0, 0.001, 0.003, 0.0035, 0.0065, 0.0105])
    cpu = FrameCpu(keep=4, clock=lambda: next(readings))
    stamps = [cpu.clock() for _ in range(len(STAGES) + 1)]
    cpu.record(stamps)
    assert cpu.medians() == pytest.approx({"update": 1.0, "advance": 2.0, "latch": 0.5,
                                           "draw": 3.0, "after": 4.0, "frame": 10.5})
    assert cpu.last_ms() == pytest.approx(10.5)


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
