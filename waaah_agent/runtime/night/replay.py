"""`waaah replay`: a supervised session's screen record from any point of the night.

The record is the session's `.cast` and its rolled parts (``runtime/parts.py``), stitched into one
asciicast v2 stream. From ``--at`` on the events keep their pace; what came before in the part
being played is drawn at once (time 0), so the screen is whole from the first frame. It is played
through asciinema's player when `asciinema` is on PATH, else written to a file to play elsewhere.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any

from waaah_agent import settings
from waaah_agent.core.nesting import loads_json
from waaah_agent.errors import UsageError, storage_error
from waaah_agent.runtime.store import SessionState, SessionStore, event_time
from waaah_agent.runtime.supervise.parts import PART_CAP, DamagedPart, lines_of, parts_of
from waaah_agent.runtime.workspace import git_root
from waaah_agent.safe_read import why

#: At most this much output from before ``--at`` is drawn at once to rebuild the screen.
CATCH_UP = 2 * 1024 * 1024
_OFFSET = re.compile(r"\+(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


@dataclass
class Record:
    header: dict[str, Any]
    events: list[tuple[float, str, str]]  # (seconds since the start, kind, data)
    problems: list[str]


Event = tuple[float, str, str]


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


def part_cap() -> int:
    """How much one part may inflate to: generous for the roll size the user set."""
    return max(PART_CAP, 4 * settings.agent_env(os.environ).log_roll)


def header_of(cast_path: Path) -> dict[str, Any]:
    """The asciicast header: the first line of the oldest part that can be read, and whose
    start is a time (see :func:`started_at`)."""
    damage = ""
    for part in [*parts_of(cast_path), cast_path]:
        with contextlib.suppress(OSError, DamagedPart, ValueError, StopIteration):
            lines = lines_of(part, part_cap())
            try:
                header = loads_json(next(lines))
            finally:
                lines.close()
            if isinstance(header, dict):
                damage = _damage(header)
                if not damage:
                    return header
    if damage:
        raise UsageError(f"{cast_path}: the record is damaged ({damage})")
    raise UsageError(f"{cast_path} holds no record (no asciicast header)")


def started_at(header: dict[str, Any]) -> datetime | None:
    """When the record began: its ``timestamp`` (none: the epoch, as asciinema reads it), as
    local time; None for one that is no time here (not a number, NaN, beyond the clock's years)."""
    value = header.get("timestamp", 0)
    return event_time(value) if isinstance(value, int | float) else None


def _damage(header: dict[str, Any]) -> str:
    """What makes ``header`` unusable, in a few words; "" for none."""
    if started_at(header) is None:
        return f"its timestamp {str(header.get('timestamp'))[:40]} is no time"
    try:
        json.dumps(header, allow_nan=False)  # what is written back must stay JSON
    except ValueError:
        return "its header holds NaN or Infinity"
    return ""


def events_of(cast_path: Path, problems: list[str]) -> Iterator[Event]:
    """The `.cast` and its parts as one stream of events, read as it is played (never all in
    memory); each part whose reading stopped early is said in ``problems``."""
    cap = part_cap()
    for part in [*parts_of(cast_path), cast_path]:
        try:
            for n, line in enumerate(lines_of(part, cap, problems)):
                if n == 0:
                    continue  # each part starts with the header
                try:
                    t, kind, data = loads_json(line)
                    event = (float(t), str(kind), str(data))
                    if not math.isfinite(event[0]):  # NaN or Infinity: no time to play it at
                        raise ValueError(t)
                except (ValueError, TypeError):
                    problems.append(f"{part.name}: a line that is not an event, left out")
                    continue
                yield event
        except DamagedPart as err:
            problems.append(f"{err}: {err.then}")
        except FileNotFoundError:
            problems.append(f"{part.name} is missing")
        except OSError as err:
            problems.append(f"{part.name} {why(err)}: left out")


def read_record(cast_path: Path) -> Record:
    """The `.cast` and its parts as one record in memory (small records; replay streams)."""
    problems: list[str] = []
    header = header_of(cast_path)
    return Record(header, list(events_of(cast_path, problems)), problems)


#: The furthest ``--at`` offset taken, in seconds (a year): past any night's record.
LONGEST = 365 * 86400


def parse_at(text: str, started: datetime) -> float:
    """Seconds after ``started``: ``+2h15m`` (an offset), ``03:12`` (the first such time after
    the start), or an ISO date and time."""
    if match := _OFFSET.fullmatch(text.strip()):
        if not any(match.groups()):
            raise UsageError(f"--at {text!r}: say how far in, e.g. +2h15m, +90s")
        h, m, s = (int(g or 0) for g in match.groups())
        if h * 3600 + m * 60 + s > LONGEST:  # no night is that long (and its date cannot be shown)
            raise UsageError(f"--at {text!r}: further in than any record (at most {LONGEST // 86400} days)")
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


def write_from(header: dict[str, Any], events: Iterable[Event], at: float, out: IO[str]) -> None:
    """The asciicast from ``at`` on, times from 0, written as it is read: the output of the last
    :data:`CATCH_UP` characters before ``at`` is drawn at time 0, so the screen is whole from
    the first frame."""
    catch_up: deque[str] = deque()
    size = 0
    started = False

    def begin() -> None:
        nonlocal started
        started = True
        out.write(json.dumps(dict(header, timestamp=int(_number(header.get("timestamp")) + at))) + "\n")
        if catch_up:
            out.write(json.dumps([0.0, "o", "".join(catch_up)]) + "\n")
        catch_up.clear()

    for t, kind, data in events:
        if t < at and not started:
            if kind == "o":
                catch_up.append(data)
                size += len(data)
                while len(catch_up) > 1 and size - len(catch_up[0]) >= CATCH_UP:
                    size -= len(catch_up.popleft())
            continue
        if not started:
            begin()
        out.write(json.dumps([round(max(0.0, t - at), 6), kind, data]) + "\n")
    if not started:
        begin()


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def replay_session(
    workspace: Path, session: str | None, at: str | None, speed: float, out: str | None
) -> int:
    state = find_session(workspace, session)
    cast = Path(state.cast_path)
    header = header_of(cast)
    started = started_at(header) or datetime.fromtimestamp(0).astimezone()  # header_of checked it
    offset = parse_at(at, started) if at else 0.0
    problems: list[str] = []
    if out == "-":
        write_from(header, events_of(cast, problems), offset, sys.stdout)
        sys.stdout.flush()
    else:
        target = Path(out) if out else cast.with_name(f"{cast.stem}-replay.cast")
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOCTTY | os.O_NONBLOCK, 0o600)
            os.set_blocking(fd, True)  # opened without waiting for a FIFO's reader; written as a file
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                write_from(header, events_of(cast, problems), offset, fh)
            target.chmod(0o600)
        except OSError as err:
            raise storage_error(err, target, "write the replay") from None
    for problem in problems:
        print(f"waaah: {problem}", file=sys.stderr)
    if out == "-":
        return 0
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
