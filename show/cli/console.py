"""The performer's console: every module logs through the standard library (one logger a
module, `logging.getLogger(__name__)`); the command installs this handler, which prints each
record as one line `instrument: ...` on stdout, with text from outside made printable, the
same message repeated within a few seconds dropped (a flood must not flood the terminal), and a
hook for whoever else writes to the terminal (a render's progress line). Main thread mostly;
logging's own lock covers the rest.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

from swarm_instrument.control.text import printable

REPEAT_S = 5.0  # the same message again within this many seconds is dropped


class RepeatFilter(logging.Filter):
    """Drops a record whose message is the same as one let through less than `seconds` ago."""

    def __init__(self, seconds: float = REPEAT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.seconds = seconds
        self.clock = clock
        self._seen: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        now = self.clock()
        if now - self._seen.get(message, -self.seconds - 1.0) < self.seconds:
            return False
        if len(self._seen) > 256:  # keep the memory bounded in a long show
            self._seen = {m: t for m, t in self._seen.items() if now - t < self.seconds}
        self._seen[message] = now
        return True


class Console(logging.Handler):
    """`instrument: MESSAGE` on stdout, one line a record (continuation lines indented)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.addFilter(RepeatFilter())
        self.before: list[Callable[[], None]] = []  # called before each line (progress bars)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            for hook in self.before:
                hook()
            stream = sys.stdout
            stream.write(f"instrument: {printable(record.getMessage())}\n")
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed terminal must not end the show
            self.handleError(record)


def install() -> Console:
    """The console on the root logger (once); INFO and above reach the performer."""
    root = logging.getLogger()
    for handler in root.handlers:
        if isinstance(handler, Console):
            return handler
    console = Console()
    root.addHandler(console)
    root.setLevel(logging.INFO)
    logging.raiseExceptions = False  # a broken pipe on stdout is not worth a traceback
    return console


def console() -> Console | None:
    """The installed console, if any (a render registers its progress line with it)."""
    return next((h for h in logging.getLogger().handlers if isinstance(h, Console)), None)


def error(message: object) -> None:
    """The one line a refused start ends with (exit 2 follows), on stderr, made printable."""
    print(f"instrument: error: {printable(message)}", file=sys.stderr, flush=True)
