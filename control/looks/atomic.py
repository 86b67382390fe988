"""Safe file writes: a crash, a full disk or a pulled plug never leaves a half-written file.

Used for presets, the recovery file, the MIDI mapping and --state-out. Any thread (the recovery
file is written on a thread of its own); it blocks on fsync for a few milliseconds.

    create    a temporary file beside PATH (same folder, so the final rename is one step),
              named .NAME.XXXXXXXX.tmp (8 hex digits)
    write     the new content into it (os.write: no Python buffer whose flush could fail later)
    fsync     the kernel -> the disk: the new content is whole on disk before it gets the name
    close
    backup    the current PATH gets a second name, PATH.bak (a hard link, or a copy where links
              are not possible, each through its own temporary name and one rename)
    replace   os.replace(temporary, PATH): one atomic step from the old file to the new one
    sync      fsync the folder, so the renames themselves are on disk

At every instant PATH is either the old file or the new one, whole, and PATH.bak is either the
backup before or the old file, whole. A test passes `on_step` to stop the write before any step.

Only `FileProblem` comes out, one line naming the file, and a failed write leaves no temporary
file behind (a killed process can: `remove_stale_temporaries` clears those at the next start).
A PATH (or PATH.bak) that is a symbolic link is refused, never written through: the instrument
writes only in its own folders, and a link planted there must not make it replace a file
elsewhere. The folder itself may be reached through links (~/.config being one); only the
file's own name is checked.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from swarm_instrument.control.looks.files import FileProblem, file_kind

STEPS = ("create", "write", "fsync", "close", "backup", "replace", "sync")
BACKUP_SUFFIX = ".bak"
# Our temporaries, and only ours: ".slot-3.json.1f2e3d4c.tmp", ".slot-3.json.bak.0a1b2c3d.tmp".
TEMPORARY_NAME = re.compile(r"^\.(?P<name>.+)\.[0-9a-f]{8}\.tmp$")
STALE_SECONDS = 60.0  # a write takes milliseconds; older temporaries belong to no live write


def backup_path(path: str | os.PathLike) -> Path:
    """Where the previous version of `path` is kept: PATH.bak beside it."""
    path = Path(path)
    return path.with_name(path.name + BACKUP_SUFFIX)


def atomic_write_text(path: str | os.PathLike, text: str, backup: bool = True, *,
                      on_step: Callable[[str], None] | None = None) -> Path:
    """Write `text` (UTF-8) to `path` safely; see the module's comment for the steps.

    `backup`: keep the file being replaced as PATH.bak. Returns the path written. Raises
    FileProblem naming the path (a symbolic link at PATH or PATH.bak is refused).
    """
    return atomic_write_bytes(path, text.encode("utf-8"), backup, on_step=on_step)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, backup: bool = True, *,
                       on_step: Callable[[str], None] | None = None) -> Path:
    """`atomic_write_text` for bytes."""
    path = Path(path)
    folder = path.parent
    step = on_step or (lambda name: None)
    _refuse_odd_target(path)
    if backup:
        _refuse_odd_target(backup_path(path))
    temporary: Path | None = None
    descriptor: int | None = None
    try:
        step("create")
        temporary, descriptor = _create_beside(path)
        _copy_mode(path, descriptor)
        step("write")
        _write_all(descriptor, data)
        step("fsync")
        os.fsync(descriptor)
        step("close")
        closing, descriptor = descriptor, None
        os.close(closing)  # an error here (NFS, a full disk) is reported like any other
        if backup and os.path.lexists(path):
            step("backup")
            _keep_backup(path)
        step("replace")
        os.replace(temporary, path)
        temporary = None
        step("sync")
        _sync_folder(folder)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise FileProblem(f"{path}: cannot write it ({reason}); check that {folder} exists "
                          "and is writable, and that the disk is not full") from None
    finally:
        if descriptor is not None:
            try:
                os.close(descriptor)
            except OSError:
                pass
        if temporary is not None:
            _remove_quietly(temporary)
    return path


def _refuse_odd_target(path: Path) -> None:
    """Refuse to write where a symbolic link, a folder, a FIFO or a device has the name."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError:
        return  # an unreachable folder: the write itself says so
    except ValueError:
        raise FileProblem(f"{str(path)!r}: not a usable path (it holds a NUL byte)") from None
    if stat.S_ISLNK(mode):
        raise FileProblem(f"{path} is a symbolic link; refusing to write through it: remove it "
                      "or point SWARM_PRESETS_DIR / SWARM_RECOVERY_FILE / SWARM_STATE_DIR "
                      "elsewhere")
    if not stat.S_ISREG(mode):
        raise FileProblem(f"{path} is {file_kind(mode)}, not a file; refusing to replace it: "
                          "move it away or choose another path")


def _write_all(descriptor: int, data: bytes) -> None:
    """os.write until every byte is written (a write may take only part)."""
    view = memoryview(data)
    while view:
        written = os.write(descriptor, view)
        view = view[written:]


def _create_beside(path: Path) -> tuple[Path, int]:
    """A new, hidden, uniquely named file in path's folder (mode 0666 less the umask)."""
    while True:
        candidate = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
            return candidate, os.open(candidate, flags, 0o666)
        except FileExistsError:
            continue


def _copy_mode(path: Path, descriptor: int) -> None:
    """The new file keeps the permissions of the one it replaces (a shared preset folder)."""
    try:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
    except OSError:
        return
    if hasattr(os, "fchmod"):
        os.fchmod(descriptor, mode)


def _keep_backup(path: Path) -> None:
    """PATH.bak becomes the current PATH in one rename; PATH itself is not touched."""
    staged = path.with_name(f".{path.name}{BACKUP_SUFFIX}.{secrets.token_hex(4)}.tmp")
    try:
        try:
            # a second name for the same bytes: instant, nothing copied
            os.link(path, staged, follow_symlinks=False)
        except OSError:
            # no hard links here (FAT, some network disks)
            shutil.copy2(path, staged, follow_symlinks=False)
            descriptor = os.open(staged, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        os.replace(staged, backup_path(path))
    finally:
        _remove_quietly(staged)


def _sync_folder(folder: Path) -> None:
    """Put the folder's entries (the renames) on disk; not every system can open a folder."""
    try:
        descriptor = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)
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


def remove_stale_temporaries(folder: str | os.PathLike, older_than_s: float = STALE_SECONDS,
                             names: Iterable[str] | None = None) -> list[Path]:
    """Delete the temporaries a killed write left in `folder` (.NAME.XXXXXXXX.tmp, this
    module's pattern and nothing else), last changed more than `older_than_s` ago, so a write
    under way in another process is left alone. `names`: only temporaries of these file names
    (and their .bak). Regular files only; a symbolic link is never followed nor removed.
    Never raises (a missing or unreadable folder removes nothing). Returns what was removed."""
    wanted = None if names is None else {n for name in names for n in (name, name + ".bak")}
    cutoff = time.time() - older_than_s
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        match = TEMPORARY_NAME.match(entry.name)
        if match is None or (wanted is not None and match.group("name") not in wanted):
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_mtime > cutoff:
                continue
            os.unlink(entry.path)
        except OSError:
            continue
        removed.append(Path(entry.path))
    return removed
