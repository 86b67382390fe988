"""Shader files: where they are, how `#include` pulls files in, and what changed on disk.

Shader files live in the project's `shaders/` folder, found from this file, never from the
working directory (`$SWARM_SHADERS`, read when `shader_dir()` is called, points at another copy;
an owner given `shader_dir=` uses that folder instead). `#include "name"` pulls a file in once,
a generated one (visual/gpu/uniforms.py) or one of the folder's, and marks where it starts with
`#line`, so that a compiler error can be mapped back to the right file and line. Main thread
only.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any

from swarm_instrument.visual.gpu.uniforms import GENERATED_INCLUDES, GENERATED_INCLUDES_410

BUNDLED_SHADERS = Path(str(files("swarm_instrument").joinpath("shaders")))  # package data
GLSL_VERSION = "#version 430 core"
GLSL_410 = "#version 410 core"  # the GL 4.1 backend's shaders (macOS stops at 4.1 core)

_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"\s*$')


class ShaderError(RuntimeError):
    """A shader that failed to load, compile or link; the message names the file and line."""


def shader_dir() -> Path:
    """The shader folder now: $SWARM_SHADERS (a copy to live-code) or the bundled one."""
    return Path(os.environ.get("SWARM_SHADERS") or BUNDLED_SHADERS)


def resolve_shader_dir(given: Path | str | None) -> Path:
    """An owner's folder: the one it was given, else `shader_dir()` as it is now."""
    return Path(given) if given is not None else shader_dir()



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

