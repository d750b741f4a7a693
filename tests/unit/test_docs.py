"""The README stays a newcomer's page; the reference lives in docs/, linked, each page with its contents."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(p.name for p in DOCS.glob("*.md"))
# docs/architecture.md is written in its own shape (a tree, then its sections); the others open
# with their contents.
WITHOUT_CONTENTS: set[str] = set()
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _anchor(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as dashes."""
    return "".join(c for c in title.lower() if c.isalnum() or c in " -_").replace(" ", "-")


def _headings(text: str) -> list[tuple[int, str]]:
    """(level, title) of each markdown heading outside code fences."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"^(#{1,6}) (.+)$", line)):
            found.append((len(match.group(1)), match.group(2).strip()))
    return found


def _anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for _, title in _headings(text):
        base = _anchor(title)
        anchors.add(base if base not in seen else f"{base}-{seen[base]}")
        seen[base] = seen.get(base, 0) + 1
    return anchors


def _broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(_text(page)):
        if re.match(r"^[a-z]+:", target):
            continue  # a web address
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or fragment and file.suffix == ".md" and fragment not in _anchors(_text(file)):
            broken.append(target)
    return broken


def test_the_readme_is_at_most_300_lines() -> None:
    lines = _text(ROOT / "README.md").count("\n")
    print(f"README.md: {lines} lines")
    assert lines <= 300


def test_every_docs_link_of_the_readme_resolves() -> None:
    links = [t for t in LINK.findall(_text(ROOT / "README.md")) if t.startswith("docs/")]
    assert len(links) >= 10  # the README points at the reference
    assert _broken_links(ROOT / "README.md") == []


@pytest.mark.parametrize("name", PAGES)
def test_every_link_of_a_docs_page_resolves(name: str) -> None:
    assert _broken_links(DOCS / name) == []


@pytest.mark.parametrize("name", [p for p in PAGES if p not in WITHOUT_CONTENTS])
def test_every_docs_page_opens_with_its_contents(name: str) -> None:
    text = _text(DOCS / name)
    headings = _headings(text)
    assert headings[0][0] == 1, "the page starts with its title"
    assert headings[1] == (2, "Contents"), "the first section is the contents"
    contents = text.split("## Contents\n", 1)[1].split("\n## ", 1)[0]
    listed = {target.partition("#")[2] or target for target in LINK.findall(contents)}
    sections = {_anchor(title) for level, title in headings[2:] if level == 2}
    assert sections <= listed, f"sections missing from the contents: {sections - listed}"
    assert listed, "the contents list nothing"


def test_the_docs_index_has_one_line_per_page() -> None:
    index = _text(DOCS / "README.md")
    listed = [t for t in LINK.findall(index) if t.endswith(".md") and not t.startswith("../")]
    assert sorted(listed) == sorted(p for p in PAGES if p != "README.md")


def test_the_options_page_is_what_its_script_prints() -> None:
    spec = importlib.util.spec_from_file_location("options_doc", ROOT / "scripts" / "options_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert _text(DOCS / "options.md") == module.page(), (
        "docs/options.md is out of date: .venv/bin/python scripts/options_doc.py > docs/options.md"
    )
