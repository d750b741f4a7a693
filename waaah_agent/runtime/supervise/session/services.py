"""What serves a session while its agent runs: its own WAAAH link, /metrics, alerts, the
counters kept from its events, and the CLI's own changes carried back to the user's files."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waaah_agent import settings
from waaah_agent.adapters.base import Adapter
from waaah_agent.core.mcp.link import POLL_EVERY
from waaah_agent.core.night.alerts import Where
from waaah_agent.core.secrets.secretenv import url_secrets
from waaah_agent.core.supervise.events import EventKind
from waaah_agent.core.supervise.vitals import Snapshot, epoch
from waaah_agent.errors import (
    UsageError,
)
from waaah_agent.runtime import key_file, reaper
from waaah_agent.runtime.mcp import link
from waaah_agent.runtime.mcp import setup as mcp_setup
from waaah_agent.runtime.mcp.givers import giver
from waaah_agent.runtime.mcp.setup import McpPlan
from waaah_agent.runtime.mcp.tool_http import ToolServer
from waaah_agent.runtime.night import report
from waaah_agent.runtime.night.alerts import Notifier
from waaah_agent.runtime.store import (
    SessionDir,
    SessionState,
)
from waaah_agent.runtime.supervise.background import Mailbox
from waaah_agent.runtime.supervise.logs import SessionLogs
from waaah_agent.runtime.supervise.session.ending import (
    Console,
    headless_line,
    resume_command,
)
from waaah_agent.runtime.supervise.session.options import AgentOptions
from waaah_agent.runtime.workspace import Workflow

if TYPE_CHECKING:
    from waaah_agent.runtime.supervise import metrics


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
        session.event(EventKind.LINK, error=f"could not serve {path}: {err.strerror or err}")
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
        session.event(EventKind.METRICS, host=opts.metrics_host, port=server.port)
    return server


def start_alerts(
    opts: AgentOptions, adapter: Adapter, state: SessionState, session: SessionDir
) -> Notifier | None:
    """Alerts of this session to the --notify URLs (runtime/alerts.py); their tokens masked (the
    parts that can be one: never the scheme nor a host and port, which logs name for themselves)."""
    if not opts.notify:
        return None
    session.redact.extend(part for url in opts.notify for part in url_secrets(url))
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
        session.event(EventKind.MCP_CONFIG, note=note)
    return notes


def keep_record(session: SessionDir, state: SessionState, console: Console) -> None:
    """The session's counters follow its events (cheap to read back in `waaah sessions`), and
    headless each event a person reads is one line (``[waaah] <time> <event>: <detail>``)."""

    def count(event: dict[str, Any]) -> None:
        name = event.get("event")
        if name == EventKind.NUDGE:
            state.nudges += 1
            session.save(state)
        elif name == EventKind.MCP_TOOL_END and event.get("outcome") == "task" and not state.first_task:
            state.first_task = str(event.get("task_id") or "a task")
            session.save(state)

    session.observers.append(count)
    if not console.interactive and not console.events_as_json:

        def say(event: dict[str, Any]) -> None:
            line = headless_line(event)
            if line is not None:
                console.say(line)

        session.observers.append(say)


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
        session.event(EventKind.LEFTOVERS, session=sid, pids=[r["pid"] for r in records])
        console.say(report.leftover_line(sid, records))
