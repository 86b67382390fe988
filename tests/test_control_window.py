"""The control window (issue 18's two screens), as a performer uses it: a virtual X screen split
into two monitors (a laptop's 960x600 and a projector's 640x360, RandR monitors as
`xrandr --setmonitor` makes them), the picture full-screen on one with nothing over it, the
control window on the other, driven with X mouse events (xdotool) and read through telemetry
and the screen. Plus the pure parts: the plan of screens, the layout, the messages."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT
from conftest import run_instrument as instrument
from pictures import read_png
from xdisplay import Performer, grab, split_into_monitors, with_display, xvfb

from control.parameters.registry import REGISTRY, param
from show.cli.live_show import plan_screens
from show.inputs.control_surface import Activity, layout_groups, to_action
from visual.control_window import Messages, hit, lay_out
from visual.screens import ScreenArea, side_by_side

LAPTOP, PROJECTOR = (0, 0, 960, 600), (960, 0, 640, 360)
CONTROL_CAPTION = "swarm instrument - control"
RUN = ("--dt", "0.0333", "--frames", "30", "--count", "2000", "--no-midi", "--preset",
       "murmuration")  # no routes: the same frames whatever the wall clock


@pytest.fixture(scope="module")
def two_screens():
    """One X screen of 1600x600 made two monitors; kept by the server (-noreset)."""
    with xvfb("1600x600", "-noreset") as display:
        split_into_monitors(display, [LAPTOP, PROJECTOR])
        yield display


# ---- pure ----------------------------------------------------------------------------------

def where(plan) -> tuple:
    return plan.output, plan.control, plan.separate


def test_the_plan_of_screens():
    two = ["960x600", "640x360"]
    plan = plan_screens(two, 0, 1, None)
    assert (plan.output, plan.control, plan.separate) == (1, 0, True)
    assert where(plan_screens(two, 0, None, 1)) == (0, 1, True)
    assert where(plan_screens(two, 0, None, None)) == (0, None, False)  # as before: no window
    one = plan_screens(["1920x1080"], 0, None, 0)
    assert (one.output, one.control, one.separate) == (0, 0, False)
    assert "keeps its HUD" in one.notes[-1]
    bad = plan_screens(two, 0, 5, 7)
    assert (bad.output, bad.control, bad.separate) == (0, 1, True)
    assert bad.notes[0].startswith("--output-screen 5: no such screen (screens: 0: 960x600")
    assert bad.notes[1].startswith("--control-screen 7: no such screen")
    alone = plan_screens(["1920x1080"], 0, 3, None)
    assert (alone.output, alone.control, alone.separate) == (0, 0, False)


@pytest.mark.parametrize("size", [(960, 600), (1920, 1080), (1280, 800)])
def test_every_parameter_has_a_slider_inside_the_window(size):
    groups = layout_groups()
    layout = lay_out(size, groups, 16 / 9)
    assert set(layout.rows) == {p.name for p in REGISTRY}
    boxes = [row.row for row in layout.rows.values()]
    for box in boxes + list(layout.slots.values()) + [layout.preview, layout.meters]:
        assert 0 <= box.x and box.x + box.w <= size[0] + 0.5
        assert 0 <= box.y and box.y + box.h <= size[1] + 0.5
    for i, a in enumerate(boxes):  # no two rows overlap
        for b in boxes[i + 1:]:
            assert (a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y + 0.01
                    or b.y + b.h <= a.y + 0.01)
    for name, row in layout.rows.items():
        centre = (row.bar.x + row.bar.w / 2, row.bar.y + row.bar.h / 2)
        assert hit(layout, *centre)[1] in (name, (name, 1))
    for slot, box in layout.slots.items():
        assert hit(layout, box.x + box.w / 2, box.y + box.h / 2) == ("slot", slot)
    assert layout.preview.w / layout.preview.h == pytest.approx(16 / 9)


def test_messages_become_the_actions_osc_would_give():
    values = {p.name: p.default for p in REGISTRY}
    action = to_action(("norm", "max_speed", 0.25), values)
    assert action.kind == "set"
    assert action.values == {"max_speed": param("max_speed").from_norm(0.25)}
    assert to_action(("nudge", "cohesion_weight", 0.01), values).values == {
        "cohesion_weight": param("cohesion_weight").nudge(values["cohesion_weight"], 0.01)}
    assert to_action(("nudge", "crossfade_a", 0.01), values).values == {"crossfade_a": 2}
    assert to_action(("set", "slow_color", (0.5, 0.25, 1.0)), values).values == {
        "slow_color": (0.5, 0.25, 1.0)}
    assert to_action(("norm", "separation", 0.0), values).values == {"separation": False}
    assert to_action(("preset", 3), values).kind == "recall_preset"
    assert to_action(("save", 9), values).value == 9
    assert to_action(("learn", "glow"), values).param == "glow"
    assert to_action(("action", "burst"), values).kind == "separation_burst"
    from control.osc.osc_wire import OscError

    for bad in (("norm", "no_such", 0.5), ("save", 10), ("preset", 0), ("action", "quit"),
                ("norm", "slow_color", 0.5), ("learn", "nothing")):
        with pytest.raises(OscError):
            to_action(bad, values)


def test_a_dragged_slider_sends_its_last_position_once_a_frame():
    messages = Messages()
    for x in (0.1, 0.2, 0.3):
        messages.add(("norm", "glow", x))
    messages.add(("preset", 2))
    messages.add(("norm", "fog", 0.5))
    assert messages.take() == [("norm", "glow", 0.3), ("preset", 2), ("norm", "fog", 0.5)]
    assert messages.take() == []
    for _ in range(1000):
        messages.add(("action", "tap"))
    assert len(messages.take()) == 256


def test_an_input_lamp_lights_when_its_count_moves():
    lamp = Activity()
    assert not lamp.lit(5, 10.0)
    assert lamp.lit(6, 10.1) and lamp.lit(6, 10.3)
    assert not lamp.lit(6, 10.5)
    assert not lamp.lit(None, 11.0)


# ---- the real windows ----------------------------------------------------------------------

def test_the_picture_on_its_own_screen_has_nothing_over_it(two_screens, tmp_path):
    """The output window's frame equals a HUD-less headless render of the same show, bit for
    bit, while the control window plays beside it (its thumbnails rendering in the same GL
    context); the same show on one screen differs exactly where the HUD is."""
    env = with_display(two_screens, SWARM_PRESETS_DIR=str(tmp_path / "presets"))
    shots = {name: tmp_path / f"{name}.png" for name in ("output", "headless", "hud")}
    result = instrument("--output-screen", "1", *RUN, "--screenshot", str(shots["output"]),
                        env=env)
    assert result.returncode == 0, result.stderr
    assert "the picture on screen 1 (640x360) with nothing over it, the control window on " \
           "screen 0 (960x600)" in result.stdout
    assert "window: 2000 agents on screen 1, 640x360 full-screen" in result.stdout
    result = instrument("--headless", "--size", "640x360", *RUN, "--screenshot",
                        str(shots["headless"]), env=env)
    assert result.returncode == 0, result.stderr
    result = instrument("--screen", "1", *RUN, "--screenshot", str(shots["hud"]), env=env)
    assert result.returncode == 0, result.stderr
    output, headless, hud = (read_png(shots[k]).astype(int) for k in ("output", "headless",
                                                                       "hud"))
    assert output.shape == headless.shape == (360, 640, 3)
    assert np.array_equal(output, headless), "something is drawn over the output's picture"
    differs = np.abs(hud - headless).max(axis=2) > 8
    rows, columns = np.nonzero(differs)
    assert differs.mean() > 0.01 and rows.min() < 40 and columns.min() < 40  # the HUD's text


def test_bad_screens_are_said_and_the_show_plays_on(two_screens, tmp_path):
    env = with_display(two_screens, SWARM_PRESETS_DIR=str(tmp_path / "presets"))
    result = instrument("--output-screen", "4", "--control-screen", "9", "--frames", "5",
                        "--count", "500", "--no-midi", env=env)
    assert result.returncode == 0, result.stderr
    said = result.stdout + result.stderr
    assert "--output-screen 4: no such screen (screens: 0: 960x600, 1: 640x360); the picture " \
           "plays on screen 0" in said
    assert "--control-screen 9: no such screen" in said
    assert "Traceback" not in said
    assert "window: 500 agents on screen 0" in said


def _wait_for(predicate, what: str, process, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _last(telemetry: Path) -> dict | None:
    if not telemetry.exists():
        return None
    lines = [line for line in telemetry.read_text().splitlines() if line.strip()]
    return json.loads(lines[-1]) if lines else None


def test_sliders_thumbnails_and_save_in_the_control_window(two_screens, tmp_path):
    """Drag a slider, wheel another, click a thumbnail, SAVE into a slot: with X mouse
    events, read back in telemetry; the control window's preview and first thumbnail lit."""
    telemetry = tmp_path / "t.jsonl"
    presets = tmp_path / "presets"
    env = with_display(two_screens, SWARM_PRESETS_DIR=str(presets))
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "instrument.py"), "--output-screen", "1", "--count",
         "2000", "--no-midi", "--frames", "100000", "--telemetry", str(telemetry)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    performer = Performer(two_screens)
    try:
        _wait_for(lambda: _last(telemetry), "the first telemetry record", process)
        window = _wait_for(lambda: _window(two_screens, CONTROL_CAPTION), "the control window",
                           process)
        geometry = subprocess.run(["xdotool", "getwindowgeometry", window], env=performer.env,
                                  capture_output=True, text=True, check=True).stdout
        assert "Position: 0,0" in geometry and "Geometry: 960x600" in geometry
        layout = lay_out((960, 600), layout_groups(), 480 / 270)

        def at(x: float, y: float) -> tuple[str, str]:  # pyglet's coordinates -> X's
            return str(round(x)), str(round(600 - y))

        def xdo(*args: str) -> None:
            subprocess.run(["xdotool", *args], env=performer.env, check=True, timeout=20)

        # Drag max_speed's slider from a tenth to three quarters of its bar.
        bar = layout.rows["max_speed"].bar
        y = bar.y + bar.h / 2
        start, end = bar.x + bar.w * 0.1, bar.x + bar.w * 0.75
        xdo("mousemove", "--window", window, *at(start, y), "mousedown", "1")
        for fraction in (0.3, 0.5, 0.75):
            xdo("mousemove", "--window", window, *at(bar.x + bar.w * fraction, y))
            time.sleep(0.1)
        xdo("mouseup", "1")
        expected = param("max_speed").from_norm(bar.fraction(round(end)))
        record = _wait_for(lambda: (r := _last(telemetry)) and r["params"]["max_speed"]
                           == pytest.approx(expected, rel=1e-6) and r, "max_speed to move",
                           process)
        assert record["selected"] == "max_speed"  # a slider clicked is the chosen one
        # The keys work here as on the picture: Right nudges the chosen parameter.
        xdo("windowfocus", "--sync", window, "key", "Right")
        nudged = param("max_speed").nudge(record["params"]["max_speed"], 0.01)
        _wait_for(lambda: (r := _last(telemetry)) and r["params"]["max_speed"]
                  == pytest.approx(nudged), "Right to nudge max_speed", process)

        # Three clicks of the wheel up over cohesion_weight: three hundredths of its range.
        weight = param("cohesion_weight")
        before = record["params"]["cohesion_weight"]
        wanted = weight.nudge(weight.nudge(weight.nudge(before, 0.01), 0.01), 0.01)
        bar = layout.rows["cohesion_weight"].bar
        xdo("mousemove", "--window", window, *at(bar.x + bar.w / 2, bar.y + bar.h / 2))
        for _ in range(3):
            xdo("click", "4")
            time.sleep(0.15)
        _wait_for(lambda: (r := _last(telemetry)) and r["params"]["cohesion_weight"]
                  == pytest.approx(wanted), "cohesion_weight to move", process)

        # Click slot 3's thumbnail: lure-rush is recalled (with the morph).
        box = layout.slots[3]
        xdo("mousemove", "--window", window, *at(box.x + box.w / 2, box.y + box.h / 2),
            "click", "1")
        _wait_for(lambda: (r := _last(telemetry)) and r["preset"]["name"] == "lure-rush",
                  "slot 3 to be recalled", process)

        # SAVE, then slot 9: the look goes into the user's slot-9.json.
        button = layout.buttons["save"]
        xdo("mousemove", "--window", window, *at(button.x + 5, button.y + 5), "click", "1")
        box = layout.slots[9]
        xdo("mousemove", "--window", window, *at(box.x + box.w / 2, box.y + box.h / 2),
            "click", "1")
        _wait_for(lambda: (presets / "slot-9.json").exists(), "slot 9 to be saved", process)
        saved = json.loads((presets / "slot-9.json").read_text())
        assert saved["format"] == "swarm-preset" and "max_speed" in saved["params"]

        # The pictures: the preview of the output, and slot 1's thumbnail once rendered.
        _wait_for(lambda: (r := _last(telemetry)) and 1 in r["control"][0]["thumbnails"],
                  "slot 1's thumbnail", process, timeout=90)
        time.sleep(0.5)
        screen = grab(two_screens)
        from visual.output.png import write_png

        write_png(tmp_path / "screens.png", screen)

        def region(box) -> np.ndarray:
            top = round(600 - box.y - box.h)
            return screen[top + 2:top + round(box.h) - 2, round(box.x) + 2:
                          round(box.x + box.w) - 2]

        assert (region(layout.preview).max(axis=2) > 60).mean() > 0.01, "no preview"
        thumb = layout.slots[1]
        picture = type(thumb)(thumb.x, thumb.y + 16, thumb.w, thumb.h - 16)
        assert (region(picture).max(axis=2) > 60).mean() > 0.01, "slot 1 has no thumbnail"
        control = _last(telemetry)["control"][0]
        assert control["rejected"] == 0 and control["applied"] >= 6
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _window(display: str, name: str) -> str | None:
    result = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", f"^{name}$"],
                            env=with_display(display), capture_output=True, text=True,
                            timeout=20)
    ids = result.stdout.split()
    return ids[-1] if ids else None


def test_one_screen_keeps_the_hud_and_opens_the_control_window_beside_it(tmp_path):
    with xvfb("1024x600") as display:
        env = with_display(display, SWARM_PRESETS_DIR=str(tmp_path / "presets"))
        shot, telemetry = tmp_path / "one.png", tmp_path / "t.jsonl"
        result = instrument("--control-screen", "0", "--windowed", "--size", "480x270",
                            "--frames", "20", "--count", "500", "--no-midi", "--screenshot",
                            str(shot), "--telemetry", str(telemetry), env=env)
        assert result.returncode == 0, result.stderr
        assert "one screen for both: the picture and the control window side by side" \
            in result.stdout
        record = _last(telemetry)
        assert record["control"][0]["draws"] > 0
        image = read_png(shot)
        text = (image.min(axis=2) > 200)[:60, :200]  # the HUD's light grey letters
        assert text.mean() > 0.01, "the HUD is gone with one screen"


def overlap(a, b) -> int:
    """Pixels two areas share."""
    width = min(a.x + a.width, b.x + b.width) - max(a.x, b.x)
    height = min(a.y + a.height, b.y + b.height) - max(a.y, b.y)
    return max(width, 0) * max(height, 0)


@pytest.mark.parametrize("screen", [(0, 0, 1920, 1080), (0, 0, 1280, 720), (0, 0, 1024, 600),
                                    (1920, 0, 800, 600), (0, 0, 3840, 2160), (0, 0, 640, 480)])
@pytest.mark.parametrize("picture", [None, (480, 270), (1280, 720), (4000, 3000)])
def test_one_screen_puts_the_picture_and_the_control_window_side_by_side(screen, picture):
    """visual/screens.py's arithmetic: both windows inside the screen, not over each other,
    the control window as high as the screen and at least 480 wide (half a narrow screen);
    --size kept where it leaves that room, else its proportions (16:9 without it)."""
    area = ScreenArea(*screen)
    shown, control = side_by_side(area, picture)
    for window in (shown, control):
        assert area.x <= window.x and window.x + window.width <= area.x + area.width
        assert area.y <= window.y and window.y + window.height <= area.y + area.height
        assert window.width > 0 and window.height > 0
    assert overlap(shown, control) == 0
    assert (shown.x, shown.y) == (area.x, area.y) and control.x == shown.x + shown.width
    assert control.height == area.height
    assert control.width >= min(480, area.width // 2)
    if picture is not None and picture[0] <= area.width - min(480, area.width // 2) \
            and picture[1] <= area.height:
        assert (shown.width, shown.height) == picture
    else:
        aspect = picture[0] / picture[1] if picture else 16 / 9
        assert shown.width / shown.height == pytest.approx(aspect, rel=0.01)
    assert side_by_side(ScreenArea(0, 0, 1920, 1080)) == (ScreenArea(0, 0, 1152, 648),
                                                          ScreenArea(1152, 0, 768, 1080))


def _geometry(display: str, window: str) -> ScreenArea:
    """A window's place and size on the X screen, as xwininfo reads them."""
    out = subprocess.run(["xwininfo", "-id", window], env=with_display(display),
                         capture_output=True, text=True, check=True, timeout=20).stdout
    value = {line.split(":")[0].strip(): line.split(":")[1].strip()
             for line in out.splitlines() if ":" in line}
    return ScreenArea(int(value["Absolute upper-left X"]), int(value["Absolute upper-left Y"]),
                      int(value["Width"]), int(value["Height"]))


def test_one_screen_opens_the_two_windows_beside_each_other(tmp_path):
    """--control-screen 0 on one 1280x720 screen (the picture full-screen by default): the
    picture's window and the control window where side_by_side puts them, neither over the
    other (the picture had been full-screen at 0,0 with the control window over it)."""
    with xvfb("1280x720") as display:
        env = with_display(display, SWARM_PRESETS_DIR=str(tmp_path / "presets"))
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "instrument.py"), "--control-screen", "0", "--count",
             "500", "--no-midi", "--frames", "100000"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            control = _wait_for(lambda: _window(display, CONTROL_CAPTION),
                                "the control window", process)
            picture = _wait_for(lambda: _window(display, "swarm instrument"), "the picture",
                                process)
            expected = side_by_side(ScreenArea(0, 0, 1280, 720))
            seen = _wait_for(lambda: (g := (_geometry(display, picture),
                                            _geometry(display, control))) == expected and g,
                             "the windows in their places", process, timeout=20)
            assert overlap(*seen) == 0
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=60)
            assert process.returncode == 0, err
            assert "side by side" in out and "window: 500 agents on screen 0, 768x432" in out
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


def test_the_screens_are_the_desktops_monitors(two_screens):
    result = subprocess.run([sys.executable, "-c", "from visual.screens import describe, "
                             "list_screens; print(describe(list_screens()))"],
                            env=with_display(two_screens), capture_output=True, text=True,
                            cwd=ROOT, timeout=60)
    assert result.stdout.strip() == "0: 960x600 at 0,0, 1: 640x360 at 960,0", result.stderr


def test_a_knob_waiting_for_pickup_shows_its_ghost_and_a_click_learns(two_screens, tmp_path,
                                                                      monkeypatch):
    """A real MIDI port (JACK): a knob turned away from the value waits for pickup and its
    position is drawn on the slider; the L box of another slider learns the next knob."""
    import uuid

    from midi_jack import Sender, jack_midi_server

    telemetry = tmp_path / "t.jsonl"
    device = f"knobs{uuid.uuid4().hex[:6]}"
    with jack_midi_server() as server:
        monkeypatch.setenv("JACK_DEFAULT_SERVER", server)
        monkeypatch.setenv("JACK_NO_START_SERVER", "1")
        knobs = Sender(device, virtual="out")
        env = with_display(two_screens, JACK_DEFAULT_SERVER=server,
                           SWARM_PRESETS_DIR=str(tmp_path / "presets"))
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "instrument.py"), "--output-screen", "1", "--count",
             "500", "--frames", "100000", "--midi-api", "jack", "--midi-port", device,
             "--preset", "murmuration", "--telemetry", str(telemetry)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _wait_for(lambda: (r := _last(telemetry)) and f"{device}:out" in
                      r["midi"]["ports_open"], "the MIDI port to open", process)
            window = _wait_for(lambda: _window(two_screens, CONTROL_CAPTION),
                               "the control window", process)
            # CC 70 is separation_weight 0..5 (the shipped mapping): at 64 the knob points
            # at 2.52, away from the look's value, so it waits to be picked up.
            layout = lay_out((960, 600), layout_groups(), 480 / 270)
            bar = layout.rows["separation_weight"].bar
            top = round(600 - bar.y - bar.h)
            knob = 64 / 127 * 5
            x = round(bar.x + bar.w * param("separation_weight").to_norm(knob))

            def ghost() -> np.ndarray:
                return grab(two_screens)[top + 1:top + round(bar.h) - 1, x - 1:x + 1]

            assert ghost().min() < 190, "a ghost before any knob moved"
            knobs.send([0xB0, 70, 64])
            record = _wait_for(lambda: (r := _last(telemetry)) and r["midi"]["pickup"].get(
                "separation_weight") and r, "the knob to wait for pickup", process)
            assert record["midi"]["pickup"]["separation_weight"]["knob"] == \
                pytest.approx(knob, abs=1e-3)
            time.sleep(0.5)
            strip = ghost()
            assert strip.min() > 190, f"no ghost where the knob points: {strip.tolist()}"
            # Click glow's L: it learns; the next knob turned (CC 80) binds to it.
            learn = layout.rows["glow"].learn
            subprocess.run(["xdotool", "mousemove", "--window", window,
                            str(round(learn.x + learn.w / 2)),
                            str(round(600 - learn.y - learn.h / 2)), "click", "1"],
                           env=with_display(two_screens), check=True, timeout=20)
            _wait_for(lambda: (r := _last(telemetry)) and r["midi"]["learn"]["param"] == "glow"
                      and r["selected"] == "glow", "glow to learn", process)
            knobs.send([0xB0, 80, 64])
            _wait_for(lambda: (r := _last(telemetry)) and (r["midi"]["learn"]["last_bound"]
                                                            or "").startswith("glow <- "),
                      "the knob to be learned", process)
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=60) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            knobs.unplug()


class _Bank:
    """The preset bank's slot_path, over files the test writes."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def slot_path(self, slot: int) -> Path | None:
        path = self.folder / f"slot-{slot}.json"
        return path if path.exists() else None


def test_thumbnails_are_the_presets_played_and_played_again_when_saved(ctx, tmp_path):
    """Each filled slot's thumbnail is its preset as the contact sheet plays it (the same
    pixels, copied on the GPU), an empty slot has none, and a slot whose file changes is
    played again."""
    from audio.synth import drum_loop
    from control.looks.presets import load_preset
    from show.inputs.control_surface import ThumbnailJob
    from show.offline.contact_sheet import AUDIO_RATE, SHEET_BPM, SheetSettings, render_look

    (tmp_path / "slot-2.json").write_text((ROOT / "presets" / "2-murmuration.json")
                                          .read_text())
    (tmp_path / "slot-5.json").write_text((ROOT / "presets" / "8-neon-streaks.json")
                                          .read_text())
    settings = SheetSettings(size=(64, 36), seconds=0.3, fps=30.0, count_cap=512)
    job = ThumbnailJob(ctx, _Bank(tmp_path), settings, frames_per_step=4)
    try:
        job.check(0.0)
        assert job.queue == [2, 5]  # the empty slots have nothing to play
        finished = [slot for _ in range(20) if (slot := job.step()) is not None]
        assert finished == [2, 5] and job.ready == {2, 5}
        song = drum_loop(SHEET_BPM, settings.seconds + 1.0, AUDIO_RATE)
        for slot in (2, 5):
            expected = render_look(ctx, load_preset(tmp_path / f"slot-{slot}.json"), settings,
                                   song)
            texture = job.images.images[slot].texture
            pixels = np.frombuffer(texture.read(), np.uint8).reshape(36, 64, 4)[::-1, :, :3]
            assert np.array_equal(pixels, expected), f"slot {slot}'s thumbnail"
            assert (expected.max(axis=2) > 40).mean() > 0.02  # a picture, not black
        job.check(0.5)  # nothing changed, and too soon to look anyway
        assert job.queue == []
        (tmp_path / "slot-2.json").write_text((ROOT / "presets" / "6-bass-pulse.json")
                                              .read_text())
        job.check(2.0)
        assert job.queue == [2]
        finished = [slot for _ in range(10) if (slot := job.step()) is not None]
        assert finished == [2] and job.rendered == 3
        texture = job.images.images[2].texture
        again = np.frombuffer(texture.read(), np.uint8).reshape(36, 64, 4)[::-1, :, :3]
        assert np.array_equal(again, render_look(ctx, load_preset(tmp_path / "slot-2.json"),
                                                 settings, song))
    finally:
        job.release()


def test_the_control_window_on_gl_4_1(two_screens, tmp_path):
    """On a GL 4.1 core context (macOS's; Mesa told to be one, as tests/test_gl41.py does)
    the control window opens in a 4.1 context beside the picture and shows its preview."""
    from test_gl41 import MAC_GL

    telemetry = tmp_path / "t.jsonl"
    env = with_display(two_screens, SWARM_PRESETS_DIR=str(tmp_path / "presets"), **MAC_GL)
    result = instrument("--output-screen", "1", "--frames", "30", "--count", "500",
                        "--no-midi", "--telemetry", str(telemetry), env=env)
    assert result.returncode == 0, result.stderr
    assert "control window: screen 0, 960x600" in result.stdout
    record = _last(telemetry)
    assert record["backend"]["gl"] == "4.1"
    control = record["control"][0]
    assert control["preview_frames"] == 30 and control["draws"] > 0
