"""Shared fixtures and the test tiers.

The tiers: every test is marked with what it needs beyond Python and a GL driver (a display,
JACK, a browser, GStreamer, a network namespace, root, POSIX processes, Linux, a long run: the
markers in pyproject.toml), derived here from the fixtures it uses where they tell, or marked
by its module; `quick` is added to every test that needs none of it (`pytest -m quick`). What
a test really starts and signals is watched (audit hooks): a test that launches Xvfb, jackd,
chromedriver, gst-launch-1.0, unshare or mount, sends a POSIX signal, or whose own code reads
/proc or /dev/shm, without the marker that says so, fails: the markers stay true.

The fixtures: a headless GL context that fails any test leaving a GL error behind; one JACK
server, one X screen (Xvfb), one browser (Chromium); the user's folders of the tests' own.
Helpers: `run_instrument` (the command as a user runs it), `wait_for` (readiness, not sleeps),
`free_port`.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from _pytest.mark.structures import ParameterSet

from jackd import PERIOD, jack_server
from xdisplay import xvfb

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"

# The instrument keeps user files (saved presets, the learned MIDI mapping, the recovery file,
# crash logs) under the user's home; tests, and the instruments they start, use a folder of
# their own instead.
_USER_FILES = Path(tempfile.mkdtemp(prefix="swarm-test-home-"))
os.environ["SWARM_PRESETS_DIR"] = str(_USER_FILES / "presets")
os.environ["SWARM_RECOVERY_FILE"] = str(_USER_FILES / "recovery.json")
os.environ["SWARM_STATE_DIR"] = str(_USER_FILES / "state")
# (JACK_NO_START_SERVER is not set for the whole run: with it in a reconnecting worker's
# environment, a server restarted under the same name took no clients, and
# test_audio_worker's restart failed. jackd is started only by tests/jackd.py.)

for path in (ROOT, TESTS):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

# The Ctrl+C tests send SIGINT as a terminal does. A shell without job control starts a
# background command (`pytest &`) with SIGINT ignored, which Python keeps (no
# KeyboardInterrupt) and every program it starts inherits: those tests then failed, as any
# program started that way ignores Ctrl+C. The suite sets up a terminal's default instead.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# ---- the tiers -----------------------------------------------------------------------------

# What keeps a test out of `quick` (pyproject.toml registers them; docs/contributing.md).
NEEDS = ("display", "jack", "browser", "gstreamer", "netns", "root", "posix", "linux", "slow")
# A fixture that tells what the test needs.
FIXTURE_NEEDS = {"display": "display", "new_display": "display", "jack": "jack",
                 "browser": "browser"}
# A program a test (or its fixtures) starts, and what that needs.
PROGRAM_NEEDS = {"Xvfb": ("display",), "xdotool": ("display",), "xwininfo": ("display",),
                 "jackd": ("jack",), "chromedriver": ("browser",), "chromium": ("browser",),
                 "gst-launch-1.0": ("gstreamer",), "unshare": ("netns", "root"),
                 "mount": ("root", "linux")}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The need markers from the fixtures each test uses (its whole closure: a module fixture
    that takes `jack` counts), `gl41` where the test is a GL 4.1 backend's case, then `quick`
    on every test that needs nothing more than Python and a GL driver."""
    for item in items:
        for fixture, need in FIXTURE_NEEDS.items():
            if fixture in item.fixturenames:
                item.add_marker(need)
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "4.1" in callspec.id.split("-"):
            item.add_marker("gl41")
        if not any(item.get_closest_marker(need) for need in NEEDS):
            item.add_marker("quick")


class _Watch:
    """What the running test does that needs a marker, seen through audit hooks: programs it
    starts, signals it sends, Linux-only files it reads (from the tests' own code)."""

    def __init__(self) -> None:
        self.item: pytest.Item | None = None
        self.seen: dict[str, str] = {}  # need -> what was seen first

    def note(self, need: str, what: str) -> None:
        if self.item is not None and need not in self.seen:
            self.seen[need] = what

    def __call__(self, event: str, args: tuple) -> None:
        if self.item is None:
            return
        if event == "subprocess.Popen":
            executable, argv = args[0], args[1]
            if isinstance(argv, (str, bytes)):
                argv = [argv]
            program = Path(os.fsdecode(executable or argv[0])).name
            for need in PROGRAM_NEEDS.get(program, ()):
                self.note(need, f"started {program}")
        elif event == "os.killpg":
            self.note("posix", "signalled a process group")
        elif event == "os.kill":
            if not _portable_signal(args[1]):
                self.note("posix", f"sent signal {args[1]}")
        elif event == "open" and isinstance(args[0], (str, Path)):
            path = os.fspath(args[0])
            if path.startswith(("/proc/", "/dev/shm")) and _from_tests():
                self.note("linux", f"read {path}")


def _portable_signal(sig: int) -> bool:
    """Popen.terminate() and Popen.kill() work everywhere; other signals (SIGINT, SIGSTOP,
    signal 0 to probe a pid) are POSIX's: Windows' os.kill ends the process whatever asked."""
    if sig == signal.SIGTERM:
        return True
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name in ("kill", "terminate") and \
                frame.f_code.co_filename == subprocess.__file__:
            return True
        frame = frame.f_back
    return False


def _from_tests() -> bool:
    """The nearest frame of this project's code is a test module's own (the instrument's reads
    of /proc have their fallbacks, and so does tests/jackd.py's)."""
    frame = sys._getframe(2)
    root, venv = str(ROOT), str(ROOT / ".venv")
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(root) and not name.startswith(venv):
            return os.path.basename(name).startswith("test_")
        frame = frame.f_back
    return False


_WATCH = _Watch()
sys.addaudithook(_WATCH)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    _WATCH.item, _WATCH.seen = item, {}
    try:
        yield
    finally:
        _WATCH.item = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """At the test's end: whatever it was seen to need, it must be marked with."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "teardown" or item is not _WATCH.item:
        return
    unmarked = {need: what for need, what in _WATCH.seen.items()
                if not item.get_closest_marker(need)}
    if unmarked and report.outcome != "failed":
        report.outcome = "failed"
        report.longrepr = "the test's markers are not what it needs: " + "; ".join(
            f"it {what}: mark it @pytest.mark.{need} (or use the fixture that says so)"
            for need, what in unmarked.items())


# ---- helpers -------------------------------------------------------------------------------

def run_instrument(*args: str, env: dict | None = None, cwd: Path | None = None,
                   timeout: float = 180) -> subprocess.CompletedProcess:
    """`python instrument.py ARGS` as a user runs it, output captured."""
    return subprocess.run([sys.executable, str(ROOT / "instrument.py"), *args],
                          capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=cwd or ROOT)


def wait_for(check: Callable[[], object], what: str, timeout: float = 60.0,
             process: subprocess.Popen | None = None, every: float = 0.05,
             state: Callable[[], object] | None = None):
    """Polls `check` until it gives something true, and returns that: readiness instead of a
    fixed sleep. `timeout` only bounds a hang; `process`, when given, must stay alive;
    `state` says what was seen instead, when it times out."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if process is not None and process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"the process ended (exit {process.returncode}) while waiting for "
                        f"{what}:\n{(err or '')[-2000:]}")
        if time.monotonic() > deadline:
            seen = f"; instead: {str(state())[:800]}" if state is not None else ""
            pytest.fail(f"timed out waiting for {what}{seen}")
        time.sleep(every)


def quick_sample(cases: list, keep: int = 3) -> list:
    """Parametrized cases of which the first `keep` are in the quick tier and the rest marked
    `slow`: for a family where each case starts the command (a new process, about 0.7 s
    here), `pytest -m quick` plays a sample and the whole suite plays them all."""
    sampled = []
    for index, case in enumerate(cases):
        if index < keep:
            sampled.append(case)
        elif isinstance(case, ParameterSet):
            sampled.append(pytest.param(*case.values, marks=[*case.marks, pytest.mark.slow],
                                        id=case.id))
        else:
            sampled.append(pytest.param(*case, marks=pytest.mark.slow))
    return sampled


def free_port(kind: int = socket.SOCK_DGRAM) -> int:
    """A port free on loopback now (UDP by default)."""
    with socket.socket(socket.AF_INET, kind) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# ---- GL ------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def gl_context():
    """The session's headless context: 4.3 where the driver has it (compute shaders), else
    4.1 (macOS), where only the GL 4.1 backend's tests can run."""
    from swarm_instrument.visual.gpu.context import create_headless_context

    ctx = create_headless_context("4.1")
    yield ctx
    ctx.release()


@pytest.fixture
def ctx(gl_context, request):
    """The session's context; the test fails if it leaves a GL error set. A test that needs
    compute shaders, on a context without them, is skipped on macOS (whose OpenGL stops at
    4.1: the GL 4.1 backend's own cases run there) and fails anywhere else."""
    from swarm_instrument.visual.gpu.context import compute_missing

    missing = compute_missing(gl_context)
    if missing and not request.node.get_closest_marker("gl41"):
        if sys.platform == "darwin":
            pytest.skip(f"needs compute shaders (OpenGL 4.3); macOS gives {missing}")
        pytest.fail(f"the headless context has no compute shaders ({missing})")
    gl_context.error  # reading clears a stale error
    yield gl_context
    error = gl_context.error
    assert error == "GL_NO_ERROR", f"the test left a GL error: {error}"


# ---- JACK, X, a browser --------------------------------------------------------------------

@pytest.fixture(scope="module")
def jack_period() -> int:
    """The JACK period (frames a cycle) of the module's server; a module may override it."""
    return PERIOD


@pytest.fixture(scope="module")
def jack(jack_period: int) -> Iterator[str]:
    """A JACK server with the dummy driver for the module (tests/jackd.py): its name, the
    default server of this process's clients and children meanwhile."""
    with jack_server(period=jack_period) as name:
        yield name


@pytest.fixture(scope="module")
def display_screen() -> tuple[str, ...]:
    """The size of the module's X screen and Xvfb's extra options; a module may override it."""
    return ("1024x600",)


@pytest.fixture(scope="module")
def display(display_screen: tuple[str, ...]) -> Iterator[str]:
    """An X screen (Xvfb) for the module: its name, ':N'."""
    with xvfb(*display_screen) as name:
        yield name


@pytest.fixture
def new_display() -> Iterator[Callable[..., str]]:
    """Starts X screens of the test's own (`new_display("1280x720", "-noreset")`), stopped
    when it ends: a screen whose size or settings no other test should see."""
    with ExitStack() as stack:
        yield lambda size="1024x600", *extra: stack.enter_context(xvfb(size, *extra))


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium, headless, driven by Selenium (chromedriver). Fails, never skips,
    without them: CI installs chromium and chromium-driver."""
    import shutil

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    program, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if program is None or driver is None:
        pytest.fail("chromium and chromedriver not found: apt-get install chromium "
                    "chromium-driver (CI's .ci/run does)")
    options = webdriver.ChromeOptions()
    options.binary_location = program
    for argument in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                     "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync",
                     "--disable-dev-shm-usage", "--window-size=1280,860",
                     f"--user-data-dir={tempfile.mkdtemp(prefix='swarm-chromium-')}"):
        options.add_argument(argument)
    made = webdriver.Chrome(options=options, service=Service(driver))
    yield made
    made.quit()


# ---- options and what the show says --------------------------------------------------------

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
