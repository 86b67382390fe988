"""Screenshots and contact sheets read back as a user's tools read them: through Pillow (a test
dependency; the product writes PNGs with zlib alone, visual/output/png.py)."""

from __future__ import annotations

import os

import numpy as np
from PIL import Image


def read_png(path: str | os.PathLike) -> np.ndarray:
    """An (H, W, 3|4) uint8 array of a PNG file, after Pillow has checked its chunks' CRCs."""
    with Image.open(path) as image:
        assert image.format == "PNG", f"{path}: {image.format}, not a PNG"
        image.verify()
    with Image.open(path) as image:
        return np.asarray(image)
