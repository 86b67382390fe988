"""Minimal PNG writing and reading for screenshots and tests, with zlib only.

Headless runs save frames without Pillow; tests read them back to check what was written.
Only 8-bit RGB and RGBA, non-interlaced: what `write_png` produces (readers of other PNGs get a
clear error). Main thread only (pure functions, no state).
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOR_TYPES = {3: 2, 4: 6}  # channels -> PNG colour type (2 = RGB, 6 = RGBA)


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def encode_png(image: np.ndarray, level: int = 6) -> bytes:
    """PNG bytes of an (H, W, 3|4) uint8 array, row 0 at the top."""
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] not in _COLOR_TYPES:
        raise ValueError(f"need an (H, W, 3 or 4) uint8 image, got {image.dtype} {image.shape}")
    height, width, channels = image.shape
    header = struct.pack(">IIBBBBB", width, height, 8, _COLOR_TYPES[channels], 0, 0, 0)
    rows = np.zeros((height, 1 + width * channels), np.uint8)  # filter byte 0 (None) per row
    rows[:, 1:] = image.reshape(height, -1)
    return (SIGNATURE + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(rows.tobytes(), level)) + _chunk(b"IEND", b""))


def write_png(path: str | os.PathLike, image: np.ndarray) -> None:
    """Write `image` to `path` (written to a temporary name first, so no half files)."""
    path = Path(path)
    temporary = path.with_name(path.name + ".partial")
    temporary.write_bytes(encode_png(image))
    os.replace(temporary, path)


def _unfilter(raw: np.ndarray, height: int, stride: int, channels: int) -> np.ndarray:
    """Undo the per-row filters (None, Sub, Up, Average, Paeth) of the PNG spec."""
    out = np.zeros((height, stride), np.int32)
    previous = np.zeros(stride, np.int32)
    for y in range(height):
        kind = raw[y, 0]
        line = raw[y, 1:].astype(np.int32)
        if kind == 0:
            row = line
        elif kind == 2:
            row = (line + previous) & 0xFF
        else:  # Sub, Average and Paeth depend on the pixel to the left: go byte by byte
            row = np.zeros(stride, np.int32)
            for x in range(stride):
                left = row[x - channels] if x >= channels else 0
                up = previous[x]
                corner = previous[x - channels] if x >= channels else 0
                if kind == 1:
                    predictor = left
                elif kind == 3:
                    predictor = (left + up) // 2
                elif kind == 4:
                    p = left + up - corner
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                    predictor = left if pa <= pb and pa <= pc else (up if pb <= pc else corner)
                else:
                    raise ValueError(f"unknown PNG row filter {kind}")
                row[x] = (line[x] + predictor) & 0xFF
        out[y] = row
        previous = row
    return out.astype(np.uint8)


def decode_png(data: bytes) -> np.ndarray:
    """An (H, W, 3|4) uint8 array from the bytes of an 8-bit RGB/RGBA PNG."""
    if not data.startswith(SIGNATURE):
        raise ValueError("not a PNG file (bad signature)")
    offset = len(SIGNATURE)
    header = None
    compressed = []
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset:offset + 4])
        kind = data[offset + 4:offset + 8]
        body = data[offset + 8:offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length:offset + 12 + length])
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            raise ValueError(f"PNG chunk {kind!r} is corrupt (CRC mismatch)")
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            compressed.append(body)
        elif kind == b"IEND":
            break
        offset += 12 + length
    if header is None:
        raise ValueError("PNG has no IHDR chunk")
    width, height, depth, color_type, _, _, interlace = header
    channels = {v: k for k, v in _COLOR_TYPES.items()}.get(color_type)
    if depth != 8 or channels is None or interlace != 0:
        raise ValueError(f"only 8-bit RGB/RGBA non-interlaced PNGs are supported "
                         f"(depth {depth}, colour type {color_type}, interlace {interlace})")
    stride = width * channels
    raw = np.frombuffer(zlib.decompress(b"".join(compressed)), np.uint8)
    if raw.size != height * (stride + 1):
        raise ValueError("PNG image data has the wrong length")
    return _unfilter(raw.reshape(height, stride + 1), height, stride, channels).reshape(
        height, width, channels)


def read_png(path: str | os.PathLike) -> np.ndarray:
    return decode_png(Path(path).read_bytes())
