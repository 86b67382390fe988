"""The contact sheet: every bundled look in one PNG, to choose from and to compare.

    python instrument.py --contact-sheet looks.png

Each preset in presets/ is played from the same seed for the same time with the same synthetic
drum loop (120 BPM: the routes and the beat move as they would with music), through the one
loop at a fixed step, offscreen, with the post chain on (the look as a GPU shows it), and its
last frame goes into a grid with the preset's slot and name under it. Same presets, same
settings: the same sheet, so the README's sheet is made by this command, not drawn. Main thread.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

import moderngl
import numpy as np
import pyglet

from swarm_instrument.audio.base import OfflineAudio
from swarm_instrument.audio.synth import drum_loop
from swarm_instrument.control.looks.preset_bank import BUNDLED_DIR, SLOTS, preset_files
from swarm_instrument.control.looks.presets import Preset, apply_preset, load_preset
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.loop import Loop, Offscreen, SongClock
from swarm_instrument.show.show import Show
from swarm_instrument.visual.output.png import write_png
from swarm_instrument.visual.ui.hud import headless_text_context

log = logging.getLogger(__name__)

SHEET_BPM = 120.0
AUDIO_RATE = 48000
GAP = 6  # pixels between thumbnails
GAP_COLOR = (14, 15, 20)


@dataclass(frozen=True)
class SheetSettings:
    size: tuple[int, int] = (480, 270)  # one thumbnail
    seconds: float = 8.0                # played before the frame is taken
    fps: float = 30.0                   # the fixed step: 1 / fps
    seed: int = 1
    columns: int = 4
    count_cap: int | None = None        # at most this many agents (tests, software GL)


def bundled_presets() -> list[tuple[int | None, Preset]]:
    """The bundled presets, in the order of their files' numbers: (slot 1-9, or None for the
    looks past the nine number keys, recalled by name), preset."""
    def number(path: Path) -> tuple[int, str]:
        match = re.match(r"(\d+)-", path.name)
        return (int(match.group(1)) if match else 1 << 30, path.name)

    out = []
    for path in sorted(preset_files(BUNDLED_DIR), key=number):
        slot = number(path)[0]
        out.append((slot if slot in SLOTS else None, load_preset(path)))
    return out


class LookRun:
    """`preset` played offscreen as the sheet plays it (its parameters and routes, the drum
    loop, seed and fixed step of `settings`), a few frames at a time: the control window's
    thumbnails (show/inputs/control_surface.py) spread it over the show's frames. The frame stays in
    `framebuffer` (RGBA8, its colour a texture) until `release()`."""

    def __init__(self, ctx, preset: Preset, settings: SheetSettings, song: np.ndarray) -> None:
        params = Params()
        routes = apply_preset(preset, params)
        if settings.count_cap is not None:
            params["count"] = min(params["count"], settings.count_cap)
        if params["post"] == "auto":
            params["post"] = "on"  # the look as a GPU shows it, on any GL
        options = ShowOptions(seed=settings.seed, fixed_dt=1.0 / settings.fps,
                              reproducible=True, live=False)
        self.show = Show(ctx, params, options, routes=routes, preset=preset,
                         audio=OfflineAudio(song, AUDIO_RATE, name="drum loop"))
        self.sink = Offscreen(self.show, settings.size)
        self.loop = Loop(self.show, SongClock(settings.fps))
        self.frames = round(settings.seconds * settings.fps)
        self.drawn = 0

    @property
    def done(self) -> bool:
        return self.drawn >= self.frames

    @property
    def framebuffer(self):
        return self.sink.framebuffer

    def step(self, frames: int) -> None:
        """Play up to `frames` more frames (never past the end)."""
        frames = min(frames, self.frames - self.drawn)
        if frames > 0:
            self.drawn += self.loop.run(self.sink, frames=frames)

    def image(self) -> np.ndarray:
        """The last frame, (H, W, 3) uint8, top row first (a readback: the sheet's)."""
        width, height = self.sink.size
        pixels = np.frombuffer(self.sink.pixels(), np.uint8)
        return pixels.reshape(height, width, 3)[::-1].copy()

    def release(self) -> None:
        self.show.release()


def render_look(ctx, preset: Preset, settings: SheetSettings,
                song: np.ndarray) -> np.ndarray:
    """`preset` played for settings.seconds: its last frame, (H, W, 3) uint8, top row first,
    left in the offscreen framebuffer (bound) for a label to be drawn on."""
    run = LookRun(ctx, preset, settings, song)
    try:
        run.step(run.frames)
        return run.image()
    finally:
        run.release()


def label(image: np.ndarray, text: str, hud) -> np.ndarray:
    """`text` drawn along the bottom of `image` with pyglet (hud: visual.ui.hud's headless text
    context), white over a dark shadow; the image back, top row first."""
    height, width = image.shape[:2]
    ctx = moderngl.get_context()
    texture = ctx.texture((width, height), 3, np.ascontiguousarray(image[::-1]).tobytes())
    framebuffer = ctx.framebuffer([texture])
    try:
        framebuffer.use()
        ctx.viewport = (0, 0, width, height)
        size = max(9, height // 20)
        x, y = size // 2 + 2, size // 2 + 2
        batch = pyglet.graphics.Batch()
        drawn = [  # kept: a shape or label that is collected leaves its batch
            pyglet.shapes.Rectangle(0, 0, width, size * 2 + 2, color=(0, 0, 0, 150),
                                    batch=batch),
            pyglet.text.Label(text, font_size=size, x=x, y=y, color=(245, 245, 245, 255),
                              batch=batch)]
        window = hud._window
        window.projection = pyglet.math.Mat4.orthogonal_projection(0, width, 0, height, -1, 1)
        batch.draw()
        del drawn
        ctx.finish()
        data = np.frombuffer(framebuffer.read(components=3, alignment=1), np.uint8)
        return data.reshape(height, width, 3)[::-1].copy()
    finally:
        (ctx.screen or ctx.detect_framebuffer(0)).use()  # never leave a released one bound
        framebuffer.release()
        texture.release()


def tile(images: list[np.ndarray], columns: int) -> np.ndarray:
    """The images in a grid, left to right, top to bottom, GAP pixels apart."""
    height, width = images[0].shape[:2]
    rows = -(-len(images) // columns)
    sheet = np.empty((rows * height + (rows + 1) * GAP, columns * width + (columns + 1) * GAP,
                      3), np.uint8)
    sheet[:] = GAP_COLOR
    for k, image in enumerate(images):
        row, column = divmod(k, columns)
        top, left = GAP + row * (height + GAP), GAP + column * (width + GAP)
        sheet[top:top + height, left:left + width] = image
    return sheet


def contact_sheet(settings: SheetSettings = SheetSettings(),
                  presets: list[tuple[int | None, Preset]] | None = None
                  ) -> tuple[np.ndarray, list[str]]:
    """(the sheet, the names in its order). Opens its own headless context."""
    presets = bundled_presets() if presets is None else presets
    ctx, hud, note = headless_text_context(settings.size)
    if hud is None:
        log.info(f"contact sheet: {note}: the names are not drawn")
    song = drum_loop(SHEET_BPM, settings.seconds + 1.0, AUDIO_RATE)
    images, names = [], []
    try:
        for slot, preset in presets:
            began = time.perf_counter()
            image = render_look(ctx, preset, settings, song)
            name = f"{slot}  {preset.name}" if slot is not None else preset.name
            if hud is not None:
                image = label(image, name, hud)
            images.append(image)
            names.append(preset.name)
            log.info(f"contact sheet: {name} ({time.perf_counter() - began:.1f} s)")
    finally:
        ctx.release()
    return tile(images, settings.columns), names


def write_contact_sheet(path: str | Path, settings: SheetSettings = SheetSettings()) -> None:
    sheet, names = contact_sheet(settings)
    write_png(path, sheet)
    log.info(f"contact sheet of {len(names)} looks ({sheet.shape[1]}x{sheet.shape[0]}) saved "
             f"to {Path(path).resolve()}")
