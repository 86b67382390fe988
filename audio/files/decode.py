"""Sound files for `--audio-file` and `--render`: WAV (PCM 8-32 bit, float, extensible, A-law,
RF64...), MP3, FLAC, OGG, M4A, a video's sound: whatever FFmpeg reads, through PyAV.

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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

MAX_FILE_BYTES = 2 * 1024 ** 3
MAX_SECONDS = 3 * 3600.0
SOUND_FILES = "a WAV, MP3, FLAC or OGG file"
# never a command that writes beside the input: it may sit in a system or read-only folder
_EXPORT_AGAIN = "export it again as PCM or float WAV, or give the MP3, FLAC or OGG file itself"


class AudioFileError(Exception):
    """A sound file that cannot be played; the message names the file and what to try."""


class SongTooLong(AudioFileError):
    """A sound file longer than a song may last."""


@dataclass(frozen=True)
class AudioFileInfo:
    """What `check_audio_file` found, without decoding the song."""

    path: Path
    kind: str  # the container FFmpeg found ("wav", "mp3", "ogg", "flac", ...)
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


def _is_wav(file: IO[bytes], path: Path) -> bool:
    """Whether the file says it is a WAV. A big-endian one (RIFX, as `sox -B` writes) is
    refused: FFmpeg reads its header but decodes its samples as little-endian, loud noise."""
    head = file.read(12)
    file.seek(0)
    if len(head) < 12 or head[8:12] != b"WAVE":
        return False
    if head[:4] == b"RIFX":
        raise AudioFileError(f"{path}: big-endian WAV (RIFX) is not supported; {_EXPORT_AGAIN}")
    return head[:4] in (b"RIFF", b"RF64", b"BW64")


def _too_long(path: Path, seconds: float) -> SongTooLong:
    return SongTooLong(f"{path}: lasts {seconds / 3600:.1f} hours or more, longer than the "
                       f"{MAX_SECONDS / 3600:g} hours a song may last; trim it")


def read_audio(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """(samples float32 (frames, channels) in -1..1, rate) of a sound file: one channel or
    two (FFmpeg's downmix of a surround file; the first two of a multitrack's unnamed
    channels). Raises AudioFileError, one line naming the file and what to do."""
    with _opened(path) as (file, name):
        return _decode(file, name, _is_wav(file, name))


def check_audio_file(path: str | os.PathLike) -> AudioFileInfo:
    """Is this a sound file that `read_audio` will read? The cheap checks only: the path (as
    `read_audio` checks it), FFmpeg's container (its length, where it says) and the first
    decoded sound; a song damaged further in is found by `read_audio`. Raises AudioFileError."""
    with _opened(path) as (file, name):
        return _probe(file, name, _is_wav(file, name))


def _unreadable(path: Path, wav: bool, exc: Exception) -> AudioFileError:
    """What FFmpeg refused, said for what the file claims to be."""
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    if wav:
        return AudioFileError(f"{path}: a broken WAV file, or one FFmpeg cannot decode "
                              f"({reason}); {_EXPORT_AGAIN}")
    if path.suffix.lower() == ".wav":
        return AudioFileError(f"{path}: not a WAV file (nor any sound FFmpeg reads); give "
                              f"{SOUND_FILES}")
    return AudioFileError(f"{path}: not a sound file this can read ({reason}); give "
                          f"{SOUND_FILES}")


@dataclass(frozen=True)
class _Sound:
    """The first audio stream and how its samples are read."""

    stream: Any
    rate: int
    channels: int  # in the decoded frames
    keep: int  # of them, read: 1 or 2
    layout: str | None  # what FFmpeg converts to; None: as they are (unnamed channels)


def _audio_stream(container: Any, path: Path) -> _Sound:
    """The first audio stream, refused where it is too long by the container's word. Mono and
    stereo are read as they are and a surround layout through FFmpeg's downmix to stereo;
    more channels with no names (a mixer's multitrack, which FFmpeg's downmix often refuses)
    read as they are, of which the first two are kept, as a sound card plays them."""
    if not container.streams.audio:
        raise AudioFileError(f"{path}: holds no audio; give {SOUND_FILES}")
    stream = container.streams.audio[0]
    codec = stream.codec_context
    if codec is None:
        raise AudioFileError(f"{path}: its sound is in a format FFmpeg does not decode; "
                             f"{_EXPORT_AGAIN}")
    rate = int(codec.sample_rate or stream.rate or 0)
    if rate <= 0:
        raise AudioFileError(f"{path}: its sound has no sample rate; give {SOUND_FILES}")
    duration = container.duration / 1_000_000 if container.duration else None  # AV_TIME_BASE
    if duration is not None and duration > MAX_SECONDS:
        raise _too_long(path, duration)
    channels = max(int(codec.layout.nb_channels or getattr(codec, "channels", 0) or 1), 1)
    if channels > 2 and any(channel.name == "NONE" for channel in codec.layout.channels):
        return _Sound(stream, rate, channels, 2, None)
    keep = min(channels, 2)
    return _Sound(stream, rate, keep, keep, "mono" if keep == 1 else "stereo")


def _probe(file: IO[bytes], path: Path, wav: bool) -> AudioFileInfo:
    import av  # noqa: PLC0415 - PyAV takes about a second to import: only when a file is coded
    try:
        with av.open(file) as container:
            sound = _audio_stream(container, path)
            next(iter(container.decode(sound.stream)))  # the codec really decodes it
            duration = container.duration / 1_000_000 if container.duration else None
            return AudioFileInfo(path, container.format.name.split(",")[0], sound.rate,
                                 sound.keep, duration)
    except AudioFileError:
        raise
    except StopIteration:
        raise AudioFileError(f"{path}: holds no samples") from None
    except Exception as exc:  # noqa: BLE001 - FFmpeg's errors come as many types
        raise _unreadable(path, wav, exc) from None


def _blocks(frames: list, sound: _Sound) -> list[np.ndarray]:
    """Converted frames as (frames, channels kept) float32 arrays."""
    blocks = [out.to_ndarray().reshape(-1, sound.channels) for out in frames]
    if sound.keep == sound.channels:
        return blocks
    return [np.array(block[:, :sound.keep]) for block in blocks]  # not views of them all


def _decode(file: IO[bytes], path: Path, wav: bool) -> tuple[np.ndarray, int]:
    import av  # noqa: PLC0415 - PyAV takes about a second to import: only when a file is coded
    chunks: list[np.ndarray] = []
    try:
        with av.open(file) as container:
            sound = _audio_stream(container, path)
            resampler = av.AudioResampler(format="flt", layout=sound.layout, rate=sound.rate)
            limit, total, damaged = int(MAX_SECONDS * sound.rate), 0, None
            for packet in container.demux(sound.stream):
                try:
                    decoded = packet.decode()
                except av.error.InvalidDataError as exc:  # one damaged packet (two MP3s
                    damaged = exc  # joined, a cut download): skipped, as ffmpeg does
                    continue
                for frame in decoded:
                    for block in _blocks(resampler.resample(frame), sound):
                        chunks.append(block)
                        total += len(block)
                if total > limit:  # the header did not say: stop before memory runs out
                    raise _too_long(path, total / sound.rate)
            if not chunks and damaged is not None:
                raise damaged
            chunks += _blocks(resampler.resample(None), sound)
    except AudioFileError:
        raise
    except Exception as exc:  # noqa: BLE001 - FFmpeg's errors come as many types
        raise _unreadable(path, wav, exc) from None
    if sum(len(block) for block in chunks) == 0:
        raise AudioFileError(f"{path}: holds no samples")
    samples = np.concatenate(chunks) if len(chunks) > 1 else np.array(chunks[0])
    del chunks
    # a float file's NaN or infinity would reach the sound card and the analysis: silence
    return np.nan_to_num(samples, copy=False, nan=0.0, posinf=0.0, neginf=0.0), sound.rate
