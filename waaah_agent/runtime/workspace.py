"""Finding the workspace (the git root) and the workflow to give the agent."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from waaah_agent.errors import WorkflowNotFound

BUNDLED = Path(__file__).resolve().parent.parent / "workflows"


def git_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding ``.git`` (a folder, or a file for worktrees)."""
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def git_init(folder: Path) -> bool:
    result = subprocess.run(["git", "init", "-q", str(folder)], capture_output=True, text=True, check=False)
    return result.returncode == 0


@dataclass(frozen=True)
class Workflow:
    name: str
    path: Path
    text: str


def workflow_name(raw: str) -> str:
    """`/waaah-orc`, `waaah-orc.md` and `waaah-orc` all name the same workflow."""
    name = raw.strip().lstrip("/")
    return name[: -len(".md")] if name.endswith(".md") else name


def strip_front_matter(text: str) -> str:
    """Drop a leading YAML front matter block (metadata for tools, not for the model)."""
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end >= 0:
            return text[end + 4 :].lstrip("\n")
    return text


def find_workflow(raw: str, workspace: Path, bundled: Path = BUNDLED) -> Workflow:
    name = workflow_name(raw)
    places = [workspace / ".agent" / "workflows", bundled]
    for folder in places:
        path = folder / f"{name}.md"
        if path.is_file():
            return Workflow(name, path, strip_front_matter(path.read_text(encoding="utf-8")))
    known = sorted({p.stem for folder in places if folder.is_dir() for p in folder.glob("*.md")})
    searched = " and ".join(str(folder / f"{name}.md") for folder in places)
    raise WorkflowNotFound(
        f"workflow '{name}' not found (searched {searched}); available: {', '.join(known) or 'none'}"
    )
