"""Shared fixtures: a headless GL context (EGL, llvmpipe on CI) that fails any test leaving a GL
error behind, and the project root on sys.path so tests import the instrument's packages."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
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


def run_instrument(*args: str, env: dict | None = None, cwd: Path | None = None,
                   timeout: float = 180) -> subprocess.CompletedProcess:
    """`python instrument.py ARGS` as a user runs it, output captured."""
    return subprocess.run([sys.executable, str(ROOT / "instrument.py"), *args],
                          capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=cwd or ROOT)


def _clear_stale_jack_state() -> None:
    """JACK keeps a registry of servers in /dev/shm, eight at most; a server that died without
    cleaning up (killed, or stopped while clients hung on) keeps its place, and after eight of
    those every new jackd fails with "Too many servers already active". When no jackd runs,
    nothing there is in use: clear it, so the JACK tests start from a clean slate."""
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() in ("jackd", "jackdbus"):
                return
        except OSError:
            continue
    for path in Path("/dev/shm").glob("jack*"):
        try:
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        except OSError:
            pass


_clear_stale_jack_state()
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


@pytest.fixture(scope="session")
def gl_context():
    from swarm_instrument.visual.gpu.context import create_headless_context

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


def pytest_addoption(parser: pytest.Parser) -> None:
    """--slow: run every case of the exhaustive families (every truncation point of every
    bundled file in tests/test_hostile_files.py) instead of a sample."""
    parser.addoption("--slow", action="store_true", default=False,
                     help="run the exhaustive hostile-input families in full (slower)")


class _Said(logging.Handler):
    """Collects what the instrument's modules log, as the console would print it."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextmanager
def listening():
    """The lines the instrument's modules say meanwhile (their loggers, INFO and up)."""
    handler, root = _Said(), logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield handler.lines
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@pytest.fixture
def said():
    """The lines the show says during the test, in order."""
    with listening() as lines:
        yield lines
