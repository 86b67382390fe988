"""The control window's pure parts: its colours, the flow of the parameters into columns, the
messages it hands the show, what a typed value means, which keys go where, and how large to
draw on a high-DPI screen. No imgui, no GL: tests use them without a window.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_MESSAGES = 256  # a frame's worth, as OSC and the web remote
COLUMN_WIDTH = 440.0  # about the widest a column of sliders gets (a slider short enough to aim)
MIN_COLUMN_WIDTH = 190.0  # narrower, a name and its value no longer fit beside each other

# Today's dark style (RGB): the window, panels, a slider's track and fill, a switch on, the
# chosen row, MIDI learn and SAVE armed, text, dim text, group headers, a knob's ghost.
BACKGROUND = (16, 17, 22)
PANEL = (26, 28, 36)
TRACK = (46, 49, 62)
HOVER = (58, 62, 78)
FILL = (74, 150, 214)
ON = (86, 196, 140)
SELECTED = (40, 46, 66)
LEARN = (238, 168, 58)
TEXT = (222, 224, 230)
DIM = (138, 142, 156)
HEADER = (120, 170, 230)
GHOST = (255, 255, 255)
ERROR = (236, 96, 86)


def rgba(color: tuple[int, int, int], alpha: int = 255) -> int:
    """An RGB colour as imgui's packed 32-bit colour (IM_COL32: alpha, blue, green, red)."""
    r, g, b = color
    return (alpha << 24) | (b << 16) | (g << 8) | r


def rgbf(color: tuple[int, int, int], alpha: float = 1.0) -> tuple[float, float, float, float]:
    """An RGB colour as imgui's style colours take it (four floats in 0..1)."""
    return (color[0] / 255, color[1] / 255, color[2] / 255, alpha)


class Messages:
    """The gestures since the frame last took them: a slider dragged many times in a frame
    sends its last position only; at most MAX_MESSAGES a frame."""

    def __init__(self) -> None:
        self._items: list[tuple] = []
        self._latest_norm: dict[str, int] = {}

    def add(self, message: tuple) -> None:
        if message[0] == "norm" and message[1] in self._latest_norm:
            self._items[self._latest_norm[message[1]]] = message
            return
        if len(self._items) >= MAX_MESSAGES:
            return
        if message[0] == "norm":
            self._latest_norm[message[1]] = len(self._items)
        self._items.append(message)

    def take(self) -> list[tuple]:
        items, self._items = self._items, []
        self._latest_norm.clear()
        return items


# ---- the parameters in columns --------------------------------------------------------------

Run = tuple[int, int, int]  # (group index, first row, row after the last) in one column


@dataclass
class Flow:
    """The parameter groups flowed into columns: each column a list of runs of rows."""

    columns: list[list[Run]]
    width: float  # of one column
    height: float  # of the tallest column
    fits: bool  # False: some column is taller than the area (it scrolls)


def flow_columns(counts: list[int], width: float, height: float, row_h: float,
                 header_h: float, gap: float, scale: float = 1.0) -> Flow:
    """Groups of `counts` rows into the fewest columns (at least one a COLUMN_WIDTH, none
    narrower than MIN_COLUMN_WIDTH, both times the UI's `scale`) in which they fit an area
    `width` x `height`, balanced so the columns end at about the same height; a group
    continues in the next column when it does not fit, and a header never stands alone at the
    bottom of a column."""
    widest = max(1, min(5, int(width // (MIN_COLUMN_WIDTH * scale))))
    preferred = max(1, min(widest, round(width / (COLUMN_WIDTH * scale))))
    for columns in range(preferred, widest + 1):
        for balanced in (True, False):  # balanced columns, else each filled to the bottom
            placed, tallest = _place(counts, columns, height, row_h, header_h, gap, balanced)
            if tallest <= height + 0.5:
                return Flow(placed, width / columns, tallest, True)
    placed, tallest = _place(counts, widest, math.inf, row_h, header_h, gap, True)
    return Flow(placed, width / widest, tallest, False)


def _place(counts: list[int], columns: int, height: float, row_h: float, header_h: float,
           gap: float, balanced: bool) -> tuple[list[list[Run]], float]:
    total = sum(header_h + gap + row_h * n for n in counts)
    share = total / columns if math.isinf(height) else min(total / columns, height)
    share = share if balanced else math.inf
    placed: list[list[Run]] = [[]]
    used = 0.0
    for group, count in enumerate(counts):
        need = header_h + row_h * count
        if used and len(placed) < columns and (
                used + header_h + row_h > height  # a header never alone at the bottom
                or (used >= share * 0.8 and used + need > share * 1.15)):  # balanced
            placed.append([])
            used = 0.0
        used += header_h
        first = 0
        for row in range(count):
            if used + row_h > height and len(placed) < columns and row > first:
                placed[-1].append((group, first, row))
                placed.append([])
                used, first = 0.0, row
            used += row_h
        placed[-1].append((group, first, count))
        used += gap
    heights = [sum((header_h if start == 0 else 0.0) + row_h * (stop - start) + gap
                   for _, start, stop in column) - gap for column in placed]
    return placed, max(heights)


# ---- a typed value --------------------------------------------------------------------------

BOOL_WORDS = {"on": True, "off": False, "true": True, "false": False, "yes": True,
              "no": False, "1": True, "0": False}
HEX_COLOR = re.compile(r"#?([0-9a-fA-F]{6})")


def parse_typed(kind: str, choices: list[str], text: str) -> Any:
    """What the performer typed into a parameter's field, as the value OSC would be sent
    (`/swarm/<name> value`): the range is OSC's to check. ValueError says why it is none."""
    typed = text.strip()
    if not typed:
        raise ValueError("nothing typed")
    if kind in ("float", "int"):
        try:
            number = float(typed.replace(",", "").replace("_", "").replace(" ", ""))
        except ValueError:
            raise ValueError(f"'{typed[:40]}' is not a number") from None
        if not math.isfinite(number):
            raise ValueError(f"'{typed[:40]}' is not a finite number")
        return int(number) if kind == "int" and number.is_integer() else number
    if kind == "bool":
        word = typed.lower()
        if word not in BOOL_WORDS:
            raise ValueError(f"'{typed[:40]}': on or off")
        return BOOL_WORDS[word]
    if kind == "choice":
        for choice in choices:
            if choice.lower() == typed.lower():
                return choice
        raise ValueError(f"'{typed[:40]}': one of {', '.join(choices)}")
    if kind == "color":
        match = HEX_COLOR.fullmatch(typed)
        if match:
            return "#" + match.group(1).lower()
        parts = typed.replace(",", " ").split()
        try:
            channels = tuple(float(part) for part in parts)
        except ValueError:
            channels = ()
        if len(channels) != 3 or not all(math.isfinite(c) for c in channels):
            raise ValueError(f"'{typed[:40]}': #rrggbb or three numbers 0..1")
        return channels
    raise ValueError(f"{kind}: cannot be typed")


def typed_text(kind: str, shown: str, color: tuple[float, ...] | None) -> str:
    """What a parameter's field holds when it opens: its value as the slider says it, without
    the thousands' commas (so Enter alone sets it again)."""
    if kind == "color" and color is not None:
        return "#" + "".join(f"{round(min(max(c, 0.0), 1.0) * 255):02x}" for c in color)
    return shown.replace(",", "") if kind in ("float", "int") else shown


# ---- keys -----------------------------------------------------------------------------------

NAV_KEYS = ("TAB", "UP", "DOWN")
ENTER_KEYS = ("RETURN", "ENTER", "NUM_ENTER")


def route_key(name: str, typing: bool, focus: str | None) -> str:
    """Where a key pressed in the control window goes: "ui" (imgui: typing into a field, Tab
    and Up/Down moving the keyboard focus, Left/Right/Enter on a focused button or slot),
    "nudge" (Left/Right on a focused parameter: it moves by a step), "edit" (Enter on a
    focused parameter: its field opens to type a value), "toggle" (Enter on a focused switch)
    or "show" (every other key does what it does on the picture: 1-9, Space, T, D, L, Esc...).
    `focus`: the kind of widget holding the keyboard focus ("float", "int", "choice",
    "color", "bool" for a parameter's, "widget" for any other), or None."""
    if typing:
        return "ui"
    if name in NAV_KEYS:
        return "ui"
    parameter = focus not in (None, "widget")
    if name in ("LEFT", "RIGHT"):
        return "nudge" if parameter else "ui" if focus == "widget" else "show"
    if name in ENTER_KEYS:
        if focus == "bool":
            return "toggle"
        return "edit" if parameter else "ui" if focus == "widget" else "show"
    return "show"


SETTLE_FRAMES = 2  # imgui moves the focus in the frame after a key, and shows it in the next


class KeyQueue:
    """Key and mouse events held, in order, until imgui has caught up with those before them:
    imgui takes its input a little at a time (a key's press, its character and its release
    in frames of their own), and where a key goes depends on what imgui made of the input
    before it. So Left/Right or Enter right after Tab or Down act on the widget the focus
    moved to, not the one it left; what is typed right after a right-click goes into the field
    it opens, not to the show; a click after typing lands after the typing. Mouse moves are
    never held back (imgui takes them all at once), only kept in order behind what is."""

    def __init__(self) -> None:
        self.events: deque[tuple] = deque()
        self.settle = 0
        self.hold = False  # a field is opening: what is typed waits until it takes the keys

    def now(self, event: tuple, busy: bool = False) -> bool:
        """True: handle `event` now; False: it is held (in order) until imgui has caught up.
        `busy`: imgui has input it has not taken yet."""
        if self.events or self.settle or self.hold or (busy and event[0] != "move"):
            self.events.append(event)
            return False
        return True

    def moved(self) -> None:
        """A key went to imgui to move the focus, or a mouse button: hold what follows for a
        few frames."""
        self.settle = SETTLE_FRAMES

    def frame(self) -> None:
        """A frame was drawn."""
        self.settle = max(self.settle - 1, 0)

    def next(self, busy: bool = False) -> tuple | None:
        """The next held event once imgui has caught up (a mouse move at once), else None."""
        if not self.events:
            return None
        if self.events[0][0] != "move" and (self.settle or self.hold or busy):
            return None
        return self.events.popleft()


# ---- size -----------------------------------------------------------------------------------

def ui_scale(window_size: tuple[int, int], framebuffer_size: tuple[int, int],
             dpi_scale: float) -> float:
    """How much larger than at 96 dpi to draw: where the framebuffer is larger than the window
    (macOS's points, a scaled Wayland desktop) the platform scales already and imgui draws at
    the framebuffer's density; elsewhere (X11, Windows: window sizes in pixels) the screen's
    DPI over 96, at least 1 and at most 4."""
    ratio = framebuffer_size[0] / max(window_size[0], 1)
    if ratio > 1.01:
        return 1.0
    return min(max(float(dpi_scale), 1.0), 4.0) if math.isfinite(dpi_scale) else 1.0


def fit_text(text: str, width: float, measure: Callable[[str], float]) -> str:
    """`text` cut at the end with an ellipsis until `measure` says it fits `width`."""
    if measure(text) <= width:
        return text
    cut = text
    while cut and measure(cut + "\u2026") > width:
        cut = cut[:-1]
    return cut.rstrip() + "\u2026" if cut else ""
