"""What the cull pass counts, brought back to the CPU without waiting for the GPU.

Each frame the cull pass leaves its counts in the draw state buffer (see shaders/cull.comp): the
two indirect commands' instance counts, the agents near the lure, and fixed-point sums of the
agents' offsets from the camera's centre and of their squared distances. `CountsReadback`
copies that buffer into a ring of small buffers and reads a copy once a GL fence says the GPU
has finished its frame (or exactly two frames late, `fixed_lag`, so that renders repeat), then
decodes it with the scales that frame's sums were made with. Main thread only.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import moderngl

from swarm_instrument.visual.gpu.fence import ReadbackRing

COUNTER_RING = 3       # counter copies in flight before the oldest is dropped unread
DRAW_STATE_UINTS = 16  # two 5-uint commands, near_lure, spread, offset[3], pad (cull.comp)
SUM_BUDGET = 4.0e9     # fixed-point scales keep the spread and offset sums below 2^32
_WORDS = struct.Struct(f"<{DRAW_STATE_UINTS}I")


@dataclass(frozen=True)
class CullCounts:
    """What one cull pass counted: visible agents by level of detail, agents near the lure,
    and where the swarm is (mean position, RMS distance from it) for the camera to frame."""

    near: int
    far: int
    near_lure: int
    center: tuple[float, float, float]
    rms_radius: float

    @property
    def visible(self) -> int:
        return self.near + self.far


@dataclass(frozen=True)
class SumScales:
    """How a frame's fixed-point sums were made, to decode them when they are read back."""

    count: int
    center: tuple[float, float, float]
    reach: float
    spread_scale: float
    offset_scale: float

    @classmethod
    def for_frame(cls, count: int, center: Sequence[float], contain_radius: float
                  ) -> SumScales:
        """Sums around `center` (the camera's target); an agent farther than 4 x
        contain_radius counts as that far, so `count` of them fit in a uint."""
        reach = 4.0 * float(contain_radius)
        return cls(count=count, center=tuple(map(float, center)), reach=reach,
                   spread_scale=SUM_BUDGET / (count * reach * reach),
                   offset_scale=SUM_BUDGET / (count * 2.0 * reach))

    def decode(self, data: bytes) -> CullCounts:
        """The draw state's words -> counts, centre and RMS radius."""
        words = _WORDS.unpack_from(data)  # plain ints and floats: a few numbers, no numpy
        count = max(self.count, 1)
        mean_square = words[11] / self.spread_scale / count  # E|p - c|^2
        scale, reach = self.offset_scale, self.reach
        ox, oy, oz = (words[12] / scale / count - reach, words[13] / scale / count - reach,
                      words[14] / scale / count - reach)  # E(p - c)
        variance = max(mean_square - (ox * ox + oy * oy + oz * oz), 0.0)
        cx, cy, cz = self.center
        center = (cx + ox, cy + oy, cz + oz)
        return CullCounts(near=words[1], far=words[6], near_lure=words[10],
                          center=center, rms_radius=math.sqrt(variance))


class CountsReadback:
    """The newest finished frame's counts (`counts`, from render `counts_frame`)."""

    def __init__(self, ctx: moderngl.Context, nbytes: int) -> None:
        self.ctx = ctx
        self.ring = ReadbackRing(ctx, nbytes, COUNTER_RING)
        # read_now reads a copy: a draw-state buffer the CPU has read once costs NVIDIA's
        # driver 0.7 ms of CPU in every indirect draw from it after that (H200, 16,384 agents)
        self._scratch = ctx.buffer(reserve=nbytes)
        self.counts: CullCounts | None = None
        self.counts_frame: int | None = None  # the render (from 0) that `counts` comes from
        self.frames = 0  # frames pushed so far
        self._last_scales = SumScales(1, (0.0, 0.0, 0.0), 1.0, 1.0, 1.0)

    @property
    def readback(self) -> str:
        """"fences" (counts read once the GPU is done, never waiting) or "two frames late"
        (`fixed_lag`, or a driver without fences: waits when the GPU is further behind)."""
        ring = self.ring
        return "two frames late" if ring.fixed_lag or ring.fences is None else "fences"

    def push(self, draw_state: moderngl.Buffer, scales: SumScales) -> None:
        """Keep a copy of this frame's draw state; take the counts of a finished frame."""
        self.ring.push(draw_state, (self.frames, scales))
        self._last_scales = scales
        self.frames += 1
        done = self.ring.poll()
        if done is not None:
            data, (self.counts_frame, done_scales) = done
            self.counts = done_scales.decode(data)

    def read_now(self, draw_state: moderngl.Buffer) -> CullCounts:
        """The last pushed frame's counts, waiting for the GPU: for tests, not per frame."""
        self.ctx.copy_buffer(self._scratch, draw_state)
        self.ctx.finish()
        self.counts = self._last_scales.decode(self._scratch.read())
        return self.counts

    def release(self) -> None:
        self.ring.release()
        self._scratch.release()


class CountsView:
    """What a renderer tells of its counts (the show's HUD, telemetry and camera read these),
    from `self._readback`, its CountsReadback."""

    _readback: CountsReadback

    @property
    def readback(self) -> str:
        """"fences" (counts read once the GPU is done, never waiting) or "two frames late"
        (`fixed_lag`, or a driver without fences: waits when the GPU is further behind)."""
        return self._readback.readback

    @property
    def has_fences(self) -> bool:
        return self._readback.ring.fences is not None

    @property
    def fixed_lag(self) -> bool:
        """Read counts exactly two frames late, waiting if need be: reproducible frames."""
        return self._readback.ring.fixed_lag

    @fixed_lag.setter
    def fixed_lag(self, value: bool) -> None:
        self._readback.ring.fixed_lag = value

    @property
    def frames(self) -> int:
        """Frames rendered so far."""
        return self._readback.frames

    @property
    def counts(self) -> CullCounts | None:
        """The newest finished frame's counts, None until the GPU has finished one."""
        return self._readback.counts

    @property
    def counts_frame(self) -> int | None:
        """The render (from 0) that `counts` comes from."""
        return self._readback.counts_frame

    @property
    def visible(self) -> int | None:
        """Agents drawn in the newest finished frame, None until the GPU has finished one."""
        return None if self.counts is None else self.counts.visible

    @property
    def near_lure(self) -> int | None:
        """Agents within lure_radius of the lure in a recent frame, None until known."""
        return None if self.counts is None else self.counts.near_lure

    @property
    def swarm_center(self) -> tuple[float, float, float] | None:
        """The agents' mean position a few frames ago (None until known): `OrbitCamera.follow`
        can keep it in the middle of the frame."""
        return None if self.counts is None else self.counts.center

    @property
    def swarm_radius(self) -> float | None:
        """The agents' RMS distance from their mean position a few frames ago (None until
        known): `OrbitCamera.follow` frames a ball of that size."""
        return None if self.counts is None else self.counts.rms_radius
