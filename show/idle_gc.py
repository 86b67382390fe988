"""Python's garbage collector kept out of the frames (issue 31: steady frames).

A collection runs wherever the allocation count crosses a threshold, so left alone it lands
inside a frame, and a full one over a live show's objects (pyglet, numpy, the web server) takes
milliseconds. Once the show is built, `start()` freezes what exists (gc.freeze: never scanned
again) and turns automatic collection off; `idle()`, called after each frame is shown (the
time the pacer waits anyway), collects the youngest generation when as many objects were made
as would have triggered it, the middle one every tenth time and all every hundredth, timing
each pause for telemetry. Main thread only.
"""

from __future__ import annotations

import gc
import time


class IdleCollector:
    def __init__(self, threshold: int | None = None) -> None:
        self.threshold = threshold or gc.get_threshold()[0] or 700
        self.active = False
        self.runs = 0
        self.last_ms = 0.0
        self.longest_ms = 0.0
        self.frozen = 0  # objects frozen at the start

    def start(self) -> None:
        gc.collect()
        gc.freeze()
        self.frozen = gc.get_freeze_count()
        gc.disable()
        self.active = True

    def idle(self) -> None:
        if not self.active or gc.get_count()[0] < self.threshold:
            return
        self.runs += 1
        generation = 2 if self.runs % 100 == 0 else 1 if self.runs % 10 == 0 else 0
        started = time.perf_counter()
        gc.collect(generation)
        self.last_ms = (time.perf_counter() - started) * 1e3
        self.longest_ms = max(self.longest_ms, self.last_ms)

    def stop(self) -> None:
        """Automatic collection back (the show is over)."""
        if self.active:
            self.active = False
            gc.unfreeze()
            gc.enable()

    def state(self) -> dict:
        return {"idle_collections": self.runs, "last_ms": round(self.last_ms, 3),
                "longest_ms": round(self.longest_ms, 3), "frozen": self.frozen}
