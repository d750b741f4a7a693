"""The options of `waaah agent`, and those a session keeps for --resume: which session a
--resume means, the options it was started with, the workspace it belongs to."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from waaah_agent import settings
from waaah_agent.adapters.base import Adapter
from waaah_agent.core import names
from waaah_agent.core.prices import Prices
from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.core.supervise.backoff import BackoffConfig
from waaah_agent.core.supervise.policy import PolicyConfig
from waaah_agent.errors import (
    SessionNotFound,
    UsageError,
)
from waaah_agent.runtime.private import untrusted
from waaah_agent.runtime.store import (
    CorruptSession,
    SessionStore,
)
from waaah_agent.runtime.supervise.session.ending import Console
from waaah_agent.runtime.workspace import Workflow


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
