"""Progress lines: frames done, frames a second, time left, on stderr, kept clean of the
console's messages (show/cli/console.py clears it before each). The offline render's (`Progress`)
and a bounded live run's (`RunProgress`: the no-display ten seconds), which also says how long
the whole run will take once its first frames are timed. Main thread."""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Callable
from typing import TextIO

from swarm_instrument.show.cli.console import console as show_console

log = logging.getLogger(__name__)
ESTIMATE_FRAMES = 3  # frames (and seconds) timed before a run says how long it will take
ESTIMATE_S = 1.0


class Progress:
    """One status line: frames done of the total, output frames a second, time left.

    On a terminal it is redrawn in place (carriage return) at most 5 times a second; into a
    file or pipe it prints a plain line every `plain_every` seconds. Timed from its making,
    `first` frames being done then, by `clock`.
    """

    def __init__(self, total: int, stream: TextIO | None = None,
                 plain_every: float = 5.0, *, label: str = "render", first: int = 0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.plain_every = plain_every
        self.label = label
        self.first = first
        self.clock = clock
        self.started = clock()
        self._last = -math.inf
        self._shown = False

    def rate(self, done: int, now: float) -> float:
        """Frames a second since the start."""
        return (done - self.first) / max(now - self.started, 1e-9)

    def left(self, done: int, now: float) -> float:
        """Seconds until the last frame at that rate (inf before any frame is timed)."""
        rate = self.rate(done, now)
        return (self.total - done) / rate if rate > 0 else math.inf

    def line(self, done: int, now: float | None = None) -> str:
        now = self.clock() if now is None else now
        elapsed = max(now - self.started, 1e-9)
        percent = 100.0 * done / max(self.total, 1)
        width = 24
        filled = int(width * done / max(self.total, 1))
        bar = "#" * filled + "-" * (width - filled)
        return (f"{self.label} [{bar}] {done}/{self.total} frames {percent:3.0f}%  "
                f"{self.rate(done, now):5.1f} fps  {_clock(elapsed)} elapsed, "
                f"{_clock(self.left(done, now))} left")

    def update(self, done: int) -> None:
        now = self.clock()
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


class RunProgress:
    """A bounded live run's progress (the no-display ten seconds, played headless): timed from
    the end of its first frame (the shaders compiled then), its line on stderr, and once
    ESTIMATE_FRAMES more and ESTIMATE_S are timed, one console line saying how long the run
    will take (the line then keeps the time left up to date)."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.total = total
        self.label = label
        self.stream = stream
        self.clock = clock
        self.progress: Progress | None = None
        self.estimate: float | None = None  # seconds the whole run takes, as first said

    def frame(self, done: int) -> None:
        """After each frame: `done` frames drawn."""
        progress = self.progress
        if progress is None:
            progress = self.progress = Progress(self.total, self.stream, label=self.label,
                                                first=done, clock=self.clock)
            console = show_console()
            if console is not None:  # the console's lines never break into the progress line
                console.before.append(progress.clear)
        elif self.estimate is None:
            now = self.clock()
            if done - progress.first >= ESTIMATE_FRAMES and now - progress.started >= ESTIMATE_S:
                left = progress.left(done, now)
                self.estimate = now - progress.started + left
                log.info(f"{self.label}: the {self.total} frames take about "
                         f"{_clock(self.estimate)} here "
                         f"({1000.0 / progress.rate(done, now):.0f} ms a frame), "
                         f"{_clock(left)} to go; progress on stderr")
        progress.update(done)

    def finish(self) -> None:
        """The run ended: the line ends, the console has the terminal to itself again."""
        progress, self.progress = self.progress, None
        if progress is None:
            return
        progress.finish()
        console = show_console()
        if console is not None and progress.clear in console.before:
            console.before.remove(progress.clear)


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "--:--"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else \
        f"{rest // 60}:{rest % 60:02d}"
