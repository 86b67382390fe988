"""The web remote's page in a real browser: Debian's Chromium, headless, driven by Selenium
(chromedriver), speaking to a real show played headless through the one loop in this process.

A click on a slider changes the parameter within two frames of its message reaching the
server; switches, choices and colours set theirs; the preset grid shows what is in each slot
and recalls it with the morph; tap, downbeat, respawn and burst reach the show; values the show
changes come back to the page; the meters move with audio played into a JACK port. The page
is looked at on a phone's and a laptop's screen: every touch target at least 44 px, nothing
wider than the screen. The browser is the `browser` fixture (tests/conftest.py): it fails,
never skips, without Chromium.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from swarm_instrument.control.actions import Action
from swarm_instrument.control.looks.preset_bank import PresetBank
from swarm_instrument.control.parameters.groups import grouped
from swarm_instrument.control.parameters.registry import BY_NAME, REGISTRY, Params
from swarm_instrument.control.web.web_messages import plain_value
from swarm_instrument.control.web.web_remote import WebRemote
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.inputs.web_input import WebInput
from swarm_instrument.show.loop import Loop, Offscreen, WallClock
from swarm_instrument.show.show import Show

from jackd import ToneBurstClient

TOKEN = "page-test-token-0123456789"
PHONE = (390, 844)
LAPTOP = (1280, 860)


class Stage:
    """A show with the web remote, played by the one loop, and a browser on its page."""

    def __init__(self, ctx, driver, *, audio=None, user_folder: Path) -> None:
        self.remote = WebRemote("0.0.0.0", 0, token=TOKEN)  # reached here through loopback
        self.bank = PresetBank(user_folder)
        self.show = Show(ctx, Params({"count": 400}), ShowOptions(), presets=self.bank,
                         web=WebInput(self.remote), audio=audio)
        self.loop = Loop(self.show, WallClock())
        self.sink = Offscreen(self.show, (160, 120))
        self.driver = driver
        self.acted: list[Action] = []
        act = self.show.act
        self.show.act = lambda action: (self.acted.append(action), act(action))[1]

    @property
    def url(self) -> str:
        return self.remote.url_for("127.0.0.1")

    def frame(self) -> None:
        """A frame, then the page handed the show's state, as the live run's idle does."""
        self.loop.frame(*self.sink.target())
        self.show.publish()

    def play_until(self, condition, timeout: float = 10.0, frames_between: int = 3) -> bool:
        """Frames (about 60 a second) until `condition()` holds; False at the timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for _ in range(frames_between):
                start = time.perf_counter()
                self.frame()
                time.sleep(max(0.0, 1 / 60 - (time.perf_counter() - start)))
            if condition():
                return True
        return False

    def js(self, script: str, *args):
        return self.driver.execute_script(script, *args)

    def open(self) -> None:
        self.driver.get(self.url)
        assert self.play_until(lambda: self.js(
            "return document.querySelectorAll('[data-param]').length") == len(REGISTRY)
            and self.js("return document.body.dataset.link") == "live"
            and self.js("return document.querySelector('#presets .slot .title').textContent")
            != "empty"), "the page did not build itself from the show's hello"

    def element(self, css: str):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def shown(self, css: str):
        """The element scrolled to the middle of the screen, clear of the sticky header, as
        a performer would have it before touching it."""
        found = self.element(css)
        self.js("arguments[0].scrollIntoView({block: 'center'})", found)
        return found

    def click(self, css: str) -> None:
        self.shown(css).click()

    def frames_to_apply(self, gesture, applied, limit: int = 600) -> int:
        """Perform `gesture` (browser input), then play frames until `applied()`: how many
        frames that took from the first frame that began after its message reached the
        server (1: the very next frame)."""
        received = self.remote.received
        gesture()
        arrived = None
        for index in range(limit):
            if arrived is None and self.remote.received > received:
                arrived = index
            self.frame()
            if applied():
                assert arrived is not None, "applied before the server had the message?"
                return index - arrived + 1
            time.sleep(0.004)
        raise AssertionError(f"not applied within {limit} frames: {self.remote.state()}")

    def release(self) -> None:
        self.show.release()


@pytest.fixture(scope="module")
def stage(gl_context, browser, tmp_path_factory):
    made = Stage(gl_context, browser, user_folder=tmp_path_factory.mktemp("user-presets"))
    made.open()
    yield made
    made.release()


def test_the_page_lays_out_every_parameter_in_its_group_and_the_slots(stage):
    groups = stage.js("return [...document.querySelectorAll('details.group')].map(g => "
                      "[g.dataset.group, [...g.querySelectorAll('[data-param]')].map("
                      "r => r.dataset.param)])")
    assert [tuple(g) for g in groups] == [(group, names) for group, names in grouped()]
    kinds = stage.js("return Object.fromEntries([...document.querySelectorAll('[data-param]')]"
                     ".map(r => [r.dataset.param, r.querySelector('.slider') ? 'slider' : "
                     "r.querySelector('.switch') ? 'switch' : r.querySelector('.segments, "
                     "select') ? 'choice' : r.querySelector('input[type=color]') ? 'colour' "
                     ": '?']))")
    expected = {"float": "slider", "int": "slider", "bool": "switch", "choice": "choice",
                "color": "colour"}
    assert kinds == {p.name: expected[p.kind] for p in REGISTRY}
    titles = stage.js("return [...document.querySelectorAll('#presets .slot')].map("
                      "s => [s.dataset.slot, s.querySelector('.title').textContent])")
    names = stage.bank.names()
    assert len(titles) == 9
    assert {int(slot): title for slot, title in titles if title != "empty"} == names


def test_a_slider_moves_its_parameter_within_two_frames(stage):
    speed = BY_NAME["max_speed"]
    track = stage.shown("[data-param=max_speed] .slider")
    width = track.size["width"]
    click = ActionChains(stage.driver).move_to_element_with_offset(track, round(0.3 * width), 0)
    before = stage.show.params["max_speed"]
    frames = stage.frames_to_apply(lambda: click.click().perform(),
                                   lambda: stage.show.params["max_speed"] != before)
    assert frames <= 2, frames
    print(f"applied {frames} frame(s) after its message arrived")
    value = stage.show.params["max_speed"]
    assert abs(speed.to_norm(value) - 0.8) <= 2.0 / width  # where the mouse clicked
    assert stage.show.looks.preset_modified() or stage.show.looks.preset is None
    readout = stage.element("[data-param=max_speed] .value").text
    assert float(readout) == pytest.approx(value, rel=0.01)
    # A drag: messages as the mouse moves, the parameter following, ending where it let go.
    drag = (ActionChains(stage.driver)
            .move_to_element_with_offset(track, round(-0.4 * width), 0).click_and_hold())
    for step in range(1, 6):
        drag.move_by_offset(round(0.1 * width), 0)
    drag.release()
    received = stage.remote.received
    drag.perform()
    assert stage.play_until(lambda: abs(speed.to_norm(stage.show.params["max_speed"]) - 0.6)
                            <= 3.0 / width, timeout=5)
    assert stage.remote.received - received >= 2  # it played along the way, not only the end


def test_switches_choices_and_colours_set_theirs(stage):
    stage.click("[data-param=separation] .switch")
    assert stage.play_until(lambda: stage.show.params["separation"] is False, timeout=5)
    stage.click("[data-param=boundary] .segment[data-value=wrap]")
    assert stage.play_until(lambda: stage.show.params["boundary"] == "wrap", timeout=5)
    Select(stage.shown("[data-param=palette] select")).select_by_visible_text("ocean")
    assert stage.play_until(lambda: stage.show.params["palette"] == "ocean", timeout=5)
    swatch = stage.shown("[data-param=fast_color] input[type=color]")
    stage.js("arguments[0].value = '#00ff80'; arguments[0].dispatchEvent(new Event('input'))",
             swatch)  # the native colour picker is the browser's own window
    assert stage.play_until(lambda: stage.show.params["fast_color"] == pytest.approx(
        (0.0, 1.0, 128 / 255)), timeout=5)
    assert stage.remote.rejected == 0


def test_values_the_show_changes_come_back_to_the_page(stage):
    stage.show.act(Action("set", values={"cohesion_weight": 3.25, "seek": False}))
    assert stage.play_until(lambda: stage.element(
        "[data-param=cohesion_weight] .value").text == "3.25" and stage.element(
        "[data-param=seek] .switch").get_attribute("aria-checked") == "false", timeout=5)


# Every control's value as the page shows it: a slider's readout and where its thumb sits, a
# switch, the chosen segment or option, a colour.
READ_PAGE = """return Object.fromEntries([...document.querySelectorAll('[data-param]')].map(row => {
  const name = row.dataset.param;
  const slider = row.querySelector('.slider');
  if (slider) return [name, [row.querySelector('.value').textContent,
                             Number(slider.getAttribute('aria-valuenow'))]];
  const button = row.querySelector('.switch');
  if (button) return [name, button.getAttribute('aria-checked') === 'true'];
  if (row.querySelector('.segments')) {
    const chosen = row.querySelectorAll('.segment[aria-checked=true]');
    return [name, chosen.length === 1 ? chosen[0].dataset.value : null];
  }
  const select = row.querySelector('select');
  if (select) return [name, select.options[select.selectedIndex].textContent];
  return [name, row.querySelector('input[type=color]').value];
}))"""
# What the show plays, away from the registry's defaults (the 1,024, 6 and agx).
NOT_DEFAULTS = {"count": 1024, "max_speed": 6.0, "tonemap": "agx", "separation": False,
                "palette": "ocean", "boundary": "wrap", "fast_color": (0.0, 1.0, 0.5),
                "cohesion_weight": 2.5, "bloom": 1.25, "neighbor_cap": 40}


def differences(stage) -> list[str]:
    """Every control whose value on the page is not the show's (empty: all equal)."""
    shown = stage.js(READ_PAGE)
    wrong = []
    for name, value in stage.show.params.items():
        spec, on_page = BY_NAME[name], shown.get(name)
        if spec.kind in ("float", "int"):
            text, position = on_page
            same = (float(text.replace(",", "")) == pytest.approx(value, rel=0.006, abs=1e-9)
                    and position == pytest.approx(spec.to_norm(value), abs=0.002))
        elif spec.kind == "color":
            same = on_page == plain_value(value)
        elif spec.kind == "choice":
            same = on_page == str(value)
        else:
            same = on_page is value
        if not same:
            wrong.append(f"{name}: page {on_page!r}, show {value!r}")
    return wrong


def test_the_page_always_shows_the_shows_values(stage):
    """A show playing values other than the defaults: the page shows every one of them on a
    first load, a reload and after the server dropped its socket (it reconnects), and a value
    changed in the show shows on the open page. (The page used to drop the values that came
    within 800 ms of its load, and nothing sent them again: it showed the defaults.)"""
    stage.show.act(Action("set", values=NOT_DEFAULTS))
    stage.driver.get("about:blank")  # no page open while the show moves on
    assert stage.play_until(lambda: stage.remote.clients == 0 and stage.show.swarm.count == 1024)
    stage.open()  # a first load
    assert stage.play_until(lambda: not differences(stage), timeout=5), differences(stage)
    stage.driver.refresh()  # a reload
    assert stage.play_until(lambda: stage.js("return document.body.dataset.link") == "live"
                            and not differences(stage), timeout=5), differences(stage)
    # The server drops the page's socket (a restart, a phone leaving Wi-Fi); the show moves on
    # before the page is back.
    requests = stage.remote.requests
    for connection in list(stage.remote._server.connections):
        connection.close(1012)
    stage.show.act(Action("set", values={"max_speed": 7.5, "boundary": "sphere"}))
    assert stage.play_until(lambda: stage.remote.requests > requests
                            and stage.js("return document.body.dataset.link") == "live"
                            and not differences(stage), timeout=10), differences(stage)
    # Changed elsewhere (MIDI, OSC, a recall, the control window: all set the show's values).
    stage.show.act(Action("set", values={"cohesion_weight": 1.75, "tonemap": "linear",
                                         "seek": False, "slow_color": (1.0, 0.0, 0.0)}))
    assert stage.play_until(lambda: not differences(stage), timeout=5), differences(stage)


def test_a_held_slider_keeps_the_finger_s_value_then_shows_the_show_s(stage):
    """While the performer holds a slider, a value the show gets elsewhere does not move it
    under their finger; once they let go, the show's value is shown, not dropped."""
    speed = BY_NAME["max_speed"]
    readout = "[data-param=max_speed] .value"
    track = stage.shown("[data-param=max_speed] .slider")
    width = track.size["width"]
    ActionChains(stage.driver).move_to_element_with_offset(
        track, round(0.3 * width), 0).click_and_hold().perform()
    try:
        assert stage.play_until(lambda: abs(speed.to_norm(stage.show.params["max_speed"])
                                            - 0.8) <= 2.0 / width, timeout=5)
        held = stage.element(readout).text
        stage.show.act(Action("set", values={"max_speed": 3.0, "cohesion_weight": 1.25}))
        assert stage.play_until(lambda: stage.element(
            "[data-param=cohesion_weight] .value").text == "1.25", timeout=5)  # pushed
        assert stage.element(readout).text == held  # the same push: held back
    finally:
        ActionChains(stage.driver).release().perform()
    assert stage.play_until(lambda: stage.element(readout).text == "3", timeout=5)
    assert stage.show.params["max_speed"] == 3.0 and not differences(stage)


def test_the_preset_grid_recalls_with_the_morph(stage):
    names = stage.bank.names()
    stage.show.params["morph_seconds"] = 2.0
    stage.click("#presets .slot[data-slot='3']")
    assert stage.play_until(lambda: stage.show.looks.preset is not None
                            and stage.show.looks.preset.name == names[3], timeout=5)
    assert stage.show.looks.progress(stage.show.show_time) is not None  # blending, not a cut
    assert stage.play_until(lambda: stage.element("#presets .slot[data-slot='3']")
                            .get_attribute("aria-pressed") == "true"
                            and names[3] in stage.element("#preset-name").text, timeout=5)
    pressed = stage.js("return [...document.querySelectorAll('#presets .slot')].filter("
                       "s => s.getAttribute('aria-pressed') === 'true').length")
    assert pressed == 1


def test_tap_downbeat_respawn_and_burst_reach_the_show(stage):
    stage.acted.clear()
    respawns = stage.show.respawns
    for _ in range(4):
        stage.click("#do-tap")
        stage.play_until(lambda: False, timeout=0.12)  # a tempo of about 150 BPM
    stage.click("#do-downbeat")
    stage.click("#do-respawn")
    stage.click("#do-burst")
    assert stage.play_until(lambda: [a.kind for a in stage.acted].count("separation_burst"),
                            timeout=5)
    kinds = [action.kind for action in stage.acted]
    assert kinds == ["tap"] * 4 + ["downbeat", "respawn", "separation_burst"]
    assert stage.show.tap.taps == 4 and stage.show.respawns == respawns + 1
    assert stage.show.burst.strength == 1.0


def test_the_outputs_go_off_air_and_back_from_the_page(stage):
    """With video outputs the page lists them, lit while on air; a tap takes one off air
    and another tap puts it back (OSC's /swarm/outputs N 0|1)."""
    from test_outputs import FakeBackend

    from swarm_instrument.show.video_outputs import Outputs
    from swarm_instrument.visual.output.frame_output import FrameOutput

    assert stage.js("return document.getElementById('outputs-panel').hidden")  # none yet
    outputs = [FrameOutput(FakeBackend(name), size=(32, 18), start=False)
               for name in ("rig", "stream")]
    stage.show.outputs = Outputs(stage.show.ctx, outputs)
    try:
        button = "#outputs .slot[data-output='2']"
        assert stage.play_until(lambda: stage.js(
            "return document.querySelectorAll('#outputs .slot').length") == 2
            and not stage.js("return document.getElementById('outputs-panel').hidden"))
        assert stage.element(button).get_attribute("aria-pressed") == "true"
        assert "fake stream" in stage.element(button).text
        stage.click(button)
        assert stage.play_until(lambda: not outputs[1].live), "the tap did not reach the show"
        assert outputs[0].live  # the other stays on air
        assert stage.play_until(lambda: stage.element(button).get_attribute("aria-pressed")
                                == "false" and "off air" in stage.element(button).text)
        stage.click(button)
        assert stage.play_until(lambda: outputs[1].live)
    finally:
        stage.show.outputs = None
    assert stage.play_until(lambda: stage.js(
        "return document.getElementById('outputs-panel').hidden"))


def test_the_page_fits_a_phone_and_a_laptop(stage, tmp_path):
    """Large touch targets and nothing off the side of a phone; the perform panel beside the
    parameters on a laptop. Screenshots are kept in the test's folder to look at."""
    targets = ("button, .slider, select, input[type=color], summary")
    measure = ("return [...document.querySelectorAll(arguments[0])].filter(e => "
               "e.offsetParent !== null).map(e => {const r = e.getBoundingClientRect(); "
               "return [e.className || e.tagName, r.width, r.height]})")
    try:
        stage.driver.set_window_size(*PHONE)
        stage.open()
        assert stage.js("return document.documentElement.scrollWidth") <= stage.js(
            "return window.innerWidth")
        small = [t for t in stage.js(measure, targets) if t[2] < 44 or t[1] < 44]
        assert not small, f"touch targets under 44 px on a phone: {small[:5]}"
        header = stage.js("return document.getElementById('top').getBoundingClientRect()"
                          ".height")
        assert header <= 110  # the meters leave the screen to the controls
        stage.driver.save_screenshot(str(tmp_path / "phone.png"))
        stage.driver.set_window_size(*LAPTOP)
        stage.open()
        perform = stage.element("#perform").rect
        params = stage.element("#params").rect
        assert perform["x"] + perform["width"] <= params["x"]  # side by side
        assert stage.js("return getComputedStyle(document.body).backgroundColor") == \
            "rgb(11, 13, 18)"  # dark
        stage.driver.save_screenshot(str(tmp_path / "laptop.png"))
    finally:
        stage.driver.set_window_size(*LAPTOP)
    for name, (width, _) in (("phone", PHONE), ("laptop", LAPTOP)):
        data = (tmp_path / f"{name}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert int.from_bytes(data[16:20], "big") == width


def test_the_meters_move_with_audio_from_a_jack_port(gl_context, browser, jack, tmp_path):
    from swarm_instrument.audio.input.live_input import AudioInput
    from swarm_instrument.audio.source import open_audio

    audio = open_audio()  # the default input: JACK's, in its worker process
    assert isinstance(audio, AudioInput) and audio.state == "ok", audio.message
    stage = Stage(gl_context, browser, audio=audio, user_folder=tmp_path)
    try:
        stage.open()

        def level() -> float:
            return float(stage.element("#m-level").get_attribute("data-value"))

        def onsets() -> int:
            return int(stage.element("#onset").get_attribute("data-onsets") or 0)

        assert stage.play_until(lambda: stage.element("#frame-ms").text != "--", timeout=5)
        assert level() < 0.05  # the dummy driver's silence
        quiet_onsets = onsets()
        with ToneBurstClient(jack, frequency=440.0, amplitude=0.6) as burst:
            for port in burst.input_ports():
                burst.connect(port)
            for _ in range(3):
                burst.burst(0.6)
                assert stage.play_until(lambda: level() > 0.3, timeout=5), \
                    stage.show.audio.telemetry()
                # the burst ends (the meter falls): the next one is a new attack
                assert stage.play_until(lambda: level() < 0.2, timeout=5)
        assert onsets() > quiet_onsets  # each burst's attack flashed the onset lamp
        assert stage.play_until(lambda: level() < 0.2, timeout=5)  # and it falls back
        meters = json.loads(stage.js("return JSON.stringify({bpm: document.getElementById("
                                     "'bpm').textContent, ms: document.getElementById("
                                     "'frame-ms').textContent})"))
        assert float(meters["bpm"]) > 0 and float(meters["ms"]) > 0
    finally:
        stage.release()
