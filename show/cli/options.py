"""How a show is set up, from the command line: one reading for a live show and a render.
Main thread only."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from swarm_instrument.control.looks.files import FileProblem
from swarm_instrument.control.looks.swarm_state import load_state
from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.visual.gpu.shaders import BUNDLED_SHADERS

HEADLESS_SIZE = (1280, 720)  # a headless run's frame unless --size
START_LOOK = "aurora"  # the most striking bundled look: a start that chooses none opens on it
START_LOOK_NOTE = f"opening on the bundled look '{START_LOOK}' (--preset chooses another)"


@dataclass
class ShowOptions:
    neighbors: str = "grid"
    seed: int = 0
    fixed_dt: float | None = None  # --dt: exactly this step each frame
    obstacles: Sequence[Sequence[float]] = ()
    position: np.ndarray | None = None  # --state-in
    velocity: np.ndarray | None = None
    # Same input, same frames: the renderer's counts (which the camera follows) are read a
    # fixed two frames late, waiting for the GPU if need be, and the cull lists agents in
    # order (--dt, --render, and --record-control, so that the set renders again into its own
    # frames). A live show reads them when the GPU is done instead, never waiting.
    reproducible: bool = False
    # Parameters the command line set (--count): preset recalls and crossfades leave them as
    # they are until the performer changes them live.
    pinned: frozenset[str] = frozenset()
    # The most agents a live change (a knob, OSC, a recall) may ask for on this machine
    # (visual/gpu/limits.py): more would freeze the show; None: the registry's limit.
    count_limit: int | None = None
    # A live show says its slow frames; an offline render (no audience, no clock) does not.
    live: bool = True
    # Where the shaders come from: None, $SWARM_SHADERS or the bundled ones; safe mode: the
    # bundled ones whatever the environment says.
    shader_dir: Path | None = None
    # --gl: the simulation and culling backend, "auto" (4.3's compute where the driver has it,
    # else 4.1's transform feedback), "4.3" or "4.1".
    gl: str = "auto"


def options_from_args(args: argparse.Namespace, params: Params, *, render: bool = False
                      ) -> ShowOptions:
    """ShowOptions from the command line, reading --state-in (which sets the count: a
    --count that disagrees is refused). A render steps by its frame rate, reproducibly; a
    recorded set (--record-control) is reproducible too, so its render is its own frames."""
    position = velocity = None
    state_in = getattr(args, "state_in", None)
    if state_in:
        position, velocity = load_state(state_in)
        if args.count is not None and args.count != len(position):
            raise FileProblem(f"{state_in}: holds {len(position)} agents but --count is "
                              f"{args.count}; drop --count (the state sets it)")
        params["count"] = len(position)
    fixed_dt = None if render else args.dt
    recorded = bool(getattr(args, "record_control", None))
    return ShowOptions(
        neighbors=getattr(args, "neighbors", "grid"), seed=args.seed or 0, fixed_dt=fixed_dt,
        obstacles=getattr(args, "obstacle", None) or (), position=position, velocity=velocity,
        reproducible=render or fixed_dt is not None or recorded, live=not render,
        shader_dir=BUNDLED_SHADERS if getattr(args, "safe_mode", False) else None,
        gl=getattr(args, "gl", None) or "auto",
        pinned=frozenset({"count"}) if args.count is not None or position is not None
        else frozenset())
