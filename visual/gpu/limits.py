"""What this machine's GL can hold, asked of the driver before the first frame.

A frame size the driver cannot make, or a count whose buffers do not fit, used to fail deep in
the first frame (a framebuffer incomplete after 3 GB of allocation) or freeze the show for a
minute (16M agents on software GL). `machine_limits(ctx)` reads the limits once; the checks
return one line naming the figure, or None. Main thread only, with the context current.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import moderngl

from swarm_instrument.visual.gpu.context import is_software
from swarm_instrument.visual.gpu.fence import _proc_loader

# GPU memory a frame pixel and an agent take (bytes), from the buffers the renderer and the
# swarm allocate: an RGBA16F accumulation image, its depth, an RGBA8 output and its depth, the
# post chain's two RGBA16F feedback images, its scratch image and the bloom levels (a third of
# a pixel's RGBA16F in all); two 32-byte agent buffers, each agent's new cell and rank (8), its
# slot in cell order (4), the near and far visible lists and up to 16 grid cells an agent
# (counts and starts).
MAX_COUNT = 1 << 24  # agent ids are stored as float32 on the GPU: exact below 2^24
BYTES_A_PIXEL = 8 + 4 + 4 + 4 + 2 * 8 + 8 + 3
BYTES_AN_AGENT = 32 + 32 + 8 + 4 + 8 + 16 * 8
# Software GL (Mesa llvmpipe, two cores, 1280x720, measured 2026-12-01): 65,536 agents take
# 0.14 s a frame at spawn and up to about a second once they crowd; 262,144 take 1.1 s at spawn.
# Beyond this a live show would freeze for seconds a frame (the supervisor's hang limit is 5 s).
# The H200 holds every count the registry allows: 16,777,216 agents at 61 ms a 1080p frame.
SOFTWARE_LIVE_COUNT = 65536
MEMORY_SHARE = 0.8  # of the memory the driver reports free: leave some for everything else
# One image may not reach 2 GiB: Mesa (and other drivers) refuse such an allocation, and the
# first frame then failed with an incomplete framebuffer. The largest is the RGBA16F one.
MAX_IMAGE_BYTES = 2**31 - 1
IMAGE_BYTES_A_PIXEL = 8

GL_MAX_TEXTURE_SIZE = 0x0D33
GL_MAX_VIEWPORT_DIMS = 0x0D3A
GL_MAX_RENDERBUFFER_SIZE = 0x84E8
GL_GPU_MEMORY_INFO_CURRENT_AVAILABLE_VIDMEM_NVX = 0x9049  # kilobytes
GL_TEXTURE_FREE_MEMORY_ATI = 0x87FC  # kilobytes, first of four


@dataclass(frozen=True)
class MachineLimits:
    max_side: int  # the largest framebuffer side the driver makes
    memory_bytes: int | None  # GPU memory free for us (system memory on software GL), if known
    software: bool
    memory_source: str  # where memory_bytes came from, for the message

    @property
    def live_count(self) -> int:
        """Agents a live show holds without freezing: memory-bound on a GPU, far fewer in
        software."""
        limit = MAX_COUNT
        if self.memory_bytes is not None:
            limit = min(limit, int(self.memory_bytes * MEMORY_SHARE // BYTES_AN_AGENT))
        if self.software:
            limit = min(limit, SOFTWARE_LIVE_COUNT)
        return max(limit, 1)

    def size_problem(self, size: tuple[int, int], option: str = "--size") -> str | None:
        """Why a frame of `size` cannot be made here, or None."""
        width, height = size
        if max(width, height) > self.max_side:
            return (f"{option} {width}x{height}: this GL makes frames of at most "
                    f"{self.max_side} pixels a side")
        image = width * height * IMAGE_BYTES_A_PIXEL
        if image > MAX_IMAGE_BYTES:
            return (f"{option} {width}x{height}: needs a {image / 2**30:.1f} GiB image and GL "
                    "drivers take images under 2 GiB; take a smaller size (8K, 7680x4320, is "
                    "0.25 GiB)")
        need = width * height * BYTES_A_PIXEL
        if self.memory_bytes is not None and need > self.memory_bytes * MEMORY_SHARE:
            return (f"{option} {width}x{height}: needs {need / 2**30:.1f} GiB of frame buffers; "
                    f"{self.memory_source} has {self.memory_bytes / 2**30:.1f} GiB free; "
                    f"take a smaller size")
        return None

    def count_problem(self, count: int, live: bool, option: str = "--count") -> str | None:
        """Why `count` agents cannot run here (live: at an interactive rate), or None."""
        need = count * BYTES_AN_AGENT
        if self.memory_bytes is not None and need > self.memory_bytes * MEMORY_SHARE:
            return (f"{option} {count}: {count:,} agents need {need / 2**30:.1f} GiB; "
                    f"{self.memory_source} has {self.memory_bytes / 2**30:.1f} GiB free; "
                    f"at most {self.live_count:,} here")
        if live and count > self.live_count:
            return (f"{option} {count}: software GL holds at most {self.live_count:,} agents "
                    "live (a frame takes up to a second when they crowd); use a GPU, or "
                    "--frames N / --render for a run that may take longer")
        return None


def machine_limits(ctx: moderngl.Context) -> MachineLimits:
    """Read the driver's limits (the context must be current)."""
    sides = [ctx.info.get("GL_MAX_TEXTURE_SIZE"), ctx.info.get("GL_MAX_RENDERBUFFER_SIZE")]
    viewport = ctx.info.get("GL_MAX_VIEWPORT_DIMS")
    if isinstance(viewport, (tuple, list)) and viewport:
        sides.append(min(viewport))
    max_side = min(int(side) for side in sides if side) if any(sides) else 16384
    software = is_software(ctx)
    memory, source = _gpu_memory(ctx)
    if memory is None and software:
        memory, source = _available_system_memory(), "this machine (software GL)"
    return MachineLimits(max_side, memory, software, source)


def _gpu_memory(ctx: moderngl.Context) -> tuple[int | None, str]:
    """Free video memory where the driver reports it (NVIDIA, AMD), else None."""
    extensions = ctx.extensions
    for extension, enum, name in (
            ("GL_NVX_gpu_memory_info", GL_GPU_MEMORY_INFO_CURRENT_AVAILABLE_VIDMEM_NVX, "the GPU"),
            ("GL_ATI_meminfo", GL_TEXTURE_FREE_MEMORY_ATI, "the GPU")):
        if extension in extensions:
            kilobytes = _get_integer(enum)
            if kilobytes and kilobytes > 0:
                return kilobytes * 1024, name
    return None, ""


def _get_integer(enum: int) -> int | None:
    """glGetIntegerv through the current context's GetProcAddress (moderngl has no generic
    query); None where it cannot be reached."""
    try:
        loader = _proc_loader()
        address = loader(b"glGetIntegerv") if loader else None
    except (OSError, AttributeError):
        return None
    if not address:
        return None
    get_integer = ctypes.CFUNCTYPE(None, ctypes.c_uint, ctypes.POINTER(ctypes.c_int * 4))(address)
    values = (ctypes.c_int * 4)()
    get_integer(enum, ctypes.byref(values))
    return int(values[0])


def _available_system_memory() -> int | None:
    """MemAvailable from /proc/meminfo (Linux), where software GL allocates."""
    try:
        with open("/proc/meminfo", encoding="ascii") as stream:
            for line in stream:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None

