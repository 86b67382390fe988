"""GPU programs: compiled from the shader folder, checked against the uniform blocks Python
packs, and kept in sets that are built whole or not at all.

    compute_program(ctx, "cull.comp", defines, folder, FRAME_PARAMS)
    render_program(ctx, "agent.vert", "agent.frag", defines, folder, block=FRAME_PARAMS)
    render_program(ctx, "gl41_simulate.vert", None, defines, folder, version=GLSL_410,
                   varyings=("o_position", ...), block=SWARM_PARAMS, units=STATE_UNITS)

Every owner of programs (the swarm, the renderer, the post chain, the far splat, and their GL
4.1 twins) keeps them, with the vertex arrays made from them, in one `ProgramSet` built by a
function of its own. A set is compiled whole or released whole; a reload
(`reload_together`) compiles every set of an owner anew and swaps them only once all compiled,
so a shader being live-coded that fails leaves every running program in place. Main thread
only, with the context current.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import moderngl

from swarm_instrument.visual.gpu.shaders import GLSL_410, GLSL_VERSION, ShaderError, ShaderSource
from swarm_instrument.visual.gpu.uniforms import BLOCKS, Block

# Tests turn this on (an autouse fixture in each GPU test module): a uniform name a program does
# not have, or a program without the block it should read, raises instead of being skipped.
STRICT = False
MAX_GROUPS_X = 65535  # the minimum GL guarantees for GL_MAX_COMPUTE_WORK_GROUP_COUNT
STAGES = ("vertex_shader", "geometry_shader", "fragment_shader")


# ---- compiling ------------------------------------------------------------------------------

def compute_program(ctx: moderngl.Context, name: str, defines: Mapping[str, Any] | None = None,
                    shader_dir: Path | None = None, block: Block | None = None
                    ) -> moderngl.ComputeShader:
    """Compile shaders/`name`; `block`: the uniform block it reads (checked, see check_block)."""
    source = ShaderSource(name, defines, shader_dir)
    try:
        program = ctx.compute_shader(source.text)
    except Exception as exc:  # moderngl raises plain Exceptions with the driver's log
        raise ShaderError(f"{name}: {source.explain(str(exc))}") from exc
    return _checked(program, block, name)


def render_program(ctx: moderngl.Context, vertex: str, fragment: str | None,
                   defines: Mapping[str, Any] | None = None, shader_dir: Path | None = None, *,
                   geometry: str | None = None, version: str = GLSL_VERSION,
                   varyings: Sequence[str] = (), separate: bool = False,
                   block: Block | None = None, units: Mapping[str, int] | None = None
                   ) -> moderngl.Program:
    """A vertex (+ geometry) (+ fragment) program from the shader folder; without a fragment
    shader, transform feedback of `varyings` (`separate`: one buffer each). GLSL 4.10
    (`version=GLSL_410`) has no `layout(binding =)`: its uniform blocks and the samplers in
    `units` are bound from Python. `block`: the uniform block it must read as Python packs
    it. ShaderError names the file and line."""
    files = {"vertex_shader": vertex, "geometry_shader": geometry, "fragment_shader": fragment}
    sources = {stage: ShaderSource(file, defines, shader_dir, version)
               for stage, file in files.items() if file}
    what = " + ".join(file for file in files.values() if file)
    try:
        program = ctx.program(**{stage: source.text for stage, source in sources.items()},
                              varyings=tuple(varyings),
                              varyings_capture_mode="separate" if separate else "interleaved")
    except Exception as exc:  # moderngl raises plain Exceptions with the driver's log
        log = str(exc)
        # The driver's log names the stage that failed; a link error maps through the vertex
        # shader's files.
        stage = next((s for s in STAGES if s in sources and s in log), "vertex_shader")
        raise ShaderError(f"{what}: {sources[stage].explain(log)}") from exc
    if version == GLSL_410:
        bind_blocks(program)
        bind_samplers(program, units or {})
    return _checked(program, block, what)


def _checked(program: Any, block: Block | None, what: str) -> Any:
    if block is not None:
        try:
            check_block(program, block, what)
        except ShaderError:
            program.release()
            raise
    return program


def check_block(program: Any, block: Block, what: str, strict: bool | None = None) -> None:
    """A program that declares `block` must lay it out as visual/gpu/uniforms.py packs it
    (always checked); one that does not declare it at all is an error when strict (tests), and
    fine live (a shader being live-coded may not read it)."""
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
                          f"visual/gpu/uniforms.py packs {block.size}")


def bind_blocks(program: Any) -> None:
    """GLSL 4.10 has no `layout(binding =)`: give each uniform block the program declares its
    binding from visual/gpu/uniforms.py (the 4.3 shaders have it in their layout)."""
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


# ---- running compute ------------------------------------------------------------------------

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


# ---- sets of programs -----------------------------------------------------------------------

Build = Callable[[dict[str, Any]], None]


def release_all(objects: Mapping[str, Any]) -> None:
    """Release GL objects in the reverse of the order they were made (vertex arrays before the
    programs they were made from)."""
    for obj in reversed(list(objects.values())):
        obj.release()


class ProgramSet(dict):
    """An owner's programs and vertex arrays by name, made by `build(built)`, which adds them
    to the dict it is given: compiled whole (a failure releases what it made and raises), read
    like a dict (it is one: a lookup is no Python call, and a frame makes a few dozen), swapped
    whole by `reload_together`, released once by the owner."""

    def __init__(self, build: Build) -> None:
        super().__init__()
        self._build = build
        self.update(self.compile())

    def compile(self) -> dict[str, Any]:
        """A fresh set from the shader files, not yet in use (ShaderError: none made)."""
        built: dict[str, Any] = {}
        try:
            self._build(built)
        except Exception:
            release_all(built)
            raise
        return built

    def swap(self, built: dict[str, Any]) -> None:
        """Use `built` (from `compile`) from now on; the old set is released."""
        old = dict(self)
        self.clear()
        self.update(built)
        release_all(old)

    def put(self, name: str, obj: Any) -> None:
        """Add or replace one object (a vertex array over buffers remade at another size); the
        one it replaces is released."""
        old = self.pop(name, None)
        if old is not None:
            old.release()
        self[name] = obj

    def release(self) -> None:
        objects = dict(self)
        self.clear()
        release_all(objects)


def reload_together(*sets: ProgramSet) -> None:
    """Compile every set anew and swap them all, or, when any fails (ShaderError, raised),
    release the new ones and keep every running set: an owner's programs never mix two
    versions of the shader files."""
    staged: list[dict[str, Any]] = []
    try:
        for program_set in sets:
            staged.append(program_set.compile())
    except Exception:
        for built in staged:
            release_all(built)
        raise
    for program_set, built in zip(sets, staged):
        program_set.swap(built)


class ProgramOwner:
    """What every owner of programs shares: `program_sets`, all its sets (a renderer's include
    its post chain's and splat's); `reload_shaders()` recompiles them from the shader folder
    and swaps all or none (ShaderError, raised: the running programs stay)."""

    @property
    def program_sets(self) -> tuple[ProgramSet, ...]:
        return (self._programs,)

    def reload_shaders(self) -> None:
        reload_together(*self.program_sets)
