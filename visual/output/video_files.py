"""Video files around the encoder (visual/output/video.py): what an output needs before the first
frame renders (a codec this FFmpeg has, an even size, a path that can be written and replaces
nothing by mistake, the frame rate as containers store it), and a written file read back
(its streams, its frames) for tests and benchmarks. PyAV, which bundles FFmpeg. Any thread.
"""

from __future__ import annotations

import math
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_CODEC = "libx264"


# Tried in order when the default is missing from an FFmpeg build: any H.264 encoder FFmpeg
# knows by the generic name, then MPEG-4 part 2, which every build has.
FALLBACK_CODECS = ("libx264", "h264", "mpeg4")


CONTAINERS = {".mp4": "mp4", ".m4v": "mp4", ".mov": "mov", ".mkv": "matroska"}
PIXEL_FORMAT = "yuv420p"  # what every player decodes; it needs an even width and height


class VideoProblem(ValueError):
    """An output, codec or size that cannot work; said before the first frame renders."""


def codec_available(name: str) -> bool:
    import av  # noqa: PLC0415 - PyAV takes about a second to import: only when a file is coded
    try:
        av.codec.Codec(name, "w")
    except Exception:  # noqa: BLE001 - PyAV raises several kinds for an unknown codec
        return False
    return True


def choose_codec(requested: str | None = None) -> tuple[str, str | None]:
    """(codec name, a message to show or None). A codec asked for by name must exist; the
    default falls back along FALLBACK_CODECS, saying so."""
    import av  # noqa: PLC0415 - PyAV takes about a second to import: only when a file is coded
    if requested and requested != DEFAULT_CODEC:
        if not codec_available(requested):
            raise VideoProblem(f"video codec '{requested}' is not in this FFmpeg build (PyAV "
                               f"{av.__version__}); try --codec {DEFAULT_CODEC} or mpeg4")
        if av.codec.Codec(requested, "w").type != "video":
            raise VideoProblem(f"'{requested}' is not a video codec; try --codec "
                               f"{DEFAULT_CODEC}")
        return requested, None
    for name in FALLBACK_CODECS:
        if codec_available(name):
            if name == DEFAULT_CODEC:
                return name, None
            return name, (f"video codec {DEFAULT_CODEC} is not in this FFmpeg build; "
                          f"encoding with {av.codec.Codec(name, 'w').name} instead")
    raise VideoProblem("no H.264 or MPEG-4 encoder in this FFmpeg build; reinstall PyAV "
                       "(pip install --force-reinstall av)")


def check_size(size: tuple[int, int], codec: str) -> None:
    """4:2:0 video halves the colour resolution, so both sides must be even."""
    width, height = size
    if width % 2 or height % 2:
        even = f"{width - width % 2}x{height - height % 2}"
        raise VideoProblem(f"--size {width}x{height}: {codec} video ({PIXEL_FORMAT}) needs an "
                           f"even width and height; try --size {even}")


def check_output(path: str | os.PathLike, inputs: tuple[str | os.PathLike | None, ...] = (),
                 overwrite: bool = False) -> Path:
    """The output path, checked: a known container by its extension, a folder that exists and
    can be written to, not a folder itself, not one of the inputs, and no video already there
    unless `overwrite` (--overwrite): an hour's render is not replaced by a typo."""
    path = Path(path)
    if path.is_dir():
        raise VideoProblem(f"{path}: is a folder; give a file name, e.g. {path / 'render.mp4'}")
    if path.exists() and not path.is_file():
        raise VideoProblem(f"{path}: not a regular file (a device or a FIFO); choose another "
                           "--out")
    suffix = path.suffix.lower()
    if suffix not in CONTAINERS:
        raise VideoProblem(f"{path}: unknown video type '{suffix or '(none)'}'; end the name "
                           f"with {', '.join(CONTAINERS)} (.mp4: H.264 + AAC, plays anywhere)")
    folder = path.resolve().parent
    if not folder.is_dir():
        raise VideoProblem(f"{path}: the folder {folder} does not exist; create it or choose "
                           "another --out")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise VideoProblem(f"{path}: cannot write there (permission denied); choose another "
                           "--out")
    for other in inputs:
        if other and Path(other).resolve() == path.resolve():
            raise VideoProblem(f"{path}: is also an input; writing the video would destroy "
                               "it; choose another --out")
    if path.exists() and not overwrite:
        raise VideoProblem(f"{path}: already exists; --overwrite replaces it, or choose another "
                           "--out")
    return path


def fps_fraction(fps: float) -> Fraction:
    """Frames a second as the exact fraction containers store: the NTSC rates (23.976, 29.97,
    59.94, ...) as N * 1000/1001, others as the nearest fraction over at most 1001."""
    for base in (24, 30, 48, 60, 120):
        ntsc = Fraction(base * 1000, 1001)
        if abs(fps - float(ntsc)) < 0.005:
            return ntsc
    return Fraction(fps).limit_denominator(1001)


def video_info(path: str | os.PathLike) -> dict[str, Any]:
    """What a video file holds, for tests and the end-of-render report: frames, size, codec,
    rate and duration of the video, codec, rate and duration of the audio (None if absent)."""
    import av  # noqa: PLC0415 - PyAV takes about a second to import: only when a file is coded
    with av.open(str(path)) as container:
        info: dict[str, Any] = {"duration": (container.duration or 0) / av.time_base}
        video = container.streams.video[0] if container.streams.video else None
        audio = container.streams.audio[0] if container.streams.audio else None
        if video is not None:
            info["video"] = {
                "codec": video.codec_context.name, "width": video.width,
                "height": video.height, "frames": video.frames,
                "rate": video.average_rate,
                "duration": float(video.duration * video.time_base) if video.duration else None,
            }
        if audio is not None:
            info["audio"] = {
                "codec": audio.codec_context.name, "rate": audio.rate,
                "channels": audio.codec_context.channels,
                "duration": float(audio.duration * audio.time_base) if audio.duration else None,
            }
        return info


def decode_frames(path: str | os.PathLike) -> np.ndarray:
    """Every video frame as RGB (frames, h, w, 3) uint8: for tests and checks."""
    import av  # noqa: PLC0415 - PyAV takes about a second to import: only when a file is coded
    with av.open(str(path)) as container:
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    return np.stack(frames) if frames else np.zeros((0, 0, 0, 3), np.uint8)


def frames_for(duration: float, fps: float) -> int:
    """Frames that cover `duration` seconds: the video is never shorter than the song."""
    return max(math.ceil(duration * fps - 1e-6), 1)
