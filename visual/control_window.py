"""The control window: the performer's screen beside the projector's. A live preview of the
output, every parameter as a slider in its group, the nine preset slots as thumbnails, the A/B
crossfade, buttons for tap, downbeat, respawn and burst, and the meters.

It knows nothing of the show: show/inputs/control_surface.py hands it a layout once (groups of parameters as
plain data) and a state a few dozen times a second (each parameter's position and text, the
knobs waiting for pickup, the slots, the meters), and takes back the gestures as plain
messages, which it turns into the show's actions through the same checks as OSC:

    ("norm", name, x)          a slider dragged to x in 0..1 of the performance range
    ("set", name, value)       a switch flipped, a colour's channel moved (value: the colour)
    ("nudge", name, steps)     the wheel over a slider, or an A/B arrow: steps of the range
    ("select", name)           a slider clicked: it becomes the chosen parameter (keys, L)
    ("learn", name)            its L box: MIDI-learn it (again: cancel)
    ("preset", slot)  ("save", slot)  ("action", "tap" | "downbeat" | "respawn" | "burst")

Pictures are the output context's textures (visual/preview.py), borrowed by GL name: pyglet's
windows share textures, and nothing is read back. Keys go to the same handler as the output
window's. Drawn with pyglet (shapes and labels in one batch, text laid out again only when it
changes). Main thread only (pyglet's event loop).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

CAPTION = "swarm instrument - control"
FONT = "DejaVu Sans"
MAX_MESSAGES = 256  # a frame's worth, as OSC and the web remote
DRAW_RATE = 30.0  # the control window's redraws a second, at most

BACKGROUND = (16, 17, 22)
PANEL = (26, 28, 36)
TRACK = (46, 49, 62)
FILL = (74, 150, 214)
ON = (86, 196, 140)
SELECTED = (40, 46, 66)
LEARN = (238, 168, 58)
TEXT = (222, 224, 230)
DIM = (138, 142, 156)
HEADER = (120, 170, 230)
GHOST = (255, 255, 255)


@dataclass
class Rect:
    """A box in window coordinates (pyglet's: origin bottom-left)."""

    x: float
    y: float
    w: float
    h: float

    def contains(self, px: float, py: float) -> bool:
        return self.x <= px < self.x + self.w and self.y <= py < self.y + self.h

    def fraction(self, px: float) -> float:
        return min(max((px - self.x) / max(self.w, 1.0), 0.0), 1.0)


@dataclass
class Row:
    """One parameter's slider: its name, kind and boxes."""

    name: str
    kind: str  # "float", "int", "bool", "choice" or "color"
    row: Rect
    bar: Rect
    learn: Rect | None
    channels: list[Rect] = field(default_factory=list)  # a colour's red, green, blue


@dataclass
class Layout:
    """Where everything is for a window of `size` (pure: tests lay it out without a window)."""

    size: tuple[int, int]
    top: Rect
    preview: Rect
    meters: Rect
    slots: dict[int, Rect]
    buttons: dict[str, Rect]
    crossfade: Rect
    fade_arrows: dict[str, Rect]  # "a-", "a+", "b-", "b+"
    headers: list[tuple[str, Rect]]
    rows: dict[str, Row]
    row_height: float


BUTTONS = ("save", "tap", "downbeat", "respawn", "burst")
COLUMN_WIDTH = 440.0  # pixels: about the widest a column of sliders gets


def lay_out(size: tuple[int, int], groups: list[tuple[str, list[dict[str, Any]]]],
            aspect: float = 16 / 9) -> Layout:
    """The left panel (preview, meters, slots, buttons, crossfade) and the parameters in as
    many columns as their rows need, for a window of `size` and an output of `aspect`."""
    width, height = size
    margin = 10.0
    top = Rect(0, height - 30, width, 30)
    left_w = min(max(width * 0.34, 300.0), 560.0)
    left_x = margin
    y = height - 30 - margin  # the top of what is left, going down
    # The slots, buttons and crossfade at the bottom; meters above them; the preview on top,
    # as large as what remains allows.
    tile_gap = 6.0
    fade_h, button_h = 26.0, 26.0
    meters_h = 118.0
    bottom = margin
    crossfade = Rect(left_x + 50, bottom, left_w - 100, fade_h)
    fade_arrows = {"a-": Rect(left_x, bottom, 22, fade_h),
                   "a+": Rect(left_x + 24, bottom, 22, fade_h),
                   "b-": Rect(left_x + left_w - 46, bottom, 22, fade_h),
                   "b+": Rect(left_x + left_w - 22, bottom, 22, fade_h)}
    buttons_y = bottom + fade_h + 8
    button_w = (left_w - tile_gap * (len(BUTTONS) - 1)) / len(BUTTONS)
    buttons = {name: Rect(left_x + i * (button_w + tile_gap), buttons_y, button_w, button_h)
               for i, name in enumerate(BUTTONS)}
    slots_y = buttons_y + button_h + 8
    # The slots as wide as the panel allows, the meters above them, the preview on top in
    # what is left (as wide as the panel at most).
    tile_w = (left_w - 2 * tile_gap) / 3
    tile_h = tile_w * 9 / 16 + 16
    slots = {}
    for index in range(9):
        row, column = divmod(index, 3)
        slots[index + 1] = Rect(left_x + column * (tile_w + tile_gap),
                                slots_y + (2 - row) * (tile_h + tile_gap), tile_w, tile_h)
    meters_y = slots_y + 3 * (tile_h + tile_gap) + 4
    room = y - (meters_y + meters_h + 8)
    preview_w = max(min(left_w, room * aspect), 32.0)
    preview_h = preview_w / aspect
    preview = Rect(left_x + (left_w - preview_w) / 2, y - preview_h, preview_w, preview_h)
    meters = Rect(left_x, min(meters_y, preview.y - 8 - meters_h), left_w, meters_h)

    # The parameters: headers and rows flowed into columns, top to bottom.
    area_x = left_x + left_w + 2 * margin
    area_w = width - area_x - margin
    area_top, area_h = y, y - margin
    header_h = 22.0
    # The fewest columns (at least one per COLUMN_WIDTH, so a slider stays short enough to
    # aim along) at the tallest rows that fit; narrower columns or shorter rows if need be.
    widest = max(1, min(5, round(area_w / COLUMN_WIDTH)))
    columns, row_h = widest, 18.0
    for row_h in (20.0, 18.0, 16.0, 14.0, 12.0):
        for columns in range(widest, 6):
            if area_w / columns < 190 and columns > widest:
                break
            if _flow_fits(groups, columns, row_h, header_h, area_h):
                break
        if _flow_fits(groups, columns, row_h, header_h, area_h):
            break
    column_w = area_w / columns
    share = sum(header_h + 6 + row_h * len(params) for _, params in groups) / columns
    headers, rows = [], {}
    column, cursor = 0, area_top
    for group, params in groups:
        used = area_top - cursor
        need = header_h + row_h * len(params)
        if cursor < area_top and column + 1 < columns and (
                cursor - (header_h + row_h) < margin  # a header never alone at the bottom
                or (used >= share * 0.8 and used + need > share * 1.15)):  # balanced columns
            column, cursor = column + 1, area_top
        x = area_x + column * column_w
        headers.append((group, Rect(x, cursor - header_h, column_w - 12, header_h)))
        cursor -= header_h
        for spec in params:
            if cursor - row_h < margin:
                column, cursor = column + 1, area_top
                x = area_x + column * column_w
            box = Rect(x, cursor - row_h, column_w - 12, row_h)
            name_w = box.w * 0.46
            learn = Rect(box.x + box.w - row_h + 2, box.y + 2, row_h - 4, row_h - 4) \
                if spec["kind"] != "color" else None
            bar_right = box.x + box.w - (row_h + 4 if learn else 0)
            bar = Rect(box.x + name_w, box.y + 2, bar_right - box.x - name_w, row_h - 4)
            channels = []
            if spec["kind"] == "color":
                swatch = row_h
                part = (bar.w - swatch - 8) / 3
                channels = [Rect(bar.x + swatch + 4 + i * (part + 2), bar.y, part - 2, bar.h)
                            for i in range(3)]
            rows[spec["name"]] = Row(spec["name"], spec["kind"], box, bar, learn, channels)
            cursor -= row_h
        cursor -= 6
    return Layout(size, top, preview, meters, slots, buttons, crossfade, fade_arrows,
                  headers, rows, row_h)


def _flow_fits(groups, columns: int, row_h: float, header_h: float, area_h: float) -> bool:
    column, used = 0, 0.0
    for _, params in groups:
        need = header_h + row_h
        if used and used + need > area_h:
            column, used = column + 1, 0.0
        used += header_h
        for _ in params:
            if used + row_h > area_h:
                column, used = column + 1, 0.0
            used += row_h
        used += 6
    return column < columns


def hit(layout: Layout, x: float, y: float) -> tuple[str, Any] | None:
    """What is under (x, y): ("row", name), ("learn", name), ("channel", (name, i)),
    ("slot", n), ("button", name), ("crossfade", None), ("arrow", "a-"...), or None."""
    for name, row in layout.rows.items():
        if row.row.contains(x, y):
            if row.learn is not None and row.learn.contains(x, y):
                return ("learn", name)
            for index, channel in enumerate(row.channels):
                if channel.contains(x, y):
                    return ("channel", (name, index))
            return ("row", name)
    for slot, box in layout.slots.items():
        if box.contains(x, y):
            return ("slot", slot)
    for name, box in layout.buttons.items():
        if box.contains(x, y):
            return ("button", name)
    if layout.crossfade.contains(x, y):
        return ("crossfade", None)
    for name, box in layout.fade_arrows.items():
        if box.contains(x, y):
            return ("arrow", name)
    return None


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


class ControlWindow:
    """The window, its widgets and its gestures. `groups`: [(group, [{"name", "kind"}])];
    `on_key(symbol, modifiers)`: the output window's key handler (keys do the same here, Esc
    twice quits)."""

    def __init__(self, window, groups: list[tuple[str, list[dict[str, Any]]]], *,
                 on_key: Callable[[int, int], Any]) -> None:
        self.window = window
        self.groups = groups
        self.kinds = {spec["name"]: spec["kind"] for _, specs in groups for spec in specs}
        self.choices = {spec["name"]: list(spec.get("choices", ())) for _, specs in groups
                        for spec in specs}
        self.on_key = on_key
        self.messages = Messages()
        self.state: dict[str, Any] = {}
        self.notice = ""
        self._notice_until = 0.0
        self.save_armed = False
        self._drag: tuple[str, Any] | None = None
        self._images: dict[Any, Any] = {}  # key -> (glo, size) of the textures shown
        self._textures: dict[Any, Any] = {}  # key -> pyglet Texture borrowing that name
        self._aspect = 16 / 9
        self.draws = 0
        self._dirty = True
        self._drawn_at = -1e9
        window.draw = self.draw  # pyglet's loop redraws every window: this one when due
        self.escape = None  # the output window's EscapeGuard: "press Esc again" shown here
        with self._current():
            self._build()
        from pyglet.window import key

        self._keys = key.KeyStateHandler()  # Shift with the wheel: a tenth of the range
        window.push_handlers(self)
        window.push_handlers(self._keys)  # above: it sees every key, then passes it on

    # ---- pictures ---------------------------------------------------------------------------

    def show_image(self, key: Any, glo: int | None, size: tuple[int, int]) -> None:
        """Show the texture `glo` (the output context's, `size` pixels) as the preview
        (key "preview") or slot `key`'s thumbnail; None shows none."""
        if self._images.get(key) == (glo, size):
            return
        self._images[key] = (glo, size)
        if key == "preview" and glo is not None:
            aspect = size[0] / max(size[1], 1)
            if abs(aspect - self._aspect) > 1e-3:
                self._aspect = aspect
                with self._current():
                    self._build()
                return
        self._place_image(key)

    @contextmanager
    def _current(self):
        """This window's context current for what follows, and the one that was current
        (the output's, which moderngl draws with) current again after it."""
        import pyglet

        before = pyglet.gl.current_context
        self.window.switch_to()
        try:
            yield
        finally:
            if before is not None and before is not self.window.context:
                before.set_current()

    def _place_image(self, key: Any) -> None:
        with self._current():
            self._place_image_here(key)

    def _place_image_here(self, key: Any) -> None:
        import pyglet

        old = self._sprites.pop(key, None)
        if old is not None:
            old.delete()
        texture = self._textures.pop(key, None)
        if texture is not None:
            texture.id = None  # borrowed: the owner (visual/preview.py) deletes it
        glo, size = self._images.get(key, (None, None))
        box = self.layout.preview if key == "preview" else self.layout.slots.get(key)
        if glo is None or box is None:
            return
        texture = pyglet.image.Texture(size[0], size[1], pyglet.gl.GL_TEXTURE_2D, glo)
        self._textures[key] = texture
        if key == "preview":
            x, y, w, h = box.x, box.y, box.w, box.h
        else:
            x, y, w, h = box.x, box.y + 16, box.w, box.h - 16
        sprite = pyglet.sprite.Sprite(texture, x, y, batch=self._batch, group=self._pictures)
        sprite.scale_x, sprite.scale_y = w / size[0], h / size[1]
        self._sprites[key] = sprite

    # ---- building the widgets ---------------------------------------------------------------

    def _build(self) -> None:
        """Every shape and label for the window's current size (again after a resize), made
        with this window's context current (vertex arrays are not shared)."""
        import pyglet
        from pyglet import shapes

        width, height = self.window.get_size()
        self.layout = layout = lay_out((width, height), self.groups, self._aspect)
        self._batch = batch = pyglet.graphics.Batch()
        self._back = pyglet.graphics.Group(0)
        self._mid = pyglet.graphics.Group(1)
        self._pictures = pyglet.graphics.Group(2)
        self._front = pyglet.graphics.Group(3)
        self._texts = pyglet.graphics.Group(4)
        self._sprites: dict[Any, Any] = {}
        self._labels: dict[Any, Any] = {}
        self._shown: dict[Any, str] = {}
        self._values: dict[Any, Any] = {}
        keep = self._keep = []

        def box(rect: Rect, color, group=None) -> Any:
            shape = shapes.Rectangle(rect.x, rect.y, rect.w, rect.h, color=color, batch=batch,
                                     group=group or self._back)
            keep.append(shape)
            return shape

        def text(key, value, x, y, size=9, color=TEXT, anchor_x="left", anchor_y="center",
                 bold=False, width=None, fit=None) -> Any:
            label = pyglet.text.Label(value, font_name=FONT, font_size=size, x=x, y=y,
                                      anchor_x=anchor_x, anchor_y=anchor_y,
                                      weight="bold" if bold else "normal",
                                      color=(*color, 255), batch=batch, group=self._texts,
                                      width=width)
            if fit is not None:  # smaller, then cut with an ellipsis, until it fits
                while label.content_width > fit and label.font_size > 7:
                    label.font_size -= 1
                while label.content_width > fit and len(label.text) > 2:
                    label.text = label.text[:-2] + "\u2026"
            self._labels[key] = label
            self._shown[key] = label.text
            return label

        box(layout.top, PANEL)
        text("title", "SWARM  control", 12, layout.top.y + 15, size=11, bold=True)
        text("status", "", width - 12, layout.top.y + 15, size=9, color=DIM, anchor_x="right")
        text("notice", "", width / 2, layout.top.y + 15, size=10, color=LEARN,
             anchor_x="center")
        p = layout.preview
        box(Rect(p.x - 1, p.y - 1, p.w + 2, p.h + 2), TRACK)
        box(p, (0, 0, 0), self._mid)
        text("preview-label", "OUTPUT", p.x + 6, p.y + p.h - 10, size=8, color=DIM)
        # meters
        m = layout.meters
        box(m, PANEL)
        self._meter_bars = {}
        labels = (("level", "level"), ("low", "low"), ("mid", "mid"), ("high", "high"),
                  ("onset", "onset"))
        bar_x, bar_w = m.x + 52, m.w * 0.45 - 52
        for i, (key, name) in enumerate(labels):
            y = m.y + m.h - 14 - i * 20
            text(("meter", key), name, m.x + 8, y, size=8, color=DIM)
            box(Rect(bar_x, y - 5, bar_w, 10), TRACK, self._mid)
            fill = box(Rect(bar_x, y - 5, 0, 10), FILL if key != "onset" else LEARN, self._front)
            self._meter_bars[key] = (fill, bar_w)
        right = m.x + m.w * 0.5
        self._meter_lines = ("tempo", "beats", "midi", "osc", "frame", "agents")
        for i, key in enumerate(self._meter_lines):
            text(("line", key), "", right, m.y + m.h - 14 - i * 18, size=8, color=TEXT)
        self._beat_dots = []
        for i in range(4):
            dot = shapes.Rectangle(right + 46 + i * 16, m.y + m.h - 14 - 18 - 5, 12, 10,
                                   color=TRACK, batch=batch, group=self._front)
            keep.append(dot)
            self._beat_dots.append(dot)
        self._activity = {}
        for i, key in ((2, "midi"), (3, "osc")):
            dot = shapes.Circle(m.x + m.w - 12, m.y + m.h - 14 - i * 18, 4, color=TRACK,
                                batch=batch, group=self._front)
            keep.append(dot)
            self._activity[key] = dot
        # preset slots
        self._slot_frames = {}
        self._morph_bars = {}
        for slot, rect in layout.slots.items():
            frame = box(Rect(rect.x - 2, rect.y - 2, rect.w + 4, rect.h + 4), PANEL)
            self._slot_frames[slot] = frame
            box(Rect(rect.x, rect.y + 16, rect.w, rect.h - 16), (8, 8, 12), self._mid)
            text(("slot", slot), f"{slot}", rect.x + 4, rect.y + 8, size=8, color=TEXT,
                 width=rect.w - 8)
            self._morph_bars[slot] = box(Rect(rect.x, rect.y + 15, 0, 2), LEARN, self._front)
        self._buttons = {}
        for name, rect in layout.buttons.items():
            self._buttons[name] = box(rect, TRACK, self._mid)
            text(("button", name), name.upper(), rect.x + rect.w / 2, rect.y + rect.h / 2,
                 size=8, anchor_x="center", bold=True, fit=rect.w - 6)
        c = layout.crossfade
        box(c, TRACK, self._mid)
        self._fade_knob = box(Rect(c.x, c.y, 6, c.h), TEXT, self._front)
        for name, rect in layout.fade_arrows.items():
            box(rect, TRACK, self._mid)
            text(("arrow", name), "<" if name.endswith("-") else ">", rect.x + rect.w / 2,
                 rect.y + rect.h / 2, size=9, anchor_x="center")
        text("fade-a", "A", c.x + 6, c.y + c.h / 2, size=8, color=DIM)
        text("fade-b", "B", c.x + c.w - 6, c.y + c.h / 2, size=8, color=DIM, anchor_x="right")
        text("fade-label", "", c.x + c.w / 2, c.y + c.h / 2, size=8, anchor_x="center")
        # parameters
        for group, rect in layout.headers:
            text(("header", group), group.upper(), rect.x + 2, rect.y + rect.h / 2 - 1,
                 size=9, color=HEADER, bold=True)
            box(Rect(rect.x, rect.y + 2, rect.w, 1), TRACK)
        self._rows = {}
        font = 8 if layout.row_height < 16 else 9
        for name, row in layout.rows.items():
            back = box(row.row, BACKGROUND, self._back)
            text(("name", name), name.replace("_", " "), row.row.x + 4,
                 row.row.y + row.row.h / 2, size=font, color=TEXT,
                 fit=row.bar.x - row.row.x - 8)
            parts: dict[str, Any] = {"back": back}
            if row.kind == "color":
                parts["swatch"] = box(Rect(row.bar.x, row.bar.y, layout.row_height - 4,
                                           row.bar.h), TRACK, self._mid)
                parts["channels"] = []
                for index, channel in enumerate(row.channels):
                    box(channel, TRACK, self._mid)
                    tint = tuple(180 if i == index else 60 for i in range(3))
                    parts["channels"].append(box(Rect(channel.x, channel.y, 0, channel.h),
                                                 tint, self._front))
            else:
                box(row.bar, TRACK, self._mid)
                parts["fill"] = box(Rect(row.bar.x, row.bar.y, 0, row.bar.h), FILL, self._front)
                parts["ghost"] = box(Rect(row.bar.x, row.bar.y - 1, 2, row.bar.h + 2), GHOST,
                                     self._front)
                parts["ghost"].opacity = 0
                text(("value", name), "", row.bar.x + row.bar.w - 4, row.row.y + row.row.h / 2,
                     size=font - 1, anchor_x="right")
            if row.learn is not None:
                parts["learn"] = box(row.learn, TRACK, self._mid)
                text(("learn", name), "L", row.learn.x + row.learn.w / 2,
                     row.learn.y + row.learn.h / 2, size=7, color=DIM, anchor_x="center")
            self._rows[name] = parts
        for key in list(self._images):
            self._place_image_here(key)

    # ---- state in ---------------------------------------------------------------------------

    def update(self, state: dict[str, Any]) -> None:
        """The show's latest state (show/inputs/control_surface.py); drawn at the next redraw."""
        self.state = state
        self._dirty = True

    def say(self, notice: str, seconds: float = 4.0) -> None:
        """A line at the top of the window for a few seconds."""
        self.notice, self._notice_until = notice, time.monotonic() + seconds
        self._dirty = True

    def _set(self, shape: Any, attribute: str, value: Any) -> None:
        """Set a shape's attribute only when it changes (each set rewrites its vertices)."""
        key = (id(shape), attribute)
        if self._values.get(key) != value:
            self._values[key] = value
            setattr(shape, attribute, value)

    def _text(self, key: Any, value: str) -> None:
        if self._shown.get(key) != value:
            self._shown[key] = value
            self._labels[key].text = value

    def _refresh(self) -> None:
        state = self.state
        if not state:
            return
        rows = state.get("rows", {})
        ghosts = state.get("ghost", {})
        selected, learning = state.get("selected"), state.get("learning")
        for name, row in self.layout.rows.items():
            parts = self._rows[name]
            norm, shown, color = rows.get(name, (None, "", None))
            self._set(parts["back"], "color", SELECTED if name == selected else BACKGROUND)
            if row.kind == "color" and color is not None:
                self._set(parts["swatch"], "color", tuple(int(round(c * 255)) for c in color))
                for index, fill in enumerate(parts["channels"]):
                    self._set(fill, "width", row.channels[index].w * float(color[index]))
            elif row.kind != "color":
                fill = parts["fill"]
                if norm is None:
                    self._set(fill, "width", 0)
                elif row.kind == "bool":
                    self._set(fill, "width", row.bar.w if norm >= 0.5 else 0)
                    self._set(fill, "color", ON)
                elif row.kind == "choice":
                    count = max(len(self.choices[name]), 1)
                    self._set(fill, "x", row.bar.x + int(norm * count) * row.bar.w / count)
                    self._set(fill, "width", row.bar.w / count)
                else:
                    self._set(fill, "width", row.bar.w * norm)
                self._text(("value", name), shown)
                ghost = ghosts.get(name)
                self._set(parts["ghost"], "opacity", 0 if ghost is None else 220)
                if ghost is not None:
                    self._set(parts["ghost"], "x", row.bar.x + row.bar.w * ghost - 1)
            if "learn" in parts:
                self._set(parts["learn"], "color", LEARN if name == learning else TRACK)
        slots = state.get("slots", {})
        active, morph = state.get("active"), state.get("morph")
        for slot, rect in self.layout.slots.items():
            name = slots.get(slot)
            self._text(("slot", slot), f"{slot}  {name}" if name else f"{slot}  (empty)")
            lit = slot == active
            self._set(self._slot_frames[slot], "color",
                      FILL if lit else LEARN if self.save_armed else PANEL)
            self._set(self._morph_bars[slot], "width",
                      rect.w * morph if lit and morph is not None else 0)
        self._set(self._buttons["save"], "color", LEARN if self.save_armed else TRACK)
        a, b, x = state.get("crossfade", (1, 2, 0.0))
        c = self.layout.crossfade
        self._set(self._fade_knob, "x", c.x + (c.w - 6) * float(x))
        self._text("fade-a", f"A {a}")
        self._text("fade-b", f"{b} B")
        self._text("fade-label", f"crossfade {float(x):.2f}")
        meters = state.get("meters", {})
        for key, (fill, width) in self._meter_bars.items():
            self._set(fill, "width", width * min(max(float(meters.get(key) or 0.0), 0.0), 1.0))
        for key in self._meter_lines:
            self._text(("line", key), meters.get(f"{key}_text", ""))
        beat = meters.get("beat_in_bar")
        for index, dot in enumerate(self._beat_dots):
            self._set(dot, "color", (LEARN if index == 0 else FILL) if beat == index else TRACK)
        for key, dot in self._activity.items():
            self._set(dot, "color", ON if meters.get(f"{key}_active") else TRACK)
        self._text("status", state.get("status", ""))
        notice = (self.notice if time.monotonic() < self._notice_until else "") or \
            state.get("notice", "")
        if self.escape is not None and self.escape.armed(time.monotonic()):
            notice = "press Esc again to quit"
        elif self.save_armed:
            notice = "SAVE: click the slot to save the look into (Esc: cancel)"
        self._text("notice", notice)

    # ---- events -----------------------------------------------------------------------------

    def draw(self, dt: float = 0.0) -> None:
        """pyglet's redraw of this window (it calls every window's `draw` each frame): at
        most DRAW_RATE a second, and only when the state or a gesture changed something, so
        the output's frame pays for the control window's drawing only when it shows news.
        A frame left out is not swapped: the screen keeps the last one."""
        now = time.monotonic()
        if now - self._drawn_at < 1.0 / DRAW_RATE or not (
                self._dirty or now - self._drawn_at > 0.5):
            return
        self._drawn_at = now
        self._dirty = False
        self.window.switch_to()
        self.on_draw()
        self.window.flip()

    def on_draw(self):
        from pyglet import gl

        self._refresh()
        gl.glClearColor(*(c / 255 for c in BACKGROUND), 1.0)
        self.window.clear()
        self._batch.draw()
        self.draws += 1

    def on_resize(self, width, height):
        if (width, height) != self.layout.size:
            with self._current():
                self._build()

    def on_close(self):
        """The window stays: closing it by mistake must not end a show (Esc twice quits)."""
        import pyglet

        self.say("the control window stays while the show plays: Esc twice quits")
        return pyglet.event.EVENT_HANDLED

    def on_key_press(self, symbol, modifiers):
        import pyglet
        from pyglet.window import key

        self._dirty = True
        if symbol == key.ESCAPE and self.save_armed:
            self.save_armed = False
            return pyglet.event.EVENT_HANDLED
        return self.on_key(symbol, modifiers)

    def on_expose(self):
        self._dirty = True

    def on_mouse_press(self, x, y, button, modifiers):
        from pyglet.window import key, mouse

        self._dirty = True
        if button != mouse.LEFT:
            return
        target = hit(self.layout, x, y)
        if target is None:
            self.save_armed = False
            return
        what, value = target
        if what == "slot":
            save = self.save_armed or bool(modifiers & key.MOD_CTRL)
            self.messages.add(("save" if save else "preset", value))
            self.save_armed = False
            return
        if what == "button":
            if value == "save":
                self.save_armed = not self.save_armed
            else:
                self.messages.add(("action", value))
            return
        self.save_armed = False
        if what == "learn":
            self.messages.add(("learn", value))
        elif what == "arrow":
            name = "crossfade_a" if value.startswith("a") else "crossfade_b"
            self.messages.add(("nudge", name, 0.01 if value.endswith("+") else -0.01))
        elif what == "crossfade":
            self._drag = target
            self._drag_to(x)
        elif what == "row":
            self.messages.add(("select", value))
            kind = self.kinds.get(value)
            if kind == "bool":
                norm = self.state.get("rows", {}).get(value, (0.0,))[0] or 0.0
                self.messages.add(("norm", value, 0.0 if norm >= 0.5 else 1.0))
            elif kind != "color" and self.layout.rows[value].bar.contains(x, y):
                self._drag = target
                self._drag_to(x)
        elif what == "channel":
            self._drag = target
            self._drag_to(x)

    def on_mouse_drag(self, x, y, dx, dy, buttons, modifiers):
        if self._drag is not None:
            self._drag_to(x)

    def on_mouse_release(self, x, y, button, modifiers):
        self._drag = None

    def _drag_to(self, x: float) -> None:
        what, value = self._drag
        if what == "crossfade":
            c = self.layout.crossfade
            self.messages.add(("norm", "crossfade", c.fraction(x)))
        elif what == "row":
            self.messages.add(("norm", value, self.layout.rows[value].bar.fraction(x)))
        elif what == "channel":
            name, index = value
            color = list(self.state.get("rows", {}).get(name, (None, "", (0, 0, 0)))[2]
                         or (0.0, 0.0, 0.0))
            color[index] = self.layout.rows[name].channels[index].fraction(x)
            self.messages.add(("set", name, tuple(round(c, 4) for c in color)))

    def on_mouse_scroll(self, x, y, scroll_x, scroll_y):
        target = hit(self.layout, x, y)
        if target is None or not scroll_y:
            return
        from pyglet.window import key

        step = 0.1 if self._keys[key.LSHIFT] or self._keys[key.RSHIFT] else 0.01
        what, value = target
        name = {"row": value, "learn": value, "crossfade": "crossfade"}.get(what)
        if what == "arrow":
            name = "crossfade_a" if value.startswith("a") else "crossfade_b"
        if name is not None and self.kinds.get(name) != "color":
            self.messages.add(("nudge", name, step * (1 if scroll_y > 0 else -1)))

    def take_messages(self) -> list[tuple]:
        return self.messages.take()

    # ---- the end ----------------------------------------------------------------------------

    def close(self) -> None:
        """Sprites deleted and borrowed texture names let go (never deleted here), then the
        window closed."""
        import pyglet

        before = pyglet.gl.current_context
        with self._current():
            self._close_here()
        self.window.close()
        if before is not None and before is not self.window.context:
            before.set_current()  # the output's, for whatever moderngl releases next

    def _close_here(self) -> None:
        for sprite in self._sprites.values():
            sprite.delete()
        self._sprites.clear()
        for texture in self._textures.values():
            texture.id = None
        self._textures.clear()


def open_control_window(screen, *, fullscreen: bool, size: tuple[int, int] | None,
                        version: tuple[int, int] = (4, 3)):
    """The control window's pyglet window on `screen`: covering it (borderless) or a window
    of `size` centred on it; an OpenGL `version` core context like the output's (pyglet
    shares the output context's textures with it). No vsync: the output window's swap paces
    the show."""
    import pyglet

    config = pyglet.gl.Config(major_version=version[0], minor_version=version[1],
                              forward_compatible=True, double_buffer=True)
    if fullscreen:
        window = pyglet.window.Window(
            screen.width, screen.height, screen=screen, config=config, vsync=False,
            caption=CAPTION, style=pyglet.window.Window.WINDOW_STYLE_BORDERLESS)
        window.set_location(screen.x, screen.y)
        return window
    width, height = size or (min(1280, screen.width), min(800, screen.height))
    window = pyglet.window.Window(width, height, screen=screen, config=config, vsync=False,
                                  caption=CAPTION, resizable=True)
    window.set_location(screen.x + max((screen.width - width) // 2, 0),
                        screen.y + max((screen.height - height) // 2, 0))
    return window

