"""The offline render's progress line: frames done, output frames a second, time left, on stderr,
kept clean of the console's messages (show/cli/console.py clears it before each). Main thread."""

from __future__ import annotations

import math
import sys
import time
from typing import TextIO


class Progress:
    """One status line: frames done of the total, output frames a second, time left.

    On a terminal it is redrawn in place (carriage return) at most 5 times a second; into a
    file or pipe it prints a plain line every `plain_every` seconds.
    """

    def __init__(self, total: int, stream: TextIO | None = None,
                 plain_every: float = 5.0) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.plain_every = plain_every
        self.started = time.perf_counter()
        self._last = -math.inf
        self._shown = False

    def line(self, done: int, now: float | None = None) -> str:
        now = time.perf_counter() if now is None else now
        elapsed = max(now - self.started, 1e-9)
        rate = done / elapsed
        left = (self.total - done) / rate if rate > 0 else math.inf
        percent = 100.0 * done / max(self.total, 1)
        width = 24
        filled = int(width * done / max(self.total, 1))
        bar = "#" * filled + "-" * (width - filled)
        return (f"render [{bar}] {done}/{self.total} frames {percent:3.0f}%  "
                f"{rate:5.1f} fps  {_clock(elapsed)} elapsed, {_clock(left)} left")

    def update(self, done: int) -> None:
        now = time.perf_counter()
        interval = 0.2 if self.tty else self.plain_every
        if done < self.total and now - self._last < interval:
            return
        self._last = now
        text = self.line(done, now)
        try:
            if self.tty:
                self.stream.write("\r" + text + "\x1b[K")
                self._shown = True
            else:
                self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed terminal must not stop the render

    def clear(self) -> None:
        """Before a console line: clear the progress line on a terminal (drawn again at the
        next update), so the two never run into each other."""
        if not (self.tty and self._shown):
            return
        try:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        except (OSError, ValueError):
            pass
        self._last = -math.inf

    def finish(self) -> None:
        if self.tty and self._shown:
            try:
                self.stream.write("\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "--:--"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else \
        f"{rest // 60}:{rest % 60:02d}"
