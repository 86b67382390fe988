"""Sound files for `--audio-file` and `--render`: WAV through wavfile.py, anything else FFmpeg
reads (MP3, FLAC, OGG, M4A, a video's sound) through PyAV.

Main thread only, before the show or the render starts. A path is checked before anything
reads it, without hanging: `os.stat`, then `os.open(..., O_NONBLOCK)` and `fstat` on what was
opened. A FIFO opened for reading would wait for a writer forever, a device such as
/dev/zero never ends, a folder is no sound: each is refused with one line. So are files over
2 GiB and songs over 3 hours (a song's decoded float32 samples are held in memory), the
latter found from the header where it says, else while decoding. Every refusal is an
AudioFileError whose message names the file and what to do.

`check_audio_file` is the cheap check (the path, the container, the codec of the first
sound: no decoding of the whole song); `read_audio` reads it all.
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from audio.files.wavfile import AudioFileError, parse_fmt, SongTooLong, wav_from_bytes

MAX_FILE_BYTES = 2 * 1024 ** 3
MAX_SECONDS = 3 * 3600.0
SOUND_FILES = "a WAV, MP3, FLAC or OGG file"


@dataclass(frozen=True)
class AudioFileInfo:
    """What `check_audio_file` found, without decoding the song."""

    path: Path
    kind: str  # "wav", or the container FFmpeg found ("mp3", "ogg", "flac", ...)
    rate: int
    channels: int
    duration: float | None  # seconds; None when the file does not say


@contextmanager
def _opened(path: str | os.PathLike) -> Iterator[tuple[IO[bytes], Path]]:
    """The file, opened only once it is known to be a regular file of a sane size."""
    path = Path(path)
    try:
        _refuse_unless_regular(path, os.stat(path))  # before open: a device is not even opened
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise AudioFileError(f"{path}: no such file") from None
    except PermissionError:
        raise AudioFileError(f"{path}: cannot read it (permission denied); check its "
                             "permissions, or copy it somewhere you can read") from None
    except OSError as exc:
        raise AudioFileError(f"{path}: cannot open it ({exc.strerror or exc})") from None
    try:
        _refuse_unless_regular(path, os.fstat(fd))  # the path may have changed meanwhile
    except AudioFileError:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as file:
        yield file, path


def _refuse_unless_regular(path: Path, info: os.stat_result) -> None:
    mode = info.st_mode
    if stat.S_ISDIR(mode):
        raise AudioFileError(f"{path}: is a folder; give {SOUND_FILES}")
    if stat.S_ISFIFO(mode):
        raise AudioFileError(f"{path}: is a pipe (FIFO), not a file; save the sound to a "
                             f"file and give that ({SOUND_FILES})")
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        raise AudioFileError(f"{path}: is a device, not a sound file; give {SOUND_FILES}")
    if not stat.S_ISREG(mode):
        raise AudioFileError(f"{path}: is not a regular file; give {SOUND_FILES}")
    if info.st_size == 0:
        raise AudioFileError(f"{path}: is empty; give {SOUND_FILES}")
    if info.st_size > MAX_FILE_BYTES:
        raise AudioFileError(f"{path}: {info.st_size / 1024 ** 3:.1f} GiB is too large for a "
                             f"song (at most {MAX_FILE_BYTES // 1024 ** 3} GiB); trim it, or "
                             "give a compressed file (MP3, FLAC, OGG)")


def _is_wav(head: bytes) -> bool:
    return len(head) >= 12 and head[:4] in (b"RIFF", b"RIFX") and head[8:12] == b"WAVE"


class _Unreadable(AudioFileError):
    """Not a sound file FFmpeg reads."""


def _too_long(path: Path, seconds: float) -> SongTooLong:
    return SongTooLong(f"{path}: lasts {seconds / 3600:.1f} hours or more, longer than the "
                       f"{MAX_SECONDS / 3600:g} hours a song may last; trim it")


def read_audio(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """(samples float32 (frames, channels) in -1..1, rate) of a sound file. Raises
    AudioFileError, one line naming the file and what to do."""
    with _opened(path) as (file, name):
        if not _is_wav(file.read(12)):
            file.seek(0)
            try:
                return _decode_with_pyav(file, name)
            except _Unreadable:
                if name.suffix.lower() != ".wav":
                    raise
                raise _not_wav(name) from None
        try:
            file.seek(0)
            _probe_wav(file, name)  # its length, before gigabytes are read and converted
            file.seek(0)
            return wav_from_bytes(file.read(), name, MAX_SECONDS)
        except SongTooLong:
            raise
        except AudioFileError as exc:
            wav_error = exc  # a WAV this reader does not convert (A-law, ADPCM): FFmpeg may
        file.seek(0)
        try:
            return _decode_with_pyav(file, name)
        except AudioFileError:
            raise wav_error from None


def check_audio_file(path: str | os.PathLike) -> AudioFileInfo:
    """Is this a sound file that `read_audio` will read? The cheap checks only: the path (as
    `read_audio` checks it), the WAV header or FFmpeg's container and the first decoded
    sound; a song damaged further in is found by `read_audio`. Raises AudioFileError."""
    with _opened(path) as (file, name):
        if not _is_wav(file.read(12)):
            file.seek(0)
            try:
                return _probe_with_pyav(file, name)
            except _Unreadable:
                if name.suffix.lower() != ".wav":
                    raise
                raise _not_wav(name) from None
        try:
            file.seek(0)
            return _probe_wav(file, name)
        except SongTooLong:
            raise
        except AudioFileError as exc:
            wav_error = exc
        file.seek(0)
        try:
            return _probe_with_pyav(file, name)
        except AudioFileError:
            raise wav_error from None


def _not_wav(path: Path) -> AudioFileError:
    return AudioFileError(f"{path}: not a WAV file (nor any sound FFmpeg reads); give "
                          f"{SOUND_FILES}")


def _probe_wav(file: IO[bytes], path: Path) -> AudioFileInfo:
    """The 'fmt ' and 'data' chunks found by seeking from chunk to chunk (a WAV's cover art
    or notes may be megabytes): what `read_audio` will convert, without reading it."""
    if file.read(4) == b"RIFX":
        raise AudioFileError(f"{path}: big-endian WAV (RIFX) is not supported; give "
                             f"{SOUND_FILES}")
    size = os.fstat(file.fileno()).st_size
    at, fmt, data_bytes = 12, None, None
    while at + 8 <= size and (fmt is None or data_bytes is None):
        file.seek(at)
        header = file.read(8)
        if len(header) < 8:
            break
        chunk, length = header[:4], struct.unpack("<I", header[4:])[0]
        if chunk == b"fmt ":
            fmt = file.read(min(length, 4096))
        elif chunk == b"data":
            data_bytes = min(length, size - at - 8)  # a streamed file's size may overrun
        at += 8 + length + (length & 1)
    if fmt is None or data_bytes is None:
        raise AudioFileError(f"{path}: a broken WAV file (no 'fmt ' or 'data' chunk); give "
                             f"{SOUND_FILES}")
    _, channels, rate, _, block_align = parse_fmt(fmt, path)
    frames = data_bytes // block_align
    if frames == 0:
        raise AudioFileError(f"{path}: holds no samples")
    if frames / rate > MAX_SECONDS:
        raise _too_long(path, frames / rate)
    return AudioFileInfo(path, "wav", int(rate), int(channels), frames / rate)


def _import_av(path: Path) -> Any:
    try:
        import av
    except ImportError:
        raise AudioFileError(f"{path}: not a WAV file, and reading other sound files needs "
                             "PyAV (pip install av)") from None
    return av


def _unreadable(path: Path, exc: Exception) -> _Unreadable:
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return _Unreadable(f"{path}: not a sound file this can read ({reason}); give "
                          f"{SOUND_FILES}")


def _audio_stream(container: Any, path: Path) -> tuple[Any, int, int]:
    """The first audio stream, its rate and the channels read from it (mono or stereo)."""
    if not container.streams.audio:
        raise AudioFileError(f"{path}: holds no audio; give {SOUND_FILES}")
    stream = container.streams.audio[0]
    codec = stream.codec_context
    rate = int(codec.sample_rate or stream.rate or 0)
    if rate <= 0:
        raise AudioFileError(f"{path}: its sound has no sample rate; give {SOUND_FILES}")
    channels = getattr(codec, "channels", None) or codec.layout.nb_channels
    duration = container.duration / 1_000_000 if container.duration else None  # AV_TIME_BASE
    if duration is not None and duration > MAX_SECONDS:
        raise _too_long(path, duration)
    return stream, rate, min(max(int(channels or 1), 1), 2)


def _probe_with_pyav(file: IO[bytes], path: Path) -> AudioFileInfo:
    av = _import_av(path)
    try:
        with av.open(file) as container:
            stream, rate, channels = _audio_stream(container, path)
            next(iter(container.decode(stream)))  # the codec really decodes it
            duration = container.duration / 1_000_000 if container.duration else None
            return AudioFileInfo(path, container.format.name.split(",")[0], rate, channels,
                                 duration)
    except AudioFileError:
        raise
    except StopIteration:
        raise AudioFileError(f"{path}: holds no samples") from None
    except Exception as exc:  # noqa: BLE001 - FFmpeg's errors come as many types
        raise _unreadable(path, exc) from None


def _decode_with_pyav(file: IO[bytes], path: Path) -> tuple[np.ndarray, int]:
    av = _import_av(path)
    chunks: list[np.ndarray] = []
    try:
        with av.open(file) as container:
            stream, rate, channels = _audio_stream(container, path)
            resampler = av.AudioResampler(format="flt", layout="mono" if channels == 1 else
                                          "stereo", rate=rate)
            limit, total, damaged = int(MAX_SECONDS * rate), 0, None
            for packet in container.demux(stream):
                try:
                    frames = packet.decode()
                except av.error.InvalidDataError as exc:  # one damaged packet (two MP3s
                    damaged = exc  # joined, a cut download): skipped, as ffmpeg does
                    continue
                for frame in frames:
                    for out in resampler.resample(frame):
                        chunks.append(out.to_ndarray().reshape(-1, channels))
                        total += len(chunks[-1])
                if total > limit:  # the header did not say: stop before memory runs out
                    raise _too_long(path, total / rate)
            if not chunks and damaged is not None:
                raise damaged
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray().reshape(-1, channels))
    except AudioFileError:
        raise
    except Exception as exc:  # noqa: BLE001 - FFmpeg's errors come as many types
        raise _unreadable(path, exc) from None
    samples = np.concatenate(chunks) if chunks else np.zeros((0, 1), np.float32)
    if len(samples) == 0:
        raise AudioFileError(f"{path}: holds no samples")
    return np.ascontiguousarray(samples, np.float32), rate
