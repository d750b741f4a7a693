"""`waaah report`: which sessions, their events read safely, the summary and the HTML page written.

A session is named by its id (or a unique prefix of it), else every session of the workspace
that was active within ``--since`` (``12h``, ``90m``, ``2d``), else the newest. Events files are
read as regular files only, at most :data:`EVENTS_CAP` bytes each (a longer one is read from its
end, and the summary says so), a line at a time as the night is drawn, never all in memory; a
line that is not a JSON object is skipped, one longer than :data:`LINE_CAP` too (and said).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from waaah_agent.core.nesting import loads_json
from waaah_agent.core.night.report import Night, duration, read_night, summary_lines
from waaah_agent.core.oneshot.streams import Lines
from waaah_agent.core.prices import Prices
from waaah_agent.errors import SessionNotFound as NoSession
from waaah_agent.errors import UsageError, storage_error
from waaah_agent.runtime import price_file
from waaah_agent.runtime.oneshot import runlog
from waaah_agent.runtime.store import SessionState, SessionStore, atomic_write, event_epoch
from waaah_agent.runtime.workspace import git_root
from waaah_agent.safe_read import open_regular, why

MB = 1024 * 1024
EVENTS_CAP = 64 * MB
LINE_CAP = MB  # an event is a few hundred bytes
_SINCE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def since_seconds(text: str) -> float:
    match = _SINCE.match(text)
    if not match:
        raise UsageError(f"--since {text!r}: give a length such as 12h, 90m or 2d")
    return float(match.group(1)) * _UNIT[match.group(2)]


@dataclass
class Chosen:
    workspace: Path
    states: list[SessionState]
    notes: list[str]


def choose(folder: Path, session: str | None, since: str | None, now: float | None = None) -> Chosen:
    start = folder.resolve()
    workspace = git_root(start) or start
    store = SessionStore(workspace / ".waaah" / "sessions")
    states = sorted(store.all_states(), key=lambda s: s.created or "", reverse=True)
    if not states:
        raise NoSession(f"no sessions in {workspace}; start one with: waaah agent --start=gemini")
    if session:
        found = [s for s in states if s.id == session] or [s for s in states if s.id.startswith(session)]
        if len(found) != 1:
            what = "no session" if not found else f"{len(found)} sessions"
            raise NoSession(f"{what} named {session!r} in {workspace}; `waaah sessions` lists them")
        return Chosen(workspace, found, [])
    if since:
        cutoff = (now if now is not None else time.time()) - since_seconds(since)
        recent = [s for s in states if _last_active(store.root / s.id, s) >= cutoff]
        if not recent:
            raise NoSession(f"no session of {workspace} was active in the last {since}")
        return Chosen(workspace, list(reversed(recent)), [])
    return Chosen(workspace, states[:1], [])


def _last_active(folder: Path, state: SessionState) -> float:
    ended = event_epoch(state.ended) if state.ended else None
    if ended is not None:
        return ended
    try:
        return (folder / "events.jsonl").stat().st_mtime
    except OSError:
        return event_epoch(state.created) or 0.0


def events_of(path: Path, notes: list[str]) -> Iterator[dict[str, Any]]:
    """The events of ``path`` with their time as ``t``, read as they are taken."""
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return
    except OSError as err:
        notes.append(f"skipped {path}: {why(err)}")
        return
    lines = Lines(LINE_CAP)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fd).st_size
        if size > EVENTS_CAP:
            fh.seek(size - EVENTS_CAP)
            fh.readline(LINE_CAP)  # the first may be cut
            notes.append(f"{path} is larger than {EVENTS_CAP // MB} MB: the report covers its end")
        left = EVENTS_CAP
        while left > 0 and (chunk := fh.read(min(MB, left))):
            left -= len(chunk)
            yield from _events(lines.feed(chunk))
        yield from _events([lines.end()])
    if lines.cut:
        notes.append(f"{path}: {len(lines.cut)} line(s) longer than {LINE_CAP // MB} MB, skipped")


def _events(lines: list[bytes]) -> Iterator[dict[str, Any]]:
    for line in lines:
        try:
            event = loads_json(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(event, dict):
            t = event_epoch(event.get("ts"))
            if t is not None:
                event["t"] = t
                yield event


def night_of(chosen: Chosen, prices: Prices | None = None) -> Night:
    root = chosen.workspace / ".waaah" / "sessions"
    parts = []
    for state in chosen.states:
        ended = event_epoch(state.ended) if state.ended else None
        parts.append((state.id, events_of(root / state.id / "events.jsonl", chosen.notes), ended))
    return read_night(parts, prices)


def clock(t: float) -> str:
    return datetime.fromtimestamp(t).astimezone().strftime("%a %H:%M:%S")


def run_rows(workspace: Path, sessions: list[str]) -> list[dict[str, Any]]:
    """The `waaah run` trees under these sessions (and the runs on their own of the same days)."""
    rows: list[dict[str, Any]] = []

    def walk(node: runlog.Node, depth: int) -> None:
        if node.kind == "run":  # a run's duration is in its envelopes, a session's in its night
            took: Any = node.duration_ms / 1000 if node.duration_ms is not None else None
        else:
            took = node.night.get("duration_s")
        rows.append(
            {
                "indent": "  " * depth,
                "id": node.id,
                "agent": node.agent,
                "outcome": node.status,
                "took": duration(float(took)) if isinstance(took, int | float) else "",
                "tokens": f"{node.tokens.get('input', 0):,} / {node.tokens.get('output', 0):,}",
            }
        )
        for child in node.children:
            walk(child, depth + 1)

    for root in runlog.tree(workspace):
        if root.id in sessions or root.kind == "run":
            if root.kind == "session" and not root.children:
                continue
            walk(root, 0)
    return rows


def report(folder: Path, session: str | None, since: str | None, html: Path | None) -> str:
    """The terminal summary; with ``html``, the page written there too."""
    if html is not None and html.is_dir():
        raise UsageError(
            f"--html {html} is a folder; give the page a file name: --html {html / 'night.html'}"
        )
    chosen = choose(folder, session, since)
    try:  # costs over time when the user keeps a table; a broken one costs the report nothing else
        prices: Prices | None = price_file.load(os.environ)[0]
    except UsageError as err:
        prices = None
        chosen.notes.append(f"no cost shown: {err}")
    night = night_of(chosen, prices)
    lines = summary_lines(night, clock)
    if html is not None:
        from waaah_agent.runtime.night.html import page

        title = f"waaah: the night of {', '.join(night.sessions) or 'no session'}"
        text = page(night, title, clock, run_rows(chosen.workspace, night.sessions))
        try:
            atomic_write(html, text, 0o600)
        except OSError as err:
            raise storage_error(err, html, "write") from None
        lines.append(f"wrote {html} ({len(text.encode()) // 1024} KB, opens without a network)")
    return "\n".join([*lines, *(f"note: {n}" for n in chosen.notes)])
