"""The reasoning of a `waaah run`: from the stream, else from the CLI's session file; and
`waaah run --reasoning-fallback --session ID`, which reads them (and the token figures) back
from the run log without calling the CLI."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from waaah_agent import adapters
from waaah_agent.core.oneshot import outputs, present
from waaah_agent.core.oneshot.streams import StreamParser, StreamSummary, Tokens
from waaah_agent.errors import SessionNotFound, UsageError
from waaah_agent.runtime.oneshot import runlog
from waaah_agent.runtime.workspace import workspace_root
from waaah_agent.safe_read import read_tail

#: At most this much of the end of a CLI's session file is read for the last turn's reasoning.
SESSION_FILE_CAP = 4 * 1024 * 1024


def _session_lines(agent: str, env: Mapping[str, str], workspace: Path, session_id: str) -> list[str]:
    """The last SESSION_FILE_CAP bytes of the CLI's own session file, in lines ([] if none)."""
    adapter = adapters.registry().get(agent)
    if adapter is None or not session_id:
        return []
    try:
        path = adapter.transcript(env, workspace, session_id)
        if path is None:
            return []
        data = read_tail(path, SESSION_FILE_CAP, follow=False)
    except (OSError, ValueError):
        return []  # no file, not a regular file, unreadable: nothing from it, never an error
    lines = data.decode("utf-8", "replace").splitlines()
    return lines[1:] if len(data) == SESSION_FILE_CAP else lines  # a cut first line is dropped


def from_session_file(agent: str, env: Mapping[str, str], workspace: Path, session_id: str) -> str:
    """The last turn's reasoning in the CLI's own session file (``Adapter.reasoning``), or ""."""
    adapter = adapters.registry().get(agent)
    if adapter is None or adapter.reasoning is None:
        return ""  # its reasoning is in its stream
    return adapter.reasoning(_session_lines(agent, env, workspace, session_id))


def session_file_tokens(
    agent: str, env: Mapping[str, str], workspace: Path, session_id: str
) -> Tokens | None:
    """The whole session's tokens as the CLI's session file counts them (gemini, claude), or None."""
    adapter = adapters.registry().get(agent)
    lines = _session_lines(agent, env, workspace, session_id)
    if adapter is None or adapter.tokens is None or not lines:
        return None
    usage = adapter.tokens().feed(lines)
    return Tokens(usage.input, usage.output, usage.cached, usage.input + usage.output)


def for_envelope(
    summary: StreamSummary, agent: str, env: Mapping[str, str], workspace: Path, session_id: str
) -> tuple[str, str]:
    """(reasoning, its source): the stream's, else the session file's ("" when neither has any)."""
    if summary.reasoning.strip():
        return summary.reasoning, "stream"
    return from_session_file(agent, env, workspace, session_id), "session_file"


def replayed(path: Path) -> list[tuple[str, StreamSummary]]:
    """(agent, summary) of each attempt the log ``path`` recorded, its events parsed again."""
    return [attempt for attempts in replayed_by_run(path).values() for attempt in attempts]


def replayed_by_run(path: Path) -> dict[int, list[tuple[str, StreamSummary]]]:
    """The same per run of the log (1 for its first start record, 2 for the next...)."""
    known = adapters.registry()
    parsers: dict[tuple[int, int], tuple[str, StreamParser]] = {}
    runs = 0
    for record in runlog.records(path, events=True):
        if record["record"] == "start":
            runs += 1
        elif record["record"] == "event":
            agent = str(record.get("agent") or "")
            adapter = known.get(agent)
            if adapter is None or adapter.headless is None:
                continue
            attempt = record.get("attempt")
            key = (runs, attempt if isinstance(attempt, int) else 0)
            if key not in parsers:
                parsers[key] = (agent, adapter.headless.parser())
            parsers[key][1].feed(json.dumps(record.get("event")))
    found: dict[int, list[tuple[str, StreamSummary]]] = {}
    for (run, _), (agent, parser) in parsers.items():  # in log order
        found.setdefault(run, []).append((agent, parser.summary))
    return found


def _tokens(envelope: dict[str, Any]) -> Tokens:
    plain, used = envelope.get("tokens"), envelope.get("tokens_used")
    plain = plain if isinstance(plain, dict) else {}
    used = used if isinstance(used, dict) else {}

    def whole(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    cost = plain.get("cost_usd")
    written = used.get("cache_creation_input_tokens")
    return Tokens(
        whole(plain.get("input")),
        whole(plain.get("output")),
        whole(plain.get("cached")),
        whole(plain.get("total")),
        float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None,
        written if isinstance(written, int) and not isinstance(written, bool) else None,
    )


def fallback(workspace: Path, session: str, env: Mapping[str, str]) -> dict[str, Any]:
    """The envelope-like result of `waaah run --reasoning-fallback --session ID`."""
    run = runlog.find_run(workspace, session)
    if run is None:
        raise SessionNotFound(
            f"unknown session id '{session}': no run with that id in {runlog.runs_root(workspace)} "
            "(see: waaah sessions)"
        )
    ends = [
        r["envelope"]
        for r in runlog.records(run.path)
        if r["record"] == "end" and isinstance(r.get("envelope"), dict)
    ]
    last = ends[-1] if ends else {}
    attempts = replayed(run.path)
    agent = str(last.get("agent") or (attempts[-1][0] if attempts else run.agent))
    session_id = str(last.get("session_id") or (attempts[-1][1].session_id if attempts else ""))
    # The token figures: the runs' envelopes; a run killed before its end, its stream's events.
    tokens, tokens_source = Tokens(), "run_log"
    for envelope in ends:
        tokens = tokens + _tokens(envelope)
    if not ends:
        for _, summary in attempts:
            tokens = tokens + summary.tokens
    if not tokens.total and (found := session_file_tokens(agent, env, workspace, session_id)):
        tokens, tokens_source = found, "session_file"  # the whole CLI session's, as its file says
    # The reasoning: the last run's envelope, else the last attempt's stream that had some, else
    # the CLI's session file.
    reasoning, source = str(last.get("reasoning") or ""), str(last.get("reasoning_source") or "")
    if not reasoning:
        streamed = [s.reasoning for _, s in attempts if s.reasoning.strip()]
        reasoning, source = (streamed[-1], "stream") if streamed else ("", "")
    if not reasoning:
        reasoning, source = from_session_file(agent, env, workspace, session_id), "session_file"
    thought = outputs.compact_reasoning(reasoning) if reasoning.strip() else ""
    result: dict[str, Any] = {
        "version": present.ENVELOPE_VERSION,
        "ok": True,
        # The older wrappers' success shape, with no answer: no CLI was called.
        "response": "",
        "session_id": session_id,
        "reasoning": thought,
        "tokens_used": outputs.tokens_used(tokens),
        "metadata": outputs.metadata(tokens, thought, source, None),
        "model_resolution": str(last.get("model_resolution") or ""),
        "mode": "reasoning_fallback",
        "agent": agent,
        "log_id": run.id,
        "log_path": str(run.path),
        "runs": run.prompts,
        "status": run.status,
        "tokens": tokens.to_json(),
        "tokens_source": tokens_source if tokens.total else "none",
        "exit_code": 0,
    }
    if thought:
        result["reasoning_source"] = source
    return result


def main(
    session: str | None, prompt: str | None, workspace: Path | None, env: Mapping[str, str], out: IO[str]
) -> int:
    """`waaah run --reasoning-fallback --session ID`: prints the result; no CLI is started."""
    if not session:
        raise UsageError("--reasoning-fallback reads a run's log: give its id with --session ID")
    if prompt is not None:
        raise UsageError("--reasoning-fallback takes no prompt: it reads the log of --session, never the CLI")
    out.write(present.json_text(fallback(workspace_root(workspace), session, env)) + "\n")
    out.flush()
    return 0
