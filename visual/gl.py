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
from visual.uniforms import BLOCKS, GENERATED_INCLUDES, GENERATED_INCLUDES_410, Block

BUNDLED_SHADERS = Path(__file__).resolve().parent.parent / "shaders"
# Tests turn this on (an autouse fixture in each GPU test module): a uniform name a program does
# not have, or a program without the block it should read, raises instead of being skipped.
STRICT = False
GLSL_VERSION = "#version 430 core"
GLSL_410 = "#version 410 core"  # the GL 4.1 backend's shaders (macOS stops at 4.1 core)
# The simulation and culling backends: "4.3" compute shaders and storage buffers, "4.1"
# transform feedback and float textures (visual/swarm41.py, visual/renderer41.py).
BACKENDS = ("4.3", "4.1")
GL_CHOICES = ("auto", *BACKENDS)  # --gl
COMPUTE_EXTENSIONS = ("GL_ARB_compute_shader", "GL_ARB_shader_storage_buffer_object",
                      "GL_ARB_shader_image_load_store")
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


def create_headless_context(minimum: str = "4.3") -> moderngl.Context:
    """A standalone OpenGL context through EGL: no display needed. `minimum`: the version it
    must have, "4.3" (the compute backend's, the default) or "4.1" (the show's: pick_backend
    then chooses the backend, and says why where --gl asked for one it cannot have)."""
    require = 430 if minimum == "4.3" else 410
    try:
        return moderngl.create_context(standalone=True, backend="egl", require=require)
    except Exception as exc:  # moderngl raises plain Exceptions for driver problems
        raise RuntimeError(
            f"could not create a headless OpenGL {require // 100}.{require // 10 % 10} core "
            f"context through EGL ({exc}): the instrument needs 4.1 at least (4.3 for compute "
            "shaders); install Mesa's EGL (Debian: libegl1 libgl1-mesa-dri) or a GPU driver"
        ) from exc


def gl_version(ctx: moderngl.Context) -> str:
    """The context's version as "4.1" (what --gl and the HUD name)."""
    code = ctx.version_code
    return f"{code // 100}.{code // 10 % 10}"


def compute_missing(ctx: moderngl.Context) -> str | None:
    """Why this context cannot run the compute backend (None: it can), asked of its version
    and extensions, never by compiling a compute shader: a failed compute compile leaves a GL
    error behind that breaks pyglet's next call. The compute shaders are GLSL 4.30, so the
    context must be 4.3 or later; an older one that offers the extensions still cannot
    compile them (Mesa's 4.1 override keeps GL_ARB_compute_shader)."""
    if ctx.version_code >= 430:
        return None
    have = set(ctx.extensions)
    lacking = [name for name in COMPUTE_EXTENSIONS if name not in have]
    what = f"without {', '.join(lacking)}" if lacking else "GLSL 4.30 not offered"
    return f"OpenGL {gl_version(ctx)} {what}"


def pick_backend(ctx: moderngl.Context, asked: str = "auto") -> tuple[str, str]:
    """(backend, why) for `--gl asked` on this context: "auto" takes 4.3 where compute is
    there and 4.1 otherwise. Asking for 4.3 where it is not raises ValueError with the line to
    say; so does a context below 4.1."""
    if asked not in GL_CHOICES:
        raise ValueError(f"--gl must be one of {', '.join(GL_CHOICES)}, got {asked!r}")
    if ctx.version_code < 410:
        raise ValueError(f"--gl {asked}: this driver gives OpenGL {gl_version(ctx)}; the "
                         "instrument needs 4.1 core at least")
    missing = compute_missing(ctx)
    if asked == "4.3" and missing:
        raise ValueError(f"--gl 4.3: no compute shaders here ({missing}); use --gl 4.1 or "
                         "--gl auto")
    if asked == "4.1":
        return "4.1", "asked (--gl 4.1)"
    if missing:
        return "4.1", f"no compute shaders: {missing}"
    return "4.3", f"compute shaders (OpenGL {gl_version(ctx)})"


def bind_blocks(program: Any) -> None:
    """GLSL 4.10 has no `layout(binding =)`: give each uniform block the program declares its
    binding from visual/uniforms.py (the 4.3 shaders have it in their layout)."""
    for block in BLOCKS:
        try:
            member = program[block.name]
        except KeyError:
            continue
        if isinstance(member, moderngl.UniformBlock):
            member.binding = block.binding


def bind_samplers(program: Any, units: Mapping[str, int]) -> None:
    """Sampler uniforms to texture units (GLSL 4.10 has no `layout(binding =)` for them
    either). A sampler the compiler removed as unused is skipped."""
    for name, unit in units.items():
        try:
            program[name].value = unit
        except KeyError:
            continue


class ShaderSource:
    """A shader's text with its includes expanded, and the files it came from, numbered."""

    def __init__(self, name: str, defines: Mapping[str, Any] | None = None,
                 shader_dir: Path | None = None, version: str = GLSL_VERSION) -> None:
        self.shader_dir = resolve_shader_dir(shader_dir)
        self.files: list[str] = []
        self._generated = GENERATED_INCLUDES_410 if version == GLSL_410 else GENERATED_INCLUDES
        body: list[str] = []
        self._expand(name, body, set())
        head = [version]
        if version == GLSL_410:
            head.append("#define GL41 1")  # shared files leave out what GLSL 4.10 lacks
        for key, value in (defines or {}).items():
            head.append(f"#define {key} {value}")
        self.text = "\n".join(head + body) + "\n"

    def _expand(self, name: str, out: list[str], seen: set[str]) -> None:
        if name in seen:
            return
        seen.add(name)
        index = len(self.files)
        if name in self._generated:
            lines = self._generated[name].splitlines()
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
