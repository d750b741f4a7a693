"""One supervised run from start to saved state: the entry point the CLI calls.

Sets up (workspace, workflow, CLI, session folder, logs), spawns the agent, hands it to
the loop, and writes down how it ended. Errors a user can act on are raised as
``WaaahError`` subclasses; the CLI turns them into one line and an exit code.
"""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waaah_agent import settings
from waaah_agent.adapters.base import Adapter
from waaah_agent.core.mcp.link import POLL_EVERY
from waaah_agent.core.night.alerts import Where
from waaah_agent.core.prices import cost_of
from waaah_agent.core.redact import Redactor, known_secrets
from waaah_agent.core.supervise.backoff import Restarts
from waaah_agent.core.supervise.events import Compacted, LimitStated, Outcome, StopReason, TokensCounted
from waaah_agent.core.supervise.lifecycle import (
    FirstPrompt,
    SessionStatus,
    first_prompt,
    rejected_command_line,
    restart_decision,
)
from waaah_agent.core.supervise.machine import Machine, MachineConfig, Saved
from waaah_agent.core.supervise.vitals import Snapshot, epoch
from waaah_agent.core.tokens import Usage, file_totals, model_totals, record_file, record_models
from waaah_agent.errors import (
    CliNotFound,
    LoginRequired,
    UsageError,
)
from waaah_agent.runtime import clis, key_file, price_file, reaper, releases
from waaah_agent.runtime.mcp import link
from waaah_agent.runtime.mcp import setup as mcp_setup
from waaah_agent.runtime.mcp.givers import giver, write_hooks
from waaah_agent.runtime.mcp.setup import McpPlan
from waaah_agent.runtime.mcp.tool_http import ToolServer
from waaah_agent.runtime.mcp.waaah import check_server
from waaah_agent.runtime.night import report
from waaah_agent.runtime.night.alerts import Notifier, check_urls
from waaah_agent.runtime.session_keep import keeper_for
from waaah_agent.runtime.store import (
    SessionDir,
    SessionState,
    SessionStore,
    now_iso,
)
from waaah_agent.runtime.supervise import jsonlog
from waaah_agent.runtime.supervise.background import OWN, Mailbox, OwnOutput, ServerWatch, record_own
from waaah_agent.runtime.supervise.child import AgentProcess
from waaah_agent.runtime.supervise.ending import (
    Console,
    announce_and_wait,
    finish,
    headless_line,
    resume_command,
    tokens_line,
)
from waaah_agent.runtime.supervise.inbox import Inbox
from waaah_agent.runtime.supervise.logs import SessionLogs
from waaah_agent.runtime.supervise.loop import LoopConfig, Supervisor
from waaah_agent.runtime.supervise.signals import signal_pipe, stop_signals_unwind
from waaah_agent.runtime.supervise.startup import (
    AgentOptions,
    agent_env,
    claim_agent,
    find_binary,
    kept_options,
    login_message,
    make_folder,
    not_executable_message,
    open_session,
    options_record,
    pick_adapter,
    refuse_other_workspace,
    resolve_workspace,
    session_to_resume,
)
from waaah_agent.runtime.supervise.terminal import DEFAULT_SIZE, is_interactive, raw_mode, terminal_size
from waaah_agent.runtime.supervise.transcripts import CompactionWatch, holds_prompt, usage_of
from waaah_agent.runtime.workspace import Workflow, find_workflow

if TYPE_CHECKING:
    from waaah_agent.runtime.supervise import metrics

#: How often the CLI's own files are read for its reset while a usage limit is waited out.
LIMIT_LOOK = 10.0
#: How often the CLI's transcript is read for a compaction (only what it gained since).
COMPACTION_LOOK = 5.0


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
    "max_tokens",
    "max_cost",
)


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
        session.event("mcp-config", note=note)
    health = check_server(server.url, server.api_key)
    warning = mcp_setup.server_warning(server, health)
    if warning:
        console.say(warning)
    session.event("server", url=server.url, source=server.source, ok=health.ok, detail=health.detail)
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
    inbox = Inbox(session.inbox, mailbox)
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
    restarts = Restarts(opts.backoff)
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
            while True:
                restarts.on_start(time.monotonic())
                logs.head.clear()
                outcome = run.once(resumed, redactor)
                carry_back(adapter, env, session, plan, final=False)
                if why := rejected_command_line(outcome, [*logs.head, *logs.recent]):
                    outcome = Outcome(StopReason.REJECTED, outcome.status, why)
                    break
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
        for message in mailbox.drain():
            if message.kind == OWN:
                record_own(message, logs, session)
            elif message.kind == link.LINK:
                link.record_link(message, logs, session)
        mailbox.close()
        state.output_tail = list(logs.recent)
        logs.close()
    state.ended = now_iso()
    state.end_reason = f"{outcome.reason.value}: {outcome.detail}" if outcome.detail else outcome.reason.value
    try:
        return finish(outcome, adapter, state, session, console)
    finally:
        if notifier is not None:
            notifier.close()


def start_link(
    plan: McpPlan, env: Mapping[str, str], session: SessionDir, state: SessionState, mailbox: Mailbox
) -> link.SessionLink | None:
    """The session's own WAAAH connection, on the socket the CLI's proxy was given."""
    path = env.get(settings.LINK)
    if plan.server is None or not path:
        return None
    every = max(1.0, settings.seconds(env, settings.LINK_POLL_SECONDS, POLL_EVERY))
    server = ToolServer(plan.server.url, plan.server.api_key)
    found = link.SessionLink(
        Path(path), session.path, server, state.agent_id, session.inbox, mailbox.post, every
    )
    try:
        found.start()
    except OSError as err:  # the proxy then calls the server itself, as without a supervisor
        session.event("link", error=f"could not serve {path}: {err.strerror or err}")
        return None
    return found


def serve_vitals(
    opts: AgentOptions,
    adapter: Adapter,
    workflow: Workflow,
    state: SessionState,
    plan: McpPlan,
    mailbox: Mailbox,
    session: SessionDir,
    logs: SessionLogs,
) -> metrics.MetricsServer | None:
    """With --metrics-port: /healthz, /readyz and /metrics (runtime/metrics.py, imported with the
    Prometheus client only then), fed every event of the session from here on."""
    if opts.metrics_port is None:
        return None
    from waaah_agent.runtime.supervise import metrics

    down = plan.server is not None and not plan.healthy
    start = Snapshot(
        adapter.name,
        workflow.name,
        state.id,
        paused=state.paused,
        server_down=(plan.health or "unreachable") if down else "",
        limit_until=epoch(state.limit_until),
    )
    try:
        server = metrics.for_session(opts.metrics_host, opts.metrics_port, start, mailbox, session)
    except UsageError:
        mailbox.close()
        logs.close()
        raise
    if server is not None:
        session.event("metrics", host=opts.metrics_host, port=server.port)
    return server


def start_alerts(
    opts: AgentOptions, adapter: Adapter, state: SessionState, session: SessionDir
) -> Notifier | None:
    """Alerts of this session to the --notify URLs (runtime/alerts.py); their tokens masked."""
    if not opts.notify:
        return None
    for url in opts.notify:
        session.redact.add(url)
    where = Where(adapter.name, state.id, state.workspace, resume_command(state))
    notifier = Notifier(opts.notify, where)
    session.observers.append(notifier.observe)
    return notifier


def keep_typed(env: Mapping[str, str], server: mcp_setup.ServerChoice, console: Console) -> None:
    """What was typed at the prompt is kept for later starts (runtime/key_file.py)."""
    try:
        where = key_file.keep_server(env, server.url)
        if server.key_typed and server.api_key:
            where = key_file.keep(env, server.api_key)
    except OSError as err:
        console.say(
            f"could not keep what you typed ({err.strerror}): give --server and --api-key "
            f"(or {settings.SERVER_URL} / {settings.API_KEY}) next time"
        )
        return
    kept = "address and API key (the key in a file of mode 0600)" if server.key_typed else "address"
    console.say(
        f"kept the WAAAH server {kept} in {where.parent} for later starts; remove the files to forget them"
    )


def carry_back(
    adapter: Adapter, env: dict[str, str], session: SessionDir, plan: McpPlan, final: bool
) -> list[str]:
    """What the CLI changed in what it was given for this run goes back to the user's files
    (gemini's home of its own: runtime/cli_home.py); at the end, that is removed."""
    if adapter.mcp is None or plan.server is None:
        return []
    try:
        carry = giver(adapter.mcp).finish if final else giver(adapter.mcp).after_run
        notes = carry(env, session.path)
    except (OSError, UsageError) as err:
        notes = [f"could not carry the CLI's own changes back to your files: {err}"]
    for note in notes:
        session.event("mcp-config", note=note)
    return notes


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
    if not console.interactive and not console.events_as_json:

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
    watch: ServerWatch | None = None
    tokens_due: float = 0.0  # monotonic time of the next read of the transcript (--max-tokens)
    learning: bool = False  # the CLI's own session id is still to be found (own_session)
    unpriced: set[str] = field(default_factory=set)  # models --max-cost found no price for (said once)
    started: float = 0.0  # when this run's CLI was started (epoch seconds)
    limit_told: datetime | None = None  # the reset the CLI's files stated, told to the machine
    compaction: CompactionWatch | None = None  # compactions in the CLI's transcript, this run

    def server_down(self) -> str:
        """Why the WAAAH server cannot be reached now ("" when it can, or when none is used)."""
        watch = self.watch
        return "" if watch is None or watch.last_ok else str(watch.last_health or "unreachable")

    def once(self, resumed: bool, redactor: Redactor) -> Outcome:
        adapter, state, workspace = self.adapter, self.state, Path(self.state.workspace)
        native = resumed and adapter.transcript(self.env, workspace, state.native_session_id) is not None
        # The CLI's own session files, kept before it resumes them (runtime/session_keep.py).
        kept = (
            keeper_for(
                adapter,
                self.env,
                workspace,
                state.native_session_id,
                self.session.path / "kept",
                self.logs.notice,
                self.session.event,
            )
            if native
            else None
        )
        # Compactions from now on (those already in a resumed transcript are history).
        self.compaction = (
            CompactionWatch.begin(
                adapter.compactions,
                adapter.transcript(self.env, workspace, state.native_session_id) if native else None,
            )
            if adapter.compactions is not None
            else None
        )
        hooks = write_hooks(adapter.hooks, self.session.path) if adapter.hooks is not None else []
        extra = [*hooks, *self.plan.extra_args, *self.opts.extra_args]
        own = releases.own_ids(state.cli_release)
        argv = adapter.argv(self.binary, state.native_session_id, native, extra, own_ids=own)
        first = self.first_prompt(native)
        # A CLI (or a release) that picks its own session id tells it only once it began one.
        picks_own = not own or state.native_session_id not in adapter.fresh_args(state.native_session_id)
        self.learning = adapter.own_session is not None and not native and picks_own
        self.started = time.time()
        # PWD as a shell sets it: a CLI may take its project folder from it (opencode does).
        env = {**self.env, "PWD": str(workspace)}
        child = AgentProcess.spawn(argv, cwd=str(workspace), env=env, size=self.size)
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
            release=state.cli_release.get("version", ""),
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
                loop_dialog_keys=adapter.loop_dialog_keys,
                login_hint=clis.login_hint(adapter, self.env),
                workflow=self.workflow.text,
                refused_hint=adapter.refused_hint,
                stop_grace=self.opts.stop_grace,
                policy=self.opts.policy,
                limit_margin=self.opts.limit_margin,
                limit_default=self.opts.limit_default,
                server_down=self.server_down(),
            ),
            first.delivery,
            Saved(
                state.workflow_delivered,
                state.limit_until,
                state.next_heartbeat,
                state.paused,
                tuple(state.queued),
            ),
            time.monotonic(),
        )
        sup = Supervisor(
            LoopConfig(adapter.rules, self.console.interactive, adapter.answers_queries),
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
            tend=lambda: self.tend(tracker, sup),
        )
        try:
            return sup.run()
        finally:
            if child.alive():  # an exception escaped the loop: never leave the agent behind
                child.signal_group(9)
            child.close()
            self.end_descendants(child)
            if kept is not None:
                kept.after()  # what the CLI removed or emptied of its session is put back
            self.learn_session()
            self.update_tokens()

    def tend(self, tracker: reaper.Tracker, sup: Supervisor) -> float:
        """The slow timer: what the agent started is recorded (saved only when it changed); the
        CLI's own session id is looked for until known; with --max-tokens, the transcript's
        totals are read again and told to the machine."""
        if tracker.look():
            self.state.processes = tracker.records
            self.session.save(self.state)
        delay = tracker.next_delay()
        if self.learn_session():
            delay = min(delay, 2.0)  # until the CLI's own session id is known: often
        if self.state.limit_until and self.stated_limit(sup):
            delay = min(delay, LIMIT_LOOK)  # waiting out a limit: read the CLI's own word on it
        if self.compaction is not None:
            self.look_for_compaction(sup)
            delay = min(delay, COMPACTION_LOOK)
        limit, cost_limit = self.opts.max_tokens, self.opts.max_cost
        if limit is None and cost_limit is None and self.opts.metrics_port is None:
            return delay
        now = time.monotonic()
        if now >= self.tokens_due:
            self.tokens_due = now + self.opts.tokens_every
            before = dict(self.state.tokens)
            self.update_tokens(quiet=True)
            cost = self.cost()
            if self.state.tokens != before:
                priced = {} if cost is None else {"cost_usd": round(cost, 6)}
                self.session.event(
                    "tokens", **self.state.tokens, **priced, models=model_totals(self.state.token_models)
                )
            used = self.state.tokens.get("input", 0) + self.state.tokens.get("output", 0)
            sup.tell(TokensCounted(used, limit, cost, cost_limit))
        return min(delay, max(0.5, self.tokens_due - now))

    def look_for_compaction(self, sup: Supervisor) -> None:
        """A compaction the CLI marked in its transcript since the last look is told to the
        machine (the next prompt is then the workflow again)."""
        assert self.compaction is not None
        path = self.adapter.transcript(self.env, Path(self.state.workspace), self.state.native_session_id)
        if self.compaction.news(path):
            sup.tell(Compacted(f"its transcript {path}"))

    def stated_limit(self, sup: Supervisor) -> bool:
        """While a usage limit is waited out, the reset the CLI wrote in its own files (codex's
        ``rate_limits.resets_at``) is told to the machine once; True: worth reading again."""
        reader = self.adapter.limit_reset
        if reader is None or not self.state.native_session_id:
            return False
        until = reader(self.env, Path(self.state.workspace), self.state.native_session_id)
        if until is not None and until != self.limit_told:
            self.limit_told = until
            sup.tell(LimitStated(until, f"{self.adapter.name}'s session file"))
        return True

    def cost(self) -> float | None:
        """What the session's tokens cost at the user's prices (None without --max-cost); a model
        the table does not price is charged at its highest prices, said once."""
        prices = self.opts.prices
        if not prices:
            return None
        found = cost_of(model_totals(self.state.token_models), prices)
        for model in found.unpriced:
            if model not in self.unpriced:
                self.unpriced.add(model)
                self.logs.notice(
                    f"the price table has no price for {model}: charged at its highest prices for --max-cost"
                )
        return found.usd

    def learn_session(self) -> bool:
        """Keep the id of the session a CLI that picks its own began (True: not found yet)."""
        if not self.learning or self.adapter.own_session is None:
            return False
        found = self.adapter.own_session(self.env, Path(self.state.workspace), self.started)
        if found is None:
            return True
        self.learning = False
        if found != self.state.native_session_id:
            self.state.native_session_id = found
            self.session.save(self.state)
            self.session.event(
                "native-session-id", id=found, how="read back from the CLI's own session files"
            )
        return False

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

    def update_tokens(self, quiet: bool = False) -> None:
        """Token totals from the CLI's own transcript (never from the screen), kept per
        transcript file and summed, so a resume or a restart adds to the night's totals."""
        counter = self.adapter.tokens() if self.adapter.tokens is not None else None
        path = self.adapter.transcript(self.env, Path(self.state.workspace), self.state.native_session_id)
        if counter is None or path is None:
            return
        try:
            usage = usage_of(path, counter)
        except OSError as err:
            self.logs.notice(f"could not read the transcript {path}: {err}")
            return
        tally_tokens(self.state, str(path), usage, counter.by_model())
        self.session.save(self.state)
        if quiet:
            return
        self.session.event(
            "tokens", source=str(path), **self.state.tokens, models=model_totals(self.state.token_models)
        )
        self.logs.notice(f"tokens so far: {tokens_line(self.state.tokens)} (from {path})")


def tally_tokens(
    state: SessionState, path: str, usage: Usage, by_model: Mapping[str, Mapping[str, int]] | None = None
) -> None:
    """Set ``path``'s totals (read again from the whole file), per model too, and the session's sum."""
    files = state.token_files
    if not files and any(state.tokens.values()):
        # Saved before totals were kept per file: they came from this session's transcript.
        files = {path: dict(state.tokens)}
    state.token_files = record_file(files, path, usage)
    state.tokens = file_totals(state.token_files)
    if by_model:
        state.token_models = record_models(state.token_models, path, by_model)


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
