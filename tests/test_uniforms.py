"""The uniform blocks and the constants the shaders share with Python, described once in
visual/gpu/uniforms.py: the std140 bytes Python packs are what the GPU reads, field by field; every
field is a registry parameter or a declared derived value; the rule bits, the obstacle limit and
the agent record are defined in one place; a misspelled uniform name is an error in tests."""

from __future__ import annotations

import re

import moderngl
import numpy as np
import pytest
from test_cull import AgentBuffer

from swarm_instrument.control.parameters.registry import REGISTRY, Params
from swarm_instrument.visual.gpu import programs
from swarm_instrument.visual.gpu.programs import check_block, compute_program, set_uniforms
from swarm_instrument.visual.gpu.shaders import BUNDLED_SHADERS, ShaderError
from swarm_instrument.visual.gpu.uniforms import (
    FRAME_PARAMS,
    GENERATED_INCLUDES,
    GENERATED_INCLUDES_410,
    MAX_OBSTACLES,
    RULE_BITS,
    SWARM_PARAMS,
    Block,
    derived,
)
from swarm_instrument.visual.render.camera import OrbitCamera
from swarm_instrument.visual.render.renderer import Renderer
from swarm_instrument.visual.sim.agents import AGENT_BYTES, pack_agents
from swarm_instrument.visual.sim.swarm import Swarm

BLOCKS = (SWARM_PARAMS, FRAME_PARAMS)
INCLUDE = {SWARM_PARAMS.name: "swarm_params.glsl", FRAME_PARAMS.name: "frame_params.glsl"}
# The GLSL type a parameter of each registry kind takes in a block.
# Shaders that keep plain uniforms: a value per dispatch or pass (the scan's level, the resize's
# counts, the GL 4.1 sort's stage) and a sampler (bound to its unit by layout, or on GLSL 4.10
# from Python, never set per frame).
PLAIN_UNIFORMS = {"scan.comp", "resize.comp", "gl41_sort.frag"}
TYPES_FOR_KIND = {"float": {"float"}, "int": {"int", "uint"}, "bool": {"bool"},
                  "color": {"vec3"}, "choice": {"int"}}


@pytest.fixture(autouse=True)
def strict_uniforms(monkeypatch):
    """A uniform name a program does not have, or a program without its block, is an error."""
    monkeypatch.setattr(programs, "STRICT", True)


# ---- the description (no GPU) ---------------------------------------------------------------

@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.name)
def test_every_field_is_a_parameter_or_a_declared_derived_value(block):
    registry = {p.name: p for p in REGISTRY}
    for field in block.fields:
        if field.derived:
            assert field.name not in registry, (
                f"{block.name}.{field.name} is declared derived but is a parameter's name")
            assert field.name in block.derived
        else:
            assert field.name in registry, (
                f"{block.name}.{field.name} is neither a registry parameter nor declared derived")
            kind = registry[field.name].kind
            if kind == "choice":
                assert all(isinstance(c, int) for c in registry[field.name].choices)
            assert field.glsl_type in TYPES_FOR_KIND[kind], (block.name, field.name, kind)
    names = [field.name for field in block.fields]
    assert len(names) == len(set(names))


def test_blocks_pack_from_the_registry_values():
    values = Params().as_dict()
    data = SWARM_PARAMS.pack(values, {name: _sample(SWARM_PARAMS, name) for name in
                                      SWARM_PARAMS.derived})
    assert len(data) == SWARM_PARAMS.size and SWARM_PARAMS.size % 16 == 0
    offset = SWARM_PARAMS.offsets["max_force"]
    assert np.frombuffer(data, np.float32, 1, offset)[0] == np.float32(values["max_force"])


def test_a_misspelled_or_missing_value_raises_naming_it():
    values = Params().as_dict()
    good = {name: _sample(SWARM_PARAMS, name) for name in SWARM_PARAMS.derived}
    with pytest.raises(KeyError, match="speed_limt"):
        SWARM_PARAMS.pack(values, {**good, "speed_limt": 1.0})
    missing = dict(good)
    del missing["dt"]
    with pytest.raises(KeyError, match="'dt'"):
        SWARM_PARAMS.pack(values, missing)
    del values["max_force"]
    with pytest.raises(KeyError, match="max_force"):
        SWARM_PARAMS.pack(values, good)
    with pytest.raises(ValueError, match="SwarmParams.target"):
        SWARM_PARAMS.pack(Params().as_dict(), {**good, "target": (1.0, 2.0)})
    with pytest.raises(ValueError, match="obstacles"):
        SWARM_PARAMS.pack(Params().as_dict(), {**good, "obstacles": [(0, 0, 0, 1)] * 9})


def test_std140_offsets_follow_the_rules():
    block = Block("Probe", 9, "probe", [
        derived("a", "float"), derived("b", "vec3"), derived("c", "vec2"), derived("d", "float"),
        derived("e", "vec4", length=2), derived("f", "int"), derived("m", "mat4"),
        derived("g", "float", length=2), derived("h", "ivec3")])
    assert block.offsets == {"a": 0, "b": 16, "c": 32, "d": 40, "e": 48, "f": 80, "m": 96,
                             "g": 160, "h": 192}
    assert block.size == 208


def test_rule_bits_obstacle_limit_and_agent_are_defined_once():
    generated = GENERATED_INCLUDES["swarm_params.glsl"]
    for name, bit in RULE_BITS.items():
        assert f"#define RULE_{name.upper()} {bit}u" in generated
    assert f"#define MAX_OBSTACLES {MAX_OBSTACLES}" in generated
    for path in BUNDLED_SHADERS.iterdir():
        text = path.read_text()
        assert not re.search(r"#define\s+(RULE_|MAX_OBSTACLES)", text), path.name
        if path.name not in PLAIN_UNIFORMS:
            # a sampler or an image is a unit, not a value: what a pass reads goes in a block
            assert not re.search(r"\buniform\s+(?!sampler|image)\w+\s+u_", text), (
                f"{path.name}: a plain uniform; what a pass reads goes in a block")
        if path.name != "agent.glsl":
            assert "struct Agent" not in text, f"{path.name} declares the Agent record again"
    for path in (BUNDLED_SHADERS.parent / "visual").rglob("*.py"):
        if path.name != "uniforms.py":
            assert "MAX_OBSTACLES = " not in path.read_text(), path


# ---- on the GPU --------------------------------------------------------------------------------

def _sample(block: Block, name: str):
    """A distinct value for every component of a field: its offset in words plus j."""
    field = next(f for f in block.fields if f.name == name)
    base = block.offsets[name] // 4
    kind = field.glsl_type

    def one(start: int):
        if kind == "mat4":  # M[row][col]: GLSL m[col][row]
            return np.arange(start, start + 16, dtype=float).reshape(4, 4) + 0.25
        if kind == "bool":
            return start % 2 == 1
        size = {"float": 1, "int": 1, "uint": 1}.get(kind) or int(kind[-1])
        numbers = [start + j + (0.5 if kind.startswith(("vec", "float")) else 0)
                   for j in range(size)]
        return numbers[0] if size == 1 else tuple(numbers)

    if field.length:
        return [one(base + 4 * k) for k in range(field.length)]
    return one(base)


def _probe_source(block: Block) -> str:
    """A kernel writing every component the block holds, as raw bits, in field order."""
    lines = [f'#include "{INCLUDE[block.name]}"', "layout(local_size_x = 1) in;",
             "layout(std430, binding = 0) writeonly buffer Out { uint words[]; };",
             "void main() {", "    uint k = 0u;"]
    for field in block.fields:
        kind = field.glsl_type
        for index in range(field.length or 1):
            ref = f"{block.instance}.{field.name}" + (f"[{index}]" if field.length else "")
            if kind == "mat4":
                parts = [f"{ref}[{col}][{row}]" for row in range(4) for col in range(4)]
            elif kind in ("float", "int", "uint", "bool"):
                parts = [ref]
            else:
                parts = [f"{ref}[{j}]" for j in range(int(kind[-1]))]
            for part in parts:
                if kind.startswith(("vec", "mat", "float")):
                    value = f"floatBitsToUint({part})"
                elif kind == "bool":
                    value = f"({part} ? 1u : 0u)"
                else:
                    value = f"uint({part})"
                lines.append(f"    words[k++] = {value};")
    return "\n".join(lines + ["}"]) + "\n"


def _expected_words(block: Block, values: dict) -> list[int]:
    words = []
    for field in block.fields:
        value = values[field.name]
        items = value if field.length else [value]
        for item in items:
            if field.glsl_type == "mat4":
                numbers = list(np.asarray(item).reshape(-1))  # row by row, as the probe reads
            elif field.glsl_type == "bool":
                numbers = [1 if item else 0]
            else:
                numbers = list(item) if isinstance(item, tuple) else [item]
            for number in numbers:
                if field.glsl_type.startswith(("vec", "mat", "float")):
                    words.append(int(np.float32(number).view(np.uint32)))
                else:
                    words.append(int(number) & 0xFFFFFFFF)
    return words


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.name)
def test_the_gpu_reads_every_field_where_python_packs_it(ctx, tmp_path, block):
    (tmp_path / "probe.comp").write_text(_probe_source(block))
    program = compute_program(ctx, "probe.comp", None, tmp_path, block)  # sizes agree
    values = {field.name: _sample(block, field.name) for field in block.fields}
    derived_values = {name: values[name] for name in block.derived}
    expected = _expected_words(block, values)
    uniform = ctx.buffer(block.pack(values, derived_values))
    out = ctx.buffer(reserve=4 * len(expected))
    try:
        uniform.bind_to_uniform_block(block.binding)
        out.bind_to_storage_buffer(0)
        program.run(1)
        ctx.memory_barrier()
        words = np.frombuffer(out.read(), np.uint32)
        assert list(words) == expected
    finally:
        program.release()
        uniform.release()
        out.release()


def _probe_source_410(block: Block, words: int) -> str:
    """The probe as a GLSL 4.10 fragment pass: fragment x writes word x of the block."""
    body = _probe_source(block).splitlines()
    reads = [line.replace("words[k++]", "w[k++]") for line in body if "words[k++]" in line]
    return "\n".join([f'#include "{INCLUDE[block.name]}"', "out uint f_word;", "void main() {",
                      f"    uint w[{words}];", "    uint k = 0u;", *reads,
                      "    f_word = w[int(gl_FragCoord.x)];", "}"]) + "\n"


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.name)
def test_glsl_410_reads_every_field_where_python_packs_it(ctx, tmp_path, block):
    """The GL 4.1 backend's blocks: declared without `binding =` (GLSL 4.10 has none), bound
    from Python, read field by field where the packer put them."""
    from swarm_instrument.visual.sim.state41 import program_410

    assert "binding" not in GENERATED_INCLUDES_410[INCLUDE[block.name]]
    values = {field.name: _sample(block, field.name) for field in block.fields}
    derived_values = {name: values[name] for name in block.derived}
    expected = _expected_words(block, values)
    (tmp_path / "probe.frag").write_text(_probe_source_410(block, len(expected)))
    (tmp_path / "gl41_pass.vert").write_text((BUNDLED_SHADERS / "gl41_pass.vert").read_text())
    program = program_410(ctx, "gl41_pass.vert", "probe.frag", tmp_path, block=block)
    vao = ctx.vertex_array(program, [])
    texture = ctx.texture((len(expected), 1), 1, dtype="u4")
    target = ctx.framebuffer([texture])
    uniform = ctx.buffer(block.pack(values, derived_values))
    try:
        uniform.bind_to_uniform_block(block.binding)
        target.use()
        vao.render(moderngl.TRIANGLES, vertices=3)
        assert list(np.frombuffer(texture.read(), np.uint32)) == expected
    finally:
        ctx.detect_framebuffer(0).use() if ctx.fbo is target else None
        for obj in (vao, program, target, texture, uniform):
            obj.release()


def test_the_agent_record_is_the_layout_python_packs(ctx, tmp_path):
    (tmp_path / "agents.comp").write_text(
        '#include "agent.glsl"\nlayout(local_size_x = 1) in;\n'
        "layout(std430, binding = 0) buffer Agents { Agent agents[]; };\n"
        "void main() { Agent a = agents[0]; a.position.w += 1.0; agents[1] = a; }\n")
    # The probe's folder holds it and a copy of agent.glsl, which it includes.
    (tmp_path / "agent.glsl").write_text((BUNDLED_SHADERS / "agent.glsl").read_text())
    program = compute_program(ctx, "agents.comp", None, tmp_path)
    agents = pack_agents(np.array([[1, 2, 3], [0, 0, 0]]), np.array([[4, 5, 6], [0, 0, 0]]))
    assert agents.nbytes == 2 * AGENT_BYTES
    buffer = ctx.buffer(agents.tobytes())
    try:
        buffer.bind_to_storage_buffer(0)
        program.run(1)
        ctx.memory_barrier()
        result = np.frombuffer(buffer.read(), np.float32).reshape(2, 8)
        assert list(result[1]) == [1, 2, 3, 1, 4, 5, 6, 0]  # id 0 + 1 in position.w
    finally:
        program.release()
        buffer.release()


def test_a_misspelled_uniform_name_raises_in_tests(ctx):
    scan = compute_program(ctx, "scan.comp", {"LOCAL_SIZE": 256, "ITEMS": 4})
    try:
        set_uniforms(scan, {"u_n": 5, "u_add": False})  # real names: fine
        with pytest.raises(KeyError, match="u_nn"):
            set_uniforms(scan, {"u_nn": 5})
        set_uniforms(scan, {"u_nn": 5}, strict=False)  # live: skipped, the show goes on
    finally:
        scan.release()


def test_a_program_without_its_block_or_with_another_layout_is_refused(ctx, tmp_path):
    scan = compute_program(ctx, "scan.comp", {"LOCAL_SIZE": 256, "ITEMS": 4})
    try:
        with pytest.raises(ShaderError, match="SwarmParams"):
            check_block(scan, SWARM_PARAMS, "scan.comp")
        check_block(scan, SWARM_PARAMS, "scan.comp", strict=False)
    finally:
        scan.release()
    (tmp_path / "stale.comp").write_text(
        "layout(local_size_x = 1) in;\n"
        "layout(std140, binding = 6) uniform SwarmParams { vec4 target; } swarm;\n"
        "layout(std430, binding = 0) buffer Out { float o[]; };\n"
        "void main() { o[0] = swarm.target.x; }\n")
    with pytest.raises(ShaderError, match="16 bytes on the GPU"):
        compute_program(ctx, "stale.comp", None, tmp_path, SWARM_PARAMS)


def test_a_step_and_a_frame_each_write_their_block_once(ctx):
    params = Params({"count": 500})
    swarm = Swarm(ctx, params, seed=1)
    renderer = Renderer(ctx)
    agents = AgentBuffer(ctx, np.zeros((10, 3), np.float32))
    writes = []
    try:
        for owner in (swarm, renderer):
            write = owner._params.write
            owner._params.write = lambda *a, _w=write, _o=owner: (writes.append(_o), _w(*a))
        swarm.step(1 / 60)  # the first step also sorts the agents into the grid
        swarm.step(1 / 60)
        assert writes == [swarm, swarm]
        framebuffer = renderer.offscreen_framebuffer((32, 24))
        renderer.render(agents, OrbitCamera(), framebuffer, params.as_dict(), show_lure=True)
        assert writes == [swarm, swarm, renderer]
    finally:
        agents.release()
        renderer.release()
        swarm.release()
