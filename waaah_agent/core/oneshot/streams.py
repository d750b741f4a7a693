"""Parsers of the CLIs' headless JSON streams (one JSON object per line).

Fed one line at a time, a parser keeps a :class:`StreamSummary`: the CLI's session id and model,
the final answer, token numbers as the CLI reports them, tool activity, and the CLI's *own* error
report (an API error it gave up on), kept apart from anything the model says. Lines that are not
JSON objects (warnings some CLIs print on stdout) are counted as noise and dropped.

Recorded real streams: tests/fixtures/streams/<cli>-<version>/ (scripts/record_streams.py for
gemini and claude, scripts/record_streams_extra.py for codex and opencode).
"""

from __future__ import annotations

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
    # Input tokens written to the provider's prompt cache, where the CLI reports them (claude,
    # codex, opencode); None where it does not (gemini). Already counted in ``input``.
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
    # The final answer (``response``): the assistant text after the last tool call (claude: its
    # `result`). Kept as its pieces, joined when read: a CLI that streams its answer in deltas
    # (gemini) would otherwise copy the whole answer at each one.
    answer: list[str] = field(default_factory=list, repr=False)
    tokens: Tokens = field(default_factory=Tokens)
    tools: ToolActivity = field(default_factory=ToolActivity)
    # The model's thinking / reasoning text as the stream carries it (claude's thinking blocks,
    # codex's reasoning items, opencode's reasoning parts; gemini's stream-json has none).
    reasoning: str = ""
    # The CLI's own error report, never the model's words.
    error: str = ""
    error_status: int | None = None  # an HTTP status the CLI names
    error_kind: str = ""  # the CLI's own label for it (e.g. claude's "rate_limit")
    finished: bool = False  # the stream's final result event was seen
    events: int = 0
    noise: int = 0
    retries: int = 0  # retries the CLI reported making on its own
    # True when ``tokens`` is the CLI session's running total rather than this run's (codex): on a
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
            self.summary.noise += 1
            return None
        if not isinstance(event, dict):
            self.summary.noise += 1
            return None
        self.summary.events += 1
        self._apply(event, self.summary)
        return event

    def feed_all(self, lines: Iterable[str | bytes]) -> StreamSummary:
        for line in lines:
            self.feed(line)
        return self.summary


#: At most this much reasoning text is kept in a summary (the envelope shows far less).
REASONING_KEEP = 16 * 1024


def _reasoned(s: StreamSummary, text: str) -> None:
    if text.strip() and len(s.reasoning) < REASONING_KEEP:
        s.reasoning = (f"{s.reasoning}\n{text}" if s.reasoning else text)[:REASONING_KEEP]


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


# --------------------------------------------------------------------------------------------
# gemini -p ... --output-format stream-json
# lines: init, message (user | assistant with delta), tool_use, tool_result, error, result
# --------------------------------------------------------------------------------------------

_STATUS_IN_TEXT = re.compile(r'(?:"code"\s*:\s*|API Error: |\((?=\d{3}\)))(\d{3})\b')


def apply_gemini(event: dict[str, Any], s: StreamSummary) -> None:
    kind = event.get("type")
    if kind == "init":
        s.session_id = str(event.get("session_id") or s.session_id)
        s.model = str(event.get("model") or s.model)
    elif kind == "message" and event.get("role") == "assistant":
        text = str(event.get("content") or "")
        if event.get("delta"):
            s.answer.append(text)
        else:
            s.response = text
    elif kind == "tool_use":
        s.tools.called(str(event.get("tool_name") or ""))
        s.response = ""
    elif kind == "tool_result":
        if event.get("status") not in (None, "success"):
            s.tools.error_count += 1
    elif kind == "error" and event.get("severity") not in ("warning", "info"):
        s.error = str(event.get("message") or s.error)
    elif kind == "result":
        s.finished = True
        stats = event.get("stats") or {}
        s.tokens = Tokens(
            input=_int(stats.get("input_tokens")),
            output=_int(stats.get("output_tokens")),
            cached=_int(stats.get("cached")),
            total=_int(stats.get("total_tokens")),
        )
        if event.get("status") != "success":
            error = event.get("error") or {}
            s.error = (
                str(error.get("message") or "gemini reported an error")
                if isinstance(error, dict)
                else str(error)
            )
            s.error_kind = str(error.get("type") or "") if isinstance(error, dict) else ""
            found = _STATUS_IN_TEXT.search(s.error)
            s.error_status = int(found.group(1)) if found else None


# --------------------------------------------------------------------------------------------
# claude -p ... --output-format stream-json --verbose
# lines: system (init, api_retry, ...), assistant, user (tool results), result
# --------------------------------------------------------------------------------------------


def apply_claude(event: dict[str, Any], s: StreamSummary) -> None:
    kind = event.get("type")
    if kind == "system":
        if event.get("subtype") == "init":
            s.session_id = str(event.get("session_id") or s.session_id)
            s.model = str(event.get("model") or s.model)
        elif event.get("subtype") == "api_retry":
            s.retries += 1
    elif kind == "assistant":
        message = event.get("message") or {}
        if event.get("is_api_error_message") or event.get("error"):
            # claude's own error, shaped as a message from a "<synthetic>" model.
            s.error = _claude_text(message) or s.error
            s.error_kind = str(event.get("error") or "")
            s.error_status = _int(event.get("api_error_status")) or s.error_status
            return
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "thinking" and isinstance(block.get("thinking"), str):
                _reasoned(s, block["thinking"])
            if block.get("type") == "tool_use":
                s.tools.called(str(block.get("name") or ""))
                s.response = ""
        text = _claude_text(message)
        if text:
            s.response = text
    elif kind == "user":
        for block in (event.get("message") or {}).get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_result" and block.get("is_error"):
                s.tools.error_count += 1
    elif kind == "result":
        s.finished = True
        s.session_id = str(event.get("session_id") or s.session_id)
        usage = event.get("usage") or {}
        fresh = _int(usage.get("input_tokens")) + _int(usage.get("cache_creation_input_tokens"))
        cached = _int(usage.get("cache_read_input_tokens"))
        output = _int(usage.get("output_tokens"))
        cost = event.get("total_cost_usd")
        s.tokens = Tokens(
            fresh,
            output,
            cached,
            fresh + cached + output,
            float(cost) if isinstance(cost, (int, float)) else None,
            _int(usage.get("cache_creation_input_tokens")),
        )
        models = [m for m in (event.get("modelUsage") or {}) if m != "<synthetic>"]
        if models and not s.model:
            s.model = models[0]
        if event.get("is_error"):
            s.error = (
                str(event.get("result") or "")
                or s.error
                or str(event.get("subtype") or "claude reported an error")
            )
            s.error_status = _int(event.get("api_error_status")) or s.error_status
            s.error_kind = s.error_kind or str(event.get("api_error_type") or event.get("subtype") or "")
        elif isinstance(event.get("result"), str):
            s.response = event["result"]


def _claude_text(message: dict[str, Any]) -> str:
    return "".join(
        str(b.get("text") or "")
        for b in message.get("content") or []
        if isinstance(b, dict) and b.get("type") == "text"
    )


# --------------------------------------------------------------------------------------------
# codex exec --json [PROMPT]   /   codex exec resume --json ID [PROMPT]
# lines: thread.started, turn.started, item.started / item.completed (agent_message,
# command_execution, file_change, mcp_tool_call, web_search, error, ...), error, turn.completed,
# turn.failed
# --------------------------------------------------------------------------------------------

# "unexpected status 401 Unauthorized: ...", "exceeded retry limit, last status: 429 Too Many Requests"
_CODEX_STATUS = re.compile(r"(?i)\b(?:unexpected status|last status:?)\s+(\d{3})\b")
_CODEX_RETRY = re.compile(r"^Reconnecting\.\.\. \d+/\d+")


def _codex_tool(item: dict[str, Any]) -> str | None:
    """The tool name of a codex item that is a tool call (None for messages, reasoning, ...)."""
    kind = str(item.get("type") or "")
    if kind == "mcp_tool_call":
        return f"mcp__{item.get('server') or ''}__{item.get('tool') or ''}"
    if kind in ("command_execution", "file_change", "web_search"):
        return kind
    if kind == "collab_tool_call":
        return str(item.get("tool") or kind)
    return None


def _codex_failed(item: dict[str, Any]) -> bool:
    if item.get("status") in ("failed", "declined") or item.get("error"):
        return True
    code = item.get("exit_code")
    return item.get("type") == "command_execution" and isinstance(code, int) and code != 0


def apply_codex(event: dict[str, Any], s: StreamSummary) -> None:
    kind = event.get("type")
    if kind == "thread.started":
        s.session_id = str(event.get("thread_id") or s.session_id)
    elif kind in ("item.started", "item.completed"):
        item = event.get("item") or {}
        if not isinstance(item, dict):
            return
        item_id = str(item.get("id") or "")
        name = _codex_tool(item)
        if name is not None:
            # A call counts once, when first seen (some items only ever arrive completed).
            if item_id not in s.open_calls:
                s.tools.called(name)
                s.response = ""
            if kind == "item.started":
                s.open_calls.add(item_id)
            else:
                s.open_calls.discard(item_id)
                if _codex_failed(item):
                    s.tools.error_count += 1
        elif kind == "item.completed" and item.get("type") == "agent_message":
            s.response = str(item.get("text") or "")
        elif kind == "item.completed" and item.get("type") == "reasoning":
            _reasoned(s, str(item.get("text") or ""))
        # An item of type "error" is a warning codex went on after (e.g. no metadata for a
        # model name); the run's own failure comes as the events below.
    elif kind == "error":
        message = str(event.get("message") or "")
        if _CODEX_RETRY.match(message):
            s.retries += 1
        elif message:
            _codex_error(s, message)
    elif kind == "turn.failed":
        s.finished = True
        error = event.get("error") or {}
        message = str(error.get("message") or "") if isinstance(error, dict) else str(error)
        _codex_error(s, message or s.error or "codex reported a failed turn")
    elif kind == "turn.completed":
        s.finished = True
        usage = event.get("usage") or {}
        # input_tokens includes the cached ones; output_tokens includes the reasoning ones.
        # Limitation: codex reports the *thread's* running total here, not this turn's. A fresh
        # thread's total is this run's usage; after `exec resume` it also holds every earlier
        # turn of the thread, and the stream carries nothing to tell them apart. The summary
        # keeps the total and sets tokens_cumulative; `waaah run --session` takes off the total
        # its log holds from the earlier run (runtime/run_attempts.py, session_total).
        fresh_input = _int(usage.get("input_tokens"))
        output = _int(usage.get("output_tokens"))
        s.tokens = Tokens(
            input=fresh_input,
            output=output,
            cached=_int(usage.get("cached_input_tokens")),
            total=fresh_input + output,
            cache_write=_int(usage.get("cache_write_input_tokens"))
            if "cache_write_input_tokens" in usage
            else None,
        )
        s.tokens_cumulative = True


def _codex_error(s: StreamSummary, message: str) -> None:
    s.error = message
    found = _CODEX_STATUS.search(message)
    if found:
        s.error_status = int(found.group(1))


# --------------------------------------------------------------------------------------------
# opencode run --format json [PROMPT]   (--session ID to continue)
# lines (each with sessionID): step_start, text, reasoning, tool_use, step_finish, error
# --------------------------------------------------------------------------------------------


def apply_opencode(event: dict[str, Any], s: StreamSummary) -> None:
    kind = event.get("type")
    if event.get("sessionID") and not s.session_id:
        s.session_id = str(event["sessionID"])
    part = event.get("part") or {}
    if not isinstance(part, dict):
        part = {}
    if kind == "text":
        # Each text part arrives once, complete (no deltas); the last one is the answer.
        text = str(part.get("text") or "")
        if text:
            s.response = text
    elif kind == "reasoning":
        _reasoned(s, str(part.get("text") or ""))
    elif kind == "tool_use":
        s.tools.called(str(part.get("tool") or ""))
        s.response = ""
        state = part.get("state") or {}
        exit_code = (state.get("metadata") or {}).get("exit") if isinstance(state, dict) else None
        if (isinstance(state, dict) and state.get("status") == "error") or (
            isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code != 0
        ):
            s.tools.error_count += 1
    elif kind == "step_finish":
        # One per model call: input excludes the cache reads and writes, output excludes the
        # reasoning tokens; the summary counts them the way the other CLIs do.
        tokens = part.get("tokens") or {}
        cache = tokens.get("cache") or {}
        cached = _int(cache.get("read"))
        fresh_input = _int(tokens.get("input")) + cached + _int(cache.get("write"))
        output = _int(tokens.get("output")) + _int(tokens.get("reasoning"))
        cost = part.get("cost")
        s.tokens = s.tokens + Tokens(
            fresh_input,
            output,
            cached,
            _int(tokens.get("total")) or fresh_input + output,
            float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None,
            _int(cache.get("write")),
        )
        if part.get("reason") != "tool-calls":
            s.finished = True
    elif kind == "error":
        s.finished = True
        error = event.get("error") or {}
        if not isinstance(error, dict):
            s.error = str(error) or "opencode reported an error"
            return
        data = error.get("data") or {}
        if not isinstance(data, dict):
            data = {}
        s.error = str(data.get("message") or error.get("name") or "opencode reported an error")
        s.error_kind = str(error.get("name") or "")
        s.error_status = _int(data.get("statusCode")) or s.error_status
