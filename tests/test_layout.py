"""The layout stays as designed: `audio/`, `visual/` and `control/` import nothing from one
another, nor from `show/`; `show/` (and instrument.py) wires them; nothing imports the command.
The import graph is read from the source with `ast`, imports inside functions included."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PARTS = ("audio", "visual", "control")
PACKAGES = (*PARTS, "show", "benchmarks")


def imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def test_the_parts_know_nothing_of_each_other():
    crossings = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):  # subfolders too (visual/ui)
            for line, module in imports(path):
                top = module.split(".")[0]
                if top == "instrument":
                    crossings.append(f"{path.relative_to(ROOT)}:{line} imports the command")
                elif package in PARTS and top in (*PARTS, "show") and top != package:
                    crossings.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not crossings, "imports across the layout's lines:\n" + "\n".join(crossings)


def test_the_check_sees_a_crossing(tmp_path):
    """The reader finds imports in functions too (a check that cannot fail is no check)."""
    path = tmp_path / "module.py"
    path.write_text("def f():\n    from control.params import Params\n")
    assert imports(path) == [(2, "control.params")]
