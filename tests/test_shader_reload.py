"""Shader hot reload: an edited shader is recompiled while the show runs; a broken one shows
its file and line and the last good programs keep drawing. Which folder: $SWARM_SHADERS, read
when an owner is made, unless it is given one (safe mode gives the bundled folder)."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.show import Show
from swarm_instrument.visual.gpu import programs, shaders
from swarm_instrument.visual.gpu.shaders import BUNDLED_SHADERS, ShaderError
from swarm_instrument.visual.render.renderer import Renderer
from swarm_instrument.visual.sim.swarm import Swarm

SIZE = (160, 90)


@pytest.fixture(autouse=True)
def strict_uniforms(monkeypatch):
    """A uniform name a program does not have, or a program without its block, is an error."""
    monkeypatch.setattr(programs, "STRICT", True)


@pytest.fixture
def shader_copy(tmp_path, monkeypatch):
    folder = tmp_path / "shaders"
    shutil.copytree(BUNDLED_SHADERS, folder)
    monkeypatch.setenv("SWARM_SHADERS", str(folder))
    return folder


def frame(show, framebuffer) -> np.ndarray:
    show.advance(1 / 60)
    show.draw(framebuffer)
    return np.frombuffer(framebuffer.read(components=3), np.uint8).reshape(SIZE[1], SIZE[0], 3)


def touch_later(path, seconds=5):
    stat = path.stat()
    os.utime(path, (stat.st_atime + seconds, stat.st_mtime + seconds))


def test_a_broken_shader_keeps_the_last_good_one_and_a_fixed_one_reloads(ctx, shader_copy,
                                                                        said):
    messages = said
    show = Show(ctx, Params({"count": 800, "agent_size": 2.0}), ShowOptions())
    framebuffer = show.renderer.offscreen_framebuffer(SIZE)
    try:
        assert (frame(show, framebuffer).max(axis=2) > 40).mean() > 0.01
        boids = shader_copy / "boids.glsl"
        lines = boids.read_text().splitlines()
        broken_line = len(lines) + 1
        boids.write_text("\n".join(lines) + "\nthis is not GLSL\n")
        touch_later(boids)
        show.poll_shaders(100.0)
        assert "ERROR" in show.status["shaders"]
        assert f"boids.glsl:{broken_line}" in show.status["shaders"], show.status["shaders"]
        assert any("boids.glsl" in m for m in messages)
        # The show goes on with the last good kernels: agents still move and are drawn.
        before = show.swarm.read_state()[0]
        image = frame(show, framebuffer)
        assert (image.max(axis=2) > 40).mean() > 0.01
        assert np.abs(show.swarm.read_state()[0] - before).max() > 0

        # A working edit: the display pass (the post chain's last) paints everything green.
        boids.write_text("\n".join(lines) + "\n")
        display = shader_copy / "post_display.frag"
        text = display.read_text()
        assert text.count("f_color = vec4(color, 1.0);") == 1
        display.write_text(text.replace("f_color = vec4(color, 1.0);",
                                        "f_color = vec4(0.0, 1.0, 0.0, 1.0);"))
        touch_later(boids, 10)
        touch_later(display, 10)
        show.poll_shaders(200.0)
        assert show.status["shaders"] == "reloaded" and show.shader_error is None
        image = frame(show, framebuffer)
        assert np.all(image == [0, 255, 0])
    finally:
        show.release()


def test_the_watch_looks_at_most_once_a_second(shader_copy):
    watch = shaders.ShaderWatch(interval=1.0)
    touch_later(shader_copy / "common.glsl")
    assert watch.changed(10.0)
    touch_later(shader_copy / "common.glsl", 20)
    assert not watch.changed(10.5)  # too soon: not even looked at
    assert watch.changed(11.0)
    assert not watch.changed(12.5)  # nothing new


def test_the_folder_is_read_when_asked_not_at_import(tmp_path, monkeypatch):
    monkeypatch.delenv("SWARM_SHADERS", raising=False)
    assert shaders.shader_dir() == BUNDLED_SHADERS
    monkeypatch.setenv("SWARM_SHADERS", str(tmp_path))
    assert shaders.shader_dir() == tmp_path
    assert shaders.ShaderWatch().shader_dir == tmp_path
    assert shaders.ShaderWatch(shader_dir=BUNDLED_SHADERS).shader_dir == BUNDLED_SHADERS


def test_an_owner_given_a_folder_ignores_swarm_shaders(ctx, shader_copy):
    """Safe mode: the bundled shaders, whatever $SWARM_SHADERS holds (here a broken copy)."""
    boids = shader_copy / "boids.glsl"
    boids.write_text(boids.read_text() + "\nthis is not GLSL\n")
    params = Params({"count": 300})
    with pytest.raises(ShaderError, match="boids.glsl"):
        Swarm(ctx, params)
    swarm = Swarm(ctx, params, shader_dir=BUNDLED_SHADERS)
    renderer = Renderer(ctx, shader_dir=BUNDLED_SHADERS)
    try:
        swarm.step(1 / 60)
        swarm.reload_shaders()  # from the folder it was given, still
        renderer.reload_shaders()
        assert swarm.shader_dir == renderer.shader_dir == BUNDLED_SHADERS
    finally:
        renderer.release()
        swarm.release()


def test_a_renderer_reloads_all_its_programs_or_none(ctx, shader_copy):
    """The renderer's own programs, its post chain's and its splat's are one reload: a broken
    splat leaves every running program in place (the post chain's had swapped before the
    renderer heard of the error), and a fragment shader's error names the fragment file."""
    renderer = Renderer(ctx)
    try:
        sets = renderer.program_sets
        assert len(sets) == 3  # its own, the post chain's, the splat's
        running = [dict(program_set) for program_set in sets]
        splat = shader_copy / "splat_resolve.comp"
        splat.write_text(splat.read_text() + "\nthis is not GLSL\n")
        with pytest.raises(ShaderError, match="splat_resolve.comp"):
            renderer.reload_shaders()
        assert [dict(program_set) for program_set in sets] == running
        splat.write_text(splat.read_text().replace("\nthis is not GLSL\n", "\n"))

        # The error inside the file (at its very end NVIDIA's compiler gives no line: "(0) :
        # error ... unexpected $end").
        fragment = shader_copy / "fade.frag"
        good = fragment.read_text()
        fragment.write_text(good.replace("void main", "not GLSL either;\nvoid main", 1))
        with pytest.raises(ShaderError, match=r"fade\.frag:\d+"):
            renderer.reload_shaders()
        assert [dict(program_set) for program_set in sets] == running
        fragment.write_text(good)

        renderer.reload_shaders()  # all good again: every set is new
        assert all(dict(program_set) != old for program_set, old in zip(sets, running))
    finally:
        renderer.release()
