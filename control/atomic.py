"""Safe file writes: a crash, a full disk or a pulled plug never leaves a half-written file.

Used for presets, the recovery file and the MIDI mapping. Main thread only (it blocks on fsync
for a few milliseconds; the recovery file is small).

    create    a temporary file beside PATH (same folder, so the final rename is one step)
    write     the new content into it
    flush     Python's buffer -> the kernel
    fsync     the kernel -> the disk: the new content is whole on disk before it gets the name
    close
    backup    the current PATH gets a second name, PATH.bak (a hard link, or a copy where links
              are not possible, each through its own temporary name and one rename)
    replace   os.replace(temporary, PATH): one atomic step from the old file to the new one
    sync      fsync the folder, so the renames themselves are on disk

At every instant PATH is either the old file or the new one, whole, and PATH.bak is either the
backup before or the old file, whole. A test passes `on_step` to stop the write before any step.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

STEPS = ("create", "write", "flush", "fsync", "close", "backup", "replace", "sync")
BACKUP_SUFFIX = ".bak"


def backup_path(path: str | os.PathLike) -> Path:
    """Where the previous version of `path` is kept: PATH.bak beside it."""
    path = Path(path)
    return path.with_name(path.name + BACKUP_SUFFIX)


def atomic_write_text(path: str | os.PathLike, text: str, backup: bool = True, *,
                      on_step: Callable[[str], None] | None = None) -> Path:
    """Write `text` (UTF-8) to `path` safely; see the module's comment for the steps.

    `backup`: keep the file being replaced as PATH.bak. Returns the path written (a symlink is
    followed, so the file it points to is replaced). Raises FileProblem naming the path.
    """
    return atomic_write_bytes(path, text.encode("utf-8"), backup, on_step=on_step)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, backup: bool = True, *,
                       on_step: Callable[[str], None] | None = None) -> Path:
    """`atomic_write_text` for bytes."""
    shown = Path(path)
    path = Path(os.path.realpath(path))
    folder = path.parent
    step = on_step or (lambda name: None)
    temporary: Path | None = None
    stream = None
    try:
        step("create")
        temporary, descriptor = _create_beside(path)
        stream = os.fdopen(descriptor, "wb")
        _copy_mode(path, descriptor)
        step("write")
        stream.write(data)
        step("flush")
        stream.flush()
        step("fsync")
        os.fsync(stream.fileno())
        step("close")
        stream.close()
        stream = None
        if backup and path.exists():
            step("backup")
            _keep_backup(path)
        step("replace")
        os.replace(temporary, path)
        temporary = None
        step("sync")
        _sync_folder(folder)
    except OSError as exc:
        from control.files import FileProblem  # here, so a crash test's child loads no numpy

        reason = exc.strerror or str(exc)
        raise FileProblem(f"{shown}: cannot write it ({reason}); check that {folder} exists "
                          "and is writable, and that the disk is not full") from None
    finally:
        if stream is not None:
            stream.close()
        if temporary is not None:
            _remove_quietly(temporary)
    return path


def _create_beside(path: Path) -> tuple[Path, int]:
    """A new, hidden, uniquely named file in path's folder (mode 0666 less the umask)."""
    while True:
        candidate = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return candidate, os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue


def _copy_mode(path: Path, descriptor: int) -> None:
    """The new file keeps the permissions of the one it replaces (a shared preset folder)."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return
    if hasattr(os, "fchmod"):
        os.fchmod(descriptor, mode)


def _keep_backup(path: Path) -> None:
    """PATH.bak becomes the current PATH in one rename; PATH itself is not touched."""
    staged = path.with_name(f".{path.name}{BACKUP_SUFFIX}.{secrets.token_hex(4)}.tmp")
    try:
        try:
            os.link(path, staged)  # a second name for the same bytes: instant, nothing copied
        except OSError:
            shutil.copy2(path, staged)  # no hard links here (FAT, some network disks)
            with open(staged, "rb+") as copied:
                os.fsync(copied.fileno())
        os.replace(staged, backup_path(path))
    finally:
        _remove_quietly(staged)


def _sync_folder(folder: Path) -> None:
    """Put the folder's entries (the renames) on disk; not every system can open a folder."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def _remove_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
