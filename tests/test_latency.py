"""Sound and touch to light within a frame (issue 31): the show reads its inputs again just
before the draw (late latching, show/show.py Show.latch), so a knob turned, an OSC message
sent or a sound that arrives while the simulation steps is in this frame's picture, not the
next one's. The inputs here are the real ones with their device ends replaced (a MIDI port
that queues bytes, an OSC input's queue, a sound device stream that delivers a block when the
test says), and what counts is the picture the frame drew."""

from __future__ import annotations

import json
import sys
import threading

import numpy as np
import pytest
from block_device import BlockDevice

from swarm_instrument.audio.input.live_input import AudioInput
from swarm_instrument.control.actions import Action
from swarm_instrument.control.midi.midi_in import Midi
from swarm_instrument.control.parameters.modulation import Route
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.control.web.web_remote import WebRemote
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.inputs.web_input import WebInput
from swarm_instrument.show.loop import FixedStep, Loop, Offscreen, latches_twice
from swarm_instrument.show.show import Show

from web_client import RawSocket

SIZE = (96, 54)
DARK = {"count": 3000, "agent_size": 2.5, "exposure": 0.1, "glow": 2.0}


def brightness(sink: Offscreen) -> float:
    return float(np.frombuffer(sink.pixels(), np.uint8).mean())


class Arrives:
    """Runs `arrive()` in the middle of the frame's simulation step (the swarm's), once."""

    def __init__(self, show: Show, arrive) -> None:
        self.arrive, self.step = arrive, show.swarm.step
        show.swarm.step = self

    def __call__(self, *args, **kwargs):
        self.step(*args, **kwargs)
        if self.arrive is not None:
            self.arrive()
            self.arrive = None


def play(show: Show, frames: int = 6) -> tuple[Loop, Offscreen]:
    loop, sink = Loop(show, FixedStep(1 / 60)), Offscreen(show, SIZE)
    for _ in range(frames):
        loop.frame(*sink.target())
    return loop, sink


class QueuedOsc:
    """An OSC input's side the show reads (control/osc/osc_input.py: poll once a frame)."""

    def __init__(self) -> None:
        self.queue: list[Action] = []
        self.rejected, self.last_error = 0, None

    def poll(self) -> list[Action]:
        taken, self.queue = self.queue, []
        return taken

    def state(self) -> dict:
        return {}

    def close(self) -> None:
        pass


def test_an_osc_message_sent_while_the_swarm_steps_is_in_this_frame(ctx):
    osc = QueuedOsc()
    show = Show(ctx, Params(DARK), ShowOptions(seed=3), osc=osc)
    try:
        loop, sink = play(show)
        dark = brightness(sink)
        Arrives(show, lambda: osc.queue.append(Action("set", values={"exposure": 8.0})))
        loop.frame(*sink.target())
        assert show.values["exposure"] == 8.0
        assert brightness(sink) > dark + 20, "the frame drew the exposure from before"
    finally:
        show.release()


# The whole post chain on (software GL leaves bloom and feedback off by default), and off
# (a GPU runs them by default).
POST_ON = {"post": "on", "bloom": 0.8, "feedback": 0.85, "feedback_zoom": 0.01}
POST_OFF = {"post": "off"}


@pytest.mark.parametrize("live, post", [(True, False), (False, False), (True, True)],
                         ids=["live", "render", "live-bloom-feedback"])
def test_live_a_message_sent_while_the_scene_draws_is_in_this_frames_post(ctx, live, post):
    """Live, the inputs are read once more when the scene's passes, its bloom and feedback
    are done (on software GL most of a frame; on the H200, paced, 4 ms), and the display pass
    (here the exposure) takes what came: the message shows in this frame. A render reads
    them once a frame (the next frame shows it)."""
    osc = QueuedOsc()
    show = Show(ctx, Params({**DARK, **(POST_ON if post else POST_OFF)}),
                ShowOptions(seed=3, live=live), osc=osc)
    try:
        twice = latches_twice(show)
        assert twice == live
        loop, sink = play(show)
        assert show.renderer.post_on == post
        dark = brightness(sink)
        draw_scene = show.renderer.draw_scene

        def arrives(*args, **kwargs):
            draw_scene(*args, **kwargs)
            osc.queue.append(Action("set", values={"exposure": 8.0}))
            show.renderer.draw_scene = draw_scene

        show.renderer.draw_scene = arrives
        loop.frame(*sink.target())
        assert (brightness(sink) > dark + 20) == twice
        loop.frame(*sink.target())
        assert show.values["exposure"] == 8.0 and brightness(sink) > dark + 20
    finally:
        show.release()


def test_live_only_the_display_pass_follows_the_late_latch(ctx):
    """What follows a live frame's late latch is what the picture waits for once an input
    arrives: the display pass alone (and its scaling up under a render scale). Bloom and
    feedback, the chain's other passes, are drawn with the scene and waited for with it."""
    show = Show(ctx, Params({**DARK, **POST_ON, "tonemap": "agx"}),
                ShowOptions(seed=3, live=True))
    show.governor.level["render_scale"] = 2  # as the governor lowers it: 0.7
    events = []
    post = show.renderer._post
    dispatch, draw, wait = post._dispatch, post._draw, show.scene_wait.wait
    post._dispatch = lambda name, *args, **kwargs: (events.append(name),
                                                   dispatch(name, *args, **kwargs))
    post._draw = lambda name: (events.append(name), draw(name))
    show.scene_wait.wait = lambda *args: (events.append("wait"), wait(*args))[1]
    try:
        loop, sink = play(show, frames=3)
        events.clear()
        loop.frame(*sink.target())
        after = events[events.index("wait") + 1:]
        assert events.count("wait") == 1
        assert {"prefilter", "downsample", "upsample", "composite_both"} <= set(events)
        assert after == ["display_agx", "upscale"], events
    finally:
        show.release()


SLOW_PASS = """#version 330
uniform int n; out vec4 color;
void main() { float x = gl_FragCoord.x * 0.001; for (int k = 0; k < n; k++) x = sin(x) + 0.5;
              color = vec4(x); }"""


def test_a_web_gesture_that_comes_while_the_scene_draws_is_in_this_frame(ctx):
    """The web remote's sessions are threads of the show's process and need the GIL to read a
    message and queue it. The frame's wait for its scene's passes (software GL: most of a
    frame; a GPU's: a sleep) lets them run, so a gesture that comes meanwhile is taken by the
    frame's late latch: moderngl's ctx.finish() held the GIL through the wait, and such a
    gesture waited for the next frame (the window's web 90th percentile, docs/measured.md).
    The scene is made slow here by a pass of its own; CPython's forced switch (every 5 ms,
    which rescued a gesture that had waited that long) is put off for the test, so only a
    wait that lets go counts."""
    remote = WebRemote("127.0.0.1", 0)
    show = Show(ctx, Params(DARK), ShowOptions(seed=3, live=True), web=WebInput(remote))
    client = RawSocket(remote.port)
    slow = ctx.program(vertex_shader="""#version 330
void main() { vec2 p = vec2((gl_VertexID << 1) & 2, gl_VertexID & 2);
              gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0); }""", fragment_shader=SLOW_PASS)
    slow["n"] = 4000
    slow_vao = ctx.vertex_array(slow, [])
    slow_target = ctx.simple_framebuffer((256, 256))
    interval = sys.getswitchinterval()
    try:
        assert latches_twice(show)
        client.message()  # hello
        loop, sink = play(show)
        dark = brightness(sink)
        drawn = threading.Event()
        sender = threading.Thread(target=lambda: drawn.wait(10) and client.send(
            '["/swarm/exposure", 8.0]'), daemon=True)
        sender.start()
        draw_scene = show.renderer.draw_scene

        def slow_scene(*args, **kwargs):
            draw_scene(*args, **kwargs)
            show.renderer.draw_scene = draw_scene
            slow_target.use()
            slow_vao.render(vertices=3)  # queued: drawn in the wait for the scene
            drawn.set()  # the gesture is sent once the frame waits

        show.renderer.draw_scene = slow_scene
        sys.setswitchinterval(30.0)
        loop.frame(*sink.target())
        sys.setswitchinterval(interval)
        assert show.values["exposure"] == 8.0, "the gesture waited for the next frame"
        assert brightness(sink) > dark + 20, "the frame drew the exposure from before"
    finally:
        sys.setswitchinterval(interval)
        client.close()
        show.release()
        remote.close()
        for resource in (slow_vao, slow, slow_target):
            resource.release()


class QueuedPort:
    """A MIDI input's side Midi reads (control/midi/ports.py MidiInput): bytes queued as
    rtmidi queues them, drained once a frame."""

    def __init__(self) -> None:
        self.queue: list[tuple[bytes, float]] = []

    def poll(self, now: float) -> None:
        pass

    def drain(self) -> list[tuple[bytes, float]]:
        taken, self.queue = self.queue, []
        return taken

    def status(self) -> dict:
        return {"api": "test", "ports_open": ["test"], "waiting_for": [], "dropped": 0,
                "problem": None, "state": "test"}

    def close(self) -> None:
        pass


def test_a_knob_turned_while_the_swarm_steps_is_in_this_frame(ctx, tmp_path):
    mapping = tmp_path / "knob.json"
    mapping.write_text(json.dumps({"bindings": [
        {"channel": 1, "controller": 20, "param": "exposure", "lo": 0.1, "hi": 8.0}]}))
    params, port = Params(DARK), QueuedPort()
    midi = Midi(params, port, mapping_path=mapping, save_path=None)
    show = Show(ctx, params, ShowOptions(seed=3), midi=midi)
    try:
        port.queue.append((bytes([0xB0, 20, 0]), 0.0))  # the knob at the value: picked up
        loop, sink = play(show)
        dark = brightness(sink)
        Arrives(show, lambda: port.queue.append((bytes([0xB0, 20, 127]), 0.0)))
        loop.frame(*sink.target())
        assert show.values["exposure"] == pytest.approx(8.0)
        assert brightness(sink) > dark + 20
    finally:
        show.release()


def test_a_sound_that_arrives_while_the_swarm_steps_is_in_this_frame(ctx):
    """The level (routed to the exposure) follows a block that reached the ring after the
    frame's update: the latch analyses it before the draw."""
    sd = BlockDevice()
    audio = AudioInput(sd=sd, start_wait_s=5.0, analysis_wait_s=5.0)
    route = Route("level", "exposure", 7.9)
    show = Show(ctx, Params(DARK), ShowOptions(seed=3), audio=audio, routes=[route])
    try:
        assert audio.state == "ok"
        loop, sink = Loop(show, FixedStep(1 / 60)), Offscreen(show, SIZE)
        for _ in range(40):  # quiet frames: the input delivers, the level settles low
            sd.feed(0.0, blocks=3)
            loop.frame(*sink.target())
        dark = brightness(sink)
        assert show.values["exposure"] < 1.0
        Arrives(show, lambda: sd.feed(0.5, blocks=3))
        loop.frame(*sink.target())
        assert show.audio.level > 0.9 and show.values["exposure"] > 7.0
        assert brightness(sink) > dark + 20
    finally:
        show.release()


def test_a_live_input_is_analysed_once_a_frame_at_the_latch(ctx):
    """The level, bands and onsets of a live input are worked out once a frame, at the late
    latch, whether or not blocks came while the swarm stepped (twice, at the update and again
    at the latch, cost the main thread a third of a millisecond a frame here); the frame's
    simulation steps with the last frame's."""
    sd = BlockDevice()
    audio = AudioInput(sd=sd, start_wait_s=5.0, analysis_wait_s=5.0)
    route = Route("level", "exposure", 7.9)
    show = Show(ctx, Params(DARK), ShowOptions(seed=3), audio=audio, routes=[route])
    calls = []
    apply = audio.analyzer.apply
    audio.analyzer.apply = lambda *args: calls.append(args) or apply(*args)
    try:
        loop, sink = Loop(show, FixedStep(1 / 60)), Offscreen(show, SIZE)
        for frame in range(12):
            sd.feed(0.0, blocks=3)
            if frame % 2:  # and some while the swarm steps
                Arrives(show, lambda: sd.feed(0.0, blocks=2))
            loop.frame(*sink.target())
        assert len(calls) == 12
        sd.feed(0.5, blocks=3)
        show.update(1.0)  # the update reads the blocks and feeds the beats; no analysis
        assert len(calls) == 12 and audio.level < 0.5
        show.latch(1.0)
        assert len(calls) == 13 and audio.level > 0.9 and show.values["exposure"] > 7.0
    finally:
        show.release()
    offline = Show(ctx, Params(DARK), ShowOptions(seed=3, live=False), audio=AudioInput(
        sd=BlockDevice(), start_wait_s=5.0))
    try:  # a render's loop (and a test's update alone) analyses in the update, as before
        assert not offline.audio.analysis_at_latch
    finally:
        offline.release()


KEY_BEFORE_FRAME = r"""
import ctypes
import time

import pyglet

from swarm_instrument.visual.ui.window import LiveWindow, open_window

window = open_window(0, False, (320, 180))
live = LiveWindow(window, fps=60.0)
keys = []
live.performer = type("Performer", (), {"key": lambda self, name, ctrl, shift:
                                        keys.append((name, ctrl, shift))})()
pyglet.window.Window._enable_event_queue = False  # as inside pyglet.app.run: handled at once
window.switch_to()
for _ in range(50):  # mapped: its first events (map, expose) handled
    window.dispatch_events()
    time.sleep(0.01)
x11, xtst = ctypes.CDLL("libX11.so.6"), ctypes.CDLL("libXtst.so.6")
x11.XOpenDisplay.restype = ctypes.c_void_p
x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
x11.XStringToKeysym.restype = ctypes.c_ulong
x11.XKeysymToKeycode.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
x11.XSetInputFocus.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_ulong]
x11.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
xtst.XTestFakeKeyEvent.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_ulong]
sender = x11.XOpenDisplay(None)  # another client: the keyboard
x11.XSetInputFocus(sender, window._view, 1, 0)  # pyglet's keys come to its view
x11.XSync(sender, 0)


def press(name):
    code = x11.XKeysymToKeycode(sender, x11.XStringToKeysym(name))
    xtst.XTestFakeKeyEvent(sender, code, 1, 0)
    xtst.XTestFakeKeyEvent(sender, code, 0, 0)
    x11.XSync(sender, 0)  # the server has the key; the show's window has not read it


press(b"Right")
before = list(keys)
live._take_events()  # what a frame does first
print("at the frame's start:", before, keys)
assert not before and keys == [("RIGHT", False, False)]
press(b"Left")  # while the frame's simulation steps: the late latch takes it
press(b"f")
assert live.take_keys() and keys[1:] == [("LEFT", False, False)], keys
print("at the latch:", keys[1:], "full-screen", window.fullscreen)
assert not window.fullscreen  # F waits for the frame's end
live._fullscreen_now()
assert window.fullscreen and not live.take_keys()
"""


def test_a_key_pressed_before_a_frame_begins_is_taken_by_it(display):
    """The window takes the keys the X server has for it as each frame begins (a round trip
    first: a busy server holds a client's events for frames, up to 220 ms measured under
    bench_latency's screen reads), not only when pyglet's loop next looks; and again just
    before the draw (Show.latch calls `take_keys`), where F (full-screen) waits for the
    frame's end."""
    import subprocess
    import sys

    from conftest import ROOT
    from xdisplay import with_display

    result = subprocess.run([sys.executable, "-c", KEY_BEFORE_FRAME], cwd=ROOT, timeout=60,
                            env=with_display(display), capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_key_that_comes_while_the_swarm_steps_is_in_this_frame(ctx):
    """Show.latch takes the window's keys again (`late_keys`, the window's `take_keys`) and
    makes the frame's values again when one came, as for a knob or an OSC message."""
    came: list[bool] = []

    def late_keys() -> bool:  # a key bound to the exposure, as the window hands it on
        if came:
            show.act(Action("set", values={"exposure": 8.0}))
            came.clear()
            return True
        return False

    show = Show(ctx, Params(DARK), ShowOptions(seed=3))
    show.late_keys = late_keys
    try:
        loop, sink = play(show)
        dark = brightness(sink)
        Arrives(show, lambda: came.append(True))
        loop.frame(*sink.target())
        assert show.values["exposure"] == 8.0
        assert brightness(sink) > dark + 20, "the frame drew the exposure from before"
    finally:
        show.release()
