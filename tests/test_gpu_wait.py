"""The frame's wait for its scene's passes before the late latch (visual/gpu/fence.py GpuWait):
done when the GPU is, sleeping meanwhile (NVIDIA's glFinish spins a core for as long as the
GPU draws, and the frame's CPU would count all of it), with a nap learnt from the last waits
so that it looks at its fence a few times a wait, not hundreds."""

from __future__ import annotations

import time

import pytest

from swarm_instrument.visual.gpu import fence as fence_module
from swarm_instrument.visual.gpu.fence import GpuWait, fences_for, finish

SLOW_PASS = """#version 330
uniform int n; out vec4 color;
void main() { float x = gl_FragCoord.x * 0.001; for (int k = 0; k < n; k++) x = sin(x) + 0.5;
              color = vec4(x); }"""
FULL_SCREEN = """#version 330
void main() { vec2 p = vec2((gl_VertexID << 1) & 2, gl_VertexID & 2);
              gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0); }"""


def test_the_wait_ends_when_the_gpu_is_done_and_sleeps_meanwhile(ctx):
    """A GPU's wait (the fence path, taken here on software GL too): the queued pass is done
    when it returns, and the show's thread spent a small part of the wait on its CPU."""
    fences = fences_for(ctx)
    if fences is None:
        pytest.skip("this driver gives no GL fences: the wait is glFinish (tested by the loop)")
    slow = ctx.program(vertex_shader=FULL_SCREEN, fragment_shader=SLOW_PASS)
    vao = ctx.vertex_array(slow, [])
    target = ctx.simple_framebuffer((256, 256))
    slow["n"] = 300
    while True:  # a pass of at least 20 ms on this GPU, whatever it is (llvmpipe: 300 loops)
        target.use()
        start = time.perf_counter()
        vao.render(vertices=3)
        finish(ctx)
        if time.perf_counter() - start > 0.02 or slow["n"].value > 10_000_000:
            break
        slow["n"] = slow["n"].value * 4
    slept: list[float] = []
    wait = GpuWait(ctx, sleep=lambda s: (slept.append(s), time.sleep(s))[1])
    try:
        for _ in range(3):  # the nap learnt from the first
            target.use()
            vao.render(vertices=3)
            drawn = fences.gl_fence()  # after the pass, before the wait's own fence
            cpu = time.thread_time()
            took = wait.wait()
            cpu = time.thread_time() - cpu
            assert fences.signalled(drawn), "the wait returned before the GPU was done"
            fences.delete(drawn)
        assert slept, "the wait never slept"
        assert took > 0.005, "the pass was too quick to tell a spin from a sleep"
        assert cpu < 0.5 * took, f"{cpu * 1e3:.1f} ms of CPU in a {took * 1e3:.1f} ms wait"
    finally:
        ctx.detect_framebuffer(0).use()  # not the released target
        for resource in (vao, slow, target):
            resource.release()


class FakeGpu:
    """Fences that signal once a fake clock passes the time the GPU is done; sleeping moves
    the clock."""

    def __init__(self) -> None:
        self.now, self.done_at, self.finishes = 0.0, 0.0, 0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds + 0.00006  # a sleep overshoots (the kernel's timer slack)

    # the Fences side GpuWait uses
    def gl_fence(self) -> int:
        return 1

    def signalled(self, token: int) -> bool:
        self.now += 0.000002
        return not token or self.now >= self.done_at  # no fence: done, as Fences says

    def delete(self, token: int) -> None:
        pass

    def finished(self) -> None:
        pass


def waits(gpu: FakeGpu, wait: GpuWait, gpu_s: float, count: int) -> list[tuple[int, float]]:
    """(fences looked at, seconds past the GPU's end) of `count` waits for `gpu_s` of work."""
    out = []
    for _ in range(count):
        gpu.done_at = gpu.now + gpu_s
        looks = wait.looks
        wait.wait()
        out.append((wait.looks - looks, gpu.now - gpu.done_at))
    return out


@pytest.fixture
def fake(monkeypatch) -> tuple[FakeGpu, GpuWait]:
    gpu = FakeGpu()
    monkeypatch.setattr(fence_module, "finish", lambda ctx: setattr(
        gpu, "finishes", gpu.finishes + 1) or setattr(gpu, "now", max(gpu.now, gpu.done_at)))
    monkeypatch.setattr(fence_module, "fences_for", lambda ctx: gpu)
    return gpu, GpuWait(None, sleep=gpu.sleep, clock=gpu.clock)


def test_the_nap_follows_the_gpu_so_a_wait_looks_a_few_times(fake):
    gpu, wait = fake
    poll = GpuWait.POLL_S
    first = waits(gpu, wait, 0.004, 1)[0]
    assert first[0] > 10  # nothing learnt yet: polled all the way
    learnt = waits(gpu, wait, 0.004, 30)[5:]
    assert max(looks for looks, _ in learnt) <= 4
    assert max(late for _, late in learnt) < 1.5 * poll  # never much past the GPU's end
    # The GPU gets quicker (a lighter look): the nap shortens within a few frames...
    quicker = waits(gpu, wait, 0.001, 20)[10:]
    assert max(late for _, late in quicker) < 1.5 * poll
    # ... and slower again: polled until done, then the nap is the new length.
    slower = waits(gpu, wait, 0.006, 10)[2:]
    assert max(looks for looks, _ in slower) <= 4
    assert gpu.finishes == 0


def test_a_wait_that_does_not_learn_is_never_much_past_a_wait_that_changes(fake):
    """The window's wait for its swap lasts, with vsync, until the display's refresh: long
    after a quick frame, short after a slow one. A nap learnt from the last wait oversleeps
    the next short one by most of a refresh (the frame shown late to the pacer, the next one
    started late); a wait that does not learn looks every POLL_S from the start."""
    gpu, learning = fake
    poll = GpuWait.POLL_S
    lengths = [0.012, 0.001] * 10
    late = [waits(gpu, learning, s, 1)[0][1] for s in lengths]
    assert max(late) > 0.005  # why the swap's wait must not learn
    steady = GpuWait(None, learns=False, sleep=gpu.sleep, clock=gpu.clock)
    seen = [waits(gpu, steady, s, 1)[0] for s in lengths]
    assert max(past for _, past in seen) < 1.5 * poll
    assert steady.expected == 0.0
    assert min(looks for looks, _ in seen[::2]) > 0.012 / (2 * poll)  # a look each poll
    assert gpu.finishes == 0


def test_a_gpu_that_does_not_answer_is_finished_not_polled_for_ever(fake):
    gpu, wait = fake
    gpu.done_at = 10.0  # ten seconds of work: a stalled GPU
    took = wait.wait(limit_s=0.25)
    assert gpu.finishes == 1 and took >= 0.25
    assert wait.looks < 0.3 / GpuWait.POLL_S


def test_software_gl_waits_with_glfinish(fake, monkeypatch):
    """llvmpipe's glFinish sleeps, and its raster threads are this CPU's: no polling there."""
    gpu, _ = fake
    wait = GpuWait(None, software=True, sleep=gpu.sleep, clock=gpu.clock)
    gpu.done_at = 0.004
    wait.wait()
    assert gpu.finishes == 1 and wait.looks == 0


def test_a_fence_the_driver_did_not_make_is_finished_not_taken_as_done(fake, monkeypatch):
    """glFenceSync returning 0 (a driver error) must not end the wait at once: the live loop's
    frames would then run ahead of the GPU."""
    gpu, wait = fake
    monkeypatch.setattr(gpu, "gl_fence", lambda: 0)
    gpu.done_at = 0.004
    wait.wait()
    assert gpu.finishes == 1 and gpu.now >= gpu.done_at

