"""The screens a window can play on, as the desktop lays them out: a projector beside the
laptop's own screen is two screens, whatever the graphics driver calls them.

pyglet lists X's RandR outputs (one per connector with a mode). A desktop may split one output
into several monitors (RandR 1.5's monitors, what `xrandr --setmonitor` makes: a video wall, a
wide panel behind a splitter box, a virtual X screen in tests); where X reports more monitors
than pyglet has screens, the monitors are the screens, each placed where the desktop put it.
Elsewhere (Windows, macOS, one monitor per output) pyglet's own list stands. Main thread only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass

import pyglet


@dataclass(frozen=True)
class ScreenArea:
    """Where a screen is on the desktop, in pixels."""

    x: int
    y: int
    width: int
    height: int


class _MonitorInfo(ctypes.Structure):  # XRRMonitorInfo, Xrandr.h (RandR 1.5)
    _fields_ = [("name", ctypes.c_ulong), ("primary", ctypes.c_int),
                ("automatic", ctypes.c_int), ("noutput", ctypes.c_int),
                ("x", ctypes.c_int), ("y", ctypes.c_int),
                ("width", ctypes.c_int), ("height", ctypes.c_int),
                ("mwidth", ctypes.c_int), ("mheight", ctypes.c_int),
                ("outputs", ctypes.POINTER(ctypes.c_ulong))]


def randr_monitors(x_display) -> list[ScreenArea]:
    """The X server's RandR monitors (active ones), left to right; [] where RandR 1.5 is not
    there. `x_display`: an open Xlib Display pointer (pyglet's)."""
    name = ctypes.util.find_library("Xrandr")
    if not name:
        return []
    try:
        xrandr = ctypes.CDLL(name)
        get_monitors, free_monitors = xrandr.XRRGetMonitors, xrandr.XRRFreeMonitors
        root_of = ctypes.CDLL(ctypes.util.find_library("X11")).XDefaultRootWindow
    except (OSError, AttributeError, TypeError):
        return []
    root_of.restype, root_of.argtypes = ctypes.c_ulong, [ctypes.c_void_p]
    get_monitors.restype = ctypes.POINTER(_MonitorInfo)
    get_monitors.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int,
                             ctypes.POINTER(ctypes.c_int)]
    free_monitors.argtypes = [ctypes.POINTER(_MonitorInfo)]
    count = ctypes.c_int(0)
    monitors = get_monitors(x_display, root_of(x_display), 1, ctypes.byref(count))
    if not monitors:
        return []
    try:
        areas = [ScreenArea(m.x, m.y, m.width, m.height)
                 for m in (monitors[i] for i in range(count.value))
                 if m.width > 0 and m.height > 0]
    finally:
        free_monitors(monitors)
    return sorted(areas, key=lambda a: (a.x, a.y))


def list_screens() -> list:
    """pyglet's screens, or the RandR monitors where X reports more of them (see above), as
    pyglet screens a window can be placed or made full-screen on."""
    display = pyglet.display.get_display()
    screens = list(display.get_screens())
    x_display = getattr(display, "_display", None)
    if x_display is None:  # not Xlib
        return screens
    monitors = randr_monitors(x_display)
    if len(monitors) <= len(screens):
        return screens
    from pyglet.display.xlib import XlibScreenXinerama  # noqa: PLC0415 - display: X11's screens, only where X runs

    # A screen pyglet cannot set modes on (as under Xinerama): it plays at the desktop's mode.
    return [XlibScreenXinerama(display, m.x, m.y, m.width, m.height, True, index)
            for index, m in enumerate(monitors)]


# One screen for the picture and the control window (--control-screen on a laptop alone): they
# go side by side, the control window taking this share of the width, within these bounds.
CONTROL_SHARE = 0.4
CONTROL_MIN_WIDTH = 480
CONTROL_MAX_WIDTH = 1280  # the control window's width on a screen of its own, at most


def side_by_side(screen: ScreenArea, picture: tuple[int, int] | None = None
                 ) -> tuple[ScreenArea, ScreenArea]:
    """Where the picture's window and the control window go on one screen, neither over the
    other: the picture at the screen's top left, the control window to its right, as high as
    the screen. The picture is `picture` (--size) where that leaves the control window
    CONTROL_MIN_WIDTH (or half a narrow screen); otherwise it takes what the control window's
    share leaves, in its own proportions (16:9 without --size)."""
    width, height = screen.width, screen.height
    least = min(CONTROL_MIN_WIDTH, width // 2)
    if picture is not None and picture[0] <= width - least and picture[1] <= height:
        shown = picture
    else:
        control = min(max(round(width * CONTROL_SHARE), least), CONTROL_MAX_WIDTH, width // 2)
        aspect = picture[0] / picture[1] if picture is not None else 16 / 9
        room = width - control
        shown = (room, round(room / aspect))
        if shown[1] > height:
            shown = (round(height * aspect), height)
    control_width = min(width - shown[0], CONTROL_MAX_WIDTH)
    return (ScreenArea(screen.x, screen.y, *shown),
            ScreenArea(screen.x + shown[0], screen.y, control_width, height))


def describe(screens: list) -> str:
    """"0: 1920x1080 at 0,0, 1: 1280x800 at 1920,0" for messages."""
    return ", ".join(f"{i}: {s.width}x{s.height} at {s.x},{s.y}" for i, s in enumerate(screens))
