"""One supervised session from start to saved state: the entry point the CLI calls.

Sets up (workspace, workflow, CLI, session folder, logs), spawns the agent (run.py), restarts
it after crashes and stalls, and writes down how it ended (ending.py). Errors a user can act
on are raised as ``WaaahError`` subclasses; the CLI turns them into one line and an exit code.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from waaah_agent import settings
from waaah_agent.adapters.base import Adapter
from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.core.secrets.secretenv import known_secrets
from waaah_agent.core.supervise.backoff import Restarts
from waaah_agent.core.supervise.events import EventKind, Outcome, StopReason
from waaah_agent.core.supervise.lifecycle import (
    rejected_command_line,
    restart_decision,
)
from waaah_agent.errors import (
    CliNotFound,
    LoginRequired,
    UsageError,
)
from waaah_agent.runtime import key_file, price_file, releases
from waaah_agent.runtime.mcp import link
from waaah_agent.runtime.mcp import setup as mcp_setup
from waaah_agent.runtime.mcp.givers import giver
from waaah_agent.runtime.mcp.setup import McpPlan
from waaah_agent.runtime.mcp.waaah import check_server
from waaah_agent.runtime.night.alerts import check_urls
from waaah_agent.runtime.store import (
    SessionDir,
    SessionState,
    SessionStore,
    now_iso,
)
from waaah_agent.runtime.supervise import jsonlog
from waaah_agent.runtime.supervise.background import OWN, Mailbox, OwnOutput, ServerWatch, record_own
from waaah_agent.runtime.supervise.inbox import Inbox
from waaah_agent.runtime.supervise.logs import SessionLogs
from waaah_agent.runtime.supervise.session.ending import (
    Console,
    announce_and_wait,
    finish,
)
from waaah_agent.runtime.supervise.session.opening import (
    agent_env,
    claim_agent,
    find_binary,
    login_message,
    make_folder,
    not_executable_message,
    open_session,
    pick_adapter,
    resolve_workspace,
)
from waaah_agent.runtime.supervise.session.options import (
    AgentOptions,
    kept_options,
    options_record,
    refuse_other_workspace,
    session_to_resume,
)
from waaah_agent.runtime.supervise.session.run import Run
from waaah_agent.runtime.supervise.session.services import (
    carry_back,
    keep_record,
    keep_typed,
    serve_vitals,
    start_alerts,
    start_link,
    warn_leftovers,
)
from waaah_agent.runtime.supervise.signals import signal_pipe, stop_signals_unwind
from waaah_agent.runtime.supervise.terminal import DEFAULT_SIZE, is_interactive, raw_mode, terminal_size
from waaah_agent.runtime.workspace import Workflow, find_workflow


def run_agent(opts: AgentOptions, env: Mapping[str, str], console: Console) -> int:
    adapter = pick_adapter(opts.start)
    check_urls(opts.notify)
    workspace = resolve_workspace(opts.workspace or Path.cwd(), console)
    waaah_dir = workspace / ".waaah"
    store = SessionStore(waaah_dir / "sessions")
    if opts.resume_or_start and not opts.resume and store.newest(adapter.name) is not None:
        opts = replace(opts, resume=True)
    if opts.resume:
        opts = kept_options(
            replace(opts, resume_id=session_to_resume(store, opts, adapter, workspace)), store, console
        )
        refuse_other_workspace(store, opts.resume_id, workspace)
    if opts.max_cost is not None:  # no price table: one line now, not a budget never reached
        opts = replace(opts, prices=price_file.required(env, "--max-cost"))
    elif opts.metrics_port is not None:  # waaah_cost_usd_total, where the user prices the models
        opts = replace(opts, prices=price_file.load(env)[0] or None)
    if (opts.max_tokens or opts.max_cost) and adapter.tokens is None:
        console.say(
            f"warning: waaah does not read {adapter.name}'s token usage, so --max-tokens and --max-cost "
            "cannot be judged for it: the session will not stop on them"
        )
    workflow = find_workflow(opts.workflow, workspace)
    binary = find_binary(adapter, env)
    release = releases.checked_release(adapter, binary, env)  # too old: one line, nothing started
    child_env = agent_env(adapter, env)
    if adapter.needs_login(child_env) and not console.interactive:
        # On a terminal the CLI's own login screen is the user's to answer (waaah waits).
        raise LoginRequired(login_message(adapter, env))
    claim = claim_agent(waaah_dir, adapter, workflow, workspace)
    try:
        session, state, resumed = open_session(store, opts, adapter, workflow, workspace, console)
        # Every event and save from here on is masked: the secrets of the whole environment,
        # also those the agent is not given (an alert URL it never sees may still be echoed).
        session.redact = Redactor(known_secrets(settings.with_private({**env, **child_env})))
        session.redact.add(opts.api_key)
        if console.events_as_json:  # --log-format json: every event from here on, on stderr
            session.observers.append(jsonlog.event)
        state.options = options_record(opts, workflow, session.redact)
        state.cli_release = release
        claim.note(state.id)
        # A `waaah run` the agent starts links itself under this session in `waaah sessions`.
        child_env[settings.PARENT_ID] = state.id
        try:
            make_folder(waaah_dir / "logs", "create the log folder")
            # Until the supervisor's own signal handling takes over, a stop signal unwinds (so
            # what was given to the CLI for this run is carried back and removed), never kills.
            plan: McpPlan | None = None
            with stop_signals_unwind():
                try:
                    plan = setup_mcp(opts, adapter, child_env, session, state, console)
                    return supervise(
                        opts, adapter, binary, child_env, workflow, session, state, resumed, console, plan
                    )
                finally:
                    if adapter.mcp is not None and not opts.no_mcp and (plan is None or not plan.settled):
                        with contextlib.suppress(OSError, UsageError):
                            giver(adapter.mcp).finish(child_env, session.path)
        except PermissionError as err:
            if err.filename is None:  # the CLI's exec failed (ptyprocess gives no file name)
                raise CliNotFound(not_executable_message(binary, err)) from None
            raise
        finally:
            session.unlock()
    finally:
        claim.release()


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
    existing = giver(adapter.mcp).existing(env)
    server = mcp_setup.choose_server(
        opts.server,
        opts.api_key,
        env,
        existing,
        console.interactive,
        console.ask,
        kept_key=key_file.read(env),
        kept_url=key_file.read_server(env),
    )
    state.server_url = server.url
    session.redact.add(server.api_key)  # typed at the prompt, or from the CLI's own entry
    if server.source == "asked":
        keep_typed(env, server, console)
    per_run = {
        settings.AGENT_ID: state.agent_id,
        settings.INBOX: str(session.inbox),
        settings.LINK: str(link.socket_path()),  # the session keeps the waits (runtime/mcp/link.py)
    }
    env.update(per_run)
    given = giver(adapter.mcp).give(env, server, session.path, per_run)
    notes, args = given.notes, given.args
    env.update(given.env)
    for note in notes:
        console.say(note)
        session.event(EventKind.MCP_CONFIG, note=note)
    health = check_server(server.url, server.api_key)
    warning = mcp_setup.server_warning(server, health)
    if warning:
        console.say(warning)
    session.event(EventKind.SERVER, url=server.url, source=server.source, ok=health.ok, detail=health.detail)
    return McpPlan(server, args, health.detail, health.ok)


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
    logs = SessionLogs(
        workspace / ".waaah" / "logs",
        adapter.name,
        size,
        redactor,
        budget=opts.record_budget,
        max_bytes=opts.log_roll,
    )
    mailbox = Mailbox()
    vitals = serve_vitals(opts, adapter, workflow, state, plan, mailbox, session, logs)
    # The sends a killed supervisor left unread are taken over (an older session's are history).
    inbox = Inbox(session.inbox, mailbox, carry=session.queue.mark)
    if state.inbox_mark != list(inbox.mark):
        state.inbox_mark = list(inbox.mark)
        session.save(state)
    if inbox.carried:
        console.say(
            f"{inbox.carried} prompt(s) of waaah send the last supervisor had not read: "
            "typed once the agent is ready"
        )
    inbox.start()
    session_link = start_link(plan, env, session, state, mailbox)
    watch = None
    if plan.server is not None:
        watch = ServerWatch(
            mailbox, plan.server.url, plan.server.api_key, state.agent_id, opts.server_check_every
        )
        watch.last_health, watch.last_ok = plan.health, plan.healthy
        watch.start()
    # What an earlier supervisor saved of the server is history; this start's check is news.
    down = plan.server is not None and not plan.healthy
    state.server_down = (plan.health or "unreachable") if down else ""
    state.server_down_since = now_iso() if down else ""
    keep_record(session, state, console)
    notifier = start_alerts(opts, adapter, state, session)
    run = Run(
        opts, adapter, binary, env, workflow, session, state, console, plan, logs, size, mailbox, inbox, watch
    )
    try:
        with (
            signal_pipe(),  # from here to the end, a stop signal is handled, never fatal
            raw_mode(sys.stdin.fileno()) if console.interactive else contextlib.nullcontext(),
            # What we would print (logging, warnings, a thread's traceback) goes to the session's
            # log and events: the terminal is the agent's screen.
            OwnOutput(mailbox, on_screen=console.interactive),
        ):
            outcome = _runs(run, resumed, redactor)
    finally:
        for note in carry_back(adapter, env, session, plan, final=True):
            console.say(note)
        plan.settled = True
        if vitals is not None:
            vitals.close()
        if watch is not None:
            watch.stop()
        if session_link is not None:
            session_link.stop()
        inbox.stop()
        _record_mail(mailbox, logs, session)
        state.output_tail = list(logs.recent)
        logs.close()
    state.ended = now_iso()
    state.end_reason = f"{outcome.reason.value}: {outcome.detail}" if outcome.detail else outcome.reason.value
    try:
        return finish(outcome, adapter, state, session, console)
    finally:
        if notifier is not None:
            notifier.close()


def _runs(run: Run, resumed: bool, redactor: Redactor) -> Outcome:
    """The agent run again and again (after crashes and stalls, with the backoff between) until
    a run's end needs no restart, the restart budget is spent, or the wait is interrupted."""
    adapter, env, session, state, plan, logs = (
        run.adapter,
        run.env,
        run.session,
        run.state,
        run.plan,
        run.logs,
    )
    restarts = Restarts(run.opts.backoff)
    while True:
        restarts.on_start(time.monotonic())
        logs.head.clear()
        outcome = run.once(resumed, redactor)
        carry_back(adapter, env, session, plan, final=False)
        if why := rejected_command_line(outcome, [*logs.head, *logs.recent]):
            return Outcome(StopReason.REJECTED, outcome.status, why)
        decision = restart_decision(outcome, restarts, time.monotonic(), random.random())
        if decision is None:
            return outcome
        if not decision.restart:
            return Outcome(StopReason.GAVE_UP, outcome.status, decision.reason)
        interrupted = announce_and_wait(adapter, outcome, decision, state, session, logs, run.console)
        if interrupted:
            why = StopReason.USER if interrupted == "Ctrl+C" else StopReason.SIGNAL
            return Outcome(why, outcome.status, interrupted)
        resumed = True


def _record_mail(mailbox: Mailbox, logs: SessionLogs, session: SessionDir) -> None:
    """What the background threads said last (our own output, the link's records), then the
    mailbox closed."""
    for message in mailbox.drain():
        if message.kind == OWN:
            record_own(message, logs, session)
        elif message.kind == link.LINK:
            link.record_link(message, logs, session)
    mailbox.close()


def default_console(log_format: str = "text") -> Console:
    interactive = is_interactive(sys.stdin.fileno(), sys.stdout.fileno())
    if log_format == "json" and not interactive:  # on a terminal, the events are in events.jsonl
        return Console(interactive=False, ask=input, say=jsonlog.say, events_as_json=True)

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
