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
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from waaah_agent import adapters, settings
from waaah_agent.adapters.base import Adapter
from waaah_agent.core import names
from waaah_agent.core.prices import Prices
from waaah_agent.core.redact import Redactor
from waaah_agent.core.supervise.backoff import BackoffConfig
from waaah_agent.core.supervise.policy import PolicyConfig
from waaah_agent.errors import (
    CliNotFound,
    SessionBusy,
    SessionNotFound,
    UsageError,
    storage_error,
)
from waaah_agent.runtime import clis
from waaah_agent.runtime.private import check_state, private_dir, untrusted
from waaah_agent.runtime.store import (
    Claim,
    CorruptSession,
    SessionDir,
    SessionState,
    SessionStore,
    new_session_id,
    now_iso,
)
from waaah_agent.runtime.supervise.ending import Console
from waaah_agent.runtime.workspace import Workflow, git_init, git_root


@dataclass
class AgentOptions:
    start: str
    workflow: str = settings.DEFAULT_WORKFLOW
    resume: bool = False
    resume_id: str = ""  # the session --resume names ("" for the newest)
    resume_or_start: bool = False  # --resume if this agent has a session here, else a new one
    # The options given on the command line (parameter names): on --resume they win over the
    # ones the session was started with; the others are taken from session.json.
    given: frozenset[str] = frozenset()
    workspace: Path | None = None
    extra_args: list[str] = field(default_factory=list)
    stop_grace: float = settings.STOP_GRACE
    policy: PolicyConfig | None = field(default_factory=PolicyConfig)
    backoff: BackoffConfig = field(default_factory=BackoffConfig)
    limit_margin: float = settings.LIMIT_MARGIN
    limit_default: float = settings.LIMIT_DEFAULT
    server: str | None = None
    api_key: str | None = None
    no_mcp: bool = False
    server_check_every: float = settings.SERVER_CHECK_EVERY
    record_budget: int = settings.RECORD_BUDGET * 1024 * 1024  # bytes for the session's logs
    log_roll: int = settings.AgentEnv.log_roll  # bytes at which a log file rolls over
    notify: tuple[str, ...] = ()  # apprise URLs for alerts (secrets: never saved)
    max_tokens: int | None = None  # stop after the task in hand once the session used this many
    max_cost: float | None = None  # the same in US dollars (the user's price table)
    prices: Prices | None = None  # the user's price table (read at the start when --max-cost is given)
    tokens_every: float = settings.TOKENS_CHECK_EVERY  # seconds between reads of the transcript
    metrics_port: int | None = None  # serve /healthz, /readyz and /metrics here (runtime/metrics.py)
    metrics_host: str = settings.METRICS_HOST_DEFAULT
    log_format: str = "text"  # headless: "json" prints each event as one JSON object on stderr


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


def session_to_resume(store: SessionStore, opts: AgentOptions, adapter: Adapter, workspace: Path) -> str:
    """The session ``--resume [ID]`` means: the one named, else the newest of this agent."""
    sid = opts.resume_id
    if sid and (refused := names.refusal("session id (--resume)", sid)):
        raise UsageError(refused)
    for path in (store.root / sid, store.root / sid / "session.json") if sid else ():
        if why := untrusted(path):  # a session someone else made is never resumed
            raise UsageError(why)
    if not sid:
        newest = store.newest(adapter.name)
        if newest is None:
            raise SessionNotFound(
                f"no {adapter.name} session to resume in {workspace}; start one without --resume"
            )
        return newest
    if Path(sid).name != sid or sid.startswith(".") or not (store.root / sid / "session.json").is_file():
        raise SessionNotFound(
            f"no session {sid} in {store.root}; `waaah sessions` lists them (or --resume alone: the newest)"
        )
    if not sid.startswith(f"{adapter.name}-"):
        agent = sid.split("-", 1)[0]
        raise UsageError(f"session {sid} is not a {adapter.name} session; resume it with --start={agent}")
    return sid


def options_record(opts: AgentOptions, workflow: Workflow, redact: Redactor) -> dict[str, Any]:
    """The options to keep in session.json: never the API key; CLI arguments that hold a secret
    are left out (masked, they would not work on resume) and that is said on resume."""
    secret = any(redact(a) != a for a in opts.extra_args)
    record: dict[str, Any] = {
        "workflow": workflow.name,
        "restart_budget": opts.backoff.budget,
        "no_nudge": opts.policy is None,
        "no_mcp": opts.no_mcp,
        "server": opts.server,
        "extra_args": [] if secret else list(opts.extra_args),
        "max_tokens": opts.max_tokens,
        "max_cost": opts.max_cost,
    }
    if secret:
        record["extra_args_withheld"] = True
    if opts.policy is not None:
        record |= {"heartbeat": opts.policy.heartbeat, "stall_timeout": opts.policy.stall_timeout}
    return record


def kept_options(opts: AgentOptions, store: SessionStore, console: Console) -> AgentOptions:
    """``opts`` for resuming ``opts.resume_id``: what the session was started with, except the
    options given on this command line. A session that cannot be read keeps ``opts`` (it is
    moved aside and a fresh one starts)."""
    try:
        state = store.open_existing(opts.resume_id).load()
    except (OSError, CorruptSession):
        return opts
    kept, given = state.options, opts.given

    def take(name: str, kind: type | tuple[type, ...]) -> bool:
        """Whether the kept ``name`` applies: not given again, and of its type."""
        value = kept.get(name)
        if name in given or value is None:
            return False
        if kind is bool:
            return isinstance(value, bool)
        return isinstance(value, kind) and not isinstance(value, bool)

    changes: dict[str, Any] = {}
    if "workflow" not in given:
        changes["workflow"] = (
            kept["workflow"] if take("workflow", str) and kept["workflow"] else state.workflow
        )
    if take("server", str):
        changes["server"] = kept["server"]
    if take("no_mcp", bool):
        changes["no_mcp"] = kept["no_mcp"]
    if "extra_args" not in given:
        args = kept.get("extra_args")
        if isinstance(args, list) and all(isinstance(a, str) for a in args):
            changes["extra_args"] = list(args)
        if kept.get("extra_args_withheld"):
            console.say(
                "warning: the CLI arguments after -- of this session held a secret and were not kept; "
                "give them again after --"
            )
    if take("max_tokens", int) and kept["max_tokens"] > 0:
        changes["max_tokens"] = kept["max_tokens"]
    if take("max_cost", (int, float)) and kept["max_cost"] > 0:
        changes["max_cost"] = float(kept["max_cost"])
    if take("restart_budget", int) and kept["restart_budget"] >= 0:
        changes["backoff"] = replace(opts.backoff, budget=kept["restart_budget"])
    wants_policy = bool({"heartbeat", "stall_timeout"} & given)
    if "no_nudge" not in given and kept.get("no_nudge") is True and not wants_policy:
        changes["policy"] = None
    elif opts.policy is not None:
        policy = opts.policy
        if take("heartbeat", (int, float)) and kept["heartbeat"] > 0:
            policy = replace(policy, heartbeat=float(kept["heartbeat"]))
        if take("stall_timeout", (int, float)) and kept["stall_timeout"] > 0:
            stall = float(kept["stall_timeout"])
            policy = replace(policy, stall_timeout=stall, stall_grace=min(settings.STALL_GRACE, stall))
        changes["policy"] = policy
    return replace(opts, **changes)


def refuse_other_workspace(store: SessionStore, sid: str, workspace: Path) -> None:
    """A session recorded for another folder (the repository moved or was renamed, or the
    ``workspace`` field was edited) is never resumed here: it would run the agent there."""
    try:
        recorded = store.open_existing(sid).load().workspace
    except (OSError, CorruptSession):
        return  # open_session moves it aside and starts fresh
    if same_folder(Path(recorded), workspace):
        return
    raise SessionNotFound(
        f"session {sid} in {store.root} was recorded for the workspace {recorded}, not {workspace} "
        f"(moved or renamed?); to resume it, move the repository back (mv {workspace} {recorded}) "
        "and resume there; or start a fresh session here without --resume"
    )


def same_folder(a: Path, b: Path) -> bool:
    try:
        return a == b or os.path.samefile(a, b)
    except OSError:
        return False


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
