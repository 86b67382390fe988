"""The autopilot on the control surfaces (issue 29): the web page and the control window show
the section and its bar, the look, the next planned change and who is in control (and when
the autopilot takes the look back), and switch it off and on and hand it the look back
("resume now"); a show started without --autopilot answers the switch with how to have one.
The page in a real headless Chromium (Selenium), the window under Xvfb driven by xdotool, a
peer without the token refused; plus the pure parts: the words, the messages."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_autopilot import LOOKS, LiveShow, silent_audio
from test_web_page import LAPTOP, PHONE, TOKEN, Stage

from swarm_instrument.control.actions import Action
from swarm_instrument.control.looks.preset_bank import BUNDLED_DIR
from swarm_instrument.control.looks.presets import Preset
from swarm_instrument.control.midi.controller import MidiController
from swarm_instrument.control.midi.mapping_file import mapping_from_json
from swarm_instrument.control.osc.osc_input import interpret
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.control.web.web_messages import parse_message
from swarm_instrument.show.autopilot.autopilot import autopilot_looks
from swarm_instrument.show.autopilot.autopilot_view import NOT_RUNNING, autopilot_view
from swarm_instrument.show.autopilot.live_autopilot import NO_AUTOPILOT, LiveAutopilot
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.inputs.control_surface import to_action
from swarm_instrument.show.inputs.web_input import ShowView
from swarm_instrument.show.show import Show

from conftest import ROOT, wait_for
from telemetry import last_record
from web_client import RawSocket, Refused, get
from xdisplay import grab, split_into_monitors, with_display

# ---- pure ----------------------------------------------------------------------------------


def test_the_surfaces_say_the_section_the_next_change_and_who_has_the_look():
    state = {"on": True, "section": "build", "section_start": 10.0,
             "phrase": {"bar": 3, "beat": 1.5}, "look": "vortex", "control": "autopilot",
             "resumes_at": None, "next": {"t": 24.2, "section": "drop", "look": "lure-rush"}}
    view = autopilot_view(state, 20.0)
    assert view["lines"] == ["BUILD  bar 3 of 4  |  vortex", "next: drop in 5 s: lure-rush",
                             "autopilot in control"]
    assert view["available"] and view["on"] and view["next_in"] == 4.2
    held = autopilot_view({**state, "control": "performer", "resumes_at": 31.5}, 20.0)
    assert held["lines"][1:] == ["next: drop in 5 s: lure-rush (left to you)",
                                 "performer in control: autopilot back in 12 s"]
    assert held["resumes_in"] == 11.5
    off = autopilot_view({**state, "on": False, "control": "off", "next": None}, 20.0)
    assert off["lines"][1:] == ["next: nothing (switched off)", "autopilot off"]
    live = autopilot_view({**state, "next": {"t": 28.0, "section": "groove", "look": None},
                           "section": None, "phrase": None, "look": None}, 20.0)
    assert live["lines"][:2] == ["LISTENING  |  no look chosen yet",
                                 "next: another groove look in 8 s"]
    none = autopilot_view(None, 20.0)
    assert not none["available"] and none["lines"][2] == NOT_RUNNING and not none["said"]
    assert autopilot_view({"on": False}, 0.0, NO_AUTOPILOT)["said"]  # a render's "off"


def test_the_switch_and_resume_come_from_every_surface_as_one_action():
    values = Params().as_dict()
    assert interpret("/swarm/autopilot/resume", []) == Action("autopilot_resume")
    assert parse_message('["/swarm/autopilot/resume"]') == Action("autopilot_resume")
    assert parse_message('["/swarm/autopilot", 0]') == Action("autopilot", 0)
    assert to_action(("autopilot", 1), values) == Action("autopilot", 1)
    assert to_action(("action", "resume"), values) == Action("autopilot_resume")
    mapping = mapping_from_json({"bindings": [], "actions": [
        {"note": 41, "action": "autopilot_resume"}]}, "m.json")
    assert MidiController(Params(), mapping, armed=False).handle([0x90, 41, 100], 0.0) == \
        [Action("autopilot_resume")]


def test_resume_now_hands_the_look_back_at_once_over_a_bar():
    presets = [Preset(look.name, {}, tags=look.tags) for look in LOOKS]
    pilot = LiveAutopilot(silent_audio(), presets, seed=4, resume_s=30.0)
    pilot.section, pilot.section_start = "drop", 2.0
    playing = pilot.choreographer.choose("drop")
    show = LiveShow()
    pilot.touched(now=5.0)
    assert pilot.telemetry(6.0)["control"] == "performer"
    pilot.resume(show, 6.0)
    assert pilot.telemetry(6.0)["control"] == "autopilot"
    (name, seconds, _), = show.looks.went
    assert {name, playing} == {"blast", "storm"}  # the other peak look
    assert seconds == pilot.bar_seconds  # over a bar, no cut
    assert show.acts == []  # no burst: the drop is under way
    pilot.switch(Action("autopilot", 0), 7.0)
    pilot.resume(show, 8.0)  # off: resume switches it on too
    assert pilot.on and len(show.looks.went) == 2


def test_at_the_rate_phrase_the_next_change_is_the_next_phrase():
    presets = [Preset(look.name, {}, tags=look.tags) for look in LOOKS]
    pilot = LiveAutopilot(silent_audio(), presets, rate="phrase")
    pilot.section, pilot.section_start = "groove", 10.0  # phrases of 8 s (bars of 2 s)
    upcoming = pilot.telemetry(12.0)["next"]
    assert upcoming == {"t": 18.0, "section": "groove", "look": None}
    assert autopilot_view(pilot.telemetry(12.0), 12.0)["lines"][1] == \
        "next: another groove look in 6 s"
    pilot.section = "build"  # a build's morph is under way: no change inside it
    assert pilot.telemetry(12.0)["next"] is None
    assert LiveAutopilot(silent_audio(), presets).telemetry(12.0)["next"] is None  # "section"


def test_a_show_without_an_autopilot_answers_the_switch_and_resume(ctx):
    show = Show(ctx, Params({"count": 256}), ShowOptions())
    try:
        view = ShowView()
        assert view.autopilot(show)["lines"][2] == NOT_RUNNING
        assert not view.autopilot(show)["said"]
        show.act(Action("autopilot_resume"))
        assert show.status["autopilot"] == NO_AUTOPILOT
        assert view.autopilot(show)["said"]  # shown, not kept quiet
    finally:
        show.release()


# ---- the web page --------------------------------------------------------------------------

PANEL = ("return ['pilot-who', 'pilot-where', 'pilot-next'].map(id => "
         "document.getElementById(id).textContent).concat([document.getElementById("
         "'autopilot-switch').getAttribute('aria-checked'), document.getElementById("
         "'pilot-resume').hidden, document.getElementById('autopilot-panel').className])")


def test_the_page_shows_the_autopilot_and_switches_it(gl_context, browser, tmp_path):
    stage = Stage(gl_context, browser, user_folder=tmp_path)
    pilot = LiveAutopilot(stage.show.audio, autopilot_looks([BUNDLED_DIR]), seed=1,
                          resume_s=20.0).attach(stage.show)
    try:
        stage.open()
        now = stage.show.now
        pilot.section, pilot.section_start = "build", now
        cue = pilot.choreographer.cue(now + 3.0, None, "drop", pilot.bar_seconds)
        pilot.waiting = [cue]

        def panel() -> list:
            return stage.js(PANEL)

        assert stage.play_until(lambda: panel()[1].startswith("BUILD  bar 1 of 4")
                                and panel()[2].startswith("next: drop in "), timeout=5), \
            panel()
        assert panel()[0] == "autopilot in control" and panel()[3:5] == ["true", True]
        assert stage.play_until(lambda: panel()[1].startswith("DROP  bar ")
                                and panel()[1].endswith(f"|  {cue.look}"), timeout=8), panel()
        assert stage.show.looks.preset.name == cue.look
        stage.driver.save_screenshot(str(tmp_path / "autopilot.png"))
        stage.click("#autopilot-switch")  # off
        assert stage.play_until(lambda: not pilot.on and panel()[0] == "autopilot off"
                                and panel()[3] == "false" and not panel()[4], timeout=5)
        stage.click("#autopilot-switch")  # on again
        assert stage.play_until(lambda: pilot.on and panel()[0] == "autopilot in control",
                                timeout=5)
        # A slider moved on the page: the performer has the look, for 20 s.
        stage.click("[data-param=glow] .slider")
        assert stage.play_until(lambda: panel()[0].startswith(
            "performer in control: autopilot back in ") and not panel()[4], timeout=5), \
            panel()
        stage.driver.save_screenshot(str(tmp_path / "performer.png"))
        try:  # on a phone: the panel fits, its switch and button large enough to touch
            stage.driver.set_window_size(*PHONE)
            stage.shown("#autopilot-panel")
            sizes = stage.js("return ['autopilot-panel', 'autopilot-switch', 'pilot-resume']"
                             ".map(id => document.getElementById(id).getBoundingClientRect())"
                             ".map(r => [r.right, r.width, r.height])")
            assert all(right <= stage.js("return window.innerWidth") for right, _, _ in sizes)
            assert all(min(width, height) >= 44 for _, width, height in sizes[1:]), sizes
            stage.driver.save_screenshot(str(tmp_path / "phone.png"))
        finally:
            stage.driver.set_window_size(*LAPTOP)
        stage.click("#pilot-resume")
        assert stage.play_until(lambda: panel()[0] == "autopilot in control" and panel()[4]
                                and stage.show.looks.preset.name != cue.look, timeout=5)
        assert pilot.look == stage.show.looks.preset.name
        assert "peak" in next(p for p in autopilot_looks([BUNDLED_DIR])
                              if p.name == pilot.look).tags
        assert stage.remote.rejected == 0
        # A peer without the token gets nothing: not the page's files, not the socket.
        port = stage.remote.port
        assert get(port, "/autopilot.js")[0] == 403
        with pytest.raises(Refused) as refused:
            RawSocket(port, "/ws")
        assert refused.value.status == 403 and "autopilot" not in refused.value.body
        assert get(port, f"/autopilot.js?token={TOKEN}")[0] == 200
    finally:
        stage.release()


def test_the_page_of_a_show_without_an_autopilot_says_how_to_have_one(gl_context, browser,
                                                                     tmp_path):
    stage = Stage(gl_context, browser, user_folder=tmp_path)
    try:
        stage.open()
        assert stage.play_until(lambda: stage.js(PANEL)[0] == NOT_RUNNING, timeout=5)
        assert stage.js(PANEL)[3:6] == ["false", True, "panel"]  # no resume without one
        stage.click("#autopilot-switch")
        assert stage.play_until(lambda: "said" in stage.js(PANEL)[5], timeout=5)
        assert stage.show.status["autopilot"] == NO_AUTOPILOT
        assert stage.js(PANEL)[3] == "false"  # the switch shows the show's state: off
        assert stage.js("return getComputedStyle(document.getElementById('pilot-who')).color") \
            == "rgb(255, 169, 77)"  # in the warm colour: an answer, not a quiet line
        stage.driver.save_screenshot(str(tmp_path / "none.png"))
    finally:
        stage.release()


# ---- the control window --------------------------------------------------------------------

SCREEN, PROJECTOR = (0, 0, 960, 600), (960, 0, 640, 360)


@pytest.fixture(scope="module")
def display_screen() -> tuple[str, ...]:
    """This module's X screen: 1600x600, kept as set by the server (-noreset)."""
    return ("1600x600", "-noreset")


@pytest.fixture(scope="module")
def two_screens(display):
    split_into_monitors(display, [SCREEN, PROJECTOR])
    return display


def _window_control(telemetry: Path, process) -> dict:
    return wait_for(lambda: (r := last_record(telemetry)) and r.get("control")
                    and "button:resume" in r["control"][0]["widgets"] and r,
                    "the control window's widgets", timeout=90, process=process)


def _click(display: str, rect) -> None:
    """A click in the middle of a widget (the control window sits at the screen's 0,0)."""
    x, y, w, h = rect
    subprocess.run(["xdotool", "mousemove", str(x + w // 2), str(y + h // 2), "click", "1"],
                   env=with_display(display), check=True, timeout=20)


def _start(display: str, tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    telemetry = tmp_path / "t.jsonl"
    env = with_display(display, SWARM_PRESETS_DIR=str(tmp_path / "presets"))
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "instrument.py"), "--output-screen", "1", "--count", "800",
         "--no-midi", "--frames", "100000", "--telemetry", str(telemetry), *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return process, telemetry


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            assert process.wait(timeout=60) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


def test_the_control_window_shows_the_autopilot_and_switches_it(two_screens, tmp_path):
    """The bar under the title: ON / OFF, RESUME NOW, who has the look, the section, the next
    change; X mouse clicks, read back in telemetry (what the window drew) and on the screen."""
    from swarm_instrument.visual.output.png import write_png

    process, telemetry = _start(two_screens, tmp_path, "--autopilot", "--autopilot-resume",
                                "40")
    try:
        widgets = _window_control(telemetry, process)["control"][0]["widgets"]
        for name in ("button:autopilot", "button:resume", "autopilot"):
            x, y, w, h = widgets[name]
            assert 0 <= x and x + w <= 960 and 0 <= y and y + h <= 600, name

        def until(what: str, test) -> dict:
            return wait_for(lambda: (r := last_record(telemetry)) and test(r) and r, what,
                            timeout=60, process=process)

        def shown(record: dict) -> list[str]:
            return record["control"][0]["autopilot"]

        record = until("the autopilot's bar", lambda r: shown(r)[:2] == [
            "autopilot in control", "INTRO  |  no look chosen yet"])
        _click(two_screens, widgets["button:autopilot"])
        until("the switch to turn it off", lambda r: r["autopilot"]["on"] is False
              and shown(r)[0] == "autopilot off")
        _click(two_screens, widgets["button:autopilot"])
        until("the switch to turn it on", lambda r: r["autopilot"]["control"] == "autopilot")
        # A slider dragged: the performer has the look, the bar says until when.
        x, y, w, h = widgets["param:glow"]
        subprocess.run(["xdotool", "mousemove", str(x + w // 4), str(y + h // 2), "click",
                        "1"], env=with_display(two_screens), check=True, timeout=20)
        record = until("the performer to have the look", lambda r: shown(r)[0].startswith(
            "performer in control: autopilot back in "))
        assert record["autopilot"]["control"] == "performer"
        screen = grab(two_screens)
        write_png(tmp_path / "performer.png", screen)
        x, y, w, h = widgets["autopilot"]
        bar = screen[y:y + h, x:x + w].astype(int)
        warm = (bar[..., 0] > 200) & (bar[..., 1] > 130) & (bar[..., 1] < 200) & \
            (bar[..., 2] < 110)
        assert warm.sum() > 100, "the performer's line in its warm colour"
        _click(two_screens, widgets["button:resume"])
        record = until("RESUME NOW to hand the look back", lambda r: r["autopilot"][
            "control"] == "autopilot" and r["autopilot"]["look"] is not None)
        assert record["preset"]["name"] == record["autopilot"]["look"]
        assert record["control"][0]["rejected"] == 0
        write_png(tmp_path / "resumed.png", grab(two_screens))
    finally:
        _stop(process)


def test_the_control_window_without_an_autopilot_answers_its_switch(two_screens, tmp_path):
    process, telemetry = _start(two_screens, tmp_path)
    try:
        widgets = _window_control(telemetry, process)["control"][0]["widgets"]
        record = last_record(telemetry)
        assert record["control"][0]["autopilot"] == [NOT_RUNNING]
        _click(two_screens, widgets["button:autopilot"])
        record = wait_for(lambda: (r := last_record(telemetry)) and any(
            line == f"autopilot: {NO_AUTOPILOT}" for line in r["control"][0]["hud"]) and r,
            "the HUD to say how to have an autopilot", timeout=60, process=process)
        x, y, w, h = record["control"][0]["widgets"]["autopilot"]
        bar = grab(two_screens)[y:y + h, x:x + w].astype(int)
        warm = (bar[..., 0] > 200) & (bar[..., 1] > 130) & (bar[..., 2] < 110)
        assert warm.sum() > 100, "the answer in the notice colour"
        assert record["autopilot"] == {"on": False}
    finally:
        _stop(process)
