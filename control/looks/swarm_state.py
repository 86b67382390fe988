"""Swarm state files (--state-in, --state-out): the agents' positions and velocities as .npz
arrays, read with the same guards as every file a user hands the instrument (a regular file
under a size cap, arrays of the right shape and type, finite) and written atomically.
Main thread only.
"""

from __future__ import annotations

import io
import os
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from swarm_instrument.control.looks.atomic import atomic_write_bytes
from swarm_instrument.control.looks.files import FileProblem, read_bytes
from swarm_instrument.control.parameters.registry import MAX_COUNT

# --state-in: MAX_COUNT agents, two arrays of (N, 3) float32, plus the zip's and .npy's headers.
STATE_LIMIT = MAX_COUNT * 2 * 3 * 4 + (1 << 20)
_ZIP_FAILURES = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, KeyError,
                 RuntimeError, NotImplementedError)


def load_state(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """position and velocity, float32 (N, 3), from an .npz file written by save_state.

    Read through `read_bytes` (a regular file of at most STATE_LIMIT bytes); each array's .npy
    header is checked before its data is read, so a compressed member claiming a billion rows
    is refused instead of filling the memory.
    """
    path = Path(path)
    raw = read_bytes(path, STATE_LIMIT, "state file")
    if not zipfile.is_zipfile(io.BytesIO(raw)):
        raise FileProblem(f"{path}: not an .npz file (a zip of arrays as numpy.savez and "
                          "--state-out write)")
    arrays = {}
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            names = set(archive.namelist())
            for key in ("position", "velocity"):
                if f"{key}.npy" not in names:
                    raise FileProblem(f"{path}: missing array '{key}' (need position and "
                                      "velocity)")
                with archive.open(f"{key}.npy") as member:
                    arrays[key] = _read_array(path, key, member)
    except FileProblem:
        raise
    except _ZIP_FAILURES as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise FileProblem(f"{path}: not a readable .npz state file ({reason})") from None
    for key, array in arrays.items():
        if not np.isfinite(array).all():
            raise FileProblem(f"{path}: '{key}' holds NaN or infinite values")
    position, velocity = arrays["position"], arrays["velocity"]
    if len(position) != len(velocity):
        raise FileProblem(f"{path}: position has {len(position)} rows, velocity "
                          f"{len(velocity)}; they must match")
    if not 1 <= len(position) <= MAX_COUNT:
        raise FileProblem(f"{path}: {len(position)} agents; the instrument takes 1 to {MAX_COUNT}")
    return position.astype(np.float32), velocity.astype(np.float32)


def _read_array(path: Path, key: str, member: Any) -> np.ndarray:
    """One (N, 3) array of numbers from an open .npy member, its header checked first."""
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(member)
    elif version == (2, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(member)
    else:
        raise FileProblem(f"{path}: '{key}' is .npy version {version}; write it with "
                          "numpy.savez")
    if len(shape) != 2 or shape[1] != 3 or dtype.kind not in "iuf" or dtype.itemsize > 8:
        raise FileProblem(f"{path}: '{key}' must be numbers of shape (N, 3), got {dtype} "
                          f"{shape}")
    if not 1 <= shape[0] <= MAX_COUNT:
        raise FileProblem(f"{path}: {shape[0]} agents; the instrument takes 1 to {MAX_COUNT}")
    count = shape[0] * 3
    data = member.read(count * dtype.itemsize)
    if len(data) != count * dtype.itemsize:
        raise FileProblem(f"{path}: '{key}' ends early (truncated)")
    array = np.frombuffer(data, dtype=dtype, count=count)
    return array.reshape(shape, order="F" if fortran_order else "C")


def save_state(path: str | os.PathLike, position: np.ndarray, velocity: np.ndarray) -> None:
    """Write the state atomically (control/looks/atomic.py), keeping the file it replaces as
    .bak."""
    buffer = io.BytesIO()
    np.savez(buffer, position=position.astype(np.float32), velocity=velocity.astype(np.float32))
    atomic_write_bytes(path, buffer.getvalue(), backup=True)
