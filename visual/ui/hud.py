"""The HUD: the show's figures as text over the swarm, drawn with pyglet into whatever
framebuffer is bound (the window's, or an offscreen one for benchmarks). Main thread only.

Legible over any picture: the text sits on a translucent dark backdrop sized to it (a bright
swarm behind white text is read through 40 % of its light). Laid out for the window
(`hud_layout`): the font shrinks with a small window, a small window gets the show's compact
lines (fewer: show/report.py), and a line too long for the window is cut with an ellipsis
instead of wrapping onto the picture. A level meter in a line (`[###       ]`: ten places of
`#` or space, show/report.py) is drawn as a bar over its place, moved each frame, while the
line's text is laid out only when the rest of it changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import moderngl
import pyglet

from swarm_instrument.visual.gpu.context import create_headless_context

FONT_PT = 12  # the lines' font at 1280x720 and larger
MIN_FONT_PT = 8
NOTICE_PT = 18  # "press Esc again to quit", at 1280x720 and larger
MARGIN = 12  # from the window's corner to the backdrop, pixels
PAD = 6  # around the text, inside the backdrop
BACKDROP = (0, 0, 0, 150)  # black at 59 %: white text stays legible over a white swarm
TEXT = (235, 235, 235, 255)
NOTICE = (255, 210, 120, 255)
# The widest mean advance of the HUD's text in DejaVu Sans (pyglet's default font), in ems:
# digits are 0.64 em, letters about 0.55: where a line is cut so that it fits.
CHAR_EM = 0.64
COMPACT_BELOW = (960, 540)  # a window narrower or lower than this gets the compact lines
POINTS_TO_PIXELS = 96 / 72
METER = re.compile(r"\[([# ]{10})\]")  # a level meter: ten places, a # for each tenth
METER_PLACE = "[" + "\u2007" * 10 + "]"  # what is laid out in its place (figure spaces)


@dataclass(frozen=True)
class HudLayout:
    """How the HUD fits a window: the font, whether the show's compact lines are wanted, and
    the characters a line may have before it is cut."""

    font_pt: int
    notice_pt: int
    compact: bool
    max_chars: int


def hud_layout(size: tuple[int, int]) -> HudLayout:
    """The layout for a window of `size` (window units): the font scaled with the window
    against 1280x720 (12 pt there, 8 pt at 640x360, never larger than 12)."""
    width, height = size
    scale = min(width / 1280, height / 720)
    font = max(MIN_FONT_PT, min(FONT_PT, round(FONT_PT * scale)))
    notice = max(MIN_FONT_PT + 2, min(NOTICE_PT, round(NOTICE_PT * scale)))
    compact = width < COMPACT_BELOW[0] or height < COMPACT_BELOW[1]
    room = width - 2 * (MARGIN + PAD)
    return HudLayout(font, notice, compact,
                     max(8, int(room / (font * POINTS_TO_PIXELS * CHAR_EM))))


def split_meter(line: str) -> tuple[str, float | None]:
    """(the line with its meter's place left empty, the meter's reading 0..1 or None)."""
    match = METER.search(line)
    if match is None:
        return line, None
    return (line[:match.start()] + METER_PLACE + line[match.end():],
            match.group(1).count("#") / 10)


def fit_lines(lines: list[str], max_chars: int) -> list[str]:
    """Each line cut to `max_chars` characters, the cut marked with an ellipsis."""
    return [line if len(line) <= max_chars else line[:max_chars - 1].rstrip() + "\u2026"
            for line in lines]


class Hud:
    """The lines, one pyglet label each: a line laid out again only when its own text changes
    (text layout is the costly part: the whole block again every frame cost 4 ms of CPU a
    frame, where the frame rate's line alone changing costs a fraction of one). Hidden (H),
    the lines are kept, not drawn: shown again, only what changed meanwhile is laid out (they
    were all made anew, and the frame that showed them came late)."""

    def __init__(self, width: int, height: int) -> None:
        self._batch = pyglet.graphics.Batch()  # the lines and their backdrop
        self._notice_batch = pyglet.graphics.Batch()  # the notice, hidden lines or not
        self._back, self._front = pyglet.graphics.Group(order=0), pyglet.graphics.Group(order=1)
        self._backdrop = pyglet.shapes.Rectangle(0, 0, 0, 0, color=BACKDROP,
                                                 batch=self._batch, group=self._back)
        self._notice_backdrop = pyglet.shapes.Rectangle(0, 0, 0, 0, color=BACKDROP,
                                                        batch=self._notice_batch,
                                                        group=self._back)
        self._labels: list[pyglet.text.Label] = []
        self._meters: list[pyglet.shapes.Rectangle] = []  # one a line, hidden without a meter
        self._meter_spans: list[tuple[float, float] | None] = []  # each line's (x, width)
        self._notice = pyglet.text.Label(
            "", font_size=NOTICE_PT, x=width // 2, y=height // 2, anchor_x="center",
            anchor_y="center", color=NOTICE, batch=self._notice_batch, group=self._front)
        self.visible = True
        self._texts: list[str] = []
        self._top = height - MARGIN - PAD
        self._line_height = 0.0
        self.layout = hud_layout((width, height))
        self.resize(width, height)

    def resize(self, width: int, height: int) -> None:
        self.layout = hud_layout((width, height))
        self._notice.font_size = self.layout.notice_pt
        self._top = height - MARGIN - PAD
        self._notice.x, self._notice.y = width // 2, height // 2
        for label in self._labels:
            label.delete()
        self._labels, self._texts = [], []  # laid out again at the next draw, cut to the width
        probe = pyglet.text.Label("Ag", font_size=self.layout.font_pt)
        self._line_height = probe.content_height
        probe.delete()
        self._cover(self._notice_backdrop, self._notice)  # the notice's new font and place

    def draw(self, lines: list[str], notice: str = "") -> None:
        """Lay out only the lines that changed, then draw (the notice even with the lines
        hidden)."""
        if self.visible:
            texts, readings = [], []
            for line in fit_lines(lines, self.layout.max_chars):
                text, reading = split_meter(line)
                texts.append(text)
                readings.append(reading)
            if texts != self._texts:
                self._set_lines(texts)
            self._move_meters(readings)
            self._batch.draw()
        if notice != self._notice.text:
            self._notice.text = notice
            self._cover(self._notice_backdrop, self._notice)
        self._notice_batch.draw()

    def _set_lines(self, texts: list[str]) -> None:
        while len(self._labels) > len(texts):
            self._labels.pop().delete()
        while len(self._labels) < len(texts):
            self._labels.append(pyglet.text.Label(
                "", font_size=self.layout.font_pt, x=MARGIN + PAD,
                y=round(self._top - len(self._labels) * self._line_height), anchor_y="top",
                color=TEXT, batch=self._batch, group=self._front))
        for label, text in zip(self._labels, texts):
            if label.text != text:
                label.text = text
        self._texts = list(texts)
        self._place_meters()
        width = max((label.content_width for label in self._labels), default=0)
        height = self._line_height * len(texts)
        backdrop = self._backdrop
        backdrop.visible = bool(texts) and width > 0
        backdrop.position = (MARGIN, self._top - height - PAD)
        backdrop.width, backdrop.height = width + 2 * PAD, height + 2 * PAD

    def _place_meters(self) -> None:
        """Where each line's meter goes (its place's left edge and width), measured from the
        font's advances when the line is laid out again; a bar each."""
        while len(self._meters) < len(self._labels):
            self._meters.append(pyglet.shapes.Rectangle(0, 0, 0, 0, color=TEXT,
                                                        batch=self._batch, group=self._front))
        self._meter_spans = []
        for label, meter in zip(self._labels, self._meters):
            at = label.text.find(METER_PLACE)
            if at < 0:
                self._meter_spans.append(None)
                continue
            font = pyglet.font.load(label.font_name, label.font_size)
            before = _advance(font, label.text[:at + 1])  # up to the place's "["
            width = _advance(font, METER_PLACE[1:-1])
            bar = 0.45 * self._line_height
            meter.y = label.y - (self._line_height + bar) / 2
            meter.height = bar
            self._meter_spans.append((label.x + before, width))
        for meter in self._meters[len(self._labels):]:
            meter.visible = False

    def _move_meters(self, readings: list[float | None]) -> None:
        """Each meter's bar to its reading: a vertex update, not a layout."""
        for meter, span, reading in zip(self._meters, self._meter_spans, readings):
            shown = span is not None and reading is not None and reading > 0.0
            if shown:
                meter.x, meter.width = span[0], span[1] * reading
            if meter.visible != shown:
                meter.visible = shown

    @staticmethod
    def _cover(backdrop, label) -> None:
        """The backdrop around what `label` shows now (nothing: no backdrop)."""
        width, height = label.content_width, label.content_height
        backdrop.visible = bool(label.text) and width > 0
        left = label.x - (width / 2 if label.anchor_x == "center" else 0)
        top = label.y + (height / 2 if label.anchor_y == "center" else 0)
        backdrop.position = (left - PAD, top - height - PAD)
        backdrop.width, backdrop.height = width + 2 * PAD, height + 2 * PAD


def _advance(font, text: str) -> float:
    """How far `text` moves the pen in `font`, pixels."""
    glyphs, positions = font.get_glyphs(text)  # pyglet 2.1: the glyphs and their offsets
    return float(sum(glyph.advance + place.x_advance
                     for glyph, place in zip(glyphs, positions)))


def headless_text_context(size: tuple[int, int]):
    """(ctx, hud or None, note): an offscreen GL context in which pyglet can draw text (a hidden
    headless pyglet window, whose context moderngl takes), else a plain EGL one without text
    (and the note says why). For benchmarks with the HUD and the contact sheet's labels."""
    try:
        pyglet.options["headless"] = True
        window = None
        for minor in (3, 1):  # 4.3 core, else 4.1 (the GL 4.1 backend's)
            config = pyglet.gl.Config(major_version=4, minor_version=minor,
                                      forward_compatible=True, depth_size=24)
            try:
                window = pyglet.window.Window(*size, visible=False, config=config)
                break
            except (pyglet.window.NoSuchConfigException, pyglet.gl.ContextException):
                if minor == 1:
                    raise
        ctx = moderngl.create_context(require=410)
        hud = Hud(*size)
        hud.draw(["font check"])  # fonts load here: fail now, not midway
        hud._window = window  # keep the context alive
        return ctx, hud, "text drawn (pyglet, headless)"
    except Exception as exc:  # noqa: BLE001 - no pyglet EGL here: no text, said

        return create_headless_context("4.1"), None, f"no text ({type(exc).__name__}: {exc})"
