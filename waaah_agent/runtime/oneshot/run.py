"""`waaah run`: one prompt through a CLI's headless JSON-stream mode, one envelope out.

This module sets a run up and ends it: the inputs (runtime/run_inputs.py), a restored run's
replay (runtime/run_trees.py), the session to continue, the agent and its fallback chain (the
routing table), the budget and the models (providers files), the run log's start record; then
runtime/run_attempts.py walks the chain, and the envelope is printed (json, text, llm, or the
--stream lines). Decisions are pure, in core/; --dry-run stops before the log is made.
"""

from __future__ import annotations

import contextlib
import signal
import time
import uuid
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from waaah_agent import adapters, settings
from waaah_agent.core import failures as F
from waaah_agent.core import names
from waaah_agent.core.oneshot import models, outputs, present
from waaah_agent.core.oneshot.run_budget import RunBudget, needs_prices
from waaah_agent.core.oneshot.run_inputs import ticket_name
from waaah_agent.core.oneshot.streams import Tokens
from waaah_agent.core.prices import Prices
from waaah_agent.core.printable import one_line
from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.core.secrets.secretenv import known_secrets
from waaah_agent.errors import CliNotFound, LoginRequired, SessionNotFound, UsageError, WaaahError
from waaah_agent.runtime import price_file
from waaah_agent.runtime.oneshot import listing, providers, routes, run_inputs, run_trees, runlog
from waaah_agent.runtime.oneshot.headless import Interrupted
from waaah_agent.runtime.oneshot.run_attempts import Chain, pick
from waaah_agent.runtime.oneshot.run_io import (
    InvalidPrompt,
    RunOptions,
    ms,
    show,
    show_failure,
)
from waaah_agent.runtime.oneshot.run_stream import LineOut
from waaah_agent.runtime.private import check_state
from waaah_agent.runtime.workspace import workspace_root


def execute(opts: RunOptions, env: Mapping[str, str], stdin: IO[str], out: IO[str], err: IO[str]) -> int:
    """The whole `waaah run`; prints the result and returns the process exit code."""
    started = time.monotonic()
    _check_flags(opts)
    workspace = workspace_root(opts.workspace)
    check_state(workspace / ".waaah")  # runs and sessions someone else could have planted: not read
    runlog.check_log_dir(workspace, write=not opts.inputs.dry_run)  # a dry run makes nothing
    restored = run_trees.for_run(opts, workspace)
    warnings: list[str] = []
    try:
        prepared = run_inputs.prepare(
            opts, workspace, stdin, warnings, lambda text: run_trees.with_replay(text, restored)
        )
    except InvalidPrompt as bad:
        return run_inputs.refuse(bad, opts, out, err, started, env)
    resumed = _resumed(opts, workspace)
    chain, chain_source, route_note = _chain(opts, env, workspace, prepared.task, resumed, restored)
    budget = RunBudget(opts.max_tokens, opts.max_cost)
    budget_shown = budget.to_json(Tokens(), None, "") if budget else None
    prices = _prices(budget, chain, env)
    layers = providers.load(env, workspace, opts.model)  # a bad file or --model: exit 2
    parent = _parent(opts, env, workspace)
    try:  # each CLI's skill, prompt size, permission and temperature flags
        run_inputs.plan_chain(chain, prepared, opts, workspace, env, warnings)
    except InvalidPrompt as bad:
        return run_inputs.refuse(bad, opts, out, err, started, env)
    for warning in warnings:
        print(f"waaah: warning: {one_line(warning)}", file=err)
    resume_id = _resume_id(opts, resumed)
    if opts.inputs.dry_run:
        return run_inputs.dry_run(chain, prepared, opts, env, resume_id, warnings, out, layers, budget_shown)
    redact = Redactor(known_secrets(settings.with_private({**env, **opts.cli_env})))
    log_id, log_path = _log_place(opts, workspace, resumed)
    echo = (lambda line: print(f"waaah: debug: {line}", file=err, flush=True)) if opts.verbose else None
    log = runlog.RunLog(log_path, redact, echo)
    log.write(
        "start",
        warnings=warnings or None,
        prompt=prepared.prompt,
        agent=chain[0],
        model=opts.model,
        model_resolution=models.resolve(chain[0], opts.model, True, layers).text(),
        parent_id=parent or None,
        session=opts.session,
        fallback=chain[1:],
        fallback_source=chain_source,
        route=route_note,
        ticket=opts.ticket or None,
        context=prepared.context_source or None,
        restored_from=restored.to_log() if restored else None,
        timeout_s=opts.timeout,
        budget=budget_shown,
        cwd=str(workspace),
    )
    lines = LineOut(out if opts.stream else None, redact)  # --stream: the start line at once
    lines.start(
        log_id=log_id,
        agent=chain[0],
        parent_id=parent or None,
        fallback=chain[1:],
        session=opts.session,
        model=opts.model,
        log_path=str(log_path),
    )
    run = Chain(
        opts, env, workspace, log, redact, started + opts.timeout, log_id, resume_id,
        budget=budget, prices=prices, layers=layers, lines=lines,
    )  # fmt: skip
    run.warnings.extend(warnings)
    try:
        envelope = _through(run, chain, prepared.prompt)
        envelope.update(
            parent_id=parent or None, log_path=str(log_path), duration_ms=ms(time.monotonic() - started)
        )
        if restored:
            envelope["restored_from"] = restored.root
        if log.events_left_out:
            run.warnings.append(
                f"{log.events_left_out} stream event(s) of the CLI were not written to the run log, "
                f"which holds at most {runlog.EVENTS_CAP // (1024 * 1024)} MB of them"
            )
        if run.warnings:
            envelope["warnings"] = list(run.warnings)
        raw = run.last[1].response if run.last else ""
        log.write(
            "end",
            envelope=envelope,
            response_raw=raw if envelope["ok"] and raw != envelope["response"] else None,
        )
    finally:
        log.close()
    return _shown(envelope, run, log, log_path, len(warnings), opts, out, err, redact)


def _log_place(opts: RunOptions, workspace: Path, resumed: runlog.RunSummary | None) -> tuple[str, Path]:
    """The run log's id and path: the continued run's own, else a new one.

    The log keeps the id it was created with; the CLI session to continue is the one named, or
    (when the log id was given) the last one the log recorded. They differ for CLIs that pick
    their own session ids (codex, opencode). A ticket id names a new log: <ticket>_<uuid>."""
    if resumed is not None:
        return resumed.id, resumed.path
    ticket = ticket_name(opts.ticket)
    fresh = str(uuid.uuid4())
    log_id = f"{ticket}_{fresh}" if ticket else fresh
    return log_id, runlog.new_log_path(workspace, log_id, datetime.now())


def _through(run: Chain, chain: list[str], prompt: str) -> dict[str, Any]:
    """The chain walked with ``prompt``: its envelope (an interrupted one when Ctrl+C or SIGTERM
    stopped it)."""
    try:
        return run.through(chain, prompt)
    except Interrupted:
        run.breakers.release()
        return run.envelope(F.INTERRUPTED, f"{_stopped_by[0]}: the run and its CLI were stopped")


def _check_flags(opts: RunOptions) -> None:
    """What the flags alone say is wrong (exit 2)."""
    if opts.stream and opts.format != "json":
        raise UsageError(f"--stream prints JSON lines: it needs --format json, not --format {opts.format}")
    for flag, given in (
        ("--session", opts.session),
        ("--continue-from", opts.continue_from),
        ("--continue-from-tree", opts.continue_from_tree),
    ):
        if given is not None and (refused := names.refusal(f"{flag} id", given.strip())):
            raise UsageError(refused)  # an id names a log file and goes to the CLI as an argument


def _resumed(opts: RunOptions, workspace: Path) -> runlog.RunSummary | None:
    """The run --session continues (None without it); an id that names no run of this
    workspace's, or a run of another CLI than --agent, is refused with what to do instead."""
    if not opts.session:
        return None
    resumed = runlog.find_run(workspace, opts.session)
    if resumed is None:
        supervised = next(
            (n for n in listing.nodes(workspace) if n.kind == "session" and n.id == opts.session), None
        )
        if supervised is not None:  # listed by `waaah sessions`, but not a conversation of waaah run
            raise SessionNotFound(
                f"--session {opts.session} is a supervised session, not a run: carry it on with "
                f"waaah agent --start={supervised.agent} --resume {opts.session}, or give it to a new run "
                f"as context with --continue-from-tree {opts.session}"
            )
        raise SessionNotFound(
            f"unknown session id '{opts.session}': no run with that id in {runlog.runs_root(workspace)} "
            "(see: waaah sessions)"
        )
    if opts.agent and resumed.agent and opts.agent != resumed.agent:
        raise SessionNotFound(  # the other CLI would only say it knows no such session
            f"--session {opts.session} is a {resumed.agent} conversation, which {opts.agent} cannot "
            f"continue: drop --agent {opts.agent}, or give {opts.agent} that run as context with "
            f"--continue-from {opts.session}"
        )
    return resumed


def _chain(
    opts: RunOptions,
    env: Mapping[str, str],
    workspace: Path,
    task: str,
    resumed: runlog.RunSummary | None,
    restored: run_trees.Restored | None,
) -> tuple[list[str], str, str | None]:
    """The CLIs to try in order (the first is the run's own), where the rest came from (given,
    routed, default, none), and the routing table's note."""
    routed, fallback, route_note = None, list(opts.fallback), None
    if opts.role and not opts.agent and resumed is None:  # --agent and --session win over --role
        routed, chain_rest, route_note = routes.for_run(
            opts.role, task, env, workspace, opts.breaker_cooldown
        )
        fallback = fallback or chain_rest
    earlier_agent = resumed.agent if resumed else (restored.agent if restored and not routed else None)
    primary = settings.run_agent_name(opts.agent, earlier_agent, env, routed)
    pick(primary)
    # No chain given (nor routed): the other CLIs usable now follow, unless --no-fallback. A
    # continued conversation (--session) stays with its CLI: another one would not have it.
    chain_source = "given" if opts.fallback else "routed" if fallback else "none"
    if not fallback and not opts.role and resumed is None and opts.default_fallback:
        fallback = routes.default_fallback(primary, env, workspace, opts.breaker_cooldown)
        chain_source = "default" if fallback else "none"
    chain = list(dict.fromkeys([primary, *fallback]))
    for name in chain:
        pick(name)
    return chain, chain_source, route_note


def _prices(budget: RunBudget, chain: list[str], env: Mapping[str, str]) -> Prices:
    """The price table --max-cost needs: required (one line if there is none) when a CLI of the
    chain reports no cost of its own, else the user's if there is one."""
    if budget.max_cost is None:
        return Prices({})
    needed = needs_prices(budget, chain, {n for n, a in adapters.registry().items() if a.reports_cost})
    return price_file.required(env, "--max-cost") if needed else price_file.load(env)[0]


def _parent(opts: RunOptions, env: Mapping[str, str], workspace: Path) -> str:
    """The run or session this run is a child of ("" for none): --parent must name one of this
    workspace's; an id inherited from the environment that names none here is dropped."""
    parent = settings.parent_id(opts.parent, env)
    if parent and not listing.known_id(workspace, parent):
        if opts.parent:
            raise SessionNotFound(
                f"unknown parent id '{parent}': no run or supervised session with that id in {workspace} "
                "(see: waaah sessions)"
            )
        return ""  # an inherited id from another workspace: not ours to link
    return parent


def _resume_id(opts: RunOptions, resumed: runlog.RunSummary | None) -> str:
    """The CLI session --session continues: the one named, else the last the run recorded."""
    if resumed is None or not opts.session:
        return ""
    named = opts.session in resumed.session_ids
    return opts.session if named or not resumed.session_ids else resumed.session_ids[-1]


def _shown(
    envelope: dict[str, Any],
    run: Chain,
    log: runlog.RunLog,
    log_path: Path,
    said: int,
    opts: RunOptions,
    out: IO[str],
    err: IO[str],
    redact: Redactor,
) -> int:
    """The envelope printed (and the warnings not ``said`` yet, the error's line); the exit code."""
    # The CLI's answer is never lost: a run log that could not be written is said, not fatal.
    if log.error:
        envelope["log_error"] = log.error
        print(f"waaah: warning: {log.error}; the answer is only in this output", file=err)
    for warning in run.warnings[said:]:
        print(f"waaah: warning: {one_line(warning)}", file=err)
    if opts.stream:
        run.lines.envelope(envelope)
    else:
        show(envelope, run.last_stderr, opts.format, log_path, out, redact, opts.llm_max_lines)
    if envelope.get("error"):
        where = log_path if not log.error else "none"
        print(f"waaah: {envelope['error_kind']}: {one_line(envelope['error'])} (log: {where})", file=err)
    return int(envelope["exit_code"])


def main(opts: RunOptions, env: Mapping[str, str], stdin: IO[str], out: IO[str], err: IO[str]) -> int:
    """:func:`execute`, and for a run that fails before its chain starts (a usage error, an
    unknown session, a log folder that cannot be made, Ctrl+C while setting up) the envelope
    too, before the error goes on to its one line on stderr and its exit code."""
    started = time.monotonic()
    try:
        return execute(opts, env, stdin, out, err)
    except WaaahError as bad:
        failed: tuple[F.ErrorType, str, int] = (_kind_of(bad), str(bad), bad.exit_code)
        problem: BaseException = bad
    except KeyboardInterrupt as stop:
        failed = (F.INTERRUPTED, f"{_stopped_by[0]}: the run was stopped before any CLI started", 130)
        problem = stop
    except Exception as bug:  # a defect of ours: the envelope still, then the traceback
        failed = (F.UNKNOWN, f"internal error: {type(bug).__name__}: {bug}", 1)
        problem = bug
    kind, message, code = failed
    envelope = outputs.failure_envelope(
        kind,
        message,
        code,
        version=present.ENVELOPE_VERSION,
        agent=opts.agent or "",
        model=opts.model,
        skill=opts.inputs.skill,
    )
    envelope["duration_ms"] = ms(time.monotonic() - started)
    with contextlib.suppress(OSError):
        show_failure(
            envelope, opts, out, Redactor(known_secrets(settings.with_private({**env, **opts.cli_env})))
        )
    raise problem


def _kind_of(bad: WaaahError) -> F.ErrorType:
    """The envelope's error type of an error raised while a run was set up."""
    if isinstance(bad, UsageError):
        return F.INVALID_INPUT
    if isinstance(bad, SessionNotFound):
        return F.INVALID_SESSION
    if isinstance(bad, CliNotFound):
        return F.CRASH
    if isinstance(bad, LoginRequired):
        return F.AUTH
    return F.UNKNOWN  # our own files (exit 8) or anything else: exit_code says which


#: What interrupted the run, for its error: Ctrl+C unless a SIGTERM came.
_stopped_by = ["Ctrl+C"]


def interrupt_on_sigterm() -> None:
    """SIGTERM stops a run the way Ctrl+C does (the CLI's group is killed, the log kept)."""

    def handler(signum: int, frame: object) -> None:
        _stopped_by[0] = "SIGTERM"
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)
