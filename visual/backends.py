"""The GPU backends' roles, as the show and the benchmarks depend on them: a swarm, a renderer
and a post chain, each a protocol that both backends implement (GL 4.3's compute shaders,
GL 4.1's transform feedback and fragment passes: visual/sim/, visual/render/), and the one table
that says which classes make a backend. Nothing outside `visual/` names a backend's class.

    swarm_class, renderer_class = backend_classes("4.1")

Main thread only (the classes own GL objects of the context they are made with).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import moderngl
import numpy as np

from swarm_instrument.visual.gpu.programs import ProgramSet
from swarm_instrument.visual.post.post_chain41 import PostChain41
from swarm_instrument.visual.post.post_settings import PostSettings
from swarm_instrument.visual.render.renderer import Renderer
from swarm_instrument.visual.render.renderer41 import Renderer41
from swarm_instrument.visual.sim.swarm import Swarm
from swarm_instrument.visual.sim.swarm41 import Swarm41

Values = Mapping[str, Any]


@runtime_checkable
class SwarmRole(Protocol):
    """The simulated swarm: agents on the GPU stepped by seed 000's arithmetic."""

    backend: str  # "4.3" or "4.1"
    steps: int
    lanes: int  # invocations an agent in the last grid step (4.1: always 1)
    mean_candidates: float | None  # the crowd last measured (4.1: never measured)
    fixed_lag: bool  # read late measurements at a fixed step: reproducible runs
    obstacles: list[tuple[float, float, float, float]]
    pass_timer: Any  # benchmarks time each pass by name through it
    max_cells: int | None

    @property
    def count(self) -> int: ...
    @property
    def neighbors(self) -> str: ...
    @neighbors.setter
    def neighbors(self, mode: str) -> None: ...
    @property
    def grid_capacity(self) -> int: ...
    @property
    def program_sets(self) -> tuple[ProgramSet, ...]: ...

    def step(self, dt: float, values: Values | None = None,
             target: Sequence[float] = (0.0, 0.0, 0.0), speed_scale: float = 1.0) -> None: ...
    def set_state(self, position: np.ndarray, velocity: np.ndarray, *,
                  same_crowd: bool = False) -> None: ...
    def resize(self, count: int, values: Values | None = None) -> None: ...
    def read_state(self) -> tuple[np.ndarray, np.ndarray]: ...
    def read_guarded(self) -> int: ...
    def set_obstacles(self, spheres: Sequence[Sequence[float]]) -> None: ...
    def reload_shaders(self) -> None: ...
    def release(self) -> None: ...


@runtime_checkable
class PostRole(Protocol):
    """The post chain: an HDR image to a framebuffer (bloom, feedback, tone map)."""

    gpu_ms: float | None

    @property
    def program_sets(self) -> tuple[ProgramSet, ...]: ...

    def run(self, hdr: moderngl.Texture, out: moderngl.Framebuffer,
            size: tuple[int, int], settings: PostSettings, dt: float = 1 / 60,
            scene_size: tuple[int, int] | None = None) -> None: ...
    def prepare(self, hdr: moderngl.Texture, size: tuple[int, int], settings: PostSettings,
                dt: float = 1 / 60, scene_size: tuple[int, int] | None = None) -> None: ...
    def display(self, out: moderngl.Framebuffer, settings: PostSettings) -> None: ...
    def reload_shaders(self) -> None: ...
    def release(self) -> None: ...


@runtime_checkable
class RendererRole(Protocol):
    """Culls and draws its backend's swarm, then runs its post chain; counts what it culled,
    read back without waiting (visual/render/counts.py)."""

    backend: str
    software: bool
    shader_dir: Path
    far_draw: str  # "splat" (compute) or "points"
    post_on: bool
    post_held: bool  # the governor holds the post chain off (show/governor.py)
    gpu_ms: dict[str, float | None]
    last_size: tuple[int, int] | None
    scene_size: tuple[int, int] | None  # the picture drawn before it is scaled to last_size

    @property
    def program_sets(self) -> tuple[ProgramSet, ...]: ...
    @property
    def fixed_lag(self) -> bool: ...
    @fixed_lag.setter
    def fixed_lag(self, value: bool) -> None: ...
    @property
    def has_fences(self) -> bool: ...
    @property
    def readback(self) -> str: ...
    @property
    def frames(self) -> int: ...
    @property
    def counts_frame(self) -> int | None: ...
    @property
    def visible(self) -> int | None: ...
    @property
    def near_lure(self) -> int | None: ...
    @property
    def swarm_center(self) -> tuple[float, float, float] | None: ...
    @property
    def swarm_radius(self) -> float | None: ...
    @property
    def post_state(self) -> str: ...
    @property
    def stable_order(self) -> bool: ...
    @stable_order.setter
    def stable_order(self, value: bool) -> None: ...

    def render(self, swarm: Any, camera: Any, framebuffer: moderngl.Framebuffer,
               values: Values, *, lure: Sequence[float] = (0.0, 0.0, 0.0),
               time: float | None = None, show_lure: bool = False,
               size: tuple[int, int] | None = None, dt: float = 1 / 60,
               scale: float = 1.0) -> None: ...
    def draw_scene(self, swarm: Any, camera: Any, size: tuple[int, int], values: Values, *,
                   lure: Sequence[float] = (0.0, 0.0, 0.0), time: float | None = None,
                   show_lure: bool = False, scale: float = 1.0, dt: float = 1 / 60) -> None: ...
    def present(self, framebuffer: moderngl.Framebuffer, values: Values) -> None: ...
    def post_active(self, values: Values) -> bool: ...
    def offscreen_framebuffer(self, size: tuple[int, int]) -> moderngl.Framebuffer: ...
    def read_counts_now(self) -> Any: ...
    def read_visible_now(self) -> tuple[np.ndarray, np.ndarray]: ...
    def reload_shaders(self) -> None: ...
    def release(self) -> None: ...


# backend -> (swarm class, renderer class); each renderer makes its own post chain.
BACKEND_CLASSES: dict[str, tuple[type[SwarmRole], type[RendererRole]]] = {
    "4.3": (Swarm, Renderer),
    "4.1": (Swarm41, Renderer41),
}
POST_CHAINS: dict[str, type[PostRole]] = {"4.3": Renderer.post_chain, "4.1": PostChain41}


def backend_classes(backend: str) -> tuple[type[SwarmRole], type[RendererRole]]:
    """The swarm and renderer classes of `backend` ("4.3" or "4.1")."""
    return BACKEND_CLASSES[backend]
