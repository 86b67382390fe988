"""The GL 4.1 backend on a context that behaves like macOS's: Mesa told to stop at OpenGL 4.1 and
GLSL 4.10 and to drop compute shaders, storage buffers and image load/store (all three
overrides: the first two alone still offer compute as an extension). Under them the instrument
must see that compute is not there (from the version and extensions, before compiling any
compute shader), run the 4.1 backend headless, in the window under Xvfb and in an offline
render, and compile every shader of that path as GLSL 4.10. Each case is a process of its own
(Mesa reads the overrides when a process makes its first context)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import wave

import av
import numpy as np
import pytest

from swarm_instrument.visual.gpu.context import pick_backend

from conftest import ROOT
from conftest import run_instrument as instrument
from pictures import read_png

MAC_GL = {"MESA_GL_VERSION_OVERRIDE": "4.1", "MESA_GLSL_VERSION_OVERRIDE": "410",
          "MESA_EXTENSION_OVERRIDE": "-GL_ARB_compute_shader "
                                     "-GL_ARB_shader_storage_buffer_object "
                                     "-GL_ARB_shader_image_load_store"}
NO_COMPUTE = ("no compute shaders: OpenGL 4.1 without GL_ARB_compute_shader, "
              "GL_ARB_shader_storage_buffer_object, GL_ARB_shader_image_load_store")


# Mesa's overrides make the 4.1 context: Linux's GL (a laptop's own driver ignores them).
MESA = pytest.mark.linux


def mac_env(**extra: str) -> dict[str, str]:
    return {**os.environ, **MAC_GL, **extra}


def swarm_pixels(image: np.ndarray) -> float:
    """The share of pixels brighter than the near-black background."""
    return float((image.max(axis=2) > 40).mean())


class FakeContext:
    def __init__(self, version_code: int, extensions: set[str]) -> None:
        self.version_code = version_code
        self.extensions = extensions


def test_the_backend_is_picked_from_the_version_and_extensions():
    """4.3 or later: compute. 4.1 with the extensions still cannot compile GLSL 4.30 (Mesa's
    4.1 override without the extension override offers them). Asking for 4.3 where it is not
    there, or running below 4.1, is a line for the user."""
    compute = {"GL_ARB_compute_shader", "GL_ARB_shader_storage_buffer_object",
               "GL_ARB_shader_image_load_store"}
    assert pick_backend(FakeContext(450, set()))[0] == "4.3"
    assert pick_backend(FakeContext(450, set()), "4.1") == ("4.1", "asked (--gl 4.1)")
    backend, why = pick_backend(FakeContext(410, compute))
    assert backend == "4.1" and "GLSL 4.30 not offered" in why
    assert pick_backend(FakeContext(410, set())) == ("4.1", NO_COMPUTE)
    with pytest.raises(ValueError, match=r"^--gl 4\.3: no compute shaders here .* use --gl 4\.1"):
        pick_backend(FakeContext(410, set()), "4.3")
    with pytest.raises(ValueError, match="needs 4.1 core at least"):
        pick_backend(FakeContext(330, set()))


PROBE = r"""
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests"]
import moderngl
import numpy as np
import reference
from test_swarm import assert_matches, crowded_state
from swarm_instrument.visual.gpu import programs
from swarm_instrument.visual.sim import swarm41
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.visual.render.camera import OrbitCamera
from swarm_instrument.visual.gpu.context import (compute_missing, create_headless_context,
                                                 pick_backend)
from drawing import Drawn41, render_offscreen
from swarm_instrument.visual.sim.swarm41 import Swarm41

programs.STRICT = True
versions = []
program = moderngl.Context.program
def recording(self, vertex_shader=None, fragment_shader=None, geometry_shader=None, **kw):
    for text in (vertex_shader, fragment_shader, geometry_shader):
        if text:
            versions.append(text.splitlines()[0])
    return program(self, vertex_shader=vertex_shader, fragment_shader=fragment_shader,
                   geometry_shader=geometry_shader, **kw)
moderngl.Context.program = recording
out = {}
try:
    create_headless_context("4.3")
except RuntimeError as exc:
    out["refused_4.3"] = str(exc).splitlines()[0]
ctx = create_headless_context("4.1")
out["version"] = ctx.version_code
out["missing"] = compute_missing(ctx)
out["backend"] = pick_backend(ctx)[0]
swarm41.BRUTE_BELOW = 0
params = Params({"count": 2000, "post": "on", "bloom": 0.8, "feedback": 0.6})
position, velocity = crowded_state(2000, params)
rx, rv, margin = reference.step(position, velocity, params, 1 / 60, target=(4.0, 2.0, -1.0))
for path in ("grid", "brute"):
    swarm = Swarm41(ctx, params, neighbors=path, position=position, velocity=velocity)
    swarm.step(1 / 60, target=(4.0, 2.0, -1.0))
    assert_matches(swarm.read_state(), (rx, rv), margin, path)
    swarm.resize(2500)
    swarm.reload_shaders()
    swarm.step(1 / 60)
    renderer = Drawn41(ctx, params)
    renderer.reload_shaders()
    for shape in ("cone", "streak", "glow"):
        image = render_offscreen(ctx, renderer, swarm, OrbitCamera(), (160, 90),
                                 values={"shape": shape})
    out[path] = {"visible": renderer.read_counts_now().visible,
                 "lit": float((image.max(axis=2) > 40).mean())}
    renderer.release()
    swarm.release()
out["error_after_4.1_path"] = ctx.error
out["versions"] = sorted(set(versions))
out["programs"] = len(versions)
try:  # what the instrument never does: the driver refuses it and leaves a GL error behind
    ctx.compute_shader("#version 430\nlayout(local_size_x = 1) in;\nvoid main() {}\n")
    out["compute"] = "compiled"
except Exception as exc:
    out["compute"] = "refused"
out["error_after_compute"] = ctx.error
print(json.dumps(out))
"""


@MESA
def test_compute_is_refused_and_every_4_1_shader_compiles_as_glsl_410():
    result = subprocess.run([sys.executable, "-c", PROBE, str(ROOT)], capture_output=True,
                            text=True, timeout=180, env=mac_env())
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.splitlines()[-1])
    assert out["version"] == 410 and out["backend"] == "4.1"
    assert out["missing"] == NO_COMPUTE.removeprefix("no compute shaders: ")
    assert "OpenGL 4.3" in out["refused_4.3"]
    # Every program of the path (the simulation's, the cull's, the draw's, the post chain's,
    # a resize's, reloaded), compiled as GLSL 4.10 with no GL error left behind...
    assert out["versions"] == ["#version 410 core"] and out["programs"] >= 2 * 2 * 30
    assert out["error_after_4.1_path"] == "GL_NO_ERROR"
    for path in ("grid", "brute"):
        assert 2000 < out[path]["visible"] <= 2500 and out[path]["lit"] > 0.01, out[path]
    # ...where a compute shader is refused, and its failure leaves a GL error.
    assert out["compute"] == "refused" and out["error_after_compute"] != "GL_NO_ERROR"


@MESA
def test_the_instrument_runs_headless_on_4_1(tmp_path):
    shot, telemetry = tmp_path / "shot.png", tmp_path / "telemetry.jsonl"
    result = instrument("--headless", "--frames", "12", "--count", "3000", "--size", "320x180",
                        "--no-midi", "--screenshot", str(shot), "--telemetry", str(telemetry),
                        env=mac_env())
    assert result.returncode == 0, result.stderr
    assert f"GL 4.1 backend: {NO_COMPUTE}" in result.stdout
    assert "GL 4.1 backend" in result.stdout.split("headless: ")[1].splitlines()[0]
    assert swarm_pixels(read_png(shot)) > 0.01
    record = json.loads(telemetry.read_text().splitlines()[-1])
    assert record["backend"]["gl"] == "4.1" and record["backend"]["why"] == NO_COMPUTE
    assert record["backend"]["context"].startswith("4.1 (Core Profile)")
    assert record["visible"] == 3000


@MESA
def test_asking_for_4_3_where_it_cannot_be_had_is_one_line(tmp_path):
    result = instrument("--headless", "--frames", "2", "--no-midi", "--gl", "4.3",
                        env=mac_env())
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--gl 4.3: no compute shaders here" in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@MESA
def test_the_window_plays_on_4_1_under_xvfb(display, tmp_path):
    shot, telemetry = tmp_path / "window.png", tmp_path / "telemetry.jsonl"
    result = instrument("--windowed", "--size", "320x180", "--frames", "20", "--count", "3000",
                        "--no-midi", "--screenshot", str(shot), "--telemetry", str(telemetry),
                        env=mac_env(DISPLAY=display))
    assert result.returncode == 0, result.stderr
    assert "window: 3000 agents" in result.stdout and f"GL 4.1 backend: {NO_COMPUTE}" in (
        result.stdout)
    image = read_png(shot)
    assert image.shape == (180, 320, 3) and swarm_pixels(image) > 0.01
    record = json.loads(telemetry.read_text().splitlines()[-1])
    assert record["backend"]["gl"] == "4.1"


@MESA
def test_an_offline_render_on_4_1(tmp_path):
    song = tmp_path / "song.wav"
    with wave.open(str(song), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(48000)
        t = np.arange(24000) / 48000
        out.writeframes((np.sin(2 * np.pi * 220 * t) * 8000).astype("<i2").tobytes())
    video = tmp_path / "song.mp4"
    result = instrument("--render", str(song), "--out", str(video), "--size", "160x96",
                        "--fps", "24", "--count", "2000", env=mac_env())
    assert result.returncode == 0, result.stderr
    assert "GL 4.1 backend" in result.stdout
    with av.open(str(video)) as container:
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    assert len(frames) == 12
    assert swarm_pixels(frames[-1]) > 0.01


def test_the_docs_say_how_to_make_such_a_context():
    text = (ROOT / "docs" / "gl41-macos.md").read_text()
    options = (ROOT / "docs" / "options.md").read_text()
    assert "# GL 4.1 (macOS)" in text and "`--gl auto\\|4.3\\|4.1`" in options
    flat = " ".join(text.split())
    assert all(f"{name}={value}" in flat or f'{name}="{value}"' in flat
               for name, value in MAC_GL.items())


def test_a_headless_context_asks_for_4_3_before_4_1(monkeypatch):
    """NVIDIA's EGL gives exactly the version asked for: asking 4.1 there made an H200 run the
    4.1 backend. 4.3 is asked first; 4.1 only where 4.3 cannot be had. On Linux through EGL;
    on macOS and Windows (no EGL) through moderngl's default standalone backend."""
    import moderngl

    from swarm_instrument.visual.gpu.context import create_headless_context

    asked = []

    def driver(*, standalone, require, **backend):
        asked.append((require, backend.get("backend")))
        if require > 410:
            raise Exception("requested version not supported")  # as a 4.1 driver answers
        return f"a {require} context"

    monkeypatch.setattr(moderngl, "create_context", driver)
    assert create_headless_context("4.1", platform="linux") == "a 410 context"
    assert asked == [(430, "egl"), (410, "egl")]
    asked.clear()
    with pytest.raises(RuntimeError, match="OpenGL 4.3 core context through EGL"):
        create_headless_context("4.3", platform="linux")
    assert asked == [(430, "egl")]
    for platform in ("darwin", "win32"):  # CGL, WGL: the system's own, asked in the same order
        asked.clear()
        assert create_headless_context("4.1", platform=platform) == "a 410 context"
        assert asked == [(430, None), (410, None)]
        with pytest.raises(RuntimeError, match="OpenGL 4.3 core context .*GPU driver"):
            create_headless_context("4.3", platform=platform)
