"""One supervised run from start to saved state: the entry point the CLI calls.

Sets up (workspace, workflow, CLI, session folder, logs), spawns the agent, hands it to
the loop, and writes down how it ended. Errors a user can act on are raised as
``WaaahError`` subclasses; the CLI turns them into one line and an exit code.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import shlex
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from waaah_agent import adapters, settings
from waaah_agent.adapters.base import Adapter
from waaah_agent.core.backoff import BackoffConfig, Restarts
from waaah_agent.core.events import Outcome, StopReason
from waaah_agent.core.lifecycle import (
    FirstPrompt,
    SessionStatus,
    first_prompt,
    restart_decision,
)
from waaah_agent.core.machine import Machine, MachineConfig, Saved
from waaah_agent.core.policy import PolicyConfig
from waaah_agent.core.redact import Redactor, known_secrets
from waaah_agent.core.tokens import Usage, file_totals, record_file
from waaah_agent.errors import (
    CliNotFound,
    LoginRequired,
    SessionBusy,
    SessionNotFound,
    UsageError,
    storage_error,
)
from waaah_agent.runtime import clis, mcp_setup, reaper, report
from waaah_agent.runtime.background import OWN, Mailbox, OwnOutput, ServerWatch, record_own
from waaah_agent.runtime.child import AgentProcess
from waaah_agent.runtime.ending import Console, announce_and_wait, finish, headless_line, tokens_line
from waaah_agent.runtime.inbox import Inbox
from waaah_agent.runtime.logs import SessionLogs
from waaah_agent.runtime.loop import LoopConfig, Supervisor
from waaah_agent.runtime.mcp_setup import McpPlan
from waaah_agent.runtime.private import private_dir
from waaah_agent.runtime.signals import signal_pipe
from waaah_agent.runtime.store import (
    Claim,
    CorruptSession,
    SessionDir,
    SessionState,
    SessionStore,
    new_session_id,
    now_iso,
)
from waaah_agent.runtime.terminal import DEFAULT_SIZE, is_interactive, raw_mode, terminal_size
from waaah_agent.runtime.transcripts import holds_prompt
from waaah_agent.runtime.waaah import check_server
from waaah_agent.runtime.workspace import Workflow, find_workflow, git_init, git_root


@dataclass
class AgentOptions:
    start: str
    workflow: str = settings.DEFAULT_WORKFLOW
    resume: bool = False
    resume_id: str = ""  # the session --resume names ("" for the newest)
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


def run_agent(opts: AgentOptions, env: Mapping[str, str], console: Console) -> int:
    adapter = pick_adapter(opts.start)
    workspace = resolve_workspace(opts.workspace or Path.cwd(), console)
    waaah_dir = workspace / ".waaah"
    store = SessionStore(waaah_dir / "sessions")
    if opts.resume:
        opts = kept_options(
            replace(opts, resume_id=session_to_resume(store, opts, adapter, workspace)), store, console
        )
        refuse_other_workspace(store, opts.resume_id, workspace)
    workflow = find_workflow(opts.workflow, workspace)
    binary = find_binary(adapter, env)
    child_env = agent_env(adapter, env)
    if adapter.needs_login(child_env) and not console.interactive:
        # On a terminal the CLI's own login screen is the user's to answer (waaah waits).
        raise LoginRequired(login_message(adapter, env))
    claim = claim_agent(waaah_dir, adapter, workflow, workspace)
    try:
        session, state, resumed = open_session(store, opts, adapter, workflow, workspace, console)
        session.redact = Redactor(known_secrets(child_env))  # every event and save from here on is masked
        session.redact.add(opts.api_key)
        state.options = options_record(opts, workflow, session.redact)
        claim.note(state.id)
        # A `waaah run` the agent starts links itself under this session in `waaah sessions`.
        child_env[settings.PARENT_ID] = state.id
        try:
            make_folder(waaah_dir / "logs", "create the log folder")
            plan = setup_mcp(opts, adapter, child_env, session, state, console)
            return supervise(
                opts, adapter, binary, child_env, workflow, session, state, resumed, console, plan
            )
        except PermissionError as err:
            if err.filename is None:  # the CLI's exec failed (ptyprocess gives no file name)
                raise CliNotFound(not_executable_message(binary, err)) from None
            raise
        finally:
            session.unlock()
    finally:
        claim.release()


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


#: What a session keeps of its options for --resume (the AgentOptions or PolicyConfig field).
KEPT = (
    "workflow",
    "heartbeat",
    "stall_timeout",
    "restart_budget",
    "no_nudge",
    "no_mcp",
    "server",
    "extra_args",
)


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
        return McpPlan(None, [], None)
    existing = adapter.mcp.existing(env)
    server = mcp_setup.choose_server(
        opts.server, opts.api_key, env, existing, console.interactive, console.ask
    )
    state.server_url = server.url
    session.redact.add(server.api_key)  # typed at the prompt, or from the CLI's own entry
    per_run = {settings.AGENT_ID: state.agent_id, settings.INBOX: str(session.inbox)}
    env.update(per_run)
    given = adapter.mcp.give(env, server, session.path, per_run)
    notes, args = given.notes, given.args
    for note in notes:
        console.say(note)
        session.event("mcp-config", note=note)
    health = check_server(server.url, server.api_key)
    warning = mcp_setup.server_warning(server, health)
    if warning:
        console.say(warning)
    session.event("server", url=server.url, source=server.source, ok=health.ok, detail=health.detail)
    return McpPlan(server, args, health.detail)


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
    """Run the agent, restarting it after crashes and stalls, until the session really ends."""
    warn_leftovers(session, state, console)
    workspace = Path(state.workspace)
    env.update({settings.SESSION_ID: state.id, settings.INBOX: str(session.inbox)})
    size = (terminal_size(sys.stdout.fileno()) if console.interactive else None) or DEFAULT_SIZE
    redactor = session.redact
    logs = SessionLogs(workspace / ".waaah" / "logs", adapter.name, size, redactor)
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
    keep_record(session, state, console)
    restarts = Restarts(opts.backoff)
    run = Run(opts, adapter, binary, env, workflow, session, state, console, plan, logs, size, mailbox, inbox)
    try:
        with (
            signal_pipe(),  # from here to the end, a stop signal is handled, never fatal
            raw_mode(sys.stdin.fileno()) if console.interactive else contextlib.nullcontext(),
            # What we would print (logging, warnings, a thread's traceback) goes to the session's
            # log and events: the terminal is the agent's screen.
            OwnOutput(mailbox, on_screen=console.interactive),
        ):
            while True:
                restarts.on_start(time.monotonic())
                outcome = run.once(resumed, redactor)
                decision = restart_decision(outcome, restarts, time.monotonic(), random.random())
                if decision is None:
                    break
                if not decision.restart:
                    outcome = Outcome(StopReason.GAVE_UP, outcome.status, decision.reason)
                    break
                interrupted = announce_and_wait(adapter, outcome, decision, state, session, logs, console)
                if interrupted:
                    why = StopReason.USER if interrupted == "Ctrl+C" else StopReason.SIGNAL
                    outcome = Outcome(why, outcome.status, interrupted)
                    break
                resumed = True
    finally:
        if watch is not None:
            watch.stop()
        inbox.stop()
        for message in mailbox.drain():
            if message.kind == OWN:
                record_own(message, logs, session)
        mailbox.close()
        state.output_tail = list(logs.recent)
        logs.close()
    state.ended = now_iso()
    state.end_reason = f"{outcome.reason.value}: {outcome.detail}" if outcome.detail else outcome.reason.value
    return finish(outcome, adapter, state, session, console)


def keep_record(session: SessionDir, state: SessionState, console: Console) -> None:
    """The session's counters follow its events (cheap to read back in `waaah sessions`), and
    headless each event a person reads is one line (``[waaah] <time> <event>: <detail>``)."""

    def count(event: dict[str, Any]) -> None:
        name = event.get("event")
        if name == "nudge":
            state.nudges += 1
            session.save(state)
        elif name == "mcp-tool_end" and event.get("outcome") == "task" and not state.first_task:
            state.first_task = str(event.get("task_id") or "a task")
            session.save(state)

    session.observers.append(count)
    if not console.interactive:

        def say(event: dict[str, Any]) -> None:
            line = headless_line(event)
            if line is not None:
                console.say(line)

        session.observers.append(say)


@dataclass
class Run:
    """Everything one start of the agent needs; :meth:`once` runs it to its end."""

    opts: AgentOptions
    adapter: Adapter
    binary: str
    env: dict[str, str]
    workflow: Workflow
    session: SessionDir
    state: SessionState
    console: Console
    plan: McpPlan
    logs: SessionLogs
    size: tuple[int, int]
    mailbox: Mailbox
    inbox: Inbox

    def once(self, resumed: bool, redactor: Redactor) -> Outcome:
        adapter, state, workspace = self.adapter, self.state, Path(self.state.workspace)
        native = resumed and adapter.transcript(self.env, workspace, state.native_session_id) is not None
        hooks = adapter.hooks.args(self.session.path) if adapter.hooks is not None else []
        extra = [*hooks, *self.plan.extra_args, *self.opts.extra_args]
        argv = adapter.argv(self.binary, state.native_session_id, native, extra)
        first = self.first_prompt(native)
        child = AgentProcess.spawn(argv, cwd=str(workspace), env=self.env, size=self.size)
        tracker = reaper.Tracker(child.pid)
        tracker.look()
        state.processes = tracker.records
        state.argv = [redactor(a) for a in argv]
        state.status, state.exit_code = SessionStatus.RUNNING.value, None
        state.ended, state.end_reason = "", ""
        state.log_path, state.cast_path = str(self.logs.text_path), str(self.logs.cast_path)
        state.supervisor_pid, state.agent_pid = os.getpid(), child.pid
        self.session.save(state)
        self.session.event(
            "start",
            argv=state.argv,
            pid=child.pid,
            resumed=resumed,
            native_resume=native,
            session=state.id,
            log=str(self.logs.text_path),
        )
        self.logs.notice(f"started {shlex.join(state.argv)} (pid {child.pid}) in {workspace}")
        machine = Machine(
            MachineConfig(
                agent=adapter.name,
                interactive=self.console.interactive,
                enter_delay=adapter.enter_delay,
                limit_resume_keys=adapter.limit_resume_keys,
                login_hint=clis.login_hint(adapter, self.env),
                stop_grace=self.opts.stop_grace,
                policy=self.opts.policy,
                limit_margin=self.opts.limit_margin,
                limit_default=self.opts.limit_default,
            ),
            first.delivery,
            Saved(state.workflow_delivered, state.limit_until, state.next_heartbeat),
            time.monotonic(),
        )
        sup = Supervisor(
            LoopConfig(rules=adapter.rules, interactive=self.console.interactive),
            machine,
            child,
            self.session,
            state,
            self.logs,
            stdin_fd=sys.stdin.fileno(),
            stdout_fd=sys.stdout.fileno(),
            # Headless, what the machine says is an event it records, printed as one (keep_record).
            notify=self.console.say if self.console.interactive else lambda text: None,
            mailbox=self.mailbox,
            inbox=self.inbox,
            tend=lambda: self.tend(tracker),
        )
        try:
            return sup.run()
        finally:
            if child.alive():  # an exception escaped the loop: never leave the agent behind
                child.signal_group(9)
            child.close()
            self.end_descendants(child)
            self.update_tokens()

    def tend(self, tracker: reaper.Tracker) -> float:
        """The slow timer: what the agent started is recorded (saved only when it changed)."""
        if tracker.look():
            self.state.processes = tracker.records
            self.session.save(self.state)
        return tracker.next_delay()

    def end_descendants(self, child: AgentProcess) -> None:
        """Whatever the agent left running (nohup, setsid, a double fork: re-parented to us) ends
        with it, at every end of a run: a stop, its own exit, a restart."""
        found = [p.pid for p in reaper.ours(child.start, {child.pid}) if not p.zombie]
        left = reaper.end(child.start, exclude={child.pid})
        if found:
            self.session.event("descendants-ended", pids=found)
        if left:
            self.logs.notice(f"could not end {len(left)} process(es): {[p.pid for p in left]}")
        self.state.processes = [reaper.record(p) for p in left]
        self.session.save(self.state)

    def first_prompt(self, native: bool) -> FirstPrompt:
        """The workflow, or the continue prompt when the resumed conversation already has it."""
        state, adapter = self.state, self.adapter
        pending = native and state.workflow_pending and not state.workflow_delivered
        path = (
            adapter.transcript(self.env, Path(state.workspace), state.native_session_id) if pending else None
        )
        first = first_prompt(
            self.workflow.text,
            adapter.enter_delay,
            native_resume=native,
            workflow_delivered=state.workflow_delivered,
            workflow_pending=state.workflow_pending,
            transcript_has_workflow=holds_prompt(path, self.workflow.text) if path else None,
        )
        if pending:
            self.session.event("workflow-settled", delivered=first.settled, why=first.why)
        if first.settled:
            state.workflow_delivered, state.workflow_pending = True, False
            self.session.save(state)
        return first

    def update_tokens(self) -> None:
        """Token totals from the CLI's own transcript (never from the screen), kept per
        transcript file and summed, so a resume or a restart adds to the night's totals."""
        counter = self.adapter.tokens() if self.adapter.tokens is not None else None
        path = self.adapter.transcript(self.env, Path(self.state.workspace), self.state.native_session_id)
        if counter is None or path is None:
            return
        try:
            with path.open(encoding="utf-8", errors="replace") as fh:
                usage = counter.feed(fh)
        except OSError as err:
            self.logs.notice(f"could not read the transcript {path}: {err}")
            return
        tally_tokens(self.state, str(path), usage)
        self.session.save(self.state)
        self.session.event("tokens", source=str(path), **self.state.tokens)
        self.logs.notice(f"tokens so far: {tokens_line(self.state.tokens)} (from {path})")


def tally_tokens(state: SessionState, path: str, usage: Usage) -> None:
    """Set ``path``'s totals (read again from the whole file) and the session's sum."""
    files = state.token_files
    if not files and any(state.tokens.values()):
        # Saved before totals were kept per file: they came from this session's transcript.
        files = {path: dict(state.tokens)}
    state.token_files = record_file(files, path, usage)
    state.tokens = file_totals(state.token_files)


def warn_leftovers(session: SessionDir, state: SessionState, console: Console) -> None:
    """Processes an earlier supervisor left when it was killed (SIGKILL: nothing could end them):
    said once at the start, with the command that stops them; kept in session.json for status."""
    state.leftovers = reaper.still_running([*state.processes, *state.leftovers])
    state.processes = []
    found = [(state.id, state.leftovers)] if state.leftovers else []
    found += [
        (r.id, r.leftovers) for r in report.reports(Path(state.workspace)) if r.id != state.id and r.leftovers
    ]
    for sid, records in found:
        session.event("leftovers", session=sid, pids=[r["pid"] for r in records])
        console.say(report.leftover_line(sid, records))


def default_console() -> Console:
    interactive = is_interactive(sys.stdin.fileno(), sys.stdout.fileno())

    def say(message: str) -> None:
        if not interactive:
            print(message, flush=True)
            return
        # Never block on a terminal that is not reading: the line is in the log anyway.
        try:
            fd = os.open(os.ttyname(sys.stderr.fileno()), os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError:
            print(message, file=sys.stderr, flush=True)
            return
        try:
            os.write(fd, (message + "\r\n").encode("utf-8", "replace"))
        except OSError:
            pass
        finally:
            os.close(fd)

    return Console(interactive=interactive, ask=input, say=say)


def environment() -> dict[str, str]:
    return dict(os.environ)
