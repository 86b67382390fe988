"""Every bundled preset plays: recalled onto one live show (as a number key does), a few
headless frames simulated and one rendered; a morph between two of them renders on the way.

Small on purpose (2,000 agents, 160x90): llvmpipe renders in software.
"""

from __future__ import annotations

import numpy as np
import pytest

from swarm_instrument.control.looks.preset_bank import BUNDLED_DIR
from swarm_instrument.control.looks.presets import apply_preset, load_preset
from swarm_instrument.control.parameters.morph import Morph
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.visual.render.frame_values import BACKGROUND

BUNDLED = sorted(BUNDLED_DIR.glob("[1-9]-*.json"))
COUNT = 2000
SIZE = (160, 90)
FRAMES = 4


@pytest.fixture(scope="module")
def show(gl_context):
    """One show for the module, as on stage: presets are recalled onto it in turn."""
    from swarm_instrument.show.cli.options import ShowOptions
    from swarm_instrument.show.show import Show

    show = Show(gl_context, Params({"count": COUNT}), ShowOptions(fixed_dt=1 / 30))
    yield show
    show.release()


def play(show, frames: int, values_at=None) -> np.ndarray:
    """Run `frames` frames (update, step, draw) and return the last one as RGB."""
    framebuffer = show.renderer.offscreen_framebuffer(SIZE)
    for frame in range(frames):
        if values_at is not None:
            show.params.update(values_at(frame))
        show.update(show.sim_time)
        show.advance(1 / 30)
        show.draw(framebuffer)
    pixels = framebuffer.read(components=3, alignment=1)
    return np.frombuffer(pixels, np.uint8).reshape(SIZE[1], SIZE[0], 3)


def drawn_fraction(image: np.ndarray) -> float:
    """Share of pixels clearly not the background."""
    return float((np.abs(image.astype(float) - np.array(BACKGROUND) * 255).max(axis=2) > 24)
                 .mean())


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled_preset_renders(show, path):
    preset = load_preset(path)
    show.looks.routes = apply_preset(preset, show.params, keep=("count",))
    show.respawn()
    image = play(show, FRAMES)
    assert show.swarm.count == COUNT
    assert drawn_fraction(image) > 0.005, f"{path.name}: nothing drawn"
    assert show.swarm.read_guarded() == 0
    assert show.ctx.error == "GL_NO_ERROR"


def test_morph_between_presets_renders_each_frame(show):
    """From the flat wrapping flock to a 3D one over four frames, then the exact target."""
    flat = next(p for p in map(load_preset, BUNDLED) if p.values["dimensions"] == 2)
    volume = next(p for p in map(load_preset, BUNDLED) if p.values["dimensions"] == 3)
    show.looks.routes = apply_preset(flat, show.params, keep=("count",))
    morph = Morph(show.params.as_dict(), volume, seconds=4 / 30, keep=("count",))
    image = play(show, FRAMES + 1, values_at=lambda frame: morph.values_at(frame / 30))
    assert show.params["dimensions"] == 3 and show.params["boundary"] == volume.values["boundary"]
    assert {k: v for k, v in show.params.as_dict().items() if k != "count"} == {
        k: v for k, v in volume.values.items() if k != "count"}
    assert drawn_fraction(image) > 0.005
    assert show.ctx.error == "GL_NO_ERROR"
