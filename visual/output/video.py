"""The video encoder: RGB frames in, a video file out (H.264 + AAC in MP4 by default), via PyAV.

PyAV bundles FFmpeg (libx264, the native AAC encoder, the MP4 muxer), so nothing outside
Python is needed. Encoding is slow next to a GPU frame, so it never runs in the frame loop:

    main thread      submit(pixels)  -> a bounded queue (back-pressure for an offline
                                        render, or drop-and-count for a live recording)
    encoder thread   flip + RGB -> YUV 4:2:0 (BT.709) -> encode -> mux, and after each video
                     frame the song's audio up to that frame's end, so the streams interleave
                     and an interrupted render still has its sound up to the last frame
    main thread      close(): waits for the thread, flushes both encoders, closes the file

Only one thread touches the container at a time: the encoder thread while it runs, then the
main thread in `close()` after joining it. `check_*` functions validate before anything renders.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from swarm_instrument.visual.output.video_files import (
    CONTAINERS,
    DEFAULT_CODEC,
    PIXEL_FORMAT,
    VideoProblem,
    check_size,
    fps_fraction,
)

AUDIO_CODEC = "aac"
AAC_RATES = (96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000)
# The default encoding: x264's veryfast at CRF 16 holds the picture as medium at CRF 18 did
# (PSNR against the frames drawn, 1080p60 of aurora on the H200, 2026-12-01: worst frame 32.81
# against 32.86 dB, mean 35.41 against 35.46) at 2.2 times the speed (102 against 46 frames a
# second), the file 27 % larger (benchmarks/bench_render.py).
DEFAULT_PRESET = "veryfast"
DEFAULT_CRF = 16.0
X264_PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow",
                "slower", "veryslow")


@dataclass(frozen=True)
class Planes420:
    """One frame of 4:2:0 video as the GPU makes it (visual/output/yuv.py): Y (width x height), U
    and V (width/2 x height/2), top row first, BT.709 limited range, one after the other."""

    size: tuple[int, int]
    data: bytes
AUDIO_BITRATE = 192_000
_STOP = object()


class EncodeFailed(RuntimeError):
    """Encoding or writing failed part way (a full disk, a codec error); names the file."""


def _audio_for_aac(samples: np.ndarray, rate: int) -> tuple[np.ndarray, int, str]:
    """(planar float32 (channels, frames), rate, layout) the AAC encoder takes: mono stays
    mono, two or more channels become stereo (the first two), an odd rate becomes 48 kHz."""
    samples = np.asarray(samples, np.float32)
    if samples.ndim == 1:
        samples = samples[:, None]
    samples = samples[:, :2]
    if rate not in AAC_RATES:
        new_rate = 48000
        frames = max(round(len(samples) * new_rate / rate), 1)
        src = np.arange(len(samples)) / rate
        dst = np.arange(frames) / new_rate
        samples = np.stack([np.interp(dst, src, samples[:, c]) for c in
                            range(samples.shape[1])], axis=1).astype(np.float32)
        rate = new_rate
    layout = "mono" if samples.shape[1] == 1 else "stereo"
    return np.ascontiguousarray(np.clip(samples, -1.0, 1.0).T), rate, layout


@dataclass
class EncodeStats:
    frames: int = 0  # video frames written
    dropped: int = 0  # frames refused because the queue was full (non-blocking mode)
    audio_seconds: float = 0.0


class VideoEncoder:
    """Encodes frames on its own thread into `path`; see the module comment for the threads.

    `blocking=True` (offline render): `submit` waits while the queue is full, so the GPU never
    runs far ahead of the encoder. `blocking=False` (live recording): a full queue drops the
    frame, counts it in `stats.dropped` and returns False at once; pass each frame's `index`
    (its time x fps) so a dropped frame shows as the previous one held, not as lost time.
    `audio` (samples (frames, channels) float, rate) is muxed as AAC along the frames.
    """

    def __init__(self, path: str | os.PathLike, size: tuple[int, int], fps: float, *,
                 codec: str = DEFAULT_CODEC, crf: float = DEFAULT_CRF,
                 preset: str = DEFAULT_PRESET,
                 audio: tuple[np.ndarray, int] | None = None, queue_frames: int = 6,
                 blocking: bool = True, threads: int | None = None) -> None:
        import av  # noqa: PLC0415 - PyAV takes about a second to import: only when a file is coded
        self.path = Path(path)
        self.size = (int(size[0]), int(size[1]))
        self.rate = fps_fraction(fps)
        self.codec = codec
        self.blocking = blocking
        self.stats = EncodeStats()
        self._error: str | None = None
        self._closed = False
        self._next_index = 0
        check_size(self.size, codec)
        try:
            self._container = av.open(str(self.path), mode="w",
                                      format=CONTAINERS.get(self.path.suffix.lower()))
        except (OSError, ValueError) as exc:
            raise VideoProblem(f"{self.path}: cannot create the video ({exc})") from None
        try:
            self._video = self._add_video(codec, crf, preset, threads)
            self._audio = self._add_audio(audio) if audio is not None else None
        except Exception:
            self._container.close()
            self.path.unlink(missing_ok=True)
            raise
        self._queue: queue.Queue = queue.Queue(maxsize=max(int(queue_frames), 1))
        self._thread = threading.Thread(target=self._encode_loop, name="video-encoder",
                                        daemon=True)
        self._thread.start()

    # -- set-up (main thread, before the encoder thread starts) --------------------------------
    def _add_video(self, codec: str, crf: float, preset: str, threads: int | None) -> Any:
        stream = self._container.add_stream(codec, rate=self.rate)
        stream.width, stream.height = self.size
        stream.pix_fmt = PIXEL_FORMAT
        context = stream.codec_context
        # Tag what the frames are (BT.709, limited range: HD video) so players show the
        # colours the renderer drew.
        context.colorspace = context.color_primaries = context.color_trc = 1  # BT.709
        context.color_range = 1  # MPEG (limited) range, what swscale writes for YUV
        # A fixed thread count: x264's output depends on it, so renders repeat bit for bit.
        context.thread_count = threads or min(os.cpu_count() or 1, 16)
        if stream.codec_context.name == "libx264":
            if preset not in X264_PRESETS:
                raise VideoProblem(f"x264 preset '{preset}' is not one of "
                                   f"{', '.join(X264_PRESETS)}")
            stream.options = {"crf": f"{crf:g}", "preset": preset}
        else:
            # No CRF outside x264: a bit rate that keeps a 1080p swarm clean at 60 fps.
            stream.bit_rate = int(max(self.size[0] * self.size[1] * float(self.rate) * 0.15,
                                      200_000))
        try:
            context.open()
        except Exception as exc:  # noqa: BLE001 - FFmpeg errors come as several types
            raise VideoProblem(f"{codec} could not start for {self.size[0]}x{self.size[1]} at "
                               f"{float(self.rate):g} fps ({exc}); try another --size, --fps "
                               "or --codec") from None
        return stream

    def _add_audio(self, audio: tuple[np.ndarray, int]) -> Any:
        samples, rate, layout = _audio_for_aac(*audio)
        stream = self._container.add_stream(AUDIO_CODEC, rate=rate, layout=layout)
        stream.bit_rate = AUDIO_BITRATE
        self._samples = samples
        self._audio_rate = rate
        self._audio_layout = layout
        self._audio_done = 0  # samples encoded so far
        return stream

    # -- main thread --------------------------------------------------------------------------
    @property
    def error(self) -> str | None:
        return self._error

    def submit(self, pixels: bytes | np.ndarray, index: int | None = None) -> bool:
        """Queue one frame: RGB rows bottom first as `framebuffer.read(components=3,
        alignment=1)` gives them (bytes), an (h, w, 3) uint8 array top row first, or the
        planes of 4:2:0 video made on the GPU (visual/output/yuv.py's Planes420: encoded as they
        are). False when dropped (non-blocking and full). Raises EncodeFailed once the encoder
        has failed.
        """
        if self._error:
            raise EncodeFailed(self._error)
        if self._closed:
            raise EncodeFailed(f"{self.path}: the encoder is closed")
        index = self._next_index if index is None else int(index)
        if index < self._next_index:
            return False  # a frame must come after the last one queued
        item = (index, pixels)
        if self.blocking:
            self._queue.put(item)
        else:
            try:
                self._queue.put_nowait(item)
            except queue.Full:
                self.stats.dropped += 1
                return False
        self._next_index = index + 1
        return True

    def close(self) -> EncodeStats:
        """Encode what is queued, flush, write the audio up to the last frame's end and close
        the file, which is then complete and playable. Safe to call twice."""
        if self._closed:
            return self.stats
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join()
        try:
            self._mux(self._video.encode(None))
            if self._audio is not None:
                self._write_audio(self.stats.frames / self.rate, final=True)
        except Exception as exc:  # noqa: BLE001
            self._error = self._error or self._describe(exc)
        try:
            self._container.close()
        except Exception as exc:  # noqa: BLE001
            self._error = self._error or self._describe(exc)
        if self._error:
            raise EncodeFailed(self._error)
        return self.stats

    def abandon(self) -> None:
        """Stop without finishing (set-up failed before any frame): close and delete the
        file."""
        if not self._closed:
            self._closed = True
            self._queue.put(_STOP)
            self._thread.join()
            with contextlib.suppress(Exception):  # the file is deleted next anyway
                self._container.close()
        self.path.unlink(missing_ok=True)

    # -- encoder thread -------------------------------------------------------------------------
    def _encode_loop(self) -> None:
        import av  # noqa: PLC0415 - PyAV takes about a second to import: only when a file is coded
        width, height = self.size
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if self._error:
                continue  # keep draining so a blocked submit() wakes up and sees the error
            index, pixels = item
            try:
                if isinstance(pixels, Planes420):
                    if tuple(pixels.size) != (width, height):
                        raise ValueError(f"planes of {pixels.size[0]}x{pixels.size[1]} for a "
                                         f"{width}x{height} video")
                    planes = np.frombuffer(pixels.data, np.uint8).reshape(height * 3 // 2,
                                                                           width)
                    self._encode(av.VideoFrame.from_ndarray(planes, format=PIXEL_FORMAT),
                                 index)
                    continue
                if isinstance(pixels, np.ndarray):
                    image = np.ascontiguousarray(pixels, np.uint8)
                else:
                    image = np.frombuffer(pixels, np.uint8).reshape(height, width, 3)
                    image = np.ascontiguousarray(image[::-1])  # GL's rows are bottom first
                if image.shape != (height, width, 3):
                    raise ValueError(f"a frame of {image.shape[1]}x{image.shape[0]} for a "
                                     f"{width}x{height} video")
                frame = av.VideoFrame.from_ndarray(image, format="rgb24")
                self._encode(frame.reformat(format=PIXEL_FORMAT, dst_colorspace="ITU709"),
                             index)
            except Exception as exc:  # noqa: BLE001 - reported to the main thread
                self._error = self._describe(exc)

    def _encode(self, frame: Any, index: int) -> None:
        frame.pts = index
        self._mux(self._video.encode(frame))
        self.stats.frames += 1
        if self._audio is not None:
            self._write_audio((index + 1) / self.rate)

    def _write_audio(self, until: Fraction, final: bool = False) -> None:
        """Encode the song's samples up to time `until` (seconds) not yet encoded."""
        import av  # noqa: PLC0415 - PyAV takes about a second to import: only when a file is coded
        end = min(int(until * self._audio_rate), self._samples.shape[1])
        start = self._audio_done
        if end > start:
            frame = av.AudioFrame.from_ndarray(self._samples[:, start:end], format="fltp",
                                               layout=self._audio_layout)
            frame.sample_rate = self._audio_rate
            frame.pts = start
            self._mux(self._audio.encode(frame))
            self._audio_done = end
            self.stats.audio_seconds = end / self._audio_rate
        if final:
            self._mux(self._audio.encode(None))

    def _mux(self, packets: Any) -> None:
        self._container.mux(packets)

    def _describe(self, exc: Exception) -> str:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return f"{self.path}: encoding failed ({reason})"


