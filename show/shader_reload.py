"""Shader hot reload while the show plays: an edited file under the shader folder recompiles
every program of the swarm and the renderer (post chain, splat, ordered cull included) all or
none (visual/gpu/programs.py `reload_together`); a file that fails shows its error (file and
line) in the HUD and the last good programs keep drawing. Main thread only.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from swarm_instrument.visual.gpu.programs import reload_together
from swarm_instrument.visual.gpu.shaders import ShaderError, ShaderWatch

log = logging.getLogger("swarm_instrument.show.show")  # said as the show's, as it always was


class ShaderReload:
    """Watches the shader folder; `poll` reloads the owners' programs when a file changed."""

    def __init__(self, shader_dir: Path) -> None:
        self.watch = ShaderWatch(shader_dir=shader_dir)
        self.error: str | None = None  # the last reload's error, None when it worked

    def poll(self, now: float, owners: tuple[Any, ...], status: dict[str, str]) -> None:
        """At most once a second: reload when a file changed; the HUD's `shaders` line."""
        if not self.watch.changed(now):
            return
        try:
            reload_together(*(program_set for owner in owners
                              for program_set in owner.program_sets))
        except ShaderError as exc:
            text = str(exc)
            error = " | ".join(line.strip() for line in text.splitlines()
                               if ":" in line and "error" in line.lower())[:300]
            self.error = error or text[:300]
            status["shaders"] = f"ERROR, last good shaders running: {self.error}"
            log.info(f"shaders: {text}")
        else:
            self.error = None
            status["shaders"] = "reloaded"
            log.info("shaders: reloaded")
