"""The README is a first page a performer reads (at most about 200 lines: what it is, a picture,
the two commands, the first five minutes, a map of docs/), and every link in it and in docs/
leads somewhere: a file that exists, and a heading that exists in it."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    """GitHub's anchors for a Markdown file's headings."""
    found = set()
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return found


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_is_a_first_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move manuals to docs/"
    text = "\n".join(lines)
    for command in ("pip install -q -e . && .venv/bin/python instrument.py",
                    "pip install -q -e '.[test]' && .venv/bin/python -m pytest"):
        assert command in text
    assert "docs/images/" in text  # a picture


def test_every_link_leads_somewhere():
    broken = []
    for page in pages():
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):  # http:, mailto:: not ours to check here
                continue
            file, _, anchor = target.partition("#")
            path = (page.parent / file).resolve() if file else page
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_readme_maps_every_page_of_docs():
    readme = (ROOT / "README.md").read_text()
    missing = [page.name for page in (ROOT / "docs").glob("*.md")
               if f"(docs/{page.name})" not in readme]
    assert not missing, f"docs/ pages the README does not lead to: {missing}"
