"""The show as a performer plays it: the real window under Xvfb, supervised as `python
instrument.py` runs by default, driven by keys and the mouse through X for over a minute.

Every key the README lists, preset recalls across every bundled slot (with the count the command
line set kept, then changed from the keyboard and changed again by a recall), F in and out of
full-screen several times, the lure dragged, the wheel; the show must stay alive (one process,
no restart by the supervisor), its screen lit and drawn edge to edge, and Esc twice must end it
with exit 0.
"""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT, wait_for
from telemetry import Telemetry
from xdisplay import Performer, with_display

SCREEN = (1024, 600)
WINDOW = (480, 270)
SHOW_SECONDS = 62.0
BUNDLED = {1: "calm-school", 2: "murmuration", 3: "lure-rush", 4: "drift-trails",
           5: "flat-wrap", 6: "bass-pulse", 7: "aurora", 8: "neon-streaks", 9: "vortex"}
DRAWN = 2  # the show's background is (3, 4, 6); X's root window is black (0, 0, 0)
LIT = 40   # swarm pixels are brighter than this


def drawn_fraction(image: np.ndarray, box: tuple[int, int, int, int]) -> float:
    x, y, width, height = box
    return float((image[y:y + height, x:x + width].max(axis=2) >= DRAWN).mean())


@pytest.mark.slow  # over a minute of the real window
def test_a_minute_of_show_played_with_keys_and_mouse(display, tmp_path):
    presets, state = tmp_path / "presets", tmp_path / "state"
    telemetry = Telemetry(tmp_path / "telemetry.jsonl")
    env = with_display(display, SWARM_PRESETS_DIR=str(presets), SWARM_STATE_DIR=str(state),
                       SWARM_RECOVERY_FILE=str(state / "recovery.json"))
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "instrument.py"), "--windowed", "--size",
         f"{WINDOW[0]}x{WINDOW[1]}", "--count", "2048", "--no-midi", "--telemetry",
         str(telemetry.path)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        performer = Performer(display)
        first = telemetry.wait(lambda r: r["frame"] > 0, "the first frame", timeout=90)
        pid = first["pid"]
        started = time.monotonic()
        assert first["frame_size"] == list(WINDOW)

        # Every bundled slot: the recall lands, the command line's count stays.
        for slot, name in BUNDLED.items():
            performer.key(str(slot))
            telemetry.wait(lambda r, name=name: r["preset"]["name"] == name
                           and r["preset"]["morph"] is None, f"slot {slot} to land")
            assert telemetry.last()["params"]["count"] == 2048
        performer.key("ctrl+8")  # saves the look into slot 8, in the user's folder
        wait_for(lambda: (presets / "slot-8.json").is_file(), "slot 8 saved", timeout=20,
                 process=process)
        performer.key("1", "8")  # the saved look now fills slot 8, not the bundled one
        telemetry.wait(lambda r: r["preset"]["name"] == BUNDLED[9]
                       and r["preset"]["morph"] is None, "the saved slot to recall")

        # The chosen parameter from the keyboard: count first. Shift is ten times the step.
        assert telemetry.last()["selected"] == "count"
        performer.key("shift+Right")
        raised = telemetry.wait(lambda r: r["params"]["count"] > 2048, "count up")
        assert raised["params"]["count"] == 4096  # 256..262144 on a geometric curve
        # The agents follow the count asked, as far as the governor lets them on software GL
        # (it may hold fewer to keep 30 fps: the HUD's "count 4,096 of 16,384").
        def playing(count: int):
            return lambda r: (r["params"]["count"] == count == r["governor"]["count_asked"]
                              and r["agents"] == r["governor"]["count"] <= count)

        telemetry.wait(playing(4096), "agents to follow")
        performer.key("3")  # played live, the count is the performer's: a recall sets it
        telemetry.wait(playing(16384), "the recall's count")
        for _ in range(3):
            performer.key("shift+Left")
        lowered = telemetry.wait(lambda r: r["params"]["count"] == 2048, "count down")
        telemetry.wait(playing(lowered["params"]["count"]), "fewer agents")
        performer.key("Down", "Right", "Right")  # spawn_radius, a fine step up twice
        assert telemetry.wait(lambda r: r["selected"] == "spawn_radius", "Down")
        performer.key("Up")

        performer.key("l")  # MIDI is off: said, nothing breaks
        performer.key("space")
        telemetry.wait(lambda r: r["paused"], "pause")
        performer.key("space", "r", "h", "h")
        telemetry.wait(lambda r: not r["paused"], "play again")

        # F in and out of full-screen, three times: the whole window drawn each time.
        # pyglet makes a new X window each time, and X11 sometimes drops a key sent to a
        # window that has just been made (pyglet issue #911: about one press in 18 here,
        # under Xvfb with no window manager): a press with no effect within 10 s is made
        # once more, and every toggle must take within two presses.
        def toggle(size: tuple[int, int]) -> None:
            for press in range(2):
                performer.key("f", pause=2.5)
                if performer.wait_geometry(size, timeout=10 if press == 0 else 20) == size:
                    return
            raise AssertionError(f"F twice and the window is not {size[0]}x{size[1]}")

        for _ in range(3):
            toggle(SCREEN)
            telemetry.wait(lambda r: r["frame_size"] == list(SCREEN), "full-screen frames")
            image = performer.screen()
            assert drawn_fraction(image, (0, 0, *SCREEN)) > 0.98, "full-screen not filled"
            toggle(WINDOW)
            telemetry.wait(lambda r: r["frame_size"] == list(WINDOW), "windowed frames")

        # The lure follows a drag (and a ring marks it); the wheel zooms.
        width, height = WINDOW
        performer.drag([(width // 2 + dx, height // 2) for dx in range(-120, 121, 20)])
        held = telemetry.wait(lambda r: r["lure"]["held"], "the lure to be held")
        assert held["lure"]["position"] != first["lure"]["position"]
        performer.wheel(3)
        performer.wheel(-3)

        performer.key("Escape", pause=2.0)  # one Esc never ends a show
        assert process.poll() is None

        # Play on, through the slots, until over a minute of show has passed.
        slot = 1
        while time.monotonic() - started < SHOW_SECONDS:
            performer.key(str(slot), pause=2.0)
            slot = slot % 6 + 1
        record = telemetry.wait(lambda r: True, "a record")
        assert record["pid"] == pid, "the show was restarted: it crashed"
        image = performer.screen()
        window = (0, 0, *WINDOW)  # Xvfb has no window manager: the window sits at 0, 0
        assert drawn_fraction(image, window) > 0.98
        assert (image[:WINDOW[1], :WINDOW[0]].max(axis=2) > LIT).mean() > 0.01, "dark"

        performer.key("Escape", "Escape", pause=0.0)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        out, err = process.communicate(timeout=30)
    assert "Traceback" not in err, err[-3000:]
    assert "restarting in" not in out + err, "the supervisor had to restart the show"
    assert not (state / "crash.log").exists() or not (state / "crash.log").read_text()
    assert "MIDI is off" in out
