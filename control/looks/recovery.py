"""The recovery file: the live look saved every few seconds on a thread of its own, so that
`--resume` brings back what was playing after a crash; a damaged one is set aside.

The frame hands the look over (`RecoveryWriter.maybe_save`, main thread); the writer thread
writes it atomically (control/looks/atomic.py). `load_recovery` runs at start.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from swarm_instrument.control.looks.atomic import atomic_write_text, remove_stale_temporaries
from swarm_instrument.control.looks.files import FileProblem
from swarm_instrument.control.looks.presets import Preset, PresetError, format_preset, load_preset
from swarm_instrument.control.looks.user_folders import recovery_file
from swarm_instrument.control.parameters.modulation import Route
from swarm_instrument.control.parameters.registry import Params


class RecoveryDamaged(PresetError):
    """The recovery file exists but cannot be used; `load_recovery` has set it aside (renamed it
    beside itself, `set_aside`; None when that failed) so the next start does not trip on it
    again. The message is one line: the problem, then where the file went."""

    def __init__(self, message: str, set_aside: Path | None) -> None:
        super().__init__(message)
        self.set_aside = set_aside


def recovery_path() -> Path:
    """Where the live state is saved every few seconds (control/looks/user_folders.py)."""
    return recovery_file()


class RecoveryWriter:
    """Saves the live state every `interval` seconds, for `--resume` after a crash.

    The file is written on a thread of its own (an atomic write ends with fsync, which took up
    to 44 ms here: a dropped frame or two if the frame loop did it); the frame only formats the
    text and hands it over, the latest replacing one not yet written. Never raises: a failed
    write is returned by the next `maybe_save` (once, until a write succeeds again) and kept in
    `error` for the HUD; the show goes on. The first write of a session keeps the previous
    session's file as recovery.json.bak, so starting without --resume by mistake does not lose
    it at once; later writes skip the backup. Nothing is written while nothing has changed.
    """

    def __init__(self, path: str | os.PathLike | None = None, interval: float = 3.0) -> None:
        self.path = Path(path) if path is not None else recovery_path()
        remove_stale_temporaries(self.path.parent, names=(self.path.name,))
        self.interval = interval
        self.error: str | None = None
        self.writes = 0
        self._said: str | None = None  # the error last returned, so each is said once
        self._last_time = -math.inf
        self._last_text: str | None = None  # the text last written or handed over
        self._pending: str | None = None
        self._busy = False
        self._closed = False
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None

    def maybe_save(self, now: float, params: Params, routes: Iterable[Route],
                   extra: Mapping[str, Any] | None = None) -> str | None:
        """Hand the state to the writer if `interval` seconds have passed since the last try
        (`now` from any monotonic clock). `extra` goes into "state"; its "preset" entry names
        the file. Returns a write's error message the first time it is known."""
        if now - self._last_time >= self.interval:
            self._last_time = now
            try:
                text = self._format(params, routes, extra)
            except Exception as exc:  # noqa: BLE001 - the show must go on; the HUD says why
                self._fail(f"{self.path}: cannot save the recovery file ({exc})")
            else:
                with self._lock:
                    if text != self._last_text or self.error is not None:
                        self._last_text = self._pending = text
                        self._start()
                        self._lock.notify_all()
        return self._news()

    def save(self, params: Params, routes: Iterable[Route],
             extra: Mapping[str, Any] | None = None) -> str | None:
        """Save now, on this thread (at exit, in tests). Returns an error message the first
        time a write fails."""
        self.flush()
        try:
            text = self._format(params, routes, extra)
        except Exception as exc:  # noqa: BLE001
            self._fail(f"{self.path}: cannot save the recovery file ({exc})")
            return self._news()
        if text != self._last_text or self.error is not None:
            self._last_text = text
            self._write(text)
        return self._news()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until the state handed over is written (or failed); False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: self._pending is None and not self._busy,
                                       timeout)

    def close(self) -> None:
        """Write what is pending, then stop the writer thread."""
        self.flush()
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10.0)

    def _format(self, params: Params, routes: Iterable[Route],
                extra: Mapping[str, Any] | None) -> str:
        extra = dict(extra or {})
        name = str(extra.get("preset") or "recovery")
        preset = Preset(name, params.as_dict(), list(routes),
                        "the live state, saved while playing; --resume starts from it", extra)
        return format_preset(preset)

    def _write(self, text: str) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, text, backup=self.writes == 0)
        except Exception as exc:  # noqa: BLE001 - the show must go on; the HUD says why
            self._fail(str(exc) if isinstance(exc, FileProblem) else
                       f"{self.path}: cannot save the recovery file ({exc})")
            return
        self.writes += 1
        self.error = None
        self._said = None

    def _fail(self, message: str) -> None:
        self.error = message

    def _news(self) -> str | None:
        error = self.error
        if error is None or error == self._said:
            return None
        self._said = error
        return error

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="recovery-writer",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._pending is not None or self._closed)
                if self._pending is None:
                    return
                text, self._pending, self._busy = self._pending, None, True
            try:
                self._write(text)
            finally:
                with self._lock:
                    self._busy = False
                    self._lock.notify_all()


def load_recovery(path: str | os.PathLike | None = None) -> Preset:
    """The state `--resume` starts from.

    Raises PresetError when there is no recovery file. A file that is there but cannot be used
    (damaged, truncated, a FIFO, too deep, from a newer instrument...) raises RecoveryDamaged,
    a PresetError, after renaming it to PATH.damaged-YYYYmmdd-HHMMSS beside itself: a show
    restarted with --resume would otherwise trip on it again at every start. The caller prints
    the message (one line: the problem and where the file went) and starts without it.
    """
    path = Path(path) if path is not None else recovery_path()
    if not os.path.lexists(path):
        raise PresetError(f"{path}: no recovery file, so nothing to resume (the instrument "
                          "saves one every few seconds while it plays)")
    try:
        return load_preset(path)
    except PresetError as exc:
        aside, why = _set_aside(path)
        if aside is None:
            raise RecoveryDamaged(f"{exc}; could not set it aside ({why}): remove it", None) \
                from None
        raise RecoveryDamaged(f"{exc}; set aside as {aside}", aside) from None


def _set_aside(path: Path) -> tuple[Path | None, str]:
    """Rename `path` to PATH.damaged-<local time>[-N], never over an existing name; the link
    itself when it is a symbolic link. (new path, "") or (None, why not)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for number in range(1, 100):
        suffix = f".damaged-{stamp}" + (f"-{number}" if number > 1 else "")
        aside = path.with_name(path.name + suffix)
        if os.path.lexists(aside):
            continue
        try:
            os.rename(path, aside)
        except OSError as exc:
            return None, exc.strerror or str(exc)
        return aside, ""
    return None, "too many set-aside copies already"
