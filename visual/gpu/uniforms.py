"""The values the shaders read, described once: uniform blocks, rule bits, the obstacle limit.

Each block is a list of fields (name, GLSL type). From that one description come both the GLSL
declaration, injected into the shaders as a generated include (`#include "swarm_params.glsl"`,
see `GENERATED_INCLUDES`), and the bytes, packed from plain values by std140's rules. A field
named after a registry parameter takes that parameter's value as it is (this frame's, modulated);
a `derived` one is computed by the block's owner. Two blocks, each with one owner and one writer:

    SwarmParams  visual/sim/swarm.py writes it once a step (and on a resize): every simulation pass
    FrameParams  visual/render/renderer.py writes it once a frame: the cull, draw, fade and lure
    passes
    PostParams   visual/post/post_chain.py writes it once a frame: the post chain's passes (bloom,
                 feedback, tone map), every value clamped to what the chain takes

Description and packing are pure Python (any thread); `BlockBuffer` is GL: main thread only.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any

import moderngl
import numpy as np

# The rules a switch can turn off, as the bits of SwarmParams.rules (RULE_SEPARATION, ...).
RULE_BITS = {"separation": 1, "alignment": 2, "cohesion": 4, "seek": 8, "containment": 16}
MAX_OBSTACLES = 8  # spheres the swarm steers around: the length of SwarmParams.obstacles

# GLSL type -> (std140 base alignment, size in bytes, struct code of one component, components)
_TYPES: dict[str, tuple[int, int, str, int]] = {
    "float": (4, 4, "f", 1), "int": (4, 4, "i", 1), "uint": (4, 4, "I", 1), "bool": (4, 4, "I", 1),
    "vec2": (8, 8, "f", 2), "vec3": (16, 12, "f", 3), "vec4": (16, 16, "f", 4),
    "ivec2": (8, 8, "i", 2), "ivec3": (16, 12, "i", 3), "ivec4": (16, 16, "i", 4),
    "uvec2": (8, 8, "I", 2), "uvec3": (16, 12, "I", 3), "uvec4": (16, 16, "I", 4),
    "mat4": (16, 64, "f", 16),  # four vec4 columns
}


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


@dataclass(frozen=True)
class Field:
    """One member of a block: `length` > 0 makes it an array; `derived` says the owner computes
    it (otherwise it is the registry parameter of that name)."""

    name: str
    glsl_type: str
    doc: str = ""
    length: int = 0
    derived: bool = False


def param(name: str, glsl_type: str, doc: str = "") -> Field:
    return Field(name, glsl_type, doc)


def derived(name: str, glsl_type: str, doc: str = "", length: int = 0) -> Field:
    return Field(name, glsl_type, doc, length, derived=True)


class Block:
    """A std140 uniform block: its layout, its GLSL text and its packer."""

    def __init__(self, name: str, binding: int, instance: str, fields: list[Field]) -> None:
        self.name, self.binding, self.instance, self.fields = name, binding, instance, fields
        self.offsets: dict[str, int] = {}
        self._writers: list[tuple[Field, int, int, struct.Struct]] = []
        offset = 0
        for field in fields:
            if field.glsl_type not in _TYPES:
                raise ValueError(f"{name}.{field.name}: no std140 rule for {field.glsl_type}")
            align, size, code, components = _TYPES[field.glsl_type]
            stride = 0
            if field.length:  # std140: array elements are aligned and padded to a vec4
                align, stride = 16, _round_up(size, 16)
                size = stride * field.length
            offset = _round_up(offset, align)
            self.offsets[field.name] = offset
            self._writers.append((field, offset, stride, struct.Struct(f"<{components}{code}")))
            offset += size
        self.size = _round_up(offset, 16)  # as GL_UNIFORM_BLOCK_DATA_SIZE reports it
        self.parameters = tuple(f.name for f in fields if not f.derived)
        self.derived = frozenset(f.name for f in fields if f.derived)
        self._whole, self._plan = self._compile()
        self._flatten = self._make_flatten()

    def _compile(self) -> tuple[struct.Struct, list[tuple[str, bool, str, int, int]]]:
        """One struct for the whole block (std140's padding as pad bytes) and, field by field,
        (name, derived, how its value flattens, components, array length): `pack` makes the
        block in one call instead of one a field."""
        layout, at = ["<"], 0
        plan = []
        for field, offset, stride, packer in self._writers:
            _, size, code, components = _TYPES[field.glsl_type]
            if offset > at:
                layout.append(f"{offset - at}x")
            element = f"{components}{code}" if field.glsl_type != "bool" else "1I"
            if field.length:
                padding = f"{stride - size}x" if stride > size else ""
                layout.append((element + padding) * field.length)
                at = offset + stride * field.length
            else:
                layout.append(element)
                at = offset + size
            how = ("mat4" if field.glsl_type == "mat4" else "bool" if field.glsl_type == "bool"
                   else ("f" if code == "f" else "i") + ("1" if components == 1 else "n"))
            plan.append((field.name, field.derived, how, components, field.length))
        if self.size > at:
            layout.append(f"{self.size - at}x")
        whole = struct.Struct("".join(layout))
        assert whole.size == self.size, (self.name, whole.size, self.size)
        return whole, plan

    def glsl(self, binding: bool = True) -> str:
        """The declaration: `layout(std140, binding = N) uniform Name { ... } instance;`.
        `binding=False`: GLSL 4.10 (macOS) has no `binding =`; the owner sets the block's
        binding on the linked program instead (visual/gpu/programs.py bind_blocks)."""
        layout = f"std140, binding = {self.binding}" if binding else "std140"
        lines = [(f"// {self.name}: generated from visual/gpu/uniforms.py (std140, {self.size} "
                  "bytes). Edit the description there, not this."),
                 f"layout({layout}) uniform {self.name} {{"]
        for field in self.fields:
            array = f"[{field.length}]" if field.length else ""
            origin = "derived" if field.derived else "parameter"
            note = f"{origin} @{self.offsets[field.name]}" + (f": {field.doc}" if field.doc else "")
            lines.append(f"    {field.glsl_type} {field.name}{array};".ljust(40) + f"// {note}")
        lines.append(f"}} {self.instance};")
        return "\n".join(lines) + "\n"

    def pack(self, values: Mapping[str, Any], derived: Mapping[str, Any]) -> bytes:
        """The block's bytes: parameter fields from `values` (the frame's values by registry
        name; other names in it are ignored), derived fields from `derived`, which must hold
        exactly those (a misspelled or missing name raises, naming it). One struct call for
        the block; a value it cannot take is looked at field by field (`pack_fields`) for the
        error that names it."""
        if derived.keys() == self.derived:
            try:
                return self._whole.pack(*self._flatten(values, derived))
            except (KeyError, TypeError, ValueError, struct.error, IndexError):
                pass
        return self.pack_fields(values, derived)

    def _flat_source(self) -> str:
        """The source of `_flatten(values, derived)`, every number of the block in order as
        `_whole` takes them, made once for the block: one statement a vector field (its
        components unpacked, so a wrong length raises), one tuple of every number. Floats go
        to struct as they are (it takes ints and numpy floats for "f"); ints are cast (a knob
        may give 3.0), bools made 0 or 1, matrices transposed to column-major."""
        lines = ["def flatten(values, derived):"]
        items: list[str] = []
        for k, (name, is_derived, how, components, length) in enumerate(self._plan):
            source = f"{'derived' if is_derived else 'values'}[{name!r}]"
            if length:
                items.append(f"*_array({source}, {components}, {length}, "
                             f"{'float' if how[0] == 'f' else 'int'}, {name!r})")
            elif how == "mat4":
                items.append(f"*_matrix({source})")
            elif how == "f1":
                items.append(source)
            elif how == "i1":
                items.append(f"int({source})")
            elif how == "bool":
                items.append(f"1 if {source} else 0")
            else:  # a vector: unpacked (a wrong length raises ValueError)
                names = [f"v{k}_{c}" for c in range(components)]
                lines.append(f"    value = {source}")
                lines.append(f"    {', '.join(names)}, = (value.tolist() if value.__class__ is "
                             "_ndarray else value)")
                items += names if how[0] == "f" else [f"int({n})" for n in names]
        lines.append(f"    return ({', '.join(items)},)")
        return "\n".join(lines)

    def _make_flatten(self) -> Any:
        scope = {"_array": _array, "_matrix": _matrix, "_ndarray": np.ndarray}
        exec(compile(self._flat_source(), f"<{self.name} flatten>", "exec"), scope)
        return scope["flatten"]

    def pack_fields(self, values: Mapping[str, Any], derived: Mapping[str, Any]) -> bytes:
        """`pack`, field by field: the same bytes, and an error that names the field."""
        unknown = set(derived) - self.derived
        missing = self.derived - set(derived)
        if unknown or missing:
            raise KeyError(f"{self.name}: derived values unknown {sorted(unknown)}, "
                           f"missing {sorted(missing)}")
        data = bytearray(self.size)
        for field, offset, stride, packer in self._writers:
            source = derived if field.derived else values
            if field.name not in source:
                raise KeyError(f"{self.name}.{field.name}: no value for this parameter")
            try:
                if field.length:
                    items = list(source[field.name])
                    if len(items) > field.length:
                        raise ValueError(f"at most {field.length} items, got {len(items)}")
                    for k, item in enumerate(items):
                        packer.pack_into(data, offset + k * stride, *_components(field, item))
                else:
                    packer.pack_into(data, offset, *_components(field, source[field.name]))
            except (TypeError, ValueError, struct.error) as exc:
                raise ValueError(f"{self.name}.{field.name} ({field.glsl_type}): "
                                 f"{source[field.name]!r}: {exc}") from exc
        return bytes(data)


def _matrix(value: Any) -> list:
    """A 4x4 matrix (an array, or four rows of plain numbers) as its 16 numbers, column-major
    as GLSL reads a mat4."""
    if isinstance(value, np.ndarray):
        return np.asarray(value, np.float64).reshape(4, 4).T.ravel().tolist()
    (a, b, c, d), (e, f, g, h), (i, j, k, m), (n, o, p, q) = value
    return [a, e, i, n, b, f, j, o, c, g, k, p, d, h, m, q]


def _array(value: Any, components: int, length: int, cast: Any, name: str) -> list:
    """An array field's numbers: each item's components, then zeros for the items not given."""
    if isinstance(value, np.ndarray):  # (items, components), or (items,) of scalars
        shape = value.shape
        if (len(shape) != (1 if components == 1 else 2) or shape[0] > length
                or (components > 1 and shape[1] != components)):
            raise ValueError(name)
        flat = np.asarray(value, np.float64 if cast is float else np.int64).ravel().tolist()
        return flat + [cast(0)] * (components * (length - shape[0]))
    items = value if isinstance(value, (list, tuple)) else list(value)
    if len(items) > length:
        raise ValueError(name)
    if components == 1:
        flat = list(map(cast, items))
    else:  # every item of `components` numbers (map and chain: no Python call an item)
        if items and set(map(len, items)) != {components}:
            raise ValueError(name)
        flat = list(map(cast, chain.from_iterable(items)))
    return flat + [cast(0)] * (components * (length - len(items)))


def _components(field: Field, value: Any) -> list:
    """The value as the flat list of numbers its type packs (mat4: column-major)."""
    kind = field.glsl_type
    if kind == "mat4":
        return list(np.asarray(value, np.float64).reshape(4, 4).T.reshape(-1))
    items = list(value) if _TYPES[kind][3] > 1 else [value]
    if len(items) != _TYPES[kind][3]:
        raise ValueError(f"needs {_TYPES[kind][3]} components, got {len(items)}")
    if kind == "bool":
        return [1 if items[0] else 0]
    if _TYPES[kind][2] == "f":
        return [float(v) for v in items]
    return [int(v) for v in items]


SWARM_PARAMS = Block("SwarmParams", binding=6, instance="swarm", fields=[
    # Binding 6, not 0: pyglet's own shaders (the HUD's text) read its WindowBlock at 0.
    derived("target", "vec3", "the lure: what seek steers towards"),
    derived("dt", "float", "this step, already clamped to 1/30 s as the seed does"),
    derived("center", "vec3", "the containment sphere's centre (the origin)"),
    param("contain_radius", "float"),
    derived("grid_origin", "vec3", "the corner of grid cell (0, 0, 0)"),
    derived("grid_inv_cell", "float", "1 / the cell's size"),
    derived("grid_dims", "ivec3", "cells along x, y, z"),
    derived("agent_count", "uint", "agents in the buffer (the swarm's own count)"),
    param("neighbor_radius", "float"),
    param("separation_radius", "float"),
    param("separation_weight", "float"),
    param("alignment_weight", "float"),
    param("cohesion_weight", "float"),
    param("seek_weight", "float"),
    derived("speed_limit", "float", "max_speed after the audio boost (x speed_scale)"),
    param("max_force", "float"),
    param("spawn_radius", "float"),
    param("obstacle_weight", "float"),
    param("neighbor_cap", "uint", "candidates an agent examines; 0: all (the seed)"),
    param("dimensions", "int", "3, or 2: seed 002's flat swarm, z fixed at 0"),
    derived("rules", "uint", "RULE_* bits of the rules switched on"),
    derived("wrap", "bool", "boundary is wrap: seed 002's box"),
    derived("step_index", "uint", "steps so far: seeds the guard's respawn"),
    derived("obstacle_count", "int"),
    derived("obstacles", "vec4", "xyz centre, w radius", length=MAX_OBSTACLES),
])

FRAME_PARAMS = Block("FrameParams", binding=7, instance="frame", fields=[
    derived("view_projection", "mat4"),
    derived("planes", "vec4", "frustum planes: xyz inward unit normal, w distance", length=6),
    derived("eye", "vec3", "the camera's position"),
    param("agent_size", "float", "the mesh's scale, and so its cull radius"),
    derived("light", "vec3", "unit vector towards the light"),
    derived("lod_distance", "float", "farther from the eye than this: one point"),
    derived("lure", "vec3"),
    param("lure_radius", "float"),
    derived("center", "vec3", "the camera's orbit centre: the sums are taken from it"),
    derived("spread_max", "float", "squared distances are clamped to this..."),
    param("slow_color", "vec3"),
    derived("spread_scale", "float", "...and scaled so that count of them fit a uint"),
    param("fast_color", "vec3"),
    derived("reach", "float", "offsets from center are clamped to +-this..."),
    param("telegraph_color", "vec3"),
    derived("offset_scale", "float", "...and scaled likewise"),
    derived("background", "vec3"),
    derived("telegraph", "float", "0..1: how far the swarm is shifted to telegraph_color"),
    derived("fog_range", "vec2", "distance where the fog starts, and where it is thickest"),
    param("max_speed", "float", "the speed of the fast colour (before the audio boost)"),
    param("trail", "float", "how much of the last frame stays"),
    derived("agent_count", "uint", "agents in the buffer (the swarm's own count)"),
    derived("far_base", "uint", "where the far list starts in visible[]"),
    derived("lure_pixels", "float", "the lure marker's size"),
    derived("point_scale", "float", "pixels a unit at distance 1: far agents' point sizes"),
    param("glow", "float", "the agents' brightness (HDR: above 1 feeds the bloom)"),
    param("size_by_speed", "float", "fast agents grow by this much"),
    param("fog", "float", "0..1: how much distant agents fade"),
    derived("cull_scale", "float", "the largest agent is agent_size times this"),
    derived("shape_index", "int",
            "0 cone, 1 arrow, 2 streak, 3 glow (visual/render/meshes.py SHAPES)"),
    derived("color_by_index", "int", "0 speed, 1 heading, 2 depth, 3 density"),
    derived("palette_stops", "int", "stops used in palette_colors[] (2..5)"),
    derived("additive", "int", "1: agents add light (no depth), 0: opaque"),
    derived("depth_range", "vec2", "color by depth: the distances of 0 and 1"),
    derived("viewport", "vec2", "the frame's size in pixels (splat.comp)"),
    derived("palette_colors", "vec4", "the palette's colours, rgb (w unused)", length=5),
])


POST_PARAMS = Block("PostParams", binding=8, instance="post", fields=[
    derived("exposure", "float", "linear multiplier before tone mapping"),
    derived("dither", "float", "0 or 1"),
    derived("bloom_intensity", "float", "how much of the bloom is added to the scene"),
    derived("threshold", "float", "where the bloom starts (HDR units)"),
    derived("knee", "float", "the soft knee's half width (0.5 x threshold)"),
    derived("bloom_mix", "float", "bloom_radius: how much of the wider glow each level takes"),
    derived("feedback_fade", "float", "this frame's fade: feedback ^ (dt x 60)"),
    derived("warp", "vec4", "zoom and rotation about the centre, in uv: mat2(warp.xy, warp.zw)"),
    derived("warp_offset", "vec2", "drift, in uv"),
    derived("feedback_background", "vec3", "what the old image fades towards"),
])


def _defines() -> str:
    lines = ["// Constants shared with Python: generated from visual/gpu/uniforms.py."]
    lines += [f"#define RULE_{name.upper()} {bit}u" for name, bit in RULE_BITS.items()]
    lines.append(f"#define MAX_OBSTACLES {MAX_OBSTACLES}")
    return "\n".join(lines) + "\n"


# Includes that no file holds: ShaderSource looks here before the shader folder.
GENERATED_INCLUDES: dict[str, str] = {
    "swarm_params.glsl": _defines() + SWARM_PARAMS.glsl(),
    "frame_params.glsl": FRAME_PARAMS.glsl(),
    "post_params.glsl": POST_PARAMS.glsl(),
}
# The same for GLSL 4.10 (the GL 4.1 backend): no `binding =` in the layouts.
GENERATED_INCLUDES_410: dict[str, str] = {
    "swarm_params.glsl": _defines() + SWARM_PARAMS.glsl(binding=False),
    "frame_params.glsl": FRAME_PARAMS.glsl(binding=False),
    "post_params.glsl": POST_PARAMS.glsl(binding=False),
}
BLOCKS = (SWARM_PARAMS, FRAME_PARAMS, POST_PARAMS)


class BlockBuffer:
    """One block's uniform buffer, owned (and released) by whoever writes it."""

    def __init__(self, ctx: moderngl.Context, block: Block) -> None:
        self.block = block
        self.buffer = ctx.buffer(reserve=block.size)

    def write(self, values: Mapping[str, Any], derived: Mapping[str, Any]) -> None:
        """Pack and upload, then bind at the block's binding for the passes that follow."""
        self.buffer.write(self.block.pack(values, derived))
        self.bind()

    def bind(self) -> None:
        """Bind again before each use: other code (pyglet) may bind its own buffers."""
        self.buffer.bind_to_uniform_block(self.block.binding)

    def release(self) -> None:
        self.buffer.release()
