"""Reading and writing the files a user hands the instrument: preset parameters and swarm state.

Every failure is a `FileProblem` whose message names the file and, where it can, the key, and
says what to do; nothing here leaves a half-written file behind.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from control.params import MAX_COUNT


class FileProblem(ValueError):
    """A file that cannot be used: the message names it and says why."""


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileProblem(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FileProblem(f"{path}: cannot read it ({exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise FileProblem(
            f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None


def load_state(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """position and velocity, float32 (N, 3), from an .npz file written by save_state."""
    path = Path(path)
    if path.exists() and not zipfile.is_zipfile(path):
        raise FileProblem(f"{path}: not an .npz file (a zip of arrays as numpy.savez and "
                          "--state-out write)")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in ("position", "velocity") if key in data.files}
    except FileNotFoundError:
        raise FileProblem(f"{path}: no such file") from None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise FileProblem(f"{path}: not a readable .npz state file ({exc})") from None
    for key in ("position", "velocity"):
        if key not in arrays:
            raise FileProblem(f"{path}: missing array '{key}' (need position and velocity)")
        array = arrays[key]
        if array.ndim != 2 or array.shape[1] != 3 or not np.issubdtype(array.dtype, np.number):
            raise FileProblem(f"{path}: '{key}' must be numbers of shape (N, 3), got "
                              f"{array.dtype} {array.shape}")
        if not np.isfinite(array).all():
            raise FileProblem(f"{path}: '{key}' holds NaN or infinite values")
    position, velocity = arrays["position"], arrays["velocity"]
    if len(position) != len(velocity):
        raise FileProblem(f"{path}: position has {len(position)} rows, velocity "
                          f"{len(velocity)}; they must match")
    if not 1 <= len(position) <= MAX_COUNT:
        raise FileProblem(f"{path}: {len(position)} agents; the instrument takes 1 to {MAX_COUNT}")
    return position.astype(np.float32), velocity.astype(np.float32)


def save_state(path: str | os.PathLike, position: np.ndarray, velocity: np.ndarray) -> None:
    """Write the state atomically (control/atomic.py), keeping the file it replaces as .bak."""
    from control.atomic import atomic_write_bytes

    buffer = io.BytesIO()
    np.savez(buffer, position=position.astype(np.float32), velocity=velocity.astype(np.float32))
    atomic_write_bytes(path, buffer.getvalue(), backup=True)
