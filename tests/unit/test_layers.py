"""The package's layers, read from its source: every import statement (also those inside
functions and under TYPE_CHECKING) of every module.

* core/ is pure: it imports only the standard library, third-party packages and core/ itself;
* an adapter (adapters/) declares data and pure functions the runtime carries out: it never
  imports runtime/ or commands/.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "waaah_agent"


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of each package module ``path`` imports; a name imported from a
    package counts as its submodule (``from waaah_agent import settings``)."""
    here = module_name(path, root)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] == "waaah_agent"]


def crossings(root: Path) -> list[str]:
    """Every import that breaks a layer rule, as ``file:line imports name``."""
    bad: list[str] = []
    for path in sorted(root.rglob("*.py")):
        here = module_name(path, root)
        for line, name in imports(path, root):
            if here.startswith("waaah_agent.core") and not name.startswith("waaah_agent.core."):
                bad.append(f"{path.relative_to(root.parent)}:{line} imports {name} (core imports only core)")
            if here.startswith("waaah_agent.adapters") and name.startswith(
                ("waaah_agent.runtime.", "waaah_agent.commands.")
            ):
                bad.append(
                    f"{path.relative_to(root.parent)}:{line} imports {name} (adapters never import runtime)"
                )
    return bad


def test_core_imports_only_core_and_adapters_never_runtime() -> None:
    assert crossings(PACKAGE) == []


def test_every_kind_of_crossing_is_seen(tmp_path: Path) -> None:
    """The walk itself: a top-level, a lazy, a relative and a package-attribute import are each found."""
    root = tmp_path / "waaah_agent"
    (root / "core").mkdir(parents=True)
    (root / "adapters" / "x").mkdir(parents=True)
    for folder in (root, root / "core", root / "adapters", root / "adapters" / "x"):
        (folder / "__init__.py").write_text("")
    (root / "core" / "a.py").write_text("from waaah_agent import settings\nfrom . import b\n")
    (root / "core" / "b.py").write_text("def f():\n    import waaah_agent.runtime.store\n")
    (root / "adapters" / "x" / "__init__.py").write_text("from ...runtime.mcp import setup\n")
    found = crossings(root)
    assert [line.split(" imports ")[1].split(" (")[0] for line in found] == [
        "waaah_agent.runtime.mcp.setup",
        "waaah_agent.settings",
        "waaah_agent.runtime.store",
    ]
