"""Starting a supervised session: the CLI, the workspace, the session to open or resume, its lock.

Everything before the agent is spawned, each failure one line with what to do (``WaaahError``),
and nothing created on the way to a refusal.
"""

from __future__ import annotations

import hashlib
import os
import sys
import uuid
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from waaah_agent import adapters, settings
from waaah_agent.adapters.base import Adapter
from waaah_agent.core.mcp.inbox_records import NO_SENDS
from waaah_agent.errors import (
    CliNotFound,
    SessionBusy,
    UsageError,
    storage_error,
)
from waaah_agent.runtime import clis
from waaah_agent.runtime.locks import Claim
from waaah_agent.runtime.private import check_state, private_dir
from waaah_agent.runtime.store import (
    CorruptSession,
    SessionDir,
    SessionState,
    SessionStore,
    new_session_id,
    now_iso,
)
from waaah_agent.runtime.supervise.session.ending import Console
from waaah_agent.runtime.supervise.session.options import AgentOptions
from waaah_agent.runtime.workspace import Workflow, git_init, git_root


def make_folder(path: Path, doing: str) -> None:
    try:
        private_dir(path)
    except OSError as err:
        raise storage_error(err, path, doing) from None


def not_executable_message(binary: str, err: OSError) -> str:
    return (
        f"{binary} cannot be executed ({err.strerror or err}); make it executable: chmod +x {binary} "
        "(or, for a script, its interpreter; or move it off a noexec file system)"
    )


def claim_agent(waaah_dir: Path, adapter: Adapter, workflow: Workflow, workspace: Path) -> Claim:
    """One supervisor per agent, workflow and workspace: a second one is refused with the pid."""
    claim = Claim(waaah_dir / "locks", agent_id_for(workflow.name, adapter.name, workspace))
    try:
        holder = claim.take()
    except OSError as err:
        raise storage_error(err, claim.path, "create the lock file") from None
    if holder is not None:
        raise SessionBusy(
            f"{adapter.name} as {workflow.name} in {workspace} is being supervised by another waaah "
            f"process ({holder}); stop that one first, or run a second one with another workflow "
            "(--as) or in another workspace (--workspace)"
        )
    return claim


def pick_adapter(name: str) -> Adapter:
    known = adapters.registry()
    if name not in known:
        raise UsageError(f"unknown agent '{name}'; choose one of: {', '.join(adapters.names())}")
    if not known[name].interactive:
        raise UsageError(
            f'{name} runs headless only (waaah run --agent {name} "..."); '
            f"waaah agent can supervise: {', '.join(adapters.names())}"
        )
    return known[name]


def resolve_workspace(start: Path, console: Console) -> Path:
    """The workspace to supervise in; its ``.waaah/`` refused (one line) if it is not this user's alone."""
    workspace = _workspace(start, console)
    check_state(workspace / ".waaah")
    return workspace


def _workspace(start: Path, console: Console) -> Path:
    try:
        start = start.expanduser().resolve()
    except (OSError, RuntimeError) as err:  # a symlink loop, a vanished current directory
        raise UsageError(f"workspace {start} cannot be resolved ({err}); give it with --workspace") from None
    if not start.is_dir():
        raise UsageError(f"workspace {start} is not a folder")
    root = git_root(start)
    if root is not None:
        return root
    console.say(
        f"warning: {start} is not in a git repository; git is recommended so the agent's work can be reviewed and undone"
    )
    wants_git = console.interactive and console.ask("Run `git init` here? [y/N] ").strip().lower() in (
        "y",
        "yes",
    )
    if wants_git and git_init(start):
        console.say(f"initialised a git repository in {start}")
    return start


def find_binary(adapter: Adapter, env: Mapping[str, str]) -> str:
    if adapter.simulated:
        return sys.executable
    blocked = not_executable(adapter.binary, env.get("PATH"))
    found = clis.find(adapter, env)
    if blocked is not None and (found is None or not clis.on_path(adapter.binary, found, env)):
        # The user's own copy on PATH may not be run: that is the one they mean.
        raise CliNotFound(not_executable_message(blocked, PermissionError(13, "permission denied")))
    if found is None:
        raise CliNotFound(f"{adapter.binary} CLI not found. Install with: {adapter.install_hint}")
    return found


def not_executable(binary: str, path: str | None) -> str | None:
    """The first file named ``binary`` on ``path`` that is there but may not be executed."""
    folders = (
        [Path(binary).parent] if os.sep in binary else [Path(p) for p in (path or "").split(os.pathsep) if p]
    )
    for folder in folders:
        candidate = folder / Path(binary).name
        if candidate.is_file() and not os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def login_message(adapter: Adapter, env: Mapping[str, str]) -> str:
    return f"{adapter.name} requires login. Run: {clis.login_hint(adapter, env)}"


def agent_env(adapter: Adapter, env: Mapping[str, str]) -> dict[str, str]:
    dropped = adapter.drop_env
    child = {
        k: v
        for k, v in env.items()
        if k not in dropped
        and k not in settings.PRIVATE  # alert URLs: never the agent's (nor its MCP proxy's, hooks')
        and not any(p.endswith("_") and k.startswith(p) for p in dropped)
    }
    for key, value in adapter.extra_env.items():  # defaults: the user's own settings win
        child.setdefault(key, value)
    child.pop(settings.NOTIFY, None)  # alert URLs hold tokens: the supervisor's, never the agent's
    # The agent's terminal is the PTY, sized and resized by us: a COLUMNS or LINES exported by
    # the user's shell would win over it in programs that read the environment first (Python's
    # shutil, curses), and stay wrong after every resize.
    child.pop("COLUMNS", None)
    child.pop("LINES", None)
    child["TERM"] = "xterm-256color"
    return child


def open_session(
    store: SessionStore,
    opts: AgentOptions,
    adapter: Adapter,
    workflow: Workflow,
    workspace: Path,
    console: Console,
) -> tuple[SessionDir, SessionState, bool]:
    """The session to drive, locked: the one --resume picked (``opts.resume_id``), else a new one."""
    if opts.resume:
        sid = opts.resume_id
        session = open_dir(store, sid)
        try:
            state = session.load()
            state.workflow = workflow.name
            state.first_prompt = state.first_prompt or opening_line(workflow.text)
            first_save(session, state)
            return session, state, True
        except (CorruptSession, FileNotFoundError) as err:
            moved = move_aside(session) if isinstance(err, CorruptSession) else None
            if isinstance(err, CorruptSession):
                where = f"moved it to {moved}" if moved else "it could not be moved aside"
                console.say(
                    f"warning: session file {session.state_file} is unreadable ({err}); "
                    f"{where}; starting a fresh session"
                )
            else:
                console.say(f"warning: session {sid} has no state; starting a fresh session")
            session.unlock()
    sid = new_session_id(adapter.name, datetime.now())
    session = open_dir(store, sid)
    state = SessionState(
        id=sid,
        agent=adapter.name,
        workflow=workflow.name,
        workspace=str(workspace),
        native_session_id=str(uuid.uuid4()),
        agent_id=agent_id_for(workflow.name, adapter.name, workspace),
        created=now_iso(),
        first_prompt=opening_line(workflow.text),
        inbox_mark=list(NO_SENDS),  # no send read yet: a --resume after a SIGKILL takes them all
    )
    first_save(session, state)
    return session, state, False


def opening_line(text: str) -> str:
    """The workflow's first line of words (a heading's text), for `waaah sessions`."""
    for line in text.splitlines():
        words = line.strip().lstrip("#").strip()
        if words and words != "---":
            return words[:100]
    return ""


def open_dir(store: SessionStore, sid: str) -> SessionDir:
    """The session folder, created and locked; a file-system failure is one clear line."""
    try:
        session = store.open(sid)
    except OSError as err:
        raise storage_error(err, store.root / sid, "create the session folder") from None
    try:
        session.lock()
    except OSError as err:
        raise storage_error(err, session.path / "lock", "create the lock file") from None
    return session


def first_save(session: SessionDir, state: SessionState) -> None:
    """Save before anything starts: a session that cannot be saved cannot be resumed."""
    try:
        session.save(state, strict=True)
    except OSError as err:
        session.unlock()
        raise storage_error(err, session.state_file, "write the session file") from None


def move_aside(session: SessionDir) -> Path | None:
    try:
        return session.move_aside()
    except OSError:
        return None


def agent_id_for(workflow: str, agent: str, workspace: Path) -> str:
    """Stable across restarts and resumes: the server renames an id re-registered too soon."""
    digest = hashlib.sha1(str(workspace).encode()).hexdigest()[:6]
    return f"{workflow}-{agent}-{digest}"
