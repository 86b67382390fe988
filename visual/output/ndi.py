"""NDI out: the show as a source on the network, through cyndilib (which bundles the NDI
runtime, libndi, in its wheels). Receivers (OBS, Resolume, vMix, TouchDesigner, a hardware
decoder) find it under "HOST (NAME)". Frames go as RGBA, alpha included.

Runs on the output's thread (visual/output/frame_output.py): the sender is made there, so the
threads libndi starts for it inherit that thread's lower priority. Each frame is sent synchronously
(compressed by libndi on this thread, queued to every receiver by libndi), unclocked: the
show's frames set the pace. A receiver that falls behind is dropped frames by libndi itself;
a source with no receiver costs almost nothing.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from fractions import Fraction
from typing import Any

import numpy as np

from swarm_instrument.visual.output.frame_output import OutputFailed
from swarm_instrument.visual.output.video_files import fps_fraction

CONNECTIONS_EVERY = 1.0  # seconds between asking libndi how many receivers there are


def ndi_available() -> str | None:
    """None where cyndilib (and so libndi) loads, else why not."""
    try:
        importlib.import_module("cyndilib.sender")
    except ImportError as exc:
        return f"cyndilib is not installed or libndi does not load ({exc}); pip install cyndilib"
    return None


class NdiBackend:
    """An NDI source named `name`."""

    kind = "ndi"
    carries_alpha = True
    even_size = False

    def __init__(self, name: str, groups: str = "") -> None:
        self.target = name
        self.groups = groups
        self._sender: Any = None
        self._connections = 0
        self._asked = -1e9
        self.full_name: str | None = None

    def open(self, size: tuple[int, int], rate: float) -> None:
        importlib.invalidate_caches()  # a cyndilib installed while the show runs is found
        try:
            from cyndilib.sender import Sender  # noqa: PLC0415 - optional: NDI, only with --out-ndi
            from cyndilib.video_frame import VideoSendFrame  # noqa: PLC0415 - optional: NDI, only with --out-ndi
            from cyndilib.wrapper.ndi_structs import FourCC  # noqa: PLC0415 - optional: NDI, only with --out-ndi
        except ImportError as exc:
            raise OutputFailed(f"cyndilib is not installed or libndi does not load ({exc}); "
                               "pip install cyndilib") from None
        frame = VideoSendFrame()
        frame.set_resolution(int(size[0]), int(size[1]))
        frame.set_fourcc(FourCC.RGBA)
        frame.set_frame_rate(Fraction(fps_fraction(rate)))
        sender = Sender(self.target, ndi_groups=self.groups, clock_video=False,
                        clock_audio=False)
        sender.set_video_frame(frame)
        try:
            sender.open()
        except Exception as exc:  # noqa: BLE001 - libndi refuses in several ways
            raise OutputFailed(f"libndi could not start the source ({exc})") from None
        self._sender = sender
        self.full_name = sender.name
        self._asked = -1e9

    def send(self, frame: np.ndarray, seconds: float) -> None:
        sender = self._sender
        if sender is None:
            raise OutputFailed("the NDI source is closed")
        if not sender.write_video(frame.reshape(-1)):
            raise OutputFailed("libndi refused the frame")
        now = time.monotonic()
        if now - self._asked >= CONNECTIONS_EVERY:
            self._asked = now
            self._connections = int(sender.get_num_connections(0))

    def close(self) -> None:
        sender, self._sender = self._sender, None
        if sender is not None:
            with contextlib.suppress(Exception):  # closing never fails the show
                sender.close()

    def detail(self) -> str | None:
        if self._sender is None:
            return None
        count = self._connections
        return f"{self.full_name}, {count} receiver{'' if count == 1 else 's'}"
