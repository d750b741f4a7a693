"""Finding the workspace (the git root) and the workflow to give the agent."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from waaah_agent.core import names
from waaah_agent.core.oneshot.run_inputs import split_front_matter
from waaah_agent.errors import UsageError, WorkflowNotFound
from waaah_agent.safe_read import WORKFLOW_CAP, read_text, why

BUNDLED = Path(__file__).resolve().parent.parent / "workflows"


def git_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding ``.git`` (a folder, or a file for worktrees)."""
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def workspace_root(given: Path | None) -> Path:
    """The workspace a command works in: the git root of ``given`` (default: the current folder),
    else that folder itself. A current folder that was removed, or a ``given`` one that is not a
    folder (a typo: nothing is created there), is a one-line UsageError."""
    try:
        start = (given or Path.cwd()).resolve()
    except OSError as gone:
        raise UsageError(
            f"the current folder cannot be used ({gone.strerror}); give one with --workspace"
        ) from None
    if given is not None and not start.is_dir():
        raise UsageError(f"--workspace {given} is not a folder")
    return git_root(start) or start


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
    return split_front_matter(text)[1]


def read_workflow(path: Path) -> str:
    """The workflow file's text: a regular file of UTF-8 text, at most WORKFLOW_CAP bytes."""
    try:
        return read_text(path, WORKFLOW_CAP)
    except UnicodeDecodeError as err:
        reason = f"it is not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start})"
    except OSError as err:
        reason = why(err)
    raise WorkflowNotFound(f"workflow file {path} cannot be used: {reason}; fix it or remove it")


def find_workflow(raw: str, workspace: Path, bundled: Path = BUNDLED) -> Workflow:
    name = workflow_name(raw)
    if refused := names.refusal("workflow (--as)", name):  # it names the lock and the agent id
        raise UsageError(refused)
    places = [workspace / ".agent" / "workflows", bundled]
    for folder in places:
        path = folder / f"{name}.md"
        if path.exists() or path.is_symlink():
            return Workflow(name, path, strip_front_matter(read_workflow(path)))
    known = sorted({p.stem for folder in places if folder.is_dir() for p in folder.glob("*.md")})
    searched = " and ".join(str(folder / f"{name}.md") for folder in places)
    raise WorkflowNotFound(
        f"workflow '{name}' not found (searched {searched}); available: {', '.join(known) or 'none'}"
    )
