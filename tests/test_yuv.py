"""A render's frames to 4:2:0 video on the GPU (visual/output/yuv.py, shaders/yuv420.comp) against
numpy's BT.709 limited-range conversion, the ring's order and lag, and a render through it
decoded beside the same render through swscale (the encoder's RGB path)."""

from __future__ import annotations

import numpy as np
import pytest

from swarm_instrument.visual.output.video import Planes420
from swarm_instrument.visual.output.yuv import YuvReadback, supported


def reference(rgb: np.ndarray) -> np.ndarray:
    """(h, w, 3) uint8, top row first -> the Y, U, V planes one after the other."""
    x = rgb.astype(np.float64) / 255.0
    luma = x @ [0.2126, 0.7152, 0.0722]
    y = np.floor(16.0 + 219.0 * luma + 0.5)
    h, w = luma.shape
    mean = x.reshape(h // 2, 2, w // 2, 2, 3).mean(axis=(1, 3))
    mean_luma = mean @ [0.2126, 0.7152, 0.0722]
    u = np.floor(128.0 + 224.0 * (mean[..., 2] - mean_luma) / 1.8556 + 0.5)
    v = np.floor(128.0 + 224.0 * (mean[..., 0] - mean_luma) / 1.5748 + 0.5)
    return np.concatenate([c.clip(0, 255).astype(np.uint8).ravel() for c in (y, u, v)])


def frame_texture(ctx, rgb: np.ndarray):
    """A texture holding `rgb` (top row first) as GL keeps a frame: bottom row first."""
    h, w = rgb.shape[:2]
    rgba = np.concatenate([rgb, np.full((h, w, 1), 255, np.uint8)], axis=2)
    return ctx.texture((w, h), 4, np.ascontiguousarray(rgba[::-1]).tobytes())


def test_the_gpu_planes_match_numpys_bt709_within_one_step(ctx):
    rng = np.random.default_rng(5)
    size = (48, 20)
    ring = YuvReadback(ctx, size, depth=2)
    textures = []
    try:
        frames = [rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8) for _ in range(4)]
        frames[1][:] = (255, 0, 0)  # saturated red: chroma at its limits
        frames[2][:] = 0  # black: 16, 128, 128
        got = []
        for tag, rgb in enumerate(frames):
            textures.append(frame_texture(ctx, rgb))
            ready = ring.capture(textures[-1], tag)
            assert [t for t, _ in ready] == ([tag - 2] if tag >= 2 else [])  # two frames late
            got += ready
        got += ring.flush()
        assert [t for t, _ in got] == [0, 1, 2, 3] and ring.flush() == []
        for (tag, planes), rgb in zip(got, frames):
            assert isinstance(planes, Planes420) and planes.size == size
            data = np.frombuffer(planes.data, np.uint8).astype(int)
            assert len(data) == size[0] * size[1] * 3 // 2
            assert np.abs(data - reference(rgb).astype(int)).max() <= 1, tag
        black = np.frombuffer(got[2][1].data, np.uint8)
        assert set(black[:960]) == {16} and set(black[960:]) == {128}
    finally:
        ring.release()
        for texture in textures:
            texture.release()


def test_sizes_the_gpu_cannot_take_are_refused_by_name():
    assert supported((1920, 1080)) and supported((320, 240))
    assert not supported((854, 480)) and not supported((320, 241))
    with pytest.raises(ValueError, match="854x480"):
        YuvReadback(None, (854, 480))


def decoded(path) -> list[np.ndarray]:
    import av

    with av.open(str(path)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    error = np.mean((a.astype(float) - b.astype(float)) ** 2)
    return float(10 * np.log10(255.0 ** 2 / max(error, 1e-12)))


def test_a_render_through_the_gpu_planes_is_as_good_as_through_swscale(tmp_path, monkeypatch):
    """The same render twice, its frames converted on the GPU and by swscale (the encoder's
    RGB path, what renders did before), each decoded and held against the frames the renderer
    drew: the GPU's video is as close to them (PSNR within 0.5 dB; about 30 dB both at this
    size, 4:2:0 halving the colour of agents a few pixels wide)."""
    import io

    from swarm_instrument import instrument
    from swarm_instrument.audio.files.wav_writer import write_wav
    from swarm_instrument.audio.synth import drum_loop
    from swarm_instrument.show.cli.options import options_from_args
    from swarm_instrument.show.offline import offline_render
    from swarm_instrument.show.offline.offline_render import render
    from swarm_instrument.show.offline.progress import Progress
    from swarm_instrument.show.offline.render_job import plan_render

    song = tmp_path / "song.wav"
    write_wav(song, drum_loop(120.0, 1.0, 48000)[:, None], 48000)
    size = (160, 96)
    scores = {}
    for name, gpu in (("gpu", True), ("cpu", False)):
        monkeypatch.setattr(offline_render, "supported", lambda size, gpu=gpu: gpu)
        out = tmp_path / f"{name}.mp4"
        args = instrument.build_parser().parse_args([
            "--render", str(song), "--out", str(out), "--size", f"{size[0]}x{size[1]}",
            "--fps", "30", "--frames", "20", "--count", "512", "--seed", "3",
            "--encoder-preset", "veryfast"])
        params, routes, *_ = instrument.build_params(args)
        job, routes = plan_render(args, params, routes)
        drawn = []

        def observe(show, index, t):  # the frame as drawn, read back (a test may wait)
            pixels = show.renderer.offscreen_framebuffer(size).read(components=3, alignment=1)
            drawn.append(np.frombuffer(pixels, np.uint8).reshape(size[1], size[0], 3)[::-1])

        render(job, params, options_from_args(args, params, render=True), routes,
               observe=observe, progress=Progress(job.frames, io.StringIO()))
        frames = decoded(out)
        assert len(frames) == len(drawn) == 20
        scores[name] = min(psnr(frame, source) for frame, source in zip(frames, drawn))
    assert scores["gpu"] > 28.0 and scores["gpu"] >= scores["cpu"] - 0.5, scores
