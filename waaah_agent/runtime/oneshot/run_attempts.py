"""`waaah run`'s chain of attempts: each CLI of the chain gets its share of the time budget,
its attempts (retries, a model retry), the breaker's word, and the envelope at the end
(runtime/oneshot/run_envelope.py).

The decisions are pure (core/resilience.py: retry / fallback / stop; core/failures.py: what
went wrong; core/models.py: a model retry; core/run_budget.py: whether another attempt may
start); this is the shell that starts the CLI (runtime/headless.py), logs and sleeps.
"""

from __future__ import annotations

import contextlib
import errno
import random
import time
import uuid
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from waaah_agent import adapters, settings
from waaah_agent.adapters.base import Adapter, Headless
from waaah_agent.core import failures as F
from waaah_agent.core.failures import Failure, classify
from waaah_agent.core.oneshot import models
from waaah_agent.core.oneshot.resilience import cli_share, next_step
from waaah_agent.core.oneshot.run_budget import RunBudget, attempt_cost
from waaah_agent.core.oneshot.streams import StreamSummary, Tokens
from waaah_agent.core.prices import Prices
from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.errors import CliNotFound, UsageError
from waaah_agent.runtime import clis
from waaah_agent.runtime.oneshot import cli_env, run_envelope, runlog
from waaah_agent.runtime.oneshot.breakers import RunBreakers
from waaah_agent.runtime.oneshot.headless import KILL_GRACE, Interrupted, InterruptedRun, Outcome, run_cli
from waaah_agent.runtime.oneshot.run_envelope import Attempt
from waaah_agent.runtime.oneshot.run_io import ARGV_PROMPT_LIMIT, RunOptions, ms
from waaah_agent.runtime.oneshot.run_stream import LineOut
from waaah_agent.runtime.session_keep import keeper_for
from waaah_agent.runtime.supervise.session.opening import find_binary, not_executable_message


def pick(name: str) -> tuple[Adapter, Headless]:
    known = adapters.registry()
    adapter = known.get(name)
    headless_ones = sorted(n for n, a in known.items() if a.headless)
    if adapter is None:
        raise UsageError(f"unknown agent '{name}'; choose one of: {', '.join(headless_ones)}")
    if adapter.headless is None:
        raise UsageError(f"{name} has no headless mode; choose one of: {', '.join(headless_ones)}")
    return adapter, adapter.headless


class Chain:
    """One run's walk down its chain of CLIs."""

    def __init__(
        self,
        opts: RunOptions,
        env: Mapping[str, str],
        workspace: Path,
        log: runlog.RunLog,
        redact: Redactor,
        deadline: float,
        log_id: str,
        resume_id: str,
        *,
        budget: RunBudget,
        prices: Prices,
        layers: list[models.Providers],
        lines: LineOut,
    ) -> None:
        self.opts, self.env, self.workspace, self.log, self.redact = opts, env, workspace, log, redact
        self.deadline, self.log_id, self.resume_id = deadline, log_id, resume_id
        self.resuming = bool(resume_id)
        self.warnings: list[str] = []
        self.breakers = RunBreakers(
            settings.breaker_config(env, opts.breaker_cooldown), redact, self.warnings
        )
        self.cli_deadline = deadline  # the end of the current CLI's share of the budget
        self.attempts: list[Attempt] = []
        self.tried: list[str] = []
        self.tokens = Tokens()
        self.last: tuple[str, StreamSummary] | None = None
        self.last_stderr = ""
        self.failure: Failure | None = None
        self.primary = ""
        self.chain: list[str] = []  # the CLIs this run may try, in order
        self.budget, self.prices = budget, prices
        self.cost: float | None = None  # what the attempts cost (--max-cost), None: unknown
        self.spent = ""  # why the run's budget is spent ("" while it is not)
        self.layers = layers  # the providers files (core/models.py)
        self.models: dict[str, models.Resolution] = {}  # each CLI's model, as last tried
        self.lines = lines  # --stream's lines (writes nothing without it)

    def usable_after(self, chain: list[str]) -> int:
        """How many of these CLIs could be tried now (installed, breaker letting runs through)."""
        known, now = adapters.registry(), time.time()
        return sum(
            1 for n in chain if clis.find(known[n], self.env) is not None and self.breakers.allows(n, now)
        )

    def through(self, chain: list[str], prompt: str) -> dict[str, Any]:
        self.primary, self.chain = chain[0], list(chain)
        for index, name in enumerate(chain):
            has_next = index + 1 < len(chain)
            left = self.deadline - time.monotonic()
            share = cli_share(left, 1 + (self.usable_after(chain[index + 1 :]) if has_next else 0))
            self.cli_deadline = time.monotonic() + share
            self.log.write("share", agent=name, seconds=round(share, 1), budget_left=round(left, 1))
            if self.over_budget():
                break
            done = self.on_cli(name, prompt, first_cli=index == 0, has_next=has_next)
            if done is not None:
                return done
            if self.failure is not None and self.failure.type in (F.INVALID_INPUT, F.INVALID_SESSION):
                break
            if self.deadline - time.monotonic() <= 0:
                break
        failure = self.failure or Failure(F.CRASH, "no CLI could be run", F.RECOVERABLE[F.CRASH], None)
        return self.envelope(failure.type, failure.message)

    def on_cli(self, name: str, prompt: str, first_cli: bool, has_next: bool) -> dict[str, Any] | None:
        adapter, headless = pick(name)
        try:
            binary = find_binary(adapter, self.env)
        except CliNotFound as missing:
            self.failure = Failure(F.CRASH, str(missing), F.RECOVERABLE[F.CRASH], None)
            self.attempts.append(Attempt(name, "", F.CRASH, error=self.failure.message))
            return None
        lease = self.cli_deadline - time.monotonic() + KILL_GRACE + 5  # a probe ends with its share
        allowed, message = self.breakers.admit(name, time.time(), lease)
        if not allowed:
            self.attempts.append(Attempt(name, "", "skipped", error=f"circuit open: {message}"))
            self.log.write("attempt_skipped", agent=name, reason=message)
            self.failure = self.failure or Failure(
                F.TRANSIENT, f"{name} skipped: {message}", F.RECOVERABLE[F.TRANSIENT], None
            )
            return None
        self.tried.append(name)
        self.models[name] = models.resolve(name, self.opts.model, first_cli, self.layers)
        retries, waited, model_retried = 0, 0.0, False
        session_id, resume = (self.resume_id, True) if (first_cli and self.resuming) else ("", False)
        while True:
            if not resume:
                session_id = self.fresh_session_id(headless)
            try:
                outcome = self.attempt(adapter, headless, binary, prompt, session_id, resume)
            except OSError as cannot:  # the CLI could not be started (EACCES, ENOEXEC...)
                message = (
                    not_executable_message(binary, cannot)
                    if cannot.errno in (errno.EACCES, errno.EPERM, errno.ENOEXEC)
                    else f"cannot start {binary}: {cannot.strerror or cannot}"
                )
                self.failure = Failure(F.CRASH, message, F.RECOVERABLE[F.CRASH], None)
                self.breakers.release()  # a probe it held says nothing of the CLI
                self.attempts.append(Attempt(name, session_id, F.CRASH, error=message))
                self.log.write(
                    "attempt_end", n=len(self.attempts), agent=name, outcome=F.CRASH, error=message
                )
                return None
            sid = outcome.summary.session_id or session_id
            failure = classify(
                outcome.exit_code,
                outcome.stderr,
                outcome.summary,
                timed_out=outcome.timed_out,
                now=datetime.now().astimezone(),
                tz=datetime.now().astimezone().tzinfo,
                refused=adapters.registry()[name].refused_login(),
            )
            if (
                failure is not None
                and failure.type in (F.RATE_LIMIT, F.QUOTA)
                and failure.reset_at is None
                and adapter.limit_reset is not None
                and sid
            ):  # codex says "try again later"; its session file says when
                with contextlib.suppress(OSError, ValueError):
                    failure = replace(failure, reset_at=adapter.limit_reset(self.env, self.workspace, sid))
            record = Attempt(
                name, sid, failure.type if failure else "ok", outcome.exit_code, ms(outcome.seconds)
            )
            record.waited_s, record.model_resolution = waited, self.models[name].text()
            if failure is not None:
                record.error = self.redact(failure.message)
            self.attempts.append(record)
            self.log.write(
                "attempt_end",
                n=len(self.attempts),
                pid=outcome.pid,
                **record.to_json(),
                stderr=outcome.stderr,  # on success too: what the CLI said on the side
            )
            if failure is None:
                self.breakers.record(name, True, time.time())
                self.failure = None
                return self.envelope(None, "")
            self.failure = Failure(
                failure.type,
                self.redact(failure.message),
                failure.recoverable,
                failure.exit_code,
                failure.reset_at,
            )
            evidence = f"{outcome.summary.error}\n{outcome.stderr[-8000:]}"
            other = models.retry_model(
                adapters.registry()[name].smaller_model,
                self.models[name],
                self.failure,
                evidence,
                outcome.summary.model,
                model_retried,
            )
            if other is not None and self.cli_deadline > time.monotonic():  # within its share
                if self.budget_stops_retry():
                    return None
                self.log.write("decision", agent=name, action="retry", delay_s=0, reason=other.text())
                self.models[name], model_retried = other, True
                continue
            step = next_step(
                failure,
                retries,
                self.cli_deadline - time.monotonic(),
                has_next,
                time.time(),
                random.random(),
                self.opts.retry,
            )
            self.log.write(
                "decision", agent=name, action=step.action, delay_s=round(step.delay, 2), reason=step.reason
            )
            if step.action == "retry" and self.budget_stops_retry():
                return None
            if step.action != "retry":
                # One breaker failure per run that gave up on this CLI (not per attempt).
                self.breakers.record(name, False, time.time(), failure)
                return None
            retries += 1
            waited = step.delay
            _sleep(step.delay)

    def over_budget(self) -> bool:
        """--max-tokens / --max-cost: once spent, no attempt starts (the run ends ``budget``)."""
        if not self.budget or not self.attempts:
            return False
        self.spent = self.spent or self.budget.spent(self.tokens, self.cost)
        if not self.spent:
            return False
        self.failure = Failure(
            F.BUDGET,
            f"the run's budget is spent ({self.spent}); no more attempts",
            F.RECOVERABLE[F.BUDGET],
            None,
        )
        self.log.write("decision", action="stop", reason=f"budget spent: {self.spent}")
        return True

    def budget_stops_retry(self) -> bool:
        """Whether the run's budget forbids retrying this CLI; if so, a probe of its breaker it
        held is freed, not counted (the budget says nothing of the CLI)."""
        if not self.over_budget():
            return False
        self.breakers.release()
        return True

    def fresh_session_id(self, headless: Headless) -> str:
        if not headless.own_session_ids:
            return ""
        if not self.attempts and not self.resuming:
            # The first attempt names the log: its id is that session id, after the ticket when
            # one names the log (``<ticket>_<uuid>``).
            return self.log_id.rsplit("_", 1)[-1]
        return str(uuid.uuid4())

    def attempt(
        self, adapter: Adapter, headless: Headless, binary: str, prompt: str, session_id: str, resume: bool
    ) -> Outcome:
        prompt, knobs = self.opts.inputs.for_cli(adapter.name, prompt)
        data = prompt.encode("utf-8")
        in_argv = len(data) <= ARGV_PROMPT_LIMIT and not headless.stdin_prompt
        resolution = self.models[adapter.name]  # see core/models.py
        model = resolution.model
        argv = [
            binary,
            *headless.argv(prompt if in_argv else None, session_id, resume, model),
            *knobs,
            *self.opts.extra_args,
        ]
        shown = ["<prompt>" if (in_argv and a == prompt) else a for a in argv]
        n = len(self.attempts) + 1
        self.log.write(
            "attempt",
            n=n,
            agent=adapter.name,
            argv=shown,
            session_id=session_id,
            resume=resume,
            prompt_on_stdin=not in_argv,
            model_resolution=resolution.text(),
        )
        own = (*adapter.provider_env, *adapter.config_env(self.env, self.workspace))
        env = cli_env.for_cli(self.env, own, self.opts.pass_env)
        for key, value in adapter.extra_env.items():
            env.setdefault(key, value)
        env.update(self.opts.cli_env)  # --env KEY=VAL: the caller's own, for this CLI
        env[settings.PARENT_ID] = self.log_id  # a nested `waaah run` links under this one
        earlier = run_envelope.session_total(self.log.path, adapter.name, session_id) if resume else None
        # The CLI's own session files, kept before it resumes them (runtime/session_keep.py).
        kept = (
            keeper_for(
                adapter,
                env,
                self.workspace,
                session_id,
                self.log.path.with_name(f"{self.log.path.stem}.kept"),
                self.kept_note,
                lambda name, **fields: self.log.write(name.replace("-", "_"), agent=adapter.name, **fields),
            )
            if resume
            else None
        )
        parser = headless.parser()
        try:
            outcome = run_cli(
                argv,
                None if in_argv else data,
                env,
                self.workspace,
                self.cli_deadline,
                parser,
                # logged as it comes; --stream says the session once the CLI names it
                self.lines.watching(
                    adapter.name, n, parser, lambda line: self.log.event(n, adapter.name, line)
                ),
            )
        except InterruptedRun as stop:
            self.record_outcome(adapter.name, stop.outcome)
            self.log.write(
                "attempt_end",
                n=n,
                pid=stop.outcome.pid,
                agent=adapter.name,
                outcome=F.INTERRUPTED,
                stderr=stop.outcome.stderr,
            )
            self.attempts.append(
                Attempt(
                    adapter.name, session_id, F.INTERRUPTED, None, ms(stop.outcome.seconds), "interrupted"
                )
            )
            raise
        finally:
            if kept is not None:
                kept.after()  # what the CLI removed or emptied of its session is put back
        run_envelope.this_runs_tokens(self.log, adapter.name, outcome.summary, resume, earlier)
        self.record_outcome(adapter.name, outcome)
        return outcome

    def kept_note(self, text: str) -> None:
        """What the keeper of a resumed session did: a warning of the envelope, said once."""
        if text not in self.warnings:
            self.warnings.append(text)

    def record_outcome(self, agent: str, outcome: Outcome) -> None:
        self.tokens = self.tokens + outcome.summary.tokens
        if self.budget.max_cost is not None:
            model = outcome.summary.model or self.model_of(agent)
            cost, unpriced = attempt_cost(outcome.summary.tokens, model, self.prices)
            if cost is not None:
                self.cost = (self.cost or 0.0) + cost
            for name in unpriced:
                note = (
                    f"the price table has no price for {name}: charged at its highest prices for --max-cost"
                )
                if note not in self.warnings:  # once, however many attempts it ran
                    self.warnings.append(note)
        self.last = (agent, outcome.summary)
        self.last_stderr = self.redact(outcome.stderr)

    def envelope(self, error_type: F.ErrorType | None, error: str) -> dict[str, Any]:
        return run_envelope.envelope(self, error_type, error)

    def model_of(self, agent: str) -> str:
        """The model ``agent`` was last started with ("" for its own default, or not started)."""
        found = self.models.get(agent)
        return (found.model if found else None) or ""


def _sleep(seconds: float) -> None:
    try:
        time.sleep(max(0.0, seconds))
    except KeyboardInterrupt:
        raise Interrupted("interrupted") from None
