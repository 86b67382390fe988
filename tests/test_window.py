"""The live window under Xvfb, the no-display fallback and telemetry, as a performer runs them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from swarm_instrument.visual.ui.window import EscapeGuard

from conftest import ROOT, wait_for
from conftest import run_instrument as instrument
from pictures import read_png
from telemetry import last_record
from xdisplay import with_display

BACKGROUND_MAX = 40  # the background is near black; swarm pixels are brighter


def swarm_pixels(image: np.ndarray) -> np.ndarray:
    return image.max(axis=2) > BACKGROUND_MAX


def test_window_plays_the_swarm(display, tmp_path):
    shot, telemetry = tmp_path / "window.png", tmp_path / "telemetry.jsonl"
    result = instrument("--windowed", "--size", "480x270", "--frames", "40", "--count", "4000",
                        "--screenshot", str(shot), "--telemetry", str(telemetry),
                        env=with_display(display))
    assert result.returncode == 0, result.stderr
    assert "window: 4000 agents" in result.stdout
    image = read_png(shot)
    assert image.shape == (270, 480, 3)
    lit = swarm_pixels(image)
    assert 0.02 < lit.mean() < 0.9, "no swarm on screen"
    middle = lit[90:180, 160:320]
    assert middle.mean() > lit.mean(), "the swarm is not in the middle of the frame"
    # The speed colours: the slow colour is blue-teal, so lit pixels are mostly blue-dominant.
    colours = image[lit].astype(int)
    assert (colours[:, 2] > colours[:, 0]).mean() > 0.5
    records = [json.loads(line) for line in telemetry.read_text().splitlines()]
    last = records[-1]
    # the count asked for, unless the governor lowered it for slow frames and says so (a
    # busy two-core machine's software GL: 2,000 agents in a full run here)
    assert last["frame"] == 40
    assert last["agents"] == 4000 or "count" in last["governor"]["lowered"], last["governor"]
    for key in ("time", "fps", "frame_ms", "gpu_ms", "visible", "near_lure", "params"):
        assert key in last
    assert set(last["gpu_ms"]) >= {"simulate", "cull", "draw"}
    assert 0 < last["visible"] <= 4000
    # GLX gives GL fences (ctypes): counts are read when done, never waited for.
    assert last["readback"] == "fences" and 0 <= last["counts_lag"] <= 3
    assert last["params"]["count"] == 4000 and last["params"]["boundary"] == "sphere"


def test_escape_quits_only_when_pressed_twice(display, tmp_path):
    assert shutil.which("xdotool"), "xdotool is missing: apt-get install xdotool"
    telemetry = tmp_path / "t.jsonl"
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "instrument.py"), "--windowed", "--size", "320x200",
         "--count", "500", "--telemetry", str(telemetry)],
        env=with_display(display), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: last_record(telemetry), "the window's first frame", process=process)

        def press_escape():
            subprocess.run(["xdotool", "search", "--sync", "--name", "swarm instrument",
                            "windowfocus", "--sync", "key", "Escape"],
                           env=with_display(display), check=True, timeout=20)

        press_escape()
        time.sleep(2.5)  # longer than the one-second window: the first press has expired
        assert process.poll() is None, "one Esc ended the show"
        press_escape()
        time.sleep(2.5)
        assert process.poll() is None, "two Esc presses seconds apart ended the show"
        press_escape()
        press_escape()
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_escape_guard_timing():
    guard = EscapeGuard(1.0)
    assert not guard.press(10.0)
    assert guard.armed(10.5) and not guard.armed(11.5)
    assert not guard.press(11.5)  # the first press expired: this one arms again
    assert guard.press(12.2)


def test_headless_screenshot(tmp_path):
    shot = tmp_path / "headless.png"
    result = instrument("--headless", "--frames", "5", "--count", "3000", "--size", "320x180",
                        "--screenshot", str(shot))
    assert result.returncode == 0, result.stderr
    image = read_png(shot)
    assert image.shape == (180, 320, 3)
    assert 0.02 < swarm_pixels(image).mean() < 0.9


@pytest.mark.slow  # the command plays ten seconds of the look
def test_no_display_plays_ten_seconds_of_the_striking_look_and_says_where(tmp_path):
    """The first command of the README, as a new user runs it on a machine with no display."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    result = instrument(env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "no display found" in result.stdout
    assert "opening on the bundled look 'aurora'" in result.stdout
    assert "300 frames, 10.00 s simulated" in result.stdout  # the ten seconds it says
    # How long it takes here, said once the first frames are timed; then the progress line
    # on stderr (a plain line every 5 s into a pipe), ending on the last frame.
    assert "no display: the 300 frames take about " in result.stdout
    progress = [line for line in result.stderr.splitlines() if line.startswith("no display [")]
    assert progress and "300/300 frames 100%" in progress[-1] and "0:00 left" in progress[-1]
    shot = tmp_path / "swarm-screenshot.png"
    assert result.stdout.splitlines()[-1].endswith(f"saved to {shot}")  # where, last
    image = read_png(shot)
    assert image.shape == (720, 1280, 3)
    lit = swarm_pixels(image)
    rows, columns = np.nonzero(lit)
    # The swarm fills a good part of the frame (a look may fill it to the edges), centred in
    # it, and is bright enough to show.
    assert (rows.max() - rows.min()) / 720 > 0.6
    assert abs(rows.mean() - 360) < 180 and abs(columns.mean() - 640) < 320
    assert lit.mean() > 0.1 and image.mean() > 15  # the old default: 4 % bright, 2 % lit
    others = [line for line in result.stderr.splitlines() if not line.startswith("no display [")]
    assert "Traceback" not in result.stderr and len(others) <= 2


def test_unknown_screen_is_a_clear_error(display):
    result = instrument("--screen", "5", "--frames", "1", env=with_display(display))
    assert result.returncode == 1
    assert "--screen 5: no such screen" in result.stderr and "Traceback" not in result.stderr


HIDDEN_HUD = r"""
import ctypes
import time

import pyglet

from swarm_instrument.visual.ui.window import LiveWindow, open_window

window = open_window(0, False, (320, 180))
live = LiveWindow(window, fps=60.0)
asked = []
latch = []  # the frames that press H and take it at their late latch, as the show does


class Performer:
    def frame(self, target, size):
        if latch:
            latch.pop()
            press_h()
            live.take_keys()  # what Show.latch does (show.late_keys)

    def hud_lines(self, size):
        asked.append(len(asked))
        return [f"the HUD's line {len(asked)}"]

    def done(self):
        return False


live.performer = Performer()
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


def press_h():
    code = x11.XKeysymToKeycode(sender, x11.XStringToKeysym(b"h"))
    xtst.XTestFakeKeyEvent(sender, code, 1, 0)
    xtst.XTestFakeKeyEvent(sender, code, 0, 0)
    x11.XSync(sender, 0)


def shown():
    return [label.text for label in live.hud._labels] if live.hud.visible else None


live.on_draw()
assert len(asked) == 1 and shown() == ["the HUD's line 1"], (asked, shown())
press_h()
live._take_events()  # before the frame, as a frame begins: the HUD hidden
live.on_draw()
live.on_draw()
assert len(asked) == 1 and shown() is None, (asked, shown())  # no lines made while hidden
latch.append(True)  # H in the middle of a frame, taken at its late latch
live.on_draw()
assert len(asked) == 2 and shown() == ["the HUD's line 2"], (asked, shown())  # this frame
latch.append(True)  # and hidden again the same way: from this frame on no lines
live.on_draw()
live.on_draw()
assert len(asked) == 2 and shown() is None, (asked, shown())
print("ok")
"""


def test_a_hidden_hud_has_no_lines_made(display):
    """H hides the HUD: the window's frames then ask the show for no HUD lines (the report
    is work on the frame's thread: 0.05-0.1 ms a frame on the H100's host); H again and
    they are asked for again, in the frame that took the key at its late latch (asked before
    the frame, they showed a frame late: the key's latency 0.97 -> 1.57 frames here)."""
    result = subprocess.run([sys.executable, "-c", HIDDEN_HUD], cwd=ROOT, timeout=60,
                            env=with_display(display), capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "ok", (
        result.stdout + result.stderr)


def test_the_live_show_makes_its_hud_lines_only_when_asked(ctx, monkeypatch):
    from swarm_instrument import instrument
    from swarm_instrument.show.cli import live_show
    from swarm_instrument.show.cli.live_show import LiveShow
    from swarm_instrument.show.loop import Offscreen
    from swarm_instrument.show.supervision.supervisor import StopSignals

    args = instrument.build_parser().parse_args(["--headless", "--no-midi", "--frames", "4",
                                                 "--size", "96x54", "--count", "500"])
    params, routes, preset = instrument.build_params(args)
    monkeypatch.setattr(live_show, "check_machine", lambda *_: 500)
    live = LiveShow(args, params, routes, preset, StopSignals())
    show = live.build(ctx, (96, 54))
    try:
        sink = Offscreen(show, (96, 54))
        made = []
        real = show.hud_lines
        monkeypatch.setattr(show, "hud_lines", lambda **kw: made.append(kw) or real(**kw))
        live.frame(*sink.target())
        assert not made  # a frame alone makes no lines: the window asks where the HUD shows
        lines = live.hud_lines((96, 54))
        assert len(made) == 1 and lines and "agents" in " ".join(lines).lower()
        live.frame(*sink.target())
        assert show.frame == 2
    finally:
        live.finish(None)


GPU_WAITS = """
import time
import moderngl
import pyglet
from swarm_instrument.visual.ui import window as window_module
window_module.is_software = lambda ctx: False  # the waits a GPU's window takes: GL fences
from swarm_instrument.visual.ui.window import LiveWindow, open_window

window = open_window(0, False, (320, 180))
live = LiveWindow(window, fps=60.0)
colours = iter([(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)] * 4)


class Performer:
    def frame(self, target, size):
        target.use()
        live.ctx.clear(*next(colours))

    def hud_lines(self, size):
        return []

    def done(self):
        return False

    def paced(self, start, worked, shown):
        self.times = (start, worked, shown)
        return 1 / 60


live.performer = performer = Performer()
pyglet.window.Window._enable_event_queue = False
for _ in range(30):
    window.dispatch_events()
    time.sleep(0.01)
for frame in range(6):
    live._tick(1 / 60)
    start, worked, shown = performer.times
    assert start <= worked <= shown, performer.times
assert live._frame_wait.looks >= 6 and live._swap_wait.looks >= 6, (
    live._frame_wait.looks, live._swap_wait.looks)
assert live._swap_wait.expected == 0.0  # no nap learnt for the swap
print("ok")
"""


def test_a_gpus_window_waits_for_its_frame_and_its_swap_on_gl_fences(display):
    """On a GPU the window's waits (its frame's work before the swap, the swap after it) look
    at GL fences and sleep between looks: NVIDIA's glFinish spins a core for as long as it
    waits, with vsync until the display's refresh. Taken here on software GL's fences (GLX
    has them) in a real window: every frame's work and swap are waited for, in order."""
    result = subprocess.run([sys.executable, "-c", GPU_WAITS], cwd=ROOT, timeout=60,
                            env=with_display(display), capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "ok", (
        result.stdout + result.stderr)
