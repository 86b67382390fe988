"""The control window (issue 18's two screens), as a performer uses it: a virtual X screen split
into two monitors (a laptop's 960x600 and a projector's 640x360, RandR monitors as
`xrandr --setmonitor` makes them), the picture full-screen on one with nothing over it, the
control window on the other, driven with X mouse events (xdotool) and read through telemetry
and the screen, the widgets found where the window says it drew them (telemetry's
`control` object) rather than at pixels written here. Plus the pure parts: the plan of
screens, the flow of the parameters into columns, the messages, typed values, key routing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from swarm_instrument.control.parameters.registry import REGISTRY, Params, param
from swarm_instrument.show.cli.screen_plan import plan_screens
from swarm_instrument.show.inputs.control_surface import (
    Activity,
    Rows,
    layout_groups,
    to_action,
)
from swarm_instrument.visual.ui.control_window.control_layout import (
    KeyQueue,
    Messages,
    flow_columns,
    parse_typed,
    route_key,
    typed_text,
    ui_scale,
)
from swarm_instrument.visual.ui.screens import ScreenArea, side_by_side

from conftest import ROOT, free_port, wait_for
from conftest import run_instrument as instrument
from pictures import read_png
from telemetry import last_record
from xdisplay import Performer, grab, set_dpi, split_into_monitors, with_display

LAPTOP, PROJECTOR = (0, 0, 960, 600), (960, 0, 640, 360)
CONTROL_CAPTION = "swarm instrument - control"
RUN = ("--dt", "0.0333", "--frames", "30", "--count", "2000", "--no-midi", "--preset",
       "murmuration")  # no routes: the same frames whatever the wall clock


@pytest.fixture(scope="module")
def display_screen() -> tuple[str, ...]:
    """This module's X screen: 1600x600, kept as set by the server (-noreset)."""
    return ("1600x600", "-noreset")


@pytest.fixture(scope="module")
def two_screens(display):
    """The module's X screen made two monitors."""
    split_into_monitors(display, [LAPTOP, PROJECTOR])
    return display


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


@pytest.mark.parametrize("area", [(596, 497), (1220, 900), (780, 600), (300, 300)])
def test_every_parameter_has_one_row_in_the_columns(area):
    """Each group's rows in order, each once; the columns fit the area (or say they scroll),
    none narrower than a name and its value need, and balanced when they can be. At 596 px
    wide (three columns) the 63 parameters need 497 px of height (461 before the tempo
    range's two rows and the governor's four: issues 30 and 31; 495 before hue_shift:
    issue 29); below that they scroll."""
    counts = [len(specs) for _, specs in layout_groups()]
    assert sum(counts) == len(REGISTRY)
    flow = flow_columns(counts, *area, row_h=19, header_h=21, gap=8)
    rows = [(group, row) for column in flow.columns for group, start, stop in column
            for row in range(start, stop)]
    assert rows == [(group, row) for group, count in enumerate(counts) for row in range(count)]
    assert flow.width >= 190 or len(flow.columns) == 1
    if area[1] >= 497:
        assert flow.fits and flow.height <= area[1]
    else:
        assert not flow.fits and flow.height > area[1]  # too small: the columns scroll
    if area == (1220, 900):  # room to spare: balanced, no group split between columns
        assert all(start == 0 for column in flow.columns for _, start, _ in column)
        heights = [sum(21 + 19 * (stop - start) + 8 for _, start, stop in column)
                   for column in flow.columns]
        assert max(heights) - min(heights) < 0.5 * max(heights)


def test_a_typed_value_is_what_osc_would_be_sent():
    """What the performer types -> the value a ("set", name, value) message carries, which
    OSC's checks take (beyond the slider's range, inside the hard limits) or refuse."""
    from swarm_instrument.control.osc.osc_wire import OscError

    values = {p.name: p.default for p in REGISTRY}
    assert parse_typed("float", [], " 55.5 ") == 55.5
    assert parse_typed("int", [], "16,384") == 16384
    assert parse_typed("int", [], "1e3") == 1000
    assert parse_typed("bool", [], "Off") is False
    assert parse_typed("choice", ["orbit", "fixed"], "FIXED") == "fixed"
    assert parse_typed("color", [], "#FF8000") == "#ff8000"
    assert parse_typed("color", [], "1, 0.5 0") == (1.0, 0.5, 0.0)
    for kind, choices, text in (("float", [], "fast"), ("float", [], "inf"), ("int", [], ""),
                                ("bool", [], "maybe"), ("choice", ["a", "b"], "c"),
                                ("color", [], "#12345"), ("color", [], "1 2")):
        with pytest.raises(ValueError):
            parse_typed(kind, choices, text)
    assert to_action(("set", "max_speed", 55.5), values).values == {"max_speed": 55.5}
    assert param("max_speed").play_range[1] < 55.5  # past the slider's end: only typed
    assert to_action(("set", "count", 4096), values).values == {"count": 4096}
    assert to_action(("set", "slow_color", "#ff8000"), values).values["slow_color"] == \
        pytest.approx((1.0, 128 / 255, 0.0))
    with pytest.raises(OscError, match="out of range"):
        to_action(("set", "max_speed", 20000.0), values)
    with pytest.raises(OscError, match="whole number"):
        to_action(("set", "count", 2.5), values)
    assert typed_text("int", "16,384", None) == "16384"
    assert typed_text("color", "", (1.0, 0.5, 0.0)) == "#ff8000"


def test_keys_go_to_the_field_the_focus_or_the_show():
    for key in ("1", "SPACE", "ESCAPE", "T", "RETURN", "LEFT", "TAB"):
        assert route_key(key, True, "float") == "ui"  # typing: every key is the field's
    assert route_key("TAB", False, None) == "ui" and route_key("DOWN", False, "float") == "ui"
    assert route_key("RIGHT", False, "float") == "nudge"
    assert route_key("LEFT", False, "color") == "nudge"
    assert route_key("RIGHT", False, "widget") == "ui"  # between buttons and slots
    assert route_key("RIGHT", False, None) == "show"  # the chosen parameter, as on the picture
    assert route_key("RETURN", False, "int") == "edit"
    assert route_key("RETURN", False, "bool") == "toggle"
    assert route_key("RETURN", False, "widget") == "ui"
    for key in ("1", "SPACE", "ESCAPE", "T", "D", "L", "F"):
        assert route_key(key, False, "float") == "show"


def test_input_waits_for_imgui_to_catch_up_in_order():
    queue = KeyQueue()
    assert queue.now(("press", "TAB"))  # nothing pending: at once
    assert not queue.now(("text", "5"), busy=True)  # imgui has not taken the last one in
    assert queue.now(("move", 1, 2), busy=True) is False  # behind what is held: in order
    assert queue.next(busy=True) is None
    assert queue.next() == ("text", "5") and queue.next(busy=True) == ("move", 1, 2)
    assert queue.now(("move", 3, 4), busy=True)  # a move alone is never held back
    queue.moved()  # a key moved the focus: imgui shows where in two frames
    assert not queue.now(("press", "RIGHT")) and not queue.now(("release", "RIGHT"))
    queue.frame()
    assert queue.next() is None
    queue.frame()
    assert [queue.next(), queue.next(), queue.next()] == [("press", "RIGHT"),
                                                          ("release", "RIGHT"), None]
    queue.hold = True  # a field is opening: what is typed waits for it, however many frames
    assert not queue.now(("text", "7"))
    for _ in range(5):
        queue.frame()
        assert queue.next() is None
    queue.hold = False
    assert queue.next() == ("text", "7") and queue.next() is None


def test_the_window_draws_larger_on_a_high_dpi_screen():
    assert ui_scale((960, 600), (960, 600), 1.0) == 1.0
    assert ui_scale((1920, 1080), (1920, 1080), 2.0) == 2.0  # X11, Windows: sizes in pixels
    assert ui_scale((960, 600), (1920, 1200), 2.0) == 1.0  # macOS: points, imgui scales
    assert ui_scale((960, 600), (960, 600), 0.75) == 1.0
    assert ui_scale((960, 600), (960, 600), 9.0) == 4.0


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
    from swarm_instrument.control.osc.osc_wire import OscError

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


def test_each_row_says_its_value_and_is_made_again_only_when_it_changes():
    params = Params()
    rows = Rows()
    first = rows.rows(params.as_dict())
    assert set(first) == {spec.name for spec in REGISTRY}
    assert first["count"] == (param("count").to_norm(16384), "16,384", None)
    assert first["separation"][1] == "on" and first["slow_color"][0] is None
    params.update({"count": 4096, "max_speed": 2.5, "slow_color": (1.0, 0.5, 0.0),
                   "separation": False})
    second = rows.rows(params.as_dict())
    assert second["count"] == (param("count").to_norm(4096), "4,096", None)
    assert second["max_speed"] == (param("max_speed").to_norm(2.5), "2.5", None)
    assert second["slow_color"] == (None, "#ff8000", (1.0, 0.5, 0.0))
    assert second["separation"] == (param("separation").to_norm(False), "off", None)
    changed = {"count", "max_speed", "slow_color", "separation"}
    assert all(second[name] is first[name] for name in set(first) - changed)


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
    return wait_for(predicate, what, timeout=timeout, process=process)


def _control(telemetry: Path) -> dict | None:
    record = last_record(telemetry)
    return record["control"][0] if record and record.get("control") else None


def test_sliders_keys_typing_thumbnails_and_save_in_the_control_window(two_screens, tmp_path):
    """Drag a slider, wheel another, move the keyboard focus with Tab and Down and step the
    focused one with Right, type exact values in (Enter, right-click), click a thumbnail,
    SAVE into a slot: X mouse and key events, read back in telemetry; the preview, the first
    thumbnail and the HUD's lines (an OSC refusal in red) lit on the X screen."""
    from pythonosc.udp_client import SimpleUDPClient

    telemetry = tmp_path / "t.jsonl"
    presets = tmp_path / "presets"
    port = free_port()
    env = with_display(two_screens, SWARM_PRESETS_DIR=str(presets))
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "instrument.py"), "--output-screen", "1", "--count",
         "2000", "--no-midi", "--frames", "100000", "--osc", f"127.0.0.1:{port}",
         "--telemetry", str(telemetry)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    performer = Performer(two_screens)
    try:
        widgets = _wait_for(lambda: (c := _control(telemetry)) and "param:glow" in
                            c["widgets"] and c["widgets"], "the control window's widgets",
                            process)
        window = _wait_for(lambda: _window(two_screens, CONTROL_CAPTION), "the control window",
                           process)
        geometry = subprocess.run(["xdotool", "getwindowgeometry", window], env=performer.env,
                                  capture_output=True, text=True, check=True).stdout
        assert "Position: 0,0" in geometry and "Geometry: 960x600" in geometry
        # Every parameter has a slider inside the window, no two overlapping.
        bars = {name: rect for name, rect in widgets.items()
                if name.startswith(("param:", "channel:"))}
        assert {name.split(":")[1] for name in bars} == {p.name for p in REGISTRY}
        for x, y, w, h in bars.values():
            assert 0 <= x and x + w <= 960 and 0 <= y and y + h <= 600 and w > 20
        boxes = sorted(bars.values())
        for i, (x, y, w, h) in enumerate(boxes):
            for x2, y2, w2, h2 in boxes[i + 1:]:
                assert x + w <= x2 or x2 + w2 <= x or y + h <= y2 or y2 + h2 <= y

        def xdo(*args: str) -> None:
            subprocess.run(["xdotool", *args], env=performer.env, check=True, timeout=20)

        def centre(name: str) -> tuple[str, str]:
            x, y, w, h = widgets[name]
            return str(x + w // 2), str(y + h // 2)

        def until(what: str, test, timeout: float = 60.0) -> dict:
            return _wait_for(lambda: (r := last_record(telemetry)) and test(r) and r, what, process,
                             timeout)

        # Drag max_speed's slider from a tenth to three quarters of its bar.
        x, y, w, h = widgets["param:max_speed"]
        xdo("mousemove", "--window", window, str(x + w // 10), str(y + h // 2), "mousedown",
            "1")
        for fraction in (0.3, 0.5, 0.75):
            xdo("mousemove", "--window", window, str(round(x + w * fraction)), str(y + h // 2))
            time.sleep(0.1)
        xdo("mouseup", "1")
        speed = param("max_speed")
        record = until("max_speed to move", lambda r: abs(
            speed.to_norm(r["params"]["max_speed"]) - 0.75) < 1.5 / w)
        assert record["selected"] == "max_speed"  # a slider clicked is the chosen one
        # The keys: Right steps the slider clicked (it holds the keyboard focus).
        xdo("windowfocus", "--sync", window, "key", "Right")
        nudged = speed.nudge(record["params"]["max_speed"], 0.01)
        until("Right to nudge max_speed",
              lambda r: r["params"]["max_speed"] == pytest.approx(nudged))
        # The keyboard focus: Tab shows it on the slider clicked, Tab again moves it to the
        # next slider (the L boxes are no stops), Down to the one under it: the focused one
        # is the chosen parameter, and Right steps it.
        radius = param("neighbor_radius")
        stepped = radius.nudge(record["params"]["neighbor_radius"], 0.01)
        xdo("key", "--delay", "150", "Tab", "Tab", "Down", "Right")
        until("Tab, Tab, Down to focus neighbor_radius and Right to step it",
              lambda r: r["control"][0]["focused"] == "neighbor_radius"
              and r["selected"] == "neighbor_radius"
              and r["params"]["neighbor_radius"] == pytest.approx(stepped))
        # Enter opens its field, typed into at once (the keys wait for the field), Enter sets.
        xdo("key", "Return", "type", "--delay", "40", "7.25")
        xdo("key", "Return")
        until("7.25 typed in", lambda r: r["params"]["neighbor_radius"] == 7.25
              and r["control"][0]["editing"] is None)
        # Right-click max_speed: past the slider's end (40), inside the hard limit (10000);
        # then too much, refused by OSC's checks and said in the window.
        for typed in ("55.5", "20000"):
            xdo("mousemove", "--window", window, *centre("param:max_speed"), "click", "3")
            xdo("type", "--delay", "40", typed)
            xdo("key", "Return")
        record = until("55.5 typed in and 20000 refused", lambda r: r["params"]["max_speed"]
                       == 55.5 and r["control"][0]["rejected"] == 1
                       and "out of range" in r["control"][0]["notice"])

        # Three clicks of the wheel up over cohesion_weight: three hundredths of its range.
        weight = param("cohesion_weight")
        before = record["params"]["cohesion_weight"]
        wanted = weight.nudge(weight.nudge(weight.nudge(before, 0.01), 0.01), 0.01)
        xdo("mousemove", "--window", window, *centre("param:cohesion_weight"))
        for _ in range(3):
            xdo("click", "4")
            time.sleep(0.15)
        until("cohesion_weight to move",
              lambda r: r["params"]["cohesion_weight"] == pytest.approx(wanted))

        # Click slot 3's thumbnail: lure-rush is recalled (with the morph).
        xdo("mousemove", "--window", window, *centre("slot:3"), "click", "1")
        until("slot 3 to be recalled", lambda r: r["preset"]["name"] == "lure-rush")

        # SAVE, then slot 9: the look goes into the user's slot-9.json.
        xdo("mousemove", "--window", window, *centre("button:save"), "click", "1")
        xdo("mousemove", "--window", window, *centre("slot:9"), "click", "1")
        _wait_for(lambda: (presets / "slot-9.json").exists(), "slot 9 to be saved", process)
        saved = json.loads((presets / "slot-9.json").read_text())
        assert saved["format"] == "swarm-preset" and "max_speed" in saved["params"]

        # An OSC message refused: the HUD's osc line says so, first and in red.
        SimpleUDPClient("127.0.0.1", port).send_message("/swarm/max_speed", "fast")
        control = until("the HUD's lines to show the refusal", lambda r: any(
            line.startswith("osc:") and "1 refused" in line for line in
            r["control"][0]["hud"]))["control"][0]
        assert control["hud"][0].startswith("osc:")

        # The pictures: the preview of the output, and slot 1's thumbnail once rendered.
        until("slot 1's thumbnail", lambda r: 1 in r["control"][0]["thumbnails"], 90)
        from swarm_instrument.visual.output.png import write_png

        def region(screen: np.ndarray, name: str, part: float = 1.0) -> np.ndarray:
            x, y, w, h = widgets[name]
            return screen[y + 2:y + round(h * part) - 2, x + 2:x + w - 2]

        def pictures() -> dict[str, bool]:
            """What the X screen shows now (the window draws what telemetry said a frame
            or so later)."""
            screen = grab(two_screens)
            write_png(tmp_path / "screens.png", screen)
            hud = region(screen, "hud").astype(int)
            red = (hud[..., 0] > 170) & (hud[..., 1] < 140) & (hud[..., 2] < 140)
            return {"preview": (region(screen, "preview").max(axis=2) > 60).mean() > 0.01,
                    "slot 1's picture": (region(screen, "slot:1", 0.6).max(axis=2) > 60
                                         ).mean() > 0.01,
                    "the HUD's lines": red.sum() > 50 and (hud.min(axis=2) > 150).sum() > 200}

        _wait_for(lambda: all(pictures().values()), "the preview, slot 1's picture and the "
                  "HUD's lines on the screen", process, timeout=20)
        control = _control(telemetry)
        assert control["rejected"] == 1 and control["applied"] >= 10
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


def test_one_high_dpi_screen_keeps_the_hud_and_opens_the_control_window_larger(new_display,
                                                                              tmp_path):
    """One screen, whose desktop says 192 dpi (Xft.dpi, as a high-DPI laptop's does): the
    picture keeps its HUD, and the control window beside it is drawn twice as large (rows,
    text), its parameters scrolling where they no longer fit."""
    display = new_display("1024x600", "-noreset")  # its DPI is set: no other test sees it
    set_dpi(display, 192)
    env = with_display(display, SWARM_PRESETS_DIR=str(tmp_path / "presets"))
    shot, telemetry = tmp_path / "one.png", tmp_path / "t.jsonl"
    result = instrument("--control-screen", "0", "--windowed", "--size", "480x270",
                        "--frames", "20", "--count", "500", "--no-midi", "--screenshot",
                        str(shot), "--telemetry", str(telemetry), env=env)
    assert result.returncode == 0, result.stderr
    assert ("one screen for both: the picture and the control window side by side"
            in result.stdout)
    control = last_record(telemetry)["control"][0]
    assert control["draws"] > 0
    rows = [h for name, (x, y, w, h) in control["widgets"].items()
            if name.startswith("param:")]
    assert len(rows) > 40 and min(rows) >= 32  # 17 pixels at 96 dpi
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
    """visual/ui/screens.py's arithmetic: both windows inside the screen, not over each other,
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


def test_one_screen_opens_the_two_windows_beside_each_other(new_display, tmp_path):
    """--control-screen 0 on one 1280x720 screen (the picture full-screen by default): the
    picture's window and the control window where side_by_side puts them, neither over the
    other (the picture had been full-screen at 0,0 with the control window over it)."""
    display = new_display("1280x720")
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
    result = subprocess.run([sys.executable, "-c",
                             "from swarm_instrument.visual.ui.screens import describe, "
                             "list_screens; print(describe(list_screens()))"],
                            env=with_display(two_screens), capture_output=True, text=True,
                            cwd=ROOT, timeout=60)
    assert result.stdout.strip() == "0: 960x600 at 0,0, 1: 640x360 at 960,0", result.stderr


def test_a_knob_waiting_for_pickup_shows_its_ghost_and_a_click_learns(two_screens, jack,
                                                                      tmp_path):
    """A real MIDI port (JACK): a knob turned away from the value waits for pickup and its
    position is drawn on the slider; the L box of another slider learns the next knob."""
    import uuid

    from midi_jack import Sender

    telemetry = tmp_path / "t.jsonl"
    device = f"knobs{uuid.uuid4().hex[:6]}"
    knobs = Sender(device, virtual="out")
    env = with_display(two_screens, SWARM_PRESETS_DIR=str(tmp_path / "presets"))
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "instrument.py"), "--output-screen", "1", "--count",
         "500", "--frames", "100000", "--midi-api", "jack", "--midi-port", device,
         "--preset", "murmuration", "--telemetry", str(telemetry)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: (r := last_record(telemetry)) and f"{device}:out" in
                  r["midi"]["ports_open"], "the MIDI port to open", process)
        window = _wait_for(lambda: _window(two_screens, CONTROL_CAPTION),
                           "the control window", process)
        # CC 70 is separation_weight 0..5 (the shipped mapping): at 64 the knob points
        # at 2.52, away from the look's value, so it waits to be picked up.
        widgets = _wait_for(lambda: (c := _control(telemetry)) and "learn:glow" in
                            c["widgets"] and c["widgets"], "the control window's widgets",
                            process)
        bar_x, bar_y, bar_w, bar_h = widgets["param:separation_weight"]
        knob = 64 / 127 * 5
        x = round(bar_x + bar_w * param("separation_weight").to_norm(knob))

        def ghost() -> np.ndarray:
            return grab(two_screens)[bar_y + 1:bar_y + bar_h - 1, x - 1:x + 1]

        assert ghost().min() < 190, "a ghost before any knob moved"
        knobs.send([0xB0, 70, 64])
        record = _wait_for(lambda: (r := last_record(telemetry)) and r["midi"]["pickup"].get(
            "separation_weight") and r, "the knob to wait for pickup", process)
        assert record["midi"]["pickup"]["separation_weight"]["knob"] == \
            pytest.approx(knob, abs=1e-3)
        # drawn a frame or so after telemetry said it
        _wait_for(lambda: ghost().min() > 190, "the ghost where the knob points", process,
                  timeout=20)
        # Click glow's L: it learns; the next knob turned (CC 80) binds to it.
        x, y, w, h = widgets["learn:glow"]
        subprocess.run(["xdotool", "mousemove", "--window", window, str(x + w // 2),
                        str(y + h // 2), "click", "1"],
                       env=with_display(two_screens), check=True, timeout=20)
        _wait_for(lambda: (r := last_record(telemetry)) and r["midi"]["learn"]["param"] == "glow"
                  and r["selected"] == "glow", "glow to learn", process)
        knobs.send([0xB0, 80, 64])
        _wait_for(lambda: (r := last_record(telemetry)) and (r["midi"]["learn"]["last_bound"]
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
    from swarm_instrument.audio.synth import drum_loop
    from swarm_instrument.control.looks.presets import load_preset
    from swarm_instrument.show.inputs.control_surface import ThumbnailJob
    from swarm_instrument.show.offline.contact_sheet import (
        AUDIO_RATE,
        SHEET_BPM,
        SheetSettings,
        render_look,
    )

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
    record = last_record(telemetry)
    assert record["backend"]["gl"] == "4.1"
    control = record["control"][0]
    assert control["preview_frames"] == 30 and control["draws"] > 0
