"""GL plumbing shared by the swarm and the renderer: contexts, shader sources, dispatch, timers.

Shader files live in the project's `shaders/` folder, found from this file, never from the working
directory (`$SWARM_SHADERS`, read when `shader_dir()` is called, points at another copy; an owner
given `shader_dir=` uses that folder instead). `#include "name"` pulls a file in once, a generated
one (visual/uniforms.py) or one of the folder's, and marks where it starts with `#line`, so that a
compiler error can be mapped back to the right file and line. Main thread only.
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import moderngl

from visual.fence import fences_for
from visual.uniforms import GENERATED_INCLUDES, Block

BUNDLED_SHADERS = Path(__file__).resolve().parent.parent / "shaders"
# Tests turn this on (an autouse fixture in each GPU test module): a uniform name a program does
# not have, or a program without the block it should read, raises instead of being skipped.
STRICT = False
GLSL_VERSION = "#version 430 core"
MAX_GROUPS_X = 65535  # the minimum GL guarantees for GL_MAX_COMPUTE_WORK_GROUP_COUNT

_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"\s*$')


class ShaderError(RuntimeError):
    """A shader that failed to load, compile or link; the message names the file and line."""


def shader_dir() -> Path:
    """The shader folder now: $SWARM_SHADERS (a copy to live-code) or the bundled one."""
    return Path(os.environ.get("SWARM_SHADERS") or BUNDLED_SHADERS)


def resolve_shader_dir(given: Path | str | None) -> Path:
    """An owner's folder: the one it was given, else `shader_dir()` as it is now."""
    return Path(given) if given is not None else shader_dir()


def create_headless_context() -> moderngl.Context:
    """A standalone OpenGL 4.3+ context through EGL: no display needed."""
    try:
        return moderngl.create_context(standalone=True, backend="egl", require=430)
    except Exception as exc:  # moderngl raises plain Exceptions for driver problems
        raise RuntimeError(
            f"could not create a headless OpenGL 4.3 context through EGL ({exc}); "
            "install Mesa's EGL (Debian: libegl1 libgl1-mesa-dri) or a GPU driver"
        ) from exc


class ShaderSource:
    """A shader's text with its includes expanded, and the files it came from, numbered."""

    def __init__(self, name: str, defines: Mapping[str, Any] | None = None,
                 shader_dir: Path | None = None) -> None:
        self.shader_dir = resolve_shader_dir(shader_dir)
        self.files: list[str] = []
        body: list[str] = []
        self._expand(name, body, set())
        head = [GLSL_VERSION]
        for key, value in (defines or {}).items():
            head.append(f"#define {key} {value}")
        self.text = "\n".join(head + body) + "\n"

    def _expand(self, name: str, out: list[str], seen: set[str]) -> None:
        if name in seen:
            return
        seen.add(name)
        index = len(self.files)
        if name in GENERATED_INCLUDES:
            lines = GENERATED_INCLUDES[name].splitlines()
            self.files.append(f"{name} (generated)")
        else:
            path = self.shader_dir / name
            try:
                lines = path.read_text().splitlines()
            except OSError as exc:
                raise ShaderError(f"{path}: cannot read shader file ({exc.strerror})") from exc
            self.files.append(name)
        out.append(f"#line 1 {index}")
        for number, line in enumerate(lines, start=1):
            match = _INCLUDE.match(line)
            if match:
                self._expand(match.group(1), out, seen)
                out.append(f"#line {number + 1} {index}")
            else:
                out.append(line)

    def explain(self, log: str) -> str:
        """Rewrite a driver's log so `0:12(3)` / `0(12)` read `boids.glsl:12`."""

        def name(match: re.Match) -> str:
            index = int(match.group(1))
            file = self.files[index] if index < len(self.files) else f"<source {index}>"
            return f"{file}:{match.group(2)}"

        return re.sub(r"\b(\d+)[:(](\d+)\)?(?:\(\d+\))?", name, log, count=0)


class ShaderWatch:
    """Notices edits under the shader folder: `changed()` looks at most once a second."""

    def __init__(self, interval: float = 1.0, shader_dir: Path | None = None) -> None:
        self.interval = interval
        self.shader_dir = resolve_shader_dir(shader_dir)
        self._next = 0.0
        self._seen = self._snapshot()

    def _snapshot(self) -> dict[str, float]:
        try:
            return {p.name: p.stat().st_mtime for p in self.shader_dir.iterdir() if p.is_file()}
        except OSError:
            return {}

    def changed(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        if now < self._next:
            return False
        self._next = now + self.interval
        snapshot = self._snapshot()
        if snapshot == self._seen:
            return False
        self._seen = snapshot
        return True


def compute_program(ctx: moderngl.Context, name: str, defines: Mapping[str, Any] | None = None,
                    shader_dir: Path | None = None, block: Block | None = None
                    ) -> moderngl.ComputeShader:
    """Compile shaders/`name`; `block`: the uniform block it reads (checked, see check_block)."""
    source = ShaderSource(name, defines, shader_dir)
    try:
        program = ctx.compute_shader(source.text)
    except Exception as exc:
        raise ShaderError(f"{name}: {source.explain(str(exc))}") from exc
    if block is not None:
        try:
            check_block(program, block, name)
        except ShaderError:
            program.release()
            raise
    return program


def check_block(program: Any, block: Block, what: str, strict: bool | None = None) -> None:
    """A program that declares `block` must lay it out as visual/uniforms.py packs it (always
    checked); one that does not declare it at all is an error when strict (tests), and fine
    live (a shader being live-coded may not read it)."""
    strict = STRICT if strict is None else strict
    try:
        member = program[block.name]
    except KeyError:
        if strict:
            raise ShaderError(f"{what}: does not read the uniform block {block.name}") from None
        return
    if not isinstance(member, moderngl.UniformBlock) or member.size != block.size:
        size = getattr(member, "size", "?")
        raise ShaderError(f"{what}: {block.name} is {size} bytes on the GPU, but "
                          f"visual/uniforms.py packs {block.size}")


def set_uniforms(program: Any, values: Mapping[str, Any], strict: bool | None = None) -> None:
    """Set plain uniforms by name. A name the program does not have (misspelled, or removed by
    the compiler as unused) raises KeyError when `strict` (default: STRICT, on in tests) and is
    skipped otherwise, so that a live-coded shader that stops using one keeps running."""
    strict = STRICT if strict is None else strict
    for key, value in values.items():
        try:
            member = program[key]
        except KeyError:
            if strict:
                raise KeyError(f"no uniform {key!r} in this program (it has: "
                               f"{', '.join(sorted(program))})") from None
            continue
        member.value = value


def dispatch_1d(program: moderngl.ComputeShader, items: int, local_size: int) -> None:
    """Dispatch ceil(items / local_size) groups, folded into y past the x limit.

    Shaders compute their index with `global_index()` from common.glsl and bound-check it.
    """
    groups = max(1, -(-items // local_size))
    x = min(groups, MAX_GROUPS_X)
    y = -(-groups // x)
    program.run(x, y, 1)


def storage_barrier(ctx: moderngl.Context) -> None:
    """Between compute passes: shader storage writes become visible to the next pass (and to the
    renderer's cull and vertex shaders). Narrower than all bits: cheaper on NVIDIA."""
    ctx.memory_barrier(moderngl.SHADER_STORAGE_BARRIER_BIT)


def is_software(ctx: moderngl.Context) -> bool:
    """Mesa's llvmpipe / softpipe: compute runs on the CPU and timer queries read ~0 ns."""
    renderer = ctx.info.get("GL_RENDERER", "").lower()
    return "llvmpipe" in renderer or "softpipe" in renderer or "swrast" in renderer


class GpuTimer:
    """GL timer queries read once a fence says the GPU has finished them, so reading never
    stalls the frame (without fences: read a few frames late, which waits only when the GPU
    is further behind than that).

    `available` is False where the driver has no meaningful timer queries (software GL):
    `last_ms` then stays None and callers fall back to wall time around `ctx.finish()`.
    """

    def __init__(self, ctx: moderngl.Context, depth: int = 3) -> None:
        self.ctx = ctx
        self._free = deque()
        self.available = not is_software(ctx)
        if self.available:
            try:
                self._free.extend(ctx.query(time=True) for _ in range(depth))
            except Exception:
                self.available = False
        self._fences = fences_for(ctx) if self.available else None
        self._pending: deque = deque()  # (query, fence), oldest first
        self.last_ms: float | None = None

    def __enter__(self) -> "GpuTimer":
        if self.available and self._free:
            query = self._free.popleft()
            self._active = query
            query.__enter__()
        else:
            self._active = None  # every query still in flight: this frame goes untimed
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._active is not None:
            self._active.__exit__(*exc)
            self._pending.append((self._active, self._fences.insert() if self._fences else 0))
        if self._fences is not None:
            while self._pending and self._fences.signalled(self._pending[0][1]):
                self._read_oldest()
        elif not self._free and self._pending:
            self._read_oldest()  # a few frames old

    def _read_oldest(self) -> None:
        query, fence = self._pending.popleft()
        self.last_ms = query.elapsed / 1e6
        if self._fences is not None:
            self._fences.delete(fence)
        self._free.append(query)

    def flush(self) -> float | None:
        """Read every pending query (waits for the GPU): for benchmarks and the end of a run."""
        while self._pending:
            self._read_oldest()
        return self.last_ms

    def release(self) -> None:
        # moderngl's Query has no release(); dropping the references frees them.
        if self._fences is not None:
            for _, fence in self._pending:
                self._fences.delete(fence)
        self._free.clear()
        self._pending.clear()
