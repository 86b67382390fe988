"""The command line's value types: each a function from the text typed to a checked value, its
refusal one line naming the limits in plain numbers (argparse adds the option's name). Used by
show/cli/arguments.py and by the options of the video outputs and the render. Pure.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from swarm_instrument.visual.sim.agents import MAX_DT


def whole(what: str, lo: int, hi: int | None = None) -> Callable[[str], int]:
    """A whole number from `lo` (to `hi`), its message naming the limits in plain digits:
    "expected 1 to 16777216 agents, got 100000000"."""
    limits = f"{lo} to {hi}" if hi is not None else f"{lo} or more"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a whole number of {what}, {limits}, got {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"expected {limits} {what}, got {value}")
        return value

    parse.__name__ = what  # argparse names the type in its own messages
    return parse


positive_int = whole("frames", 1)  # --frames


def time_step(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_DT + 1e-9:  # NaN fails the comparison too
        raise argparse.ArgumentTypeError(
            f"expected a step above 0 and at most 1/30 s ({MAX_DT:.6f}: the seed's clamp), "
            f"got {text!r}")
    return value


def seconds(text: str) -> float:
    """A duration in seconds, 0 to an hour."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= 3600:  # NaN fails the comparison too
        raise argparse.ArgumentTypeError(f"expected seconds from 0 to 3600, got {text!r}")
    return value


def song_time(text: str) -> float:
    """A point in a song: seconds, or minutes:seconds (1:30), or hours:minutes:seconds."""
    parts = text.strip().split(":")
    try:
        if len(parts) > 3 or any(not part.strip() for part in parts):
            raise ValueError(text)
        value = 0.0
        for part in parts[:-1]:
            if not part.strip().isdigit():
                raise ValueError(text)
            value = value * 60.0 + int(part)
        last = float(parts[-1])
        if len(parts) > 1 and not 0 <= last < 60:
            raise ValueError(text)
        value = value * 60.0 + last
    except ValueError:
        value = math.nan
    if not 0 <= value <= 86400:  # NaN fails the comparison too
        raise argparse.ArgumentTypeError(f"expected seconds (90) or minutes:seconds (1:30), "
                                         f"got {text!r}")
    return value


MAX_SEED = 2**32 - 1
OBSTACLE_REACH = 1e6  # farther than any containment radius a knob reaches


def seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected 0 to {MAX_SEED}, got {text}")
    return value


def obstacle(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if (len(values) != 4 or not all(abs(v) <= OBSTACLE_REACH for v in values)
            or values[3] <= 0):  # NaN fails the comparison too
        raise argparse.ArgumentTypeError(
            f"an obstacle is X,Y,Z,RADIUS: four finite numbers from {-OBSTACLE_REACH:.0f} to "
            f"{OBSTACLE_REACH:.0f}, RADIUS above 0; got {text!r}")
    return values


def size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, e.g. 1920x1080, got {text!r}") \
            from None
    if not (16 <= width <= 16384 and 16 <= height <= 16384):
        raise argparse.ArgumentTypeError(f"expected each side 16 to 16384 pixels, got {text}")
    return width, height


def screen_index(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a screen number (0, 1, ...), got {text!r}") \
            from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a screen number (0, 1, ...), got {value}")
    return value


def rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"expected 1 to 1000 frames a second, got {text!r}")
    return value
