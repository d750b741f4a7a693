"""One supervised run from start to saved state: the entry point the CLI calls.

Sets up (workspace, workflow, CLI, session folder, logs), spawns the agent, hands it to
the loop, and writes down how it ended. Errors a user can act on are raised as
``WaaahError`` subclasses; the CLI turns them into one line and an exit code.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from waaah_agent import adapters
from waaah_agent.adapters.base import Adapter
from waaah_agent.core.delivery import Delivery
from waaah_agent.core.redact import Redactor, known_secrets
from waaah_agent.errors import AgentFailed, CliNotFound, LoginRequired, SessionNotFound, UsageError
from waaah_agent.runtime import mcp_setup
from waaah_agent.runtime.background import Mailbox, ServerWatch
from waaah_agent.runtime.child import AgentProcess
from waaah_agent.runtime.inbox import Inbox
from waaah_agent.runtime.logs import SessionLogs
from waaah_agent.runtime.loop import LoopConfig, Outcome, Supervisor
from waaah_agent.runtime.mcp_setup import McpPlan
from waaah_agent.runtime.store import (
    CorruptSession,
    SessionDir,
    SessionState,
    SessionStore,
    new_session_id,
    now_iso,
)
from waaah_agent.runtime.terminal import DEFAULT_SIZE, is_interactive, raw_mode, terminal_size
from waaah_agent.runtime.workspace import Workflow, find_workflow, git_init, git_root


@dataclass
class AgentOptions:
    start: str
    workflow: str = "waaah-orc"
    resume: bool = False
    workspace: Path | None = None
    extra_args: list[str] = field(default_factory=list)
    stop_grace: float = 5.0
    server: str | None = None
    api_key: str | None = None
    no_mcp: bool = False
    server_check_every: float = 30.0


@dataclass
class Console:
    """Where the supervisor talks to the user outside the agent's screen."""

    interactive: bool
    ask: Callable[[str], str]
    say: Callable[[str], None]


def run_agent(opts: AgentOptions, env: Mapping[str, str], console: Console) -> int:
    adapter = pick_adapter(opts.start)
    workspace = resolve_workspace(opts.workspace or Path.cwd(), console)
    workflow = find_workflow(opts.workflow, workspace)
    binary = find_binary(adapter, env)
    child_env = agent_env(adapter, env)
    if adapter.needs_login(child_env):
        raise LoginRequired(login_message(adapter))
    store = SessionStore(workspace / ".waaah" / "sessions")
    session, state, resumed = open_session(store, opts, adapter, workflow, workspace, console)
    try:
        plan = setup_mcp(opts, adapter, child_env, session, state, console)
        return supervise(opts, adapter, binary, child_env, workflow, session, state, resumed, console, plan)
    finally:
        session.unlock()


def setup_mcp(
    opts: AgentOptions,
    adapter: Adapter,
    env: dict[str, str],
    session: SessionDir,
    state: SessionState,
    console: Console,
) -> McpPlan:
    """Point the CLI at the WAAAH server through our proxy, and check the server once."""
    if adapter.mcp is None or opts.no_mcp:
        return McpPlan(None, [], [], None)
    existing = mcp_setup.existing_entry(adapter.mcp, env)
    server = mcp_setup.choose_server(
        opts.server, opts.api_key, env, existing, console.interactive, console.ask
    )
    state.server_url = server.url
    per_run = {"WAAAH_AGENT_ID": state.agent_id, "WAAAH_INBOX": str(session.inbox)}
    env.update(per_run)
    if adapter.mcp == "gemini":
        notes, args = mcp_setup.install_gemini(env, server, datetime.now()), []
    else:
        notes, args = [], mcp_setup.install_claude(session.path, server, per_run)
    for note in notes:
        console.say(note)
        session.event("mcp-config", note=note)
    health = mcp_setup.initial_health(server)
    warning = mcp_setup.server_warning(server, health)
    if warning:
        console.say(warning)
    session.event("server", url=server.url, source=server.source, ok=health.ok, detail=health.detail)
    return McpPlan(server, args, notes, health.detail)


def pick_adapter(name: str) -> Adapter:
    known = adapters.registry()
    if name not in known:
        raise UsageError(f"unknown agent '{name}'; choose one of: {', '.join(adapters.names())}")
    return known[name]


def resolve_workspace(start: Path, console: Console) -> Path:
    start = start.expanduser().resolve()
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
    found = shutil.which(adapter.binary, path=env.get("PATH"))
    if found is None:
        raise CliNotFound(f"{adapter.binary} CLI not found. Install with: {adapter.install_hint}")
    return found


def login_message(adapter: Adapter) -> str:
    return f"{adapter.name} requires login. Run: {adapter.login_hint or adapter.binary}"


def agent_env(adapter: Adapter, env: Mapping[str, str]) -> dict[str, str]:
    dropped = adapter.drop_env
    child = {
        k: v
        for k, v in env.items()
        if k not in dropped and not any(p.endswith("_") and k.startswith(p) for p in dropped)
    }
    for key, value in adapter.extra_env.items():  # defaults: the user's own settings win
        child.setdefault(key, value)
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
    """The session to drive, locked: the newest one on --resume, else a new one."""
    if opts.resume:
        sid = store.newest(adapter.name)
        if sid is None:
            raise SessionNotFound(
                f"no {adapter.name} session to resume in {workspace}; start one without --resume"
            )
        session = store.open(sid)
        session.lock()
        try:
            state = session.load()
            state.workflow = workflow.name
            return session, state, True
        except (CorruptSession, FileNotFoundError) as err:
            moved = session.move_aside() if isinstance(err, CorruptSession) else None
            console.say(
                f"warning: session file {session.state_file} is unreadable ({err}); "
                f"moved it to {moved}; starting a fresh session"
                if moved
                else f"warning: session {sid} has no state; starting a fresh session"
            )
            session.unlock()
    sid = new_session_id(adapter.name, datetime.now())
    session = store.open(sid)
    session.lock()
    state = SessionState(
        id=sid,
        agent=adapter.name,
        workflow=workflow.name,
        workspace=str(workspace),
        native_session_id=str(uuid.uuid4()),
        agent_id=agent_id_for(workflow.name, adapter.name, workspace),
        created=now_iso(),
    )
    return session, state, False


def agent_id_for(workflow: str, agent: str, workspace: Path) -> str:
    """Stable across restarts and resumes: the server renames an id re-registered too soon."""
    digest = hashlib.sha1(str(workspace).encode()).hexdigest()[:6]
    return f"{workflow}-{agent}-{digest}"


def supervise(
    opts: AgentOptions,
    adapter: Adapter,
    binary: str,
    env: dict[str, str],
    workflow: Workflow,
    session: SessionDir,
    state: SessionState,
    resumed: bool,
    console: Console,
    plan: McpPlan,
) -> int:
    workspace = Path(state.workspace)
    native_resume = resumed and adapter.transcript(env, workspace, state.native_session_id) is not None
    argv = adapter.argv(binary, state.native_session_id, native_resume, [*plan.extra_args, *opts.extra_args])
    env.update(WAAAH_SESSION_ID=state.id, WAAAH_INBOX=str(session.inbox))
    size = (terminal_size(sys.stdout.fileno()) if console.interactive else None) or DEFAULT_SIZE
    redactor = Redactor(known_secrets(env))
    logs = SessionLogs(workspace / ".waaah" / "logs", adapter.name, size, redactor)
    first = None if native_resume else Delivery("workflow", workflow.text, enter_delay=adapter.enter_delay)
    child = AgentProcess.spawn(argv, cwd=str(workspace), env=env, size=size)
    state.argv = [redactor(a) for a in argv]
    state.status, state.exit_code = "running", None
    state.log_path, state.cast_path = str(logs.text_path), str(logs.cast_path)
    state.supervisor_pid, state.agent_pid = os.getpid(), child.pid
    session.save(state)
    session.event("start", argv=state.argv, pid=child.pid, resumed=resumed, native_resume=native_resume)
    logs.notice(f"started {shlex.join(state.argv)} (pid {child.pid}) in {workspace}")
    if not console.interactive:
        console.say(
            f"[waaah] {adapter.name} started (pid {child.pid}); session {state.id}; log {logs.text_path}"
        )
    cfg = LoopConfig(
        adapter=adapter, interactive=console.interactive, initial_prompt=first, stop_grace=opts.stop_grace
    )
    mailbox = Mailbox()
    inbox = Inbox(session.inbox, mailbox)
    inbox.start()
    watch = None
    if plan.server is not None:
        watch = ServerWatch(
            mailbox, plan.server.url, plan.server.api_key, state.agent_id, opts.server_check_every
        )
        watch.last_health = plan.health
        watch.start()
    sup = Supervisor(
        cfg,
        child,
        session,
        state,
        logs,
        stdin_fd=sys.stdin.fileno(),
        stdout_fd=sys.stdout.fileno(),
        notify=console.say,
        mailbox=mailbox,
        inbox=inbox,
    )
    try:
        if console.interactive:
            with raw_mode(sys.stdin.fileno()):
                outcome = sup.run()
        else:
            outcome = sup.run()
    finally:
        if child.alive():  # an exception escaped the loop: never leave the agent behind
            child.signal_group(9)
        child.close()
        if watch is not None:
            watch.stop()
        inbox.stop()
        mailbox.close()
        state.output_tail = list(logs.recent)
        logs.close()
    return finish(outcome, adapter, state, session, opts, console)


def finish(
    outcome: Outcome,
    adapter: Adapter,
    state: SessionState,
    session: SessionDir,
    opts: AgentOptions,
    console: Console,
) -> int:
    status = outcome.status
    state.exit_code = status.code if status else None
    resume_cmd = resume_command(opts, state)
    if outcome.reason == "login":
        state.status = "login-required"
    elif outcome.reason == "evict":
        state.status = "evicted"
    elif outcome.reason == "agent-exit":
        state.status = "exited"
    else:
        state.status = "stopped"
    session.save(state)
    session.event(
        "end", reason=outcome.reason, detail=outcome.detail, exit=status.describe() if status else None
    )
    if outcome.reason == "login":
        raise LoginRequired(outcome.detail)
    if outcome.reason == "agent-exit":
        how = status.describe() if status else "an unknown status"
        if status is None or not status.ok:
            raise AgentFailed(
                f"{adapter.name} exited with {how}; session {state.id} saved. Resume with: {resume_cmd}"
            )
        console.say(f"{adapter.name} exited ({how}). Session {state.id} saved. Resume with: {resume_cmd}")
        return 0
    console.say(f"Stopped ({outcome.detail}). Session {state.id} saved. Resume with: {resume_cmd}")
    return 0


def resume_command(opts: AgentOptions, state: SessionState) -> str:
    parts = ["waaah", "agent", f"--start={state.agent}", f"--as={state.workflow}", "--resume"]
    if Path(state.workspace) != Path.cwd().resolve():
        parts += ["--workspace", state.workspace]
    return shlex.join(parts)


def default_console() -> Console:
    interactive = is_interactive(sys.stdin.fileno(), sys.stdout.fileno())

    def say(message: str) -> None:
        stream = sys.stderr if interactive else sys.stdout
        print(message, file=stream, flush=True)

    return Console(interactive=interactive, ask=input, say=say)


def environment() -> dict[str, str]:
    return dict(os.environ)
