"""A scripted fake model API that the real `gemini` and `claude` CLIs can talk to offline.

It speaks both wire formats the pinned CLIs use:

* Gemini API: ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse`` (SSE),
  ``:generateContent`` (JSON) and ``:countTokens``.
* Anthropic Messages API: ``POST /v1/messages`` (SSE when ``stream`` is true, JSON otherwise;
  claude appends ``?beta=true``) and ``/v1/messages/count_tokens``.

The reply is chosen from the request alone, by the first matching :class:`Rule`:

* a ``tool_result`` rule matches when the request ends with the result of that tool (rules of this
  kind are tried first on such requests);
* a ``marker`` rule matches when its marker occurs in the request's ``prompt_text``: the last text
  the user typed, looking back past tool calls (claude's ``<system-reminder>`` blocks, gemini's
  ``<session_context>`` and ``role: system`` messages are skipped). A list reply is consumed one
  step per matching request, so one marker can script a whole turn.

Requests that are not the main agent turn (no tools declared, or a JSON-schema answer requested:
titles, next-speaker checks, quota probes) never consume a rule; they get a short harmless text or a
minimal object satisfying the schema.

Each request is kept in ``FakeModel.requests`` (and appended to ``log_path`` as a JSON line) with:
``api`` (gemini|anthropic), ``kind`` (main|side|count_tokens|other), ``method``, ``path``, ``body``,
``last_user_text`` (typed text of the final message, "" when it only carries a tool result),
``prompt_text``, ``has_tool_result``, ``tool_result_name`` (wire name), ``tool_result_text``,
``reply`` and ``timestamp``.

Example::

    rules = [
        Rule([ToolCall("wait_for_prompt", {"agentId": "a1"}), Text("Done.")], marker="LOOP"),
    ]
    with FakeModel(rules) as fake:
        env = gemini_env(home, fake.url)  # see tests/doubles/cli_homes.py
        ...
        assert any("LOOP" in r["last_user_text"] for r in fake.main_requests())

Run by hand: ``python -m tests.doubles.fake_model --port 8765 [--log requests.jsonl]``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from tests.doubles.served import JsonHandler, ServedFake

Api = Literal["gemini", "anthropic"]

#: The MCP server name the WAAAH tools are registered under in both CLIs.
MCP_SERVER = "waaah"


# --------------------------------------------------------------------------------------------
# Replies and rules
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    """End the turn with this text. ``delay`` seconds pass before the first byte is sent.
    ``thinking``: sent first, as the anthropic API's thinking block (thinking_delta events and a
    signature) and as gemini's ``thought`` parts, as for a model that thinks."""

    text: str
    delay: float = 0.0
    thinking: str = ""


@dataclass(frozen=True)
class ToolCall:
    """Call a tool. ``name`` is the bare MCP tool name (mapped to ``mcp_waaah_<name>`` for gemini and
    ``mcp__waaah__<name>`` for claude); set ``server=None`` to call a built-in tool by its own name."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    server: str | None = MCP_SERVER
    delay: float = 0.0

    def wire_name(self, api: Api) -> str:
        """The tool name as the given API's client knows it."""
        if self.server is None:
            return self.name
        sep = "_" if api == "gemini" else "__"
        return f"mcp{sep}{self.server}{sep}{self.name}"


@dataclass(frozen=True)
class HttpError:
    """Answer with an HTTP error. Without ``body`` an API-shaped error for ``status`` is built
    (429: gemini ``RESOURCE_EXHAUSTED``, anthropic ``rate_limit_error``; 404: the APIs' answer
    to an unknown model, gemini ``NOT_FOUND`` "models/<model> is not found ...", anthropic
    ``not_found_error`` "model: <model>").

    Both CLIs retry a plain 429 for minutes (gemini silently behind its spinner; claude shows
    ``429 ... retrying in Ns · attempt k/10``). ``retryable=False`` makes the error final at once:
    gemini gets a daily-quota ``QuotaFailure`` detail ("You have exhausted your daily quota"),
    claude the ``x-should-retry: false`` header ("API Error: Request rejected (429)")."""

    status: int
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    retryable: bool = True

    def payload(self, api: Api, model: str = "") -> tuple[dict[str, Any], dict[str, str]]:
        """(JSON body, extra headers) of this error for ``api`` (a request for ``model``)."""
        body = self.body or _error_body(api, self.status, self.retryable, model)
        headers = dict(self.headers)
        if api == "anthropic" and not self.retryable:
            headers.setdefault("x-should-retry", "false")
        return body, headers


Reply = Text | ToolCall | HttpError


@dataclass
class Rule:
    """Pick ``reply`` for a main request.

    * ``marker``: matches when the marker occurs in the request's ``prompt_text`` (the last typed
      user text, looking back past tool results), so a list reply can script a whole turn:
      ``[ToolCall(...), Text("done")]``.
    * ``tool_result``: matches when the request ends with a result of that tool (bare or wire
      name). On such requests ``tool_result`` rules are tried before ``marker`` rules.
      ``result_has``: only when that result's text holds it (e.g. a CLI's own tool error).

    A list of replies is consumed one per matching request, in order; its last one then repeats.
    ``api`` restricts the rule to one API; ``model`` to requests for that model (gemini: the
    model in the URL, anthropic: the body's ``model``), alone or with a marker:
    ``Rule(HttpError(404), model="gemini-9-ultra")`` answers an unknown model as the API does.
    """

    reply: Reply | list[Reply]
    marker: str | None = None
    tool_result: str | None = None
    api: Api | None = None
    result_has: str | None = None
    model: str | None = None
    _used: int = field(default=0, init=False, repr=False)

    def matches(self, api: Api, turn: Turn) -> bool:
        """Whether this rule applies to a request of ``api`` summarised by ``turn``."""
        if self.api is not None and self.api != api:
            return False
        if self.model is not None and self.model != turn.model:
            return False
        if self.tool_result is not None:
            if self.result_has is not None and self.result_has not in turn.tool_result_text:
                return False
            return turn.tool_result_name is not None and _bare_tool_name(turn.tool_result_name) == (
                _bare_tool_name(self.tool_result)
            )
        if self.marker is not None:
            return self.marker in turn.prompt_text
        return self.model is not None

    def take(self) -> Reply:
        """The next reply of this rule (caller holds the model's lock)."""
        if not isinstance(self.reply, list):
            return self.reply
        reply = self.reply[min(self._used, len(self.reply) - 1)]
        self._used += 1
        return reply


@dataclass(frozen=True)
class Usage:
    """Token numbers reported in every reply."""

    input_tokens: int = 1200
    output_tokens: int = 34


@dataclass(frozen=True)
class Turn:
    """What the fake needs to know about a request.

    ``last_user_text`` is the typed text of the final message ("" when that message only carries a
    tool result); ``prompt_text`` is the last typed text anywhere in the conversation, so it still
    names the prompt while the model works through tool calls."""

    last_user_text: str
    prompt_text: str
    tool_result_name: str | None
    tool_result_text: str
    is_side: bool
    json_schema: dict[str, Any] | None
    model: str = ""  # the model the request is for


def _bare_tool_name(name: str) -> str:
    for prefix in (f"mcp__{MCP_SERVER}__", f"mcp_{MCP_SERVER}_"):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


# --------------------------------------------------------------------------------------------
# Reading requests
# --------------------------------------------------------------------------------------------


# Context the CLIs inject as user text: claude's reminders (CLAUDE.md, dates, tool lists) and
# gemini's session context (date, OS, folder listing). Neither is what the user typed.
_INJECTED_PREFIXES = ("<system-reminder>", "<session_context>")


def _is_injected(text: str) -> bool:
    return text.lstrip().startswith(_INJECTED_PREFIXES)


@dataclass(frozen=True)
class _UserMessage:
    """One user message reduced to what matters: typed text and tool results (name, text)."""

    texts: list[str]
    results: list[tuple[str, str]]


def _turn(
    user_messages: list[_UserMessage], ends_with_user: bool, is_side: bool, schema: dict[str, Any] | None
) -> Turn:
    prompt = next(("\n".join(m.texts) for m in reversed(user_messages) if m.texts), "")
    last = user_messages[-1] if user_messages and ends_with_user else None
    result_name, result_text = last.results[-1] if last and last.results else (None, "")
    return Turn(
        last_user_text="\n".join(last.texts) if last else "",
        prompt_text=prompt,
        tool_result_name=result_name,
        tool_result_text=result_text,
        is_side=is_side or schema is not None,
        json_schema=schema,
    )


def _anthropic_turn(body: dict[str, Any]) -> Turn:
    # role "system" entries inside `messages` are claude's own context: skip them.
    messages = [m for m in body.get("messages", []) if m.get("role") in ("user", "assistant")]
    tool_names = {
        str(b.get("id")): str(b.get("name"))
        for m in messages
        for b in _blocks(m.get("content"))
        if b.get("type") == "tool_use"
    }
    users = []
    for msg in messages:
        if msg["role"] != "user":
            continue
        blocks = _blocks(msg.get("content"))
        texts = [
            b["text"] for b in blocks if b.get("type") == "text" and not _is_injected(str(b.get("text", "")))
        ]
        results = [
            (tool_names.get(str(b.get("tool_use_id")), ""), _flatten_text(b.get("content")))
            for b in blocks
            if b.get("type") == "tool_result"
        ]
        users.append(_UserMessage(texts, results))
    ends_with_user = bool(messages) and messages[-1]["role"] == "user"
    return _turn(users, ends_with_user, is_side=not body.get("tools"), schema=_anthropic_schema(body))


def _anthropic_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("output_format") or (body.get("output_config") or {}).get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return fmt.get("schema") or {}
    return None


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _flatten_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict) and isinstance(content.get("output"), str):
        return str(content["output"])  # gemini's functionResponse.response = {"output": "..."}
    if isinstance(content, list):
        return "\n".join(_flatten_text(c.get("text", c)) if isinstance(c, dict) else str(c) for c in content)
    return json.dumps(content) if content is not None else ""


def _gemini_turn(body: dict[str, Any]) -> Turn:
    contents = body.get("contents", [])
    users = []
    for msg in contents:
        if msg.get("role", "user") != "user":
            continue
        parts = msg.get("parts", [])
        texts = [
            p["text"]
            for p in parts
            if isinstance(p.get("text"), str) and not p.get("thought") and not _is_injected(p["text"])
        ]
        results = [
            (str(p["functionResponse"].get("name", "")), _flatten_text(p["functionResponse"].get("response")))
            for p in parts
            if "functionResponse" in p
        ]
        users.append(_UserMessage(texts, results))
    ends_with_user = bool(contents) and contents[-1].get("role", "user") == "user"
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if schema is None and config.get("responseMimeType") == "application/json":
        schema = {}
    return _turn(users, ends_with_user, is_side=not body.get("tools"), schema=schema)


def minimal_json(schema: dict[str, Any]) -> Any:
    """A small value that satisfies ``schema``. For enums ``"user"`` is preferred when offered, so
    gemini's next-speaker check hands the turn back to the user instead of continuing."""
    if "enum" in schema and schema["enum"]:
        return "user" if "user" in schema["enum"] else schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    kind = str(kind).lower() if kind else "object"
    if kind == "object":
        props = schema.get("properties") or {}
        required = schema.get("required") or list(props)
        return {k: minimal_json(props.get(k) or {}) for k in required}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    return "ok"


# --------------------------------------------------------------------------------------------
# Writing replies
# --------------------------------------------------------------------------------------------


def _error_body(api: Api, status: int, retryable: bool = True, model: str = "") -> dict[str, Any]:
    if api == "gemini":
        names = {
            400: "INVALID_ARGUMENT",
            401: "UNAUTHENTICATED",
            403: "PERMISSION_DENIED",
            404: "NOT_FOUND",
            429: "RESOURCE_EXHAUSTED",
        }
        message = {
            429: "Resource has been exhausted (e.g. check quota).",
            404: f"models/{model} is not found for API version v1beta, or is not supported for "
            "generateContent. Call ListModels to see the list of available models and their "
            "supported methods.",
        }.get(status, f"HTTP {status}")
        error: dict[str, Any] = {"code": status, "message": message, "status": names.get(status, "INTERNAL")}
        if status == 429 and not retryable:
            # gemini treats a per-day quota violation as terminal and stops retrying.
            error["details"] = [
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}],
                }
            ]
        return {"error": error}
    kinds = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }
    message = {
        429: "This request would exceed your account's rate limit.",
        404: f"model: {model}",
    }.get(status, f"HTTP {status}")
    return {"type": "error", "error": {"type": kinds.get(status, "api_error"), "message": message}}


def _chunks(text: str, size: int = 24) -> list[str]:
    # Several deltas, like a real stream, but never an empty list.
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _gemini_usage(usage: Usage) -> dict[str, int]:
    return {
        "promptTokenCount": usage.input_tokens,
        "candidatesTokenCount": usage.output_tokens,
        "totalTokenCount": usage.input_tokens + usage.output_tokens,
    }


def _gemini_parts(reply: Text | ToolCall) -> list[dict[str, Any]]:
    if isinstance(reply, ToolCall):
        return [{"functionCall": {"name": reply.wire_name("gemini"), "args": reply.args}}]
    return [{"text": reply.text}]


def gemini_stream(reply: Text | ToolCall, model: str, usage: Usage) -> Iterator[dict[str, Any]]:
    """GenerateContentResponse chunks for one streamed reply (a Text's thinking first, as
    ``thought`` parts, the way the API sends them when asked to include thoughts)."""
    if isinstance(reply, Text):
        if reply.thinking:
            thought = [{"text": reply.thinking, "thought": True}]
            yield {"candidates": [{"content": {"role": "model", "parts": thought}, "index": 0}]}
        pieces = _chunks(reply.text)
        for piece in pieces[:-1]:
            yield {"candidates": [{"content": {"role": "model", "parts": [{"text": piece}]}, "index": 0}]}
        parts = [{"text": pieces[-1]}]
    else:
        parts = _gemini_parts(reply)
    yield {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": _gemini_usage(usage),
        "modelVersion": model,
    }


def gemini_response(reply: Text | ToolCall, model: str, usage: Usage) -> dict[str, Any]:
    """A whole (non-streamed) GenerateContentResponse."""
    return {
        "candidates": [
            {"content": {"role": "model", "parts": _gemini_parts(reply)}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": _gemini_usage(usage),
        "modelVersion": model,
    }


def _anthropic_block(reply: Text | ToolCall) -> dict[str, Any]:
    if isinstance(reply, ToolCall):
        return {
            "type": "tool_use",
            "id": f"toolu_{uuid.uuid4().hex[:20]}",
            "name": reply.wire_name("anthropic"),
            "input": reply.args,
        }
    return {"type": "text", "text": reply.text}


def _signature(thinking: str) -> str:
    return base64.b64encode(hashlib.sha256(thinking.encode()).digest()).decode()


def anthropic_message(reply: Text | ToolCall, model: str, usage: Usage) -> dict[str, Any]:
    """A whole (non-streamed) Messages API response."""
    thought = (
        [{"type": "thinking", "thinking": reply.thinking, "signature": _signature(reply.thinking)}]
        if isinstance(reply, Text) and reply.thinking
        else []
    )
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [*thought, _anthropic_block(reply)],
        "stop_reason": "tool_use" if isinstance(reply, ToolCall) else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
    }


def anthropic_stream(
    reply: Text | ToolCall, model: str, usage: Usage
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event, data) pairs of a streamed Messages API response."""
    whole = anthropic_message(reply, model, usage)
    start = dict(whole, content=[], stop_reason=None)
    start["usage"] = {
        "input_tokens": usage.input_tokens,
        "output_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    yield "message_start", {"type": "message_start", "message": start}
    at = 0
    if whole["content"][0]["type"] == "thinking":
        thought = whole["content"][0]
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
        )
        for piece in _chunks(thought["thinking"]):
            delta = {"type": "thinking_delta", "thinking": piece}
            yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        signed = {"type": "signature_delta", "signature": thought["signature"]}
        yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": signed}
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        at = 1
    block = whole["content"][at]
    if block["type"] == "text":
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": at, "content_block": {"type": "text", "text": ""}},
        )
        for piece in _chunks(block["text"]):
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": at, "delta": {"type": "text_delta", "text": piece}},
            )
    else:
        empty = dict(block, input={})
        yield "content_block_start", {"type": "content_block_start", "index": at, "content_block": empty}
        for piece in _chunks(json.dumps(block["input"])):
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": at,
                    "delta": {"type": "input_json_delta", "partial_json": piece},
                },
            )
    yield "content_block_stop", {"type": "content_block_stop", "index": at}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage.output_tokens},
        },
    )
    yield "message_stop", {"type": "message_stop"}


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


class FakeModel(ServedFake):
    """A fake Gemini + Anthropic model API on 127.0.0.1 (thread-safe; one instance per test).

    ``default`` answers main requests no rule matches; when it is None, a tool result is echoed
    (``Tool <name> returned: <text>``) and anything else gets ``OK.``.
    """

    def __init__(
        self,
        rules: list[Rule] | None = None,
        default: Reply | None = None,
        *,
        usage: Usage | None = None,
        log_path: Path | str | None = None,
        side_text: str = "OK",
        port: int = 0,
    ) -> None:
        self.rules = list(rules or [])
        self.default = default
        self.usage = usage or Usage()
        self.side_text = side_text
        self._init_served(port, log_path, "fake-model")

    # ---- lifecycle ------------------------------------------------------------------------

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler_for(self)

    # ---- queries for tests ----------------------------------------------------------------

    def wait_for_request(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30.0
    ) -> dict[str, Any]:
        """Block until a recorded request satisfies ``predicate``; returns it or raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                found = next((r for r in self.requests if predicate(r)), None)
            if found is not None:
                return found
            time.sleep(0.05)
        raise TimeoutError(f"no matching model request within {timeout}s")

    # ---- used by the handler --------------------------------------------------------------

    def choose(self, api: Api, turn: Turn) -> Reply:
        """The reply for a main request (consumes one step of a sequence rule)."""
        # A tool result is answered by its own rule first: the prompt's marker is still in view
        # and would otherwise start the same tool call again.
        ordered = sorted(self.rules, key=lambda r: r.tool_result is None)
        with self._lock:
            for rule in ordered:
                if rule.matches(api, turn):
                    return rule.take()
        if self.default is not None:
            return self.default
        if turn.tool_result_name is not None:
            name = _bare_tool_name(turn.tool_result_name)
            return Text(f"Tool {name} returned: {turn.tool_result_text[:200]}")
        return Text("OK.")

    def sleep(self, seconds: float) -> None:
        """Wait out a reply delay, returning early when the server stops."""
        if seconds > 0:
            self._stopping.wait(seconds)


def _handler_for(model: FakeModel) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        fake = model

    return Handler


class _Handler(JsonHandler):
    fake: FakeModel
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        pass  # requests go to FakeModel.requests, not stderr (it would land on test output)

    def do_GET(self) -> None:  # noqa: N802 (stdlib naming)
        self._record("other", None, {}, None)
        self._json(404, {"error": {"code": 404, "message": f"no route {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
        path = urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        try:
            if path.startswith("/v1beta/models/"):
                self._gemini(path, body)
            elif path.startswith("/v1/messages"):
                self._anthropic(path, body)
            else:
                self._record("other", None, body, None)
                self._json(404, {"error": {"code": 404, "message": f"no route {path}"}})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the CLI cancelled the request (Esc, Ctrl+C, exit): nothing to answer

    # ---- per API --------------------------------------------------------------------------

    def _gemini(self, path: str, body: dict[str, Any]) -> None:
        model, _, method = path.removeprefix("/v1beta/models/").partition(":")
        if method == "countTokens":
            self._record("gemini", None, body, None, kind="count_tokens")
            self._json(200, {"totalTokens": self.fake.usage.input_tokens})
            return
        turn = replace(_gemini_turn(body), model=model)
        reply = self._pick("gemini", turn, body)
        self.fake.sleep(reply.delay)
        if isinstance(reply, HttpError):
            self._json(reply.status, *reply.payload("gemini", model))
        elif method == "streamGenerateContent":
            self._sse((None, chunk) for chunk in gemini_stream(reply, model, self.fake.usage))
        else:
            self._json(200, gemini_response(reply, model, self.fake.usage))

    def _anthropic(self, path: str, body: dict[str, Any]) -> None:
        if path.endswith("/count_tokens"):
            self._record("anthropic", None, body, None, kind="count_tokens")
            self._json(200, {"input_tokens": self.fake.usage.input_tokens})
            return
        model = str(body.get("model", "claude-fake"))
        turn = replace(_anthropic_turn(body), model=model)
        reply = self._pick("anthropic", turn, body)
        self.fake.sleep(reply.delay)
        if isinstance(reply, HttpError):
            self._json(reply.status, *reply.payload("anthropic", model))
        elif body.get("stream"):
            self._sse(anthropic_stream(reply, model, self.fake.usage))
        else:
            self._json(200, anthropic_message(reply, model, self.fake.usage))

    def _pick(self, api: Api, turn: Turn, body: dict[str, Any]) -> Reply:
        if turn.is_side:
            # Side requests never consume rules: a title or a next-speaker check must not eat
            # the reply scripted for the agent's turn.
            reply: Reply
            if turn.json_schema is not None:
                reply = Text(json.dumps(minimal_json(turn.json_schema)))
            else:
                reply = Text(self.fake.side_text)
            self._record(api, turn, body, reply, kind="side")
        else:
            reply = self.fake.choose(api, turn)
            self._record(api, turn, body, reply, kind="main")
        return reply

    # ---- plumbing -------------------------------------------------------------------------

    def _record(
        self, api: str, turn: Turn | None, body: dict[str, Any], reply: Reply | None, kind: str = "main"
    ) -> None:
        self.fake.record(
            {
                "api": api,
                "kind": kind,
                "method": self.command,
                "path": self.path,
                "body": body,
                "last_user_text": turn.last_user_text if turn else "",
                "prompt_text": turn.prompt_text if turn else "",
                "has_tool_result": bool(turn and turn.tool_result_name is not None),
                "tool_result_name": turn.tool_result_name if turn else None,
                "tool_result_text": turn.tool_result_text if turn else "",
                "reply": _describe(reply),
                "timestamp": time.time(),
            }
        )

    def _sse(self, events: Iterator[tuple[str | None, dict[str, Any]]]) -> None:
        # No Content-Length: the body ends when we close the connection.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for event, data in events:
            head = f"event: {event}\n" if event else ""
            self.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
        self.close_connection = True


def _describe(reply: Reply | None) -> dict[str, Any] | None:
    if isinstance(reply, Text):
        return {"type": "text", "text": reply.text}
    if isinstance(reply, ToolCall):
        return {"type": "tool_call", "name": reply.name, "args": reply.args}
    if isinstance(reply, HttpError):
        return {"type": "http_error", "status": reply.status}
    return None


def main(argv: list[str] | None = None) -> None:
    """Serve until Ctrl+C, answering every main request with ``--reply`` text (or echoing tools)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", type=Path, default=None, help="append each request as a JSON line here")
    parser.add_argument(
        "--reply", default=None, help="text for every main request (default: OK. / tool echo)"
    )
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each main reply")
    args = parser.parse_args(argv)
    default = Text(args.reply or "OK.", delay=args.delay) if args.reply or args.delay else None
    fake = FakeModel(default=default, log_path=args.log, port=args.port)
    print(f"fake model listening on {fake.start()}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
