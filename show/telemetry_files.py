"""The telemetry files: one JSON record a line, once a second and once at exit (`Telemetry`,
--telemetry), and the newest record alone, replaced whole (`LatestRecord`: what the
supervisor puts in a crash report). show/report.py makes the records. Main thread only.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable


class LatestRecord:
    """The newest telemetry record, replaced whole about once a second (a temporary file and a
    rename): what the supervisor puts in a crash report. Failures are silent: it is a log."""

    def __init__(self, path: str | os.PathLike, interval: float = 1.0) -> None:
        self.path = os.fspath(path)
        self.interval = interval
        self._last = -math.inf

    def maybe_write(self, now: float, record_of: Callable[[], dict]) -> None:
        if now - self._last < self.interval:
            return
        self._last = now
        temporary = f"{self.path}.tmp"
        try:
            with open(temporary, "w", encoding="utf-8") as stream:
                stream.write(json.dumps({"time": time.time(), **record_of()}))
            os.replace(temporary, self.path)
        except (OSError, ValueError):
            pass


class Telemetry:
    """Appends one JSON object a line to a file: once a second and once at exit.

    A write that fails is reported once and telemetry stops; the show goes on.
    """

    def __init__(self, path: str | os.PathLike, interval: float = 1.0) -> None:
        self.path = path
        self.interval = interval
        self._last = -math.inf
        self.error: str | None = None
        try:
            self._stream = open(path, "a", encoding="utf-8", buffering=1)
        except OSError as exc:
            raise OSError(f"{path}: cannot open the telemetry file ({exc.strerror})") from None

    def maybe_write(self, now: float, record_of: Callable[[], dict]) -> bool:
        """Write `record_of()` if a second has passed (the record is only built then)."""
        if now - self._last < self.interval:
            return False
        self._last = now
        return self.write(record_of())

    def write(self, record: dict) -> bool:
        """One record, stamped with the wall clock's time (the show itself reads no clock)."""
        if self._stream is None:
            return False
        try:
            self._stream.write(json.dumps({"time": time.time(), **record}) + "\n")
            return True
        except (OSError, ValueError) as exc:
            self.error = f"telemetry stopped: {self.path}: {exc}"
            self.close()
            return False

    def close(self) -> None:
        if getattr(self, "_stream", None) is not None:
            try:
                self._stream.close()
            except OSError:
                pass
            self._stream = None
