"""The parser of a CLI's headless JSON stream (one JSON object per line); what each event of a
CLI's stream means is its adapter's (``adapters/<cli>/stream.py``: ``apply_<cli>``).

Fed one line at a time, a parser keeps a :class:`StreamSummary`: the CLI's session id and model,
the final answer, token numbers as the CLI reports them, tool activity, and the CLI's *own* error
report (an API error it gave up on), kept apart from anything the model says. Lines that are not
JSON objects (warnings some CLIs print on stdout), and objects with a field of another shape than
the CLI writes, are counted as noise and dropped.

Recorded real streams: tests/fixtures/streams/<cli>-<version>/ (scripts/record_streams.py,
scripts/record_streams_extra.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from waaah_agent.core.nesting import loads_json

# Tool names by the kind of effect they have, strongest last (see activity_class).
EDIT_TOOLS = (
    "write", "edit", "multiedit", "notebookedit", "replace", "write_file", "apply_patch", "edit_file",
    "patch", "file_change",
)  # fmt: skip
SHELL_TOOLS = (
    "bash", "shell", "run_shell_command", "exec_command", "local_shell", "terminal", "command",
    "command_execution",
)  # fmt: skip


def tool_names(names: tuple[str, ...]) -> re.Pattern[str]:
    """A pattern matching exactly these tool names, in any case."""
    return re.compile(r"(?i)^(" + "|".join(map(re.escape, names)) + r")$")


_EDIT = tool_names(EDIT_TOOLS)
_SHELL = tool_names(SHELL_TOOLS)
_MCP = re.compile(r"^(mcp__?|waaah_)")
_READ = re.compile(
    r"(?i)^(read|read_file|read_many_files|glob|grep|search|search_file_content|list_directory|ls|"
    r"web_fetch|webfetch|websearch|web_search|google_web_search|todowrite|todoread|task|toolsearch)$"
)


@dataclass
class ToolActivity:
    call_count: int = 0
    error_count: int = 0
    tool_names: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list, repr=False)  # each call's tool name, in order

    def called(self, name: str) -> None:
        self.call_count += 1
        self.calls.append(name)
        if name and name not in self.tool_names:
            self.tool_names.append(name)

    @property
    def activity_class(self) -> str:
        """The most consequential kind of tool the run used: ``none``, ``read``, ``mcp``, ``shell``
        or ``edit`` (``other`` for tools of no known kind only)."""
        if not self.call_count:
            return "none"
        kinds = {_kind(n) for n in self.tool_names}
        for kind in ("edit", "shell", "mcp", "read"):
            if kind in kinds:
                return kind
        return "other"

    def to_json(self) -> dict[str, Any]:
        return {
            "call_count": self.call_count,
            "error_count": self.error_count,
            "tool_names": list(self.tool_names),
            "activity_class": self.activity_class,
        }


def _kind(name: str) -> str:
    if _MCP.match(name):
        return "mcp"
    for kind, pattern in (("edit", _EDIT), ("shell", _SHELL), ("read", _READ)):
        if pattern.match(name):
            return kind
    return "other"


@dataclass
class Tokens:
    input: int = 0
    output: int = 0
    cached: int = 0
    total: int = 0
    cost_usd: float | None = None
    # Input tokens written to the provider's prompt cache, where the CLI reports them; None where
    # it does not. Already counted in ``input``.
    cache_write: int | None = None

    def __add__(self, other: Tokens) -> Tokens:
        cost = (
            None
            if self.cost_usd is None and other.cost_usd is None
            else (self.cost_usd or 0) + (other.cost_usd or 0)
        )
        written = (
            None
            if self.cache_write is None and other.cache_write is None
            else (self.cache_write or 0) + (other.cache_write or 0)
        )
        return Tokens(
            self.input + other.input,
            self.output + other.output,
            self.cached + other.cached,
            self.total + other.total,
            round(cost, 6) if cost is not None else None,
            written,
        )

    def since(self, earlier: Tokens) -> Tokens:
        """What a running total grew by after ``earlier`` (never below zero)."""
        cost = None if self.cost_usd is None else max(0.0, self.cost_usd - (earlier.cost_usd or 0))
        return Tokens(
            max(0, self.input - earlier.input),
            max(0, self.output - earlier.output),
            max(0, self.cached - earlier.cached),
            max(0, self.total - earlier.total),
            round(cost, 6) if cost is not None else None,
            None if self.cache_write is None else max(0, self.cache_write - (earlier.cache_write or 0)),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "input": self.input,
            "output": self.output,
            "cached": self.cached,
            "total": self.total,
        }
        if self.cost_usd is not None:
            out["cost_usd"] = self.cost_usd
        return out


@dataclass
class StreamSummary:
    session_id: str = ""
    model: str = ""
    # The final answer (``response``): the assistant text after the last tool call (or the CLI's
    # own final result). Kept as its pieces, joined when read: a CLI that streams its answer in
    # deltas would otherwise copy the whole answer at each one.
    answer: list[str] = field(default_factory=list, repr=False)
    tokens: Tokens = field(default_factory=Tokens)
    tools: ToolActivity = field(default_factory=ToolActivity)
    # The model's thinking / reasoning text as the stream carries it ("" when the stream has none:
    # then ``Adapter.reasoning`` may read it from the CLI's transcript).
    reasoning: str = ""
    # The CLI's own error report, never the model's words.
    error: str = ""
    error_status: int | None = None  # an HTTP status the CLI names
    error_kind: str = ""  # the CLI's own label for it (e.g. "rate_limit")
    finished: bool = False  # the stream's final result event was seen
    events: int = 0
    noise: int = 0
    # The last lines of stdout that were not JSON events (each cut), for a run that gave no result.
    other_output: list[str] = field(default_factory=list, repr=False)
    retries: int = 0  # retries the CLI reported making on its own
    # True when ``tokens`` is the CLI session's running total rather than this run's: on a
    # resumed session it then includes every earlier run of that session.
    tokens_cumulative: bool = False
    # Tool calls started and not yet finished (parsers that see start and end events).
    open_calls: set[str] = field(default_factory=set, repr=False)

    @property
    def response(self) -> str:
        if len(self.answer) > 1:
            self.answer[:] = ["".join(self.answer)]
        return self.answer[0] if self.answer else ""

    @response.setter
    def response(self, text: str) -> None:
        self.answer[:] = [text] if text else []


Apply = Callable[[dict[str, Any], StreamSummary], None]

#: Of stdout that is not the CLI's JSON stream, the last lines kept (each cut to a length).
OTHER_LINES_KEEP = 5
OTHER_LINE_KEEP = 300


class Lines:
    """A byte stream cut into lines as it comes, in time linear in its length: each chunk is
    looked at once, and a long line's pieces are joined once, at its end. A line longer than
    ``cap`` is cut: skipped to its end, its size kept in :attr:`cut` for the caller to say."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._pieces: list[bytes] = []
        self._size = 0
        self._cutting = False  # the line being read went over the cap: skip to its end
        self.cut: list[int] = []  # the size of each line cut

    def feed(self, chunk: bytes) -> list[bytes]:
        *done, rest = chunk.split(b"\n")
        lines = []
        for i, piece in enumerate(done):
            if i == 0 and self._cutting:
                self.cut[-1] += len(piece)
                self._cutting = False
                continue
            if i == 0 and self._pieces:
                piece, self._pieces, self._size = b"".join([*self._pieces, piece]), [], 0
            if len(piece) > self.cap:
                self.cut.append(len(piece))
            else:
                lines.append(piece)
        if self._cutting:
            self.cut[-1] += len(rest)
        elif self._size + len(rest) > self.cap:
            self.cut.append(self._size + len(rest))
            self._pieces, self._size, self._cutting = [], 0, True
        elif rest:
            self._pieces.append(rest)
            self._size += len(rest)
        return lines

    def end(self) -> bytes:
        """The last line, when the stream did not end with a newline (b"" when it did)."""
        last, self._pieces, self._size = b"".join(self._pieces), [], 0
        return last


class StreamParser:
    """Feed it stdout lines; read ``summary``. ``feed`` returns the event it parsed (or None)."""

    def __init__(self, apply: Apply) -> None:
        self._apply = apply
        self.summary = StreamSummary()

    def feed(self, line: str | bytes) -> dict[str, Any] | None:
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")
        text = line.strip()
        if not text:
            return None
        try:
            event = loads_json(text)
        except ValueError:
            self._other(text)
            return None
        if not isinstance(event, dict):
            self._other(text)
            return None
        try:
            self._apply(event, self.summary)
        except (AttributeError, TypeError, KeyError, IndexError, ValueError, ArithmeticError):
            # A field of another shape than this CLI's releases write (a list where an object
            # goes, a number for a text): the line is noise, the run goes on; what the reader had
            # taken from it before it tripped stays.
            self.summary.noise += 1
            return None
        self.summary.events += 1
        return event

    def _other(self, text: str) -> None:
        self.summary.noise += 1
        kept = self.summary.other_output
        kept.append(text[:OTHER_LINE_KEEP])
        del kept[:-OTHER_LINES_KEEP]

    def feed_all(self, lines: Iterable[str | bytes]) -> StreamSummary:
        for line in lines:
            self.feed(line)
        return self.summary


#: At most this much reasoning text is kept in a summary (the envelope shows far less).
REASONING_KEEP = 16 * 1024


def reasoned(s: StreamSummary, text: str) -> None:
    if text.strip() and len(s.reasoning) < REASONING_KEEP:
        s.reasoning = (f"{s.reasoning}\n{text}" if s.reasoning else text)[:REASONING_KEEP]


def as_int(value: Any) -> int:
    """A count from the stream: a finite number at least 0, else 0 (absent). A CLI's stream may
    hold ``NaN``, ``Infinity`` or ``1e999``, which Python's JSON parser takes as floats."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return max(0, int(value))


def as_cost(value: Any) -> float | None:
    """A cost in USD from the stream: a finite number at least 0, else None (not reported). A
    NaN would make every --max-cost comparison false and the envelope invalid JSON."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None
