"""A virtual X screen for tests, driven as a performer drives the instrument: keys and the mouse
through xdotool, the screen read back through FFmpeg's x11grab (PyAV). Fails, never skips,
when Xvfb or xdotool is missing: CI installs them.

Threads: the test's only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

WINDOW_NAME = "swarm instrument"


@contextmanager
def xvfb(size: str = "1024x600", *extra: str) -> Iterator[str]:
    """An Xvfb server on a free display number; yields ':N'. `extra`: more Xvfb options."""
    if not shutil.which("Xvfb"):
        pytest.fail("Xvfb is missing: apt-get install xvfb (CI installs it)")
    for number in range(91, 140):
        if not Path(f"/tmp/.X11-unix/X{number}").exists() and not Path(
                f"/tmp/.X{number}-lock").exists():
            break
    display = f":{number}"
    process = subprocess.Popen(["Xvfb", display, "-screen", "0", f"{size}x24", "-nolisten",
                                "tcp", *extra], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not Path(f"/tmp/.X11-unix/X{number}").exists():
        assert process.poll() is None and time.monotonic() < deadline, "Xvfb did not start"
        time.sleep(0.05)
    try:
        yield display
    finally:
        process.terminate()
        process.wait(timeout=10)


def with_display(display: str, **extra: str) -> dict[str, str]:
    return {**os.environ, "DISPLAY": display, **extra}


class Performer:
    """Keys and mouse into the instrument's window on `display`. The window is looked up
    again for every gesture: pyglet makes a new X window for full-screen and back."""

    def __init__(self, display: str) -> None:
        if not shutil.which("xdotool"):
            pytest.fail("xdotool is missing: apt-get install xdotool (CI installs it)")
        self.display = display
        self.env = with_display(display)

    def _xdotool(self, *args: str, timeout: float = 20) -> str:
        result = subprocess.run(["xdotool", *args], env=self.env, capture_output=True,
                                text=True, timeout=timeout)
        assert result.returncode == 0, f"xdotool {' '.join(args)}: {result.stderr.strip()}"
        return result.stdout

    def window(self, timeout: float = 60) -> str:
        """The visible instrument window's id (waits for it)."""
        deadline = time.monotonic() + timeout
        while True:
            result = subprocess.run(["xdotool", "search", "--onlyvisible", "--name",
                                     WINDOW_NAME], env=self.env, capture_output=True,
                                    text=True, timeout=20)
            ids = result.stdout.split()
            if ids:
                return ids[-1]
            assert time.monotonic() < deadline, "the instrument's window never appeared"
            time.sleep(0.2)

    def geometry(self) -> tuple[int, int]:
        """The window's size in pixels."""
        out = self._xdotool("getwindowgeometry", self.window())
        size = out.split("Geometry:")[1].split()[0]
        width, height = (int(v) for v in size.split("x"))
        return width, height

    def wait_geometry(self, size: tuple[int, int], timeout: float = 20) -> tuple[int, int]:
        """The window's size once it is `size` (pyglet maps a new window for full-screen and
        back, which takes a moment), or the last size seen after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                seen = self.geometry()
            except AssertionError:  # the old window went between search and query
                seen = None
            if seen == size or time.monotonic() > deadline:
                return seen
            time.sleep(0.25)

    def key(self, *keys: str, pause: float = 0.3) -> None:
        """Press keys in the window, e.g. key("5"), key("ctrl+7"), key("shift+Right")."""
        self._xdotool("windowfocus", "--sync", self.window(), "key", "--delay", "80", *keys)
        time.sleep(pause)

    def drag(self, path: list[tuple[int, int]], pause: float = 0.05) -> None:
        """Hold the left button along `path` (window coordinates), as the lure is dragged."""
        window = self.window()
        x, y = path[0]
        self._xdotool("mousemove", "--window", window, str(x), str(y), "mousedown", "1")
        for x, y in path[1:]:
            self._xdotool("mousemove", "--window", window, str(x), str(y))
            time.sleep(pause)
        self._xdotool("mouseup", "1")

    def wheel(self, clicks: int) -> None:
        """Scroll: positive zooms in (button 4), negative out (button 5)."""
        button = "4" if clicks > 0 else "5"
        self._xdotool("click", "--window", self.window(), "--repeat", str(abs(clicks)),
                      "--delay", "50", button)

    def screen(self) -> np.ndarray:
        """The whole X screen as an (height, width, 3) uint8 image."""
        return grab(self.display)


def grab(display: str) -> np.ndarray:
    """One frame of the X screen through FFmpeg's x11grab (PyAV bundles it)."""
    import av

    with av.open(display, format="x11grab") as container:
        for frame in container.decode(video=0):
            return frame.to_ndarray(format="rgb24")
    raise AssertionError(f"x11grab gave no frame of {display}")


def split_into_monitors(display: str, areas: list[tuple[int, int, int, int]]) -> None:
    """Make the X screen of `display` two (or more) monitors, as `xrandr --setmonitor` does
    (RandR 1.5): areas (x, y, width, height), the first holding the screen's output. The
    server must keep them after this client goes: start Xvfb with -noreset."""
    import ctypes
    import ctypes.util

    from swarm_instrument.visual.ui.screens import _MonitorInfo

    x11 = ctypes.CDLL(ctypes.util.find_library("X11"))
    xrandr = ctypes.CDLL(ctypes.util.find_library("Xrandr"))
    x11.XOpenDisplay.restype, x11.XOpenDisplay.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
    x11.XDefaultRootWindow.restype = ctypes.c_ulong
    x11.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
    x11.XInternAtom.restype = ctypes.c_ulong
    x11.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    x11.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
    x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
    xrandr.XRRGetMonitors.restype = ctypes.POINTER(_MonitorInfo)
    xrandr.XRRGetMonitors.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int,
                                      ctypes.POINTER(ctypes.c_int)]
    xrandr.XRRAllocateMonitor.restype = ctypes.POINTER(_MonitorInfo)
    xrandr.XRRAllocateMonitor.argtypes = [ctypes.c_void_p, ctypes.c_int]
    xrandr.XRRSetMonitor.argtypes = [ctypes.c_void_p, ctypes.c_ulong,
                                     ctypes.POINTER(_MonitorInfo)]
    dpy = x11.XOpenDisplay(display.encode())
    assert dpy, f"cannot open the X display {display}"
    try:
        root = x11.XDefaultRootWindow(dpy)
        count = ctypes.c_int(0)
        existing = xrandr.XRRGetMonitors(dpy, root, 0, ctypes.byref(count))
        assert existing and count.value >= 1 and existing[0].noutput >= 1, "no RandR output"
        output = existing[0].outputs[0]
        for index, (x, y, width, height) in enumerate(areas):
            outputs = [output] if index == 0 else []
            monitor = xrandr.XRRAllocateMonitor(dpy, len(outputs))
            info = monitor.contents
            info.name = x11.XInternAtom(dpy, f"TEST-{index}".encode(), 0)
            info.x, info.y, info.width, info.height = x, y, width, height
            info.mwidth, info.mheight = width // 4, height // 4
            info.primary = int(index == 0)
            for k, name in enumerate(outputs):
                info.outputs[k] = name
            xrandr.XRRSetMonitor(dpy, root, monitor)
        x11.XSync(dpy, 0)
    finally:
        x11.XCloseDisplay(dpy)


def set_dpi(display: str, dpi: int) -> None:
    """Tell programs on `display` the screen's DPI as a desktop does on a high-DPI screen:
    Xft.dpi in the root window's RESOURCE_MANAGER (what `xrdb -merge` writes; pyglet reads
    it). Start Xvfb with -noreset so that the server keeps it after this client goes."""
    import ctypes
    import ctypes.util

    x11 = ctypes.CDLL(ctypes.util.find_library("X11"))
    x11.XOpenDisplay.restype, x11.XOpenDisplay.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
    x11.XDefaultRootWindow.restype = ctypes.c_ulong
    x11.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
    x11.XInternAtom.restype = ctypes.c_ulong
    x11.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    x11.XChangeProperty.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong,
                                    ctypes.c_ulong, ctypes.c_int, ctypes.c_int,
                                    ctypes.c_char_p, ctypes.c_int]
    x11.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
    x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
    dpy = x11.XOpenDisplay(display.encode())
    assert dpy, f"cannot open the X display {display}"
    try:
        resources = f"Xft.dpi:\t{int(dpi)}\n".encode()
        atom = x11.XInternAtom(dpy, b"RESOURCE_MANAGER", 0)
        xa_string, replace = 31, 0
        x11.XChangeProperty(dpy, x11.XDefaultRootWindow(dpy), atom, xa_string, 8, replace,
                            resources, len(resources))
        x11.XSync(dpy, 0)
    finally:
        x11.XCloseDisplay(dpy)
