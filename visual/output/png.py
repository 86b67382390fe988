"""PNG writing for screenshots and contact sheets, with zlib only: the product saves frames
without an imaging library (the tests read them back through Pillow, a test dependency).

8-bit RGB and RGBA, non-interlaced, every row unfiltered. Main thread only (pure functions,
no state).
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
