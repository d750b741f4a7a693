"""One start of the agent: spawned, handed to the loop with a new machine, tended (its
processes, its own session id, its token totals, a stated limit reset, a compaction), and
cleaned up after."""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from waaah_agent.adapters.base import Adapter
from waaah_agent.core.prices import cost_of
from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.core.supervise.events import Compacted, EventKind, LimitStated, Outcome, TokensCounted
from waaah_agent.core.supervise.lifecycle import (
    FirstPrompt,
    SessionStatus,
    first_prompt,
)
from waaah_agent.core.supervise.machine import Machine, MachineConfig, Saved
from waaah_agent.core.tokens import Usage, file_totals, model_totals, record_file, record_models
from waaah_agent.runtime import clis, reaper, releases
from waaah_agent.runtime.mcp.givers import write_hooks
from waaah_agent.runtime.mcp.setup import McpPlan
from waaah_agent.runtime.session_keep import keeper_for
from waaah_agent.runtime.store import (
    SessionDir,
    SessionState,
)
from waaah_agent.runtime.supervise.background import Mailbox, ServerWatch
from waaah_agent.runtime.supervise.child import AgentProcess
from waaah_agent.runtime.supervise.inbox import Inbox
from waaah_agent.runtime.supervise.logs import SessionLogs
from waaah_agent.runtime.supervise.loop import Supervisor
from waaah_agent.runtime.supervise.session.ending import (
    Console,
    tokens_line,
)
from waaah_agent.runtime.supervise.session.options import AgentOptions
from waaah_agent.runtime.supervise.transcripts import CompactionWatch, holds_prompt, usage_of
from waaah_agent.runtime.supervise.waiting import LoopConfig
from waaah_agent.runtime.workspace import Workflow

#: How often the CLI's own files are read for its reset while a usage limit is waited out.
LIMIT_LOOK = 10.0
#: How often the CLI's transcript is read for a compaction (only what it gained since).
COMPACTION_LOOK = 5.0


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
            EventKind.START,
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
                    EventKind.TOKENS,
                    **self.state.tokens,
                    **priced,
                    models=model_totals(self.state.token_models),
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
                EventKind.NATIVE_SESSION_ID, id=found, how="read back from the CLI's own session files"
            )
        return False

    def end_descendants(self, child: AgentProcess) -> None:
        """Whatever the agent left running (nohup, setsid, a double fork: re-parented to us) ends
        with it, at every end of a run: a stop, its own exit, a restart."""
        found = [p.pid for p in reaper.ours(child.start, {child.pid}) if not p.zombie]
        left = reaper.end(child.start, exclude={child.pid})
        if found:
            self.session.event(EventKind.DESCENDANTS_ENDED, pids=found)
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
            paused=state.paused,
        )
        if pending:
            self.session.event(EventKind.WORKFLOW_SETTLED, delivered=first.settled, why=first.why)
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
            EventKind.TOKENS,
            source=str(path),
            **self.state.tokens,
            models=model_totals(self.state.token_models),
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
