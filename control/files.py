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
    """A JSON file's content, or FileProblem saying what is wrong and what to try: a file cut
    off (a crash mid-write, a full disk) says so and points at PATH.bak when there is one; a
    key given twice is refused rather than silently taking the last."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileProblem(f"{path}: no such file") from None
    except IsADirectoryError:
        raise FileProblem(f"{path}: is a folder, not a file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FileProblem(f"{path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") \
            from None
    backup = path.with_name(path.name + ".bak")
    restore = f"; the previous version is in {backup}" if backup.is_file() else ""
    if not text.strip():
        raise FileProblem(f"{path}: the file is empty{restore}")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        raise FileProblem(f"{path}: key '{exc.key}' appears twice; keep one") from None
    except json.JSONDecodeError as exc:
        if _ends_early(text):
            raise FileProblem(f"{path}: the file ends early at line {exc.lineno} (truncated, "
                              f"perhaps by a crash or a full disk){restore}") from None
        raise FileProblem(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: "
                          f"{exc.msg}") from None


def _ends_early(text: str) -> bool:
    """True when the text stops inside a string or with brackets left open: a cut-off file,
    not a typo."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return in_string or depth > 0


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


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
