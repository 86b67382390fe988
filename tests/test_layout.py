"""The layout stays as designed (docs/architecture.md):

- `audio/`, `visual/` and `control/` import nothing from one another, nor from `show/`; `show/`
  (and instrument.py) wires them; nothing imports the command;
- inside `visual/` the GL layer (`gpu/`) knows nothing of swarms or pictures, the simulation
  and the post chain stand on it alone, video outputs know nothing of the swarm, and nothing
  but the show reaches the user interface (`ui/`);
- one job a module: none over 400 lines, no folder of more than a dozen, no two modules of the
  same name;
- imports at the top of modules, except an optional, platform or display dependency imported
  late on purpose, which says why (`# noqa: PLC0415 - why`, as ruff's rule wants it);
- every GL program is compiled by visual/gpu/programs.py (one way to build them, in sets).

The import graph is read from the source with `ast`, imports inside functions included."""

from __future__ import annotations

import ast
import re
import tomllib
from collections import Counter
from pathlib import Path

from conftest import ROOT

PACKAGE = "swarm_instrument"
PARTS = ("audio", "visual", "control")
PACKAGES = (*PARTS, "show", "benchmarks")
MAX_LINES = 400
MAX_MODULES = 12
# visual/'s folders and what each may import of visual/ besides itself
VISUAL_RULES = {
    "gpu": set(),
    "sim": {"gpu"},
    "post": {"gpu"},
    "render": {"gpu", "sim", "post"},
    "output": {"gpu"},
    "ui": {"gpu", "sim", "post", "render", "output"},
}
LATE_NOTE = re.compile(r"#\s*noqa: PLC0415 - \S")


def code_files() -> list[Path]:
    files = [path for package in PACKAGES for path in (ROOT / package).rglob("*.py")]
    return sorted(files + [ROOT / "instrument.py"])


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import, the package's name taken off (`swarm_instrument.visual.
    gpu` is `visual.gpu`; `from swarm_instrument import visual` is `visual`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == PACKAGE and node.level == 0:
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return [(line, module.removeprefix(PACKAGE + ".")) for line, module in found]


def late_imports(path: Path) -> list[tuple[int, str]]:
    """(line, its text) of each import made inside a function."""
    lines = path.read_text().splitlines()
    found = []
    for node in ast.walk(ast.parse("\n".join(lines), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    found.append((inner.lineno, lines[inner.lineno - 1]))
    return found


def test_the_parts_know_nothing_of_each_other():
    crossings = []
    for path in code_files():
        package = path.relative_to(ROOT).parts[0]
        for line, module in imports(path):
            top = module.split(".")[0]
            if top == "instrument":
                crossings.append(f"{path.relative_to(ROOT)}:{line} imports the command")
            elif package in PARTS and top in (*PARTS, "show") and top != package:
                crossings.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not crossings, "imports across the layout's lines:\n" + "\n".join(crossings)


def test_visual_folders_import_only_what_is_beneath_them():
    crossings = []
    for folder, allowed in VISUAL_RULES.items():
        for path in (ROOT / "visual" / folder).rglob("*.py"):
            for line, module in imports(path):
                parts = module.split(".")
                if parts[0] != "visual" or len(parts) < 2 or parts[1] == folder:
                    continue
                if parts[1] not in allowed:
                    crossings.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not crossings, "visual/ folders crossing their line:\n" + "\n".join(crossings)


def test_one_job_a_module():
    long = [f"{path.relative_to(ROOT)}: {n} lines" for path in code_files()
            if (n := len(path.read_text().splitlines())) > MAX_LINES]
    assert not long, f"modules over {MAX_LINES} lines (split where a second job hides):\n" + \
        "\n".join(long)


def test_folders_of_about_a_dozen_modules():
    folders = Counter(path.parent for path in code_files() if path.name != "__init__.py")
    crowded = [f"{folder.relative_to(ROOT)}: {n}" for folder, n in folders.items()
               if folder != ROOT and n > MAX_MODULES]
    assert not crowded, "folders over a dozen modules:\n" + "\n".join(crowded)


def test_no_two_modules_share_a_name():
    tests = [path for path in (ROOT / "tests").glob("*.py") if path.name != "conftest.py"]
    names = Counter(path.name for path in code_files() + tests if path.name != "__init__.py")
    assert not [name for name, n in names.items() if n > 1], names.most_common(5)


def test_imports_are_at_the_top_or_say_why_not():
    unexplained = [f"{path.relative_to(ROOT)}:{line}: {text.strip()}" for path in code_files()
                   for line, text in late_imports(path) if not LATE_NOTE.search(text)]
    assert not unexplained, ("imports inside functions without a reason (`# noqa: PLC0415 - "
                             "why`):\n" + "\n".join(unexplained))


def test_every_gl_program_is_built_by_the_program_module():
    builds = re.compile(r"\.(compute_shader|program)\(")
    elsewhere = [f"{path.relative_to(ROOT)}:{number}" for path in code_files()
                 if path.relative_to(ROOT) != Path("visual/gpu/programs.py")
                 for number, line in enumerate(path.read_text().splitlines(), 1)
                 if builds.search(line)]
    assert not elsewhere, "GL programs compiled outside visual/gpu/programs.py:\n" + \
        "\n".join(elsewhere)


def test_the_checks_see_what_they_look_for(tmp_path):
    """The readers find imports in functions and their notes (a check that cannot fail is no
    check)."""
    path = tmp_path / "module.py"
    path.write_text("def f():\n    from swarm_instrument.control.parameters.registry import "
                    "Params\n    import rtmidi  # noqa: PLC0415 - optional: MIDI\n"
                    "    from swarm_instrument import show\n")
    assert imports(path) == [(2, "control.parameters.registry"), (3, "rtmidi"), (4, "show")]
    late = late_imports(path)
    assert [bool(LATE_NOTE.search(text)) for _, text in late] == [False, True, False]


def test_every_folder_of_the_package_is_in_the_wheel():
    """pyproject.toml lists the package's folders (the clone's root mapped to swarm_instrument):
    a new folder left out of the list is left out of the wheel, and the installed command
    fails where it imports it, which only a user of the wheel would see."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    folders = {"swarm_instrument"} | {
        "swarm_instrument." + ".".join(init.parent.relative_to(ROOT).parts)
        for part in ("audio", "control", "show", "visual")
        for init in (ROOT / part).rglob("__init__.py")}
    assert folders - listed == set(), "add them to [tool.setuptools] packages"
    assert listed - folders == set(), "listed, but no such folder"
