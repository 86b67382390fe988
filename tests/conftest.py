"""Shared fixtures: a headless GL context (EGL, llvmpipe on CI) that fails any test leaving a GL
error behind, and the project root on sys.path so tests import the instrument's packages."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The instrument keeps user files (saved presets, the learned MIDI mapping, the recovery file,
# crash logs) under the user's home; tests, and the instruments they start, use a folder of
# their own instead.
_USER_FILES = Path(tempfile.mkdtemp(prefix="swarm-test-home-"))
os.environ["SWARM_PRESETS_DIR"] = str(_USER_FILES / "presets")
os.environ["SWARM_RECOVERY_FILE"] = str(_USER_FILES / "recovery.json")
os.environ["SWARM_STATE_DIR"] = str(_USER_FILES / "state")
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


@pytest.fixture(scope="session")
def gl_context():
    from visual.gl import create_headless_context

    ctx = create_headless_context()
    yield ctx
    ctx.release()


@pytest.fixture
def ctx(gl_context):
    """The session's context; the test fails if it leaves a GL error set."""
    gl_context.error  # reading clears a stale error
    yield gl_context
    error = gl_context.error
    assert error == "GL_NO_ERROR", f"the test left a GL error: {error}"
