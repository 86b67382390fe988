"""Reads WAV files into float32 arrays for `--audio-file` and offline rendering (through
audio/files/decode.py, which sends every other kind of sound file to FFmpeg).

Main thread only, at start-up. The stdlib `wave` module reads integer PCM only (and not
WAVE_FORMAT_EXTENSIBLE before Python 3.12), while DAWs often write 24-bit or 32-bit float
files, so this parses the RIFF chunks itself: PCM 8/16/24/32-bit and IEEE float 32/64-bit.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

PCM, IEEE_FLOAT, EXTENSIBLE = 0x0001, 0x0003, 0xFFFE
SUPPORTED = {(PCM, 8), (PCM, 16), (PCM, 24), (PCM, 32), (IEEE_FLOAT, 32), (IEEE_FLOAT, 64)}


class AudioFileError(Exception):
    """A sound file that cannot be played; the message names the file and what to try."""


class SongTooLong(AudioFileError):
    """A sound file longer than a song may last: refused whatever reads it."""


def _convert_hint(path: Path) -> str:
    # never a command that writes beside the input: it may sit in a system or read-only folder
    return ("export it again as PCM (8-32 bit) or float WAV, or give the MP3, FLAC or OGG "
            "file itself: --audio-file and --render read those directly")


def read_wav(path: str | Path, max_seconds: float | None = None) -> tuple[np.ndarray, int]:
    """Return (samples as float32 (frames, channels) in -1..1, sample rate). A file longer
    than `max_seconds` is refused before its samples are converted."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise AudioFileError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return wav_from_bytes(raw, path, max_seconds)


def wav_from_bytes(raw: bytes, path: Path, max_seconds: float | None = None
                   ) -> tuple[np.ndarray, int]:
    """`read_wav` on bytes already read (`path` names them in errors)."""
    if len(raw) < 12 or raw[:4] not in (b"RIFF", b"RIFX") or raw[8:12] != b"WAVE":
        raise AudioFileError(f"{path}: not a WAV file; {_convert_hint(path)}")
    if raw[:4] == b"RIFX":
        raise AudioFileError(f"{path}: big-endian WAV (RIFX) is not supported; "
                             f"{_convert_hint(path)}")
    fmt = data = None
    at = 12
    while at + 8 <= len(raw):
        chunk, size = raw[at:at + 4], struct.unpack_from("<I", raw, at + 4)[0]
        body = raw[at + 8:at + 8 + size]  # a streamed file's data size may overrun: clip it
        if chunk == b"fmt ":
            fmt = body
        elif chunk == b"data":
            data = body
        at += 8 + size + (size & 1)
    if fmt is None or len(fmt) < 16 or data is None:
        raise AudioFileError(f"{path}: a broken WAV file (no 'fmt ' or 'data' chunk); "
                             f"{_convert_hint(path)}")
    tag, channels, rate, bits, block_align = parse_fmt(fmt, path)
    frames = len(data) // block_align
    if frames == 0:
        raise AudioFileError(f"{path}: holds no samples")
    if max_seconds is not None and frames / rate > max_seconds:
        raise SongTooLong(f"{path}: lasts {frames / rate / 3600:.1f} hours, longer than the "
                          f"{max_seconds / 3600:g} hours a song may last; trim it")
    data = data[:frames * block_align]
    if tag == PCM and bits == 8:
        samples = (np.frombuffer(data, np.uint8).astype(np.float32) - 128.0) / 128.0
    elif tag == PCM and bits == 16:
        samples = np.frombuffer(data, "<i2").astype(np.float32) / 32768.0
    elif tag == PCM and bits == 24:
        b = np.frombuffer(data, np.uint8).reshape(-1, 3).astype(np.int32)
        joined = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        joined = np.where(joined >= 1 << 23, joined - (1 << 24), joined)
        samples = joined.astype(np.float32) / float(1 << 23)
    elif tag == PCM and bits == 32:
        samples = (np.frombuffer(data, "<i4").astype(np.float64) / 2.0 ** 31).astype(np.float32)
    else:
        samples = np.frombuffer(data, "<f4" if bits == 32 else "<f8").astype(np.float32)
    samples = np.nan_to_num(samples, nan=0.0, posinf=0.0, neginf=0.0)
    return np.ascontiguousarray(samples.reshape(frames, channels)), int(rate)


def parse_fmt(fmt: bytes, path: Path) -> tuple[int, int, int, int, int]:
    """A 'fmt ' chunk's (format tag, channels, rate, bits, block align), checked. Raises
    AudioFileError for a format this reader does not convert."""
    if len(fmt) < 16:
        raise AudioFileError(f"{path}: a broken WAV file (its 'fmt ' chunk is too short); "
                             f"{_convert_hint(path)}")
    tag, channels, rate, _, block_align, bits = struct.unpack_from("<HHIIHH", fmt)
    if tag == EXTENSIBLE and len(fmt) >= 26:
        tag = struct.unpack_from("<H", fmt, 24)[0]  # first two bytes of the sub-format GUID
    if (tag, bits) not in SUPPORTED:
        kind = {PCM: "PCM", IEEE_FLOAT: "float"}.get(tag, f"format 0x{tag:04x}")
        raise AudioFileError(f"{path}: {kind} with {bits} bits is not supported (PCM 8/16/24/32 "
                             f"or float 32/64 are); {_convert_hint(path)}")
    if channels < 1 or rate < 1 or block_align != channels * bits // 8:
        raise AudioFileError(f"{path}: a broken WAV header ({channels} channels, {rate} Hz, "
                             f"{bits} bits); {_convert_hint(path)}")
    return tag, channels, rate, bits, block_align


def write_wav(path: str | Path, samples: np.ndarray, rate: int) -> None:
    """Write float samples (frames,) or (frames, channels) as 16-bit PCM: for tests and tools."""
    samples = np.asarray(samples, np.float64)
    if samples.ndim == 1:
        samples = samples[:, None]
    pcm = (np.clip(samples, -1.0, 1.0 - 1 / 32768) * 32768).round().astype("<i2").tobytes()
    channels = samples.shape[1]
    fmt = struct.pack("<HHIIHH", PCM, channels, rate, rate * channels * 2, channels * 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(pcm)) + pcm + (b"\0" if len(pcm) & 1 else b"")
    Path(path).write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
