"""The HUD (visual/ui/hud.py) as a performer reads it: over the brightest picture there is (white),
at a stage screen's 1280x720 and a small window's 640x360, drawn by pyglet in a hidden headless
window; and in the real window under Xvfb, against the same frames without it."""

from __future__ import annotations

import numpy as np
import pytest

from swarm_instrument.visual.ui.hud import Hud, fit_lines, hud_layout

from conftest import run_instrument
from pictures import read_png
from xdisplay import with_display

FULL = [  # what the show's lines look like (show/report.py), the MIDI reason the longest
    "  2.0 fps  504.65 ms a frame",
    "GPU ms: simulate n/a  cull n/a  draw n/a  post n/a",
    "agents 16,384  visible 15,209  near lure 2655",
    "grid neighbours  GL 4.3 (compute)",
    "audio: no input device  [          ] 0.00  low 0.00 mid 0.00 high 0.00  onsets 0",
    "tempo:  120.0 BPM (none, held)  [.#..]  beat 41",
    ("look: streak additive, palette neon by heading, camera top; post off (software GL: post "
     "on turns it on)"),
    ("midi: MIDI off: no ALSA sequencer (/dev/snd/seq: sudo modprobe snd-seq) and no JACK "
     "server (start jackd, or jackd -d dummy)"),
    "osc: 127.0.0.1:9137  0 applied",
    "preset: flat-wrap",
    "param [Up/Down, Left/Right]: count = 16384   L: MIDI learn",
]
COMPACT = [line for line in FULL if not line.startswith(("GPU ms", "grid", "look"))]


def luminance(image: np.ndarray) -> np.ndarray:
    return image[..., :3].astype(float) @ [0.2126, 0.7152, 0.0722]


@pytest.fixture(scope="module")
def headless_window():
    """A hidden headless pyglet window (EGL) to draw the HUD in: pyglet alone, as the live
    window draws it (no moderngl: its context detection is glX's on Linux)."""
    import pyglet

    pyglet.options["headless"] = True
    window = pyglet.window.Window(1280, 720, visible=False)
    yield window
    window.close()


@pytest.fixture
def text_window(headless_window):
    """The headless window; after the test, its HUDs' GL objects are collected while its
    context is current (pyglet deletes a collected object's program in whatever context is
    current: in a later test's, that is a GL error there)."""
    import gc

    yield headless_window
    headless_window.switch_to()
    gc.collect()


def drawn_over_white(window, size: tuple[int, int], lines: list[str],
                     hud: Hud | None = None) -> np.ndarray:
    """The HUD (a new one unless given) drawn over a white frame of `size`: luminance, top
    row first."""
    import pyglet
    from pyglet import gl

    window.switch_to()
    gl.glViewport(0, 0, *size)
    window.projection = pyglet.math.Mat4.orthogonal_projection(0, size[0], 0, size[1], -1, 1)
    gl.glClearColor(1.0, 1.0, 1.0, 1.0)
    gl.glClear(gl.GL_COLOR_BUFFER_BIT)
    hud = hud or Hud(*size)
    hud.draw(lines)
    gl.glFinish()
    image = pyglet.image.get_buffer_manager().get_color_buffer().get_image_data()
    pixels = np.frombuffer(image.get_data("RGB", image.width * 3), np.uint8)
    pixels = pixels.reshape(image.height, image.width, 3)[:size[1], :size[0]]
    return luminance(pixels[::-1])  # bottom row first -> top row first


def text_rows(block: np.ndarray, text_at: float) -> int:
    """Lines of text in a block: runs of pixel rows holding text."""
    has_text = (block > text_at).any(axis=1)
    return int(np.count_nonzero(has_text[1:] & ~has_text[:-1]) + has_text[0])


def test_the_layout_follows_the_window():
    big, small = hud_layout((1280, 720)), hud_layout((640, 360))
    assert (big.font_pt, big.compact) == (12, False)
    assert (small.font_pt, small.compact) == (8, True)
    assert hud_layout((3840, 2160)).font_pt == 12 and hud_layout((960, 540)).font_pt == 9
    assert hud_layout((960, 540)).compact is False and hud_layout((1280, 500)).compact
    assert big.max_chars >= max(len(line) for line in FULL[:7])  # the show's own lines fit
    cut = fit_lines(["x" * 200, "short"], 50)
    assert cut == ["x" * 49 + "\u2026", "short"]


@pytest.mark.parametrize("size, lines", [((1280, 720), FULL), ((640, 360), COMPACT)],
                         ids=["1280x720", "640x360"])
def test_the_hud_is_legible_over_white_and_fits_the_window(text_window, size, lines):
    """Over white, the text sits on a dark backdrop: text pixels at least 100 levels brighter
    than the backdrop around them (plain white text on white had none); one row of text a
    line, none wrapped; the block inside the window, at 640x360 in the top 40 % of it."""
    image = drawn_over_white(text_window, size, lines)
    dark = image < 200  # the backdrop darkens the white picture
    rows, columns = np.flatnonzero(dark.any(axis=1)), np.flatnonzero(dark.any(axis=0))
    top, bottom, left, right = rows[0], rows[-1], columns[0], columns[-1]
    assert left >= 6 and right < size[0] - 6 and top >= 6
    block = image[top:bottom + 1, left:right + 1]
    backdrop = np.median(block[block < 200])
    assert backdrop < 130, backdrop
    text = block[block > backdrop + 60]
    assert text.size > 500 and np.percentile(text, 90) - backdrop >= 100
    assert text_rows(block, backdrop + 60) == len(lines)
    assert (image[bottom + 3:] > 250).all()  # below the block the picture is untouched
    if size == (640, 360):
        assert bottom + 1 <= 0.4 * size[1], bottom


def test_the_windows_hud_at_640x360_is_compact_on_a_backdrop(display, tmp_path):
    """The real window (Xvfb) at 640x360 against the headless frames of the same show: what
    differs is the HUD alone, within the top 40 % and the window's width, its backdrop
    darkening the picture; the compact lines (no GPU, neighbour or look lines) fit without
    wrapping: at most 8 rows of text with MIDI off and no OSC."""
    run = ("--dt", "0.0333", "--frames", "12", "--count", "2000", "--no-midi",
           "--preset", "murmuration", "--size", "640x360")  # no routes: the same frames
    window, headless = tmp_path / "window.png", tmp_path / "headless.png"
    shown = run_instrument(*run, "--screenshot", str(window), env=with_display(display))
    assert shown.returncode == 0, shown.stderr
    plain = run_instrument(*run, "--headless", "--screenshot", str(headless))
    assert plain.returncode == 0, plain.stderr
    a, b = read_png(window)[..., :3], read_png(headless)[..., :3]
    differs = (a != b).any(axis=2)
    rows, columns = np.flatnonzero(differs.any(axis=1)), np.flatnonzero(differs.any(axis=0))
    assert rows[-1] + 1 <= 0.4 * 360 and columns[-1] < 640 - 6, (rows[-1], columns[-1])
    top, bottom, left, right = rows[0], rows[-1] + 1, columns[0], columns[-1] + 1
    shown_block, picture = luminance(a[top:bottom, left:right]), luminance(b[top:bottom,
                                                                             left:right])
    lit = picture > 60  # where the picture is lit, the backdrop darkens it
    under_text = shown_block > 150
    assert lit.sum() > 200
    assert np.median(shown_block[lit & ~under_text]) < 0.7 * np.median(picture[lit])
    assert 6 <= text_rows(shown_block, 150) <= 8


def test_hidden_and_shown_again_the_hud_draws_its_lines_without_laying_them_out_anew(
        text_window):
    """H hides the lines (the notice still shows) and shows them again as they were: no
    label made anew (they were all made again, and the frame that showed them came late)."""
    size = (640, 360)
    hud = Hud(*size)
    hud.draw(COMPACT)
    labels = list(hud._labels)
    hud.visible = False
    hud.draw(COMPACT, "press Esc again to quit")
    hud.visible = True
    hud.draw(COMPACT)
    assert hud._labels == labels and all(a is b for a, b in zip(hud._labels, labels))
    hud.visible = False
    hidden = drawn_over_white(text_window, size, COMPACT, hud)
    assert (hidden > 250).all()  # hidden: nothing of the lines drawn


def test_the_huds_frame_figures_change_four_times_a_second_not_each_frame():
    """The frame rate's and GPU times' lines are made again every READOUT_S of frames (each
    line that changes is laid out again: about a millisecond of CPU on a slow machine, and
    digits changing every frame cannot be read); a clock that starts over makes them at once."""
    from swarm_instrument.show.report import READOUT_S, FrameClock

    clock, made = FrameClock(), []

    def rate() -> str:
        made.append(clock.times[-1])
        return f"{len(clock.times)} frames"

    texts = []
    for frame in range(121):  # two seconds at 60 fps
        clock.tick(frame / 60)
        texts.append(clock.readout("rate", rate))
    assert READOUT_S == 0.25 and 8 <= len(made) <= 9, made
    assert all(b - a >= READOUT_S - 1e-9 for a, b in zip(made, made[1:])), made
    assert len(set(texts)) == len(made)  # the text changes only when made
    clock.times.clear()
    clock.tick(0.0)  # a new start (the clock went back): made again at once
    assert clock.readout("rate", rate) == "1 frames"


def test_the_level_meter_is_a_bar_moved_each_frame_not_a_line_laid_out_again(text_window,
                                                                               monkeypatch):
    """The audio line's meter (`[####      ]`, show/report.py) is drawn as a bar over its place:
    a louder frame moves the bar over the backdrop and lays nothing out again; the report's
    line changes its figures four times a second (its readout), the meter each frame."""
    from swarm_instrument.audio.base import Silence
    from swarm_instrument.show.report import FrameClock, audio_line

    size = (1280, 720)
    hud, lit, layouts = Hud(*size), [], []
    set_lines = hud._set_lines
    monkeypatch.setattr(hud, "_set_lines", lambda texts: (layouts.append(1), set_lines(texts)))
    for level in (0.3, 0.8):
        line = f"audio: ok (mic)  [{'#' * round(level * 10):<10}] 0.55  low 0.10"
        image = drawn_over_white(text_window, size, [FULL[0], line], hud)
        bar, (left, width) = hud._meters[1], hud._meter_spans[1]
        row = image[size[1] - 1 - round(bar.y + bar.height / 2)]  # top row first
        lit.append(int(np.count_nonzero(row[round(left):round(left + width)] > 200)))
    assert len(layouts) == 1  # laid out for the first frame only
    assert bar.width == pytest.approx(width * 0.8)
    assert lit[0] == pytest.approx(0.3 * width, abs=2) and lit[1] == pytest.approx(
        0.8 * width, abs=2), (lit, width)
    clock, source = FrameClock(), Silence()
    clock.tick(0.0)
    first = audio_line(source, clock)
    source.features = type(source.features)(level=0.5, onsets=3)
    clock.tick(1 / 60)
    moved = audio_line(source, clock)  # the meter at once, the figures not yet
    assert moved.split("]")[0].count("#") == 5 and moved.split("]")[1] == first.split("]")[1]
    clock.tick(0.3)
    assert audio_line(source, clock).endswith("onsets 3")


# The HUD drawn in a new process (pyglet reads its `debug_gl` option once, at `pyglet.gl`'s
# import) as the window draws it: the Python calls pyglet's GL error check makes.
ERROR_CHECKS = """
import sys
from swarm_instrument.visual.ui.hud import headless_text_context
ctx, hud, note = headless_text_context((640, 360))
lines = {lines!r}
hud.draw(lines)  # laid out once
checks = 0
def count(frame, event, arg):
    global checks
    checks += event == "call" and frame.f_code.co_name == "errcheck"
sys.setprofile(count)
hud.draw(lines)
sys.setprofile(None)
print(checks)
"""


@pytest.mark.parametrize("environment, checked", [({}, False), ({"PYGLET_DEBUG_GL": "1"}, True)])
def test_the_hud_draws_without_a_gl_error_check_after_each_call_unless_asked(environment,
                                                                              checked):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYGLET_DEBUG_GL"} | environment
    done = subprocess.run([sys.executable, "-c", ERROR_CHECKS.format(lines=COMPACT)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    checks = int(done.stdout.split()[-1])
    assert (checks > 0) == checked, (environment, checks)
