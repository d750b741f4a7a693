"""`waaah replay`: a supervised session's screen record from any point of the night.

The record is the session's `.cast` and its rolled parts (``runtime/parts.py``), stitched into one
asciicast v2 stream. From ``--at`` on the events keep their pace; what came before in the part
being played is drawn at once (time 0), so the screen is whole from the first frame. It is played
through asciinema's player when `asciinema` is on PATH, else written to a file to play elsewhere.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from waaah_agent.errors import UsageError
from waaah_agent.runtime.parts import DamagedPart, lines_of, parts_of
from waaah_agent.runtime.store import SessionState, SessionStore
from waaah_agent.runtime.workspace import git_root

#: At most this much output from before ``--at`` is drawn at once to rebuild the screen.
CATCH_UP = 2 * 1024 * 1024
_OFFSET = re.compile(r"\+(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


@dataclass
class Record:
    header: dict[str, Any]
    events: list[tuple[float, str, str]]  # (seconds since the start, kind, data)
    problems: list[str]


def find_session(workspace: Path, wanted: str | None) -> SessionState:
    """The session named (its id or a unique start of it), else the newest one."""
    root = git_root(workspace.resolve()) or workspace.resolve()
    states = SessionStore(root / ".waaah" / "sessions").all_states()
    states = [s for s in states if s.cast_path]
    if not states:
        raise UsageError(f"no recorded sessions in {root}; start one with: waaah agent --start=gemini")
    if wanted is None:
        return max(states, key=lambda s: s.created)
    matches = [s for s in states if s.id == wanted] or [s for s in states if s.id.startswith(wanted)]
    if len(matches) != 1:
        known = ", ".join(s.id for s in sorted(states, key=lambda s: s.created)[-5:])
        why = "no session" if not matches else "more than one session"
        raise UsageError(f"{why} matches {wanted!r}; sessions here (newest last): {known}")
    return matches[0]


def read_record(cast_path: Path) -> Record:
    """The `.cast` and its parts as one record; a damaged part is kept up to its damage."""
    header: dict[str, Any] | None = None
    events: list[tuple[float, str, str]] = []
    problems: list[str] = []
    for part in [*parts_of(cast_path), cast_path]:
        try:
            for n, line in enumerate(lines_of(part)):
                if n == 0:
                    header = header or json.loads(line)
                    continue
                try:
                    t, kind, data = json.loads(line)
                except ValueError:
                    problems.append(f"{part.name}: a line that is not an event, left out")
                    continue
                events.append((float(t), str(kind), str(data)))
        except DamagedPart as err:
            problems.append(f"{err}: replayed up to the damage")
        except FileNotFoundError:
            problems.append(f"{part.name} is missing")
    if header is None:
        raise UsageError(f"{cast_path} holds no record (no asciicast header)")
    return Record(header, events, problems)


def parse_at(text: str, started: datetime) -> float:
    """Seconds after ``started``: ``+2h15m`` (an offset), ``03:12`` (the first such time after
    the start), or an ISO date and time."""
    if match := _OFFSET.fullmatch(text.strip()):
        if not any(match.groups()):
            raise UsageError(f"--at {text!r}: say how far in, e.g. +2h15m, +90s")
        h, m, s = (int(g or 0) for g in match.groups())
        return float(h * 3600 + m * 60 + s)
    try:
        if re.fullmatch(r"\d{1,2}:\d{2}(:\d{2})?", text.strip()):
            h, m, s = ([int(x) for x in text.strip().split(":")] + [0])[:3]
            when = started.replace(hour=h, minute=m, second=s, microsecond=0)
            if when < started:
                when += timedelta(days=1)
        else:
            when = datetime.fromisoformat(text.strip())
            if when.tzinfo is None:
                when = when.replace(tzinfo=started.tzinfo)
    except ValueError:
        raise UsageError(f"--at {text!r}: use +2h15m, 03:12 or 2026-11-24T03:12") from None
    return max(0.0, (when - started).total_seconds())


def from_point(record: Record, at: float) -> list[tuple[float, str, str]]:
    """The events from ``at`` on, times from 0; the output just before ``at`` drawn at time 0."""
    before = [e for e in record.events if e[0] < at]
    after = [(t - at, kind, data) for t, kind, data in record.events if t >= at]
    catch_up: list[str] = []
    size = 0
    for _, kind, data in reversed(before):
        if kind != "o":
            continue
        catch_up.append(data)
        size += len(data)
        if size >= CATCH_UP:
            break
    head = [(0.0, "o", "".join(reversed(catch_up)))] if catch_up else []
    return head + after


def as_cast(record: Record, events: list[tuple[float, str, str]], at: float) -> str:
    header = dict(record.header, timestamp=int(record.header.get("timestamp", 0) + at))
    lines = [json.dumps(header)]
    lines += [json.dumps([round(t, 6), kind, data]) for t, kind, data in events]
    return "\n".join(lines) + "\n"


def replay_session(
    workspace: Path, session: str | None, at: str | None, speed: float, out: str | None
) -> int:
    state = find_session(workspace, session)
    cast = Path(state.cast_path)
    record = read_record(cast)
    started = datetime.fromtimestamp(float(record.header.get("timestamp", 0))).astimezone()
    offset = parse_at(at, started) if at else 0.0
    events = from_point(record, offset)
    for problem in record.problems:
        print(f"waaah: {problem}", file=sys.stderr)
    text = as_cast(record, events, offset)
    if out == "-":
        sys.stdout.write(text)
        return 0
    target = Path(out) if out else cast.with_name(f"{cast.stem}-replay.cast")
    target.write_text(text, encoding="utf-8")
    target.chmod(0o600)
    player = shutil.which("asciinema")
    if out or player is None:
        how = f"asciinema play {target}" + (f" -s {speed:g}" if speed != 1 else "")
        hint = "" if player else " (asciinema: pip install asciinema)"
        print(
            f"waaah: session {state.id} from {started + timedelta(seconds=offset):%Y-%m-%d %H:%M:%S} "
            f"written to {target}; play it with: {how}{hint}"
        )
        return 0
    return subprocess.call([player, "play", str(target), *(["-s", f"{speed:g}"] if speed != 1 else [])])
