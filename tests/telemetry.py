"""The show's telemetry as the tests read it: `--telemetry FILE` (JSON lines, one a frame) and the
supervisor's last-telemetry.json (one record), read while the show writes them, so the line being
written is skipped rather than taken for a broken file. The test's thread only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from swarm_instrument.show.supervision.supervisor import last_telemetry

from conftest import wait_for


def records(path: Path) -> list[dict]:
    """Every whole record so far (none before the file exists)."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # the line being written
    return out


def last_record(path: Path) -> dict | None:
    """The newest whole record, or None: the supervisor's own reader (it reads the file's
    last 64 KiB, whole lines only)."""
    return last_telemetry(path)


class Telemetry:
    """A show's --telemetry file, and waits on what it says."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def records(self) -> list[dict]:
        return records(self.path)

    def last(self) -> dict:
        record = last_record(self.path)
        assert record is not None, f"no telemetry yet in {self.path}"
        return record

    def wait(self, check: Callable[[dict], object], what: str, timeout: float = 20.0,
             process=None) -> dict:
        """The first record, from the newest one on, for which check(record) holds."""
        seen = max(len(self.records()) - 1, 0)

        def found() -> dict | None:
            for record in self.records()[seen:]:
                if check(record):
                    return record
            return None

        return wait_for(found, what, timeout=timeout, process=process,
                        state=lambda: last_record(self.path))

    def newest(self, check: Callable[[dict], object], what: str, timeout: float = 60.0,
               process=None) -> dict:
        """The newest record once check(record) holds for it."""
        return wait_for(lambda: (r := last_record(self.path)) is not None and check(r) and r,
                        what, timeout=timeout, process=process,
                        state=lambda: last_record(self.path))
