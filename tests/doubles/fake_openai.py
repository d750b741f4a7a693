"""A scripted fake OpenAI-style model API that the real ``codex`` and ``opencode`` CLIs can talk to
offline (stdlib only).

It speaks the two wire formats those CLIs use:

* Responses API (codex, ``wire_api = "responses"``): ``POST /v1/responses`` streamed as SSE events
  ``response.created``, ``response.in_progress``, ``response.output_item.added``,
  ``response.content_part.added``, ``response.output_text.delta``, ``response.output_text.done``,
  ``response.content_part.done``, ``response.output_item.done`` and ``response.completed`` (with
  ``usage``); a tool call is a ``function_call`` output item. A tool result comes back in the next
  request as a ``function_call_output`` input item.
* Chat Completions (opencode's ``@ai-sdk/openai-compatible`` provider): ``POST
  /v1/chat/completions`` streamed as ``chat.completion.chunk`` SSE chunks (``choices[0].delta``
  with ``content`` or ``tool_calls``), a final usage chunk when ``stream_options.include_usage``
  is set, then ``data: [DONE]``. A tool result comes back as a ``role: "tool"`` message.

Plus ``GET /v1/models`` (a short model list). Anything else gets a JSON 404 (and is logged).

The reply is chosen from the request alone (no state), so retries and side requests (titles,
summaries) never disturb a scripted turn:

1. a missing or wrong API key (when ``api_key`` is set) gets 401 ``invalid_api_key``;
2. a model named in ``missing_models`` gets 404 ``model_not_found``;
3. a request whose last input is a tool result gets ``TOOL_ECHO`` + what the command printed;
4. otherwise the first :class:`Rule` whose ``marker`` occurs in the last user text picks the reply:
   :class:`Text`, :class:`ShellCall` (a call of the CLI's built-in shell tool, found among the tools
   the request declares) or :class:`HttpError`. Side requests (no tools declared) only take a
   rule's HTTP error; otherwise they get ``side_text``;
5. no rule matches: ``default_text``.

Every reply reports the same :class:`Usage` (input 123, output 45, cached 7, total 168).

Each request is kept in ``FakeOpenAI.requests`` and appended to ``log_path`` as a JSON line:
``api`` (responses|chat|models|other), ``kind`` (main|side|other), ``method``, ``path``,
``headers`` (without ``authorization``), ``auth`` (the bearer key, masked but for its last 4
characters, or null), ``body``, ``user_texts`` (every user text in the conversation, in order, so a
resumed session shows its earlier prompts), ``last_user_text``, ``tool_result`` (output of a
trailing tool result, or null), ``reply`` and ``timestamp``.

Example::

    with FakeOpenAI(DEFAULT_RULES, api_key=FAKE_KEY) as fake:
        ...  # point the CLI at f"{fake.url}/v1"
        assert fake.main_requests()[-1]["last_user_text"].startswith("FAKE-ANSWER")

Run by hand: ``python -m tests.doubles.fake_openai --port 8765 --log requests.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.doubles.served import JsonHandler, ServedFake

#: A key that looks like an OpenAI key and is obviously not one.
FAKE_KEY = "sk-test-fake-key-000000000000"
#: Prefix of the text answering a tool result (followed by the tool's output).
TOOL_ECHO = "The command printed: "

# --------------------------------------------------------------------------------------------
# Replies and rules
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    """Token numbers reported with every reply."""

    input_tokens: int = 123
    output_tokens: int = 45
    cached_tokens: int = 7

    @property
    def total_tokens(self) -> int:
        """Input plus output, as the APIs report it."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class Text:
    """End the turn with this text, streamed after ``delay`` seconds (a slow model: the CLI is busy).
    ``thinking`` comes first: a reasoning item with its summary (Responses API), reasoning_content
    deltas (Chat Completions), as a reasoning model sends them."""

    text: str
    delay: float = 0.0
    thinking: str = ""


@dataclass(frozen=True)
class ShellCall:
    """Call the CLI's built-in shell tool with ``command`` (a shell command line). The tool and the
    shape of its arguments are taken from the tools the request declares (codex ``shell``,
    ``shell_command`` or ``exec_command``; opencode ``bash``)."""

    command: str


@dataclass(frozen=True)
class HttpError:
    """Answer with an HTTP error. Without ``body`` an OpenAI-shaped error for ``status`` is built.
    ``retry_after`` (seconds) is sent as a ``Retry-After`` header."""

    status: int
    body: dict[str, Any] | None = None
    retry_after: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def payload(self, model: str) -> tuple[dict[str, Any], dict[str, str]]:
        """(JSON body, headers) of this error."""
        headers = dict(self.headers)
        if self.retry_after is not None:
            headers.setdefault("Retry-After", self.retry_after)
        return self.body or error_body(self.status, model), headers


#: The answer of a plan's usage limit (ChatGPT sign-in), with the seconds until it resets.
CODEX_QUOTA = {
    "error": {
        "type": "usage_limit_reached",
        "message": "The usage limit has been reached",
        "plan_type": "plus",
        "resets_in_seconds": 7200,
    }
}


def codex_limit_headers(reset_at: int) -> dict[str, str]:
    """What the API sends with a ChatGPT plan's answers: each usage window's use and reset
    (Unix seconds), the 5-hour one used up. codex writes them into its session file as
    ``rate_limits`` (and, at 100 %, asks whether to switch to a cheaper model)."""
    return {
        "x-codex-primary-used-percent": "100",
        "x-codex-primary-window-minutes": "300",
        "x-codex-primary-reset-at": str(reset_at),
        "x-codex-secondary-used-percent": "40",
        "x-codex-secondary-window-minutes": "10080",
        "x-codex-secondary-reset-at": str(reset_at + 86400),
    }


@dataclass(frozen=True)
class McpCall:
    """Call ``tool`` of the MCP server ``server`` with ``args``: codex lists an MCP server's tools
    as a Responses API ``namespace`` tool (``mcp__<server>``), so the call names its namespace."""

    server: str
    tool: str
    args: dict[str, Any] = field(default_factory=dict)

    @property
    def namespace(self) -> str:
        return f"mcp__{self.server}"


Reply = Text | ShellCall | McpCall | HttpError


@dataclass(frozen=True)
class Rule:
    """Reply with ``reply`` when ``marker`` occurs in the request's last user text; with
    ``after_tool``, instead when the request's last input is the result of that tool (its name,
    without a namespace)."""

    marker: str
    reply: Reply
    after_tool: str | None = None


#: The scripted scenarios, one marker each.
DEFAULT_RULES: list[Rule] = [
    Rule("FAKE-ANSWER", Text("Hello from the fake model.")),
    Rule(
        "FAKE-THINK",
        Text("Hello from the fake model.", thinking="The user asks for a greeting.\n\nA short one will do."),
    ),
    Rule("FAKE-TOOL", ShellCall("echo hi")),
    Rule("FAKE-500", HttpError(500)),
    Rule("FAKE-429", HttpError(429, retry_after="1")),
    Rule("FAKE-401", HttpError(401)),
    Rule("FAKE-404", HttpError(404)),
]


def error_body(status: int, model: str = "") -> dict[str, Any]:
    """The error body OpenAI sends for ``status``."""
    kinds: dict[int, tuple[str, str | None, str]] = {
        400: ("invalid_request_error", None, "Invalid request."),
        401: (
            "invalid_request_error",
            "invalid_api_key",
            "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
        ),
        404: (
            "invalid_request_error",
            "model_not_found",
            f"The model `{model}` does not exist or you do not have access to it.",
        ),
        429: (
            "requests",
            "rate_limit_exceeded",
            f"Rate limit reached for {model or 'the model'} on requests per min (RPM): Limit 3, Used 3, "
            "Requested 1. Please try again in 1s.",
        ),
        503: ("server_error", None, "The server is overloaded or not ready yet."),
    }
    kind, code, message = kinds.get(
        status,
        ("server_error", None, "The server had an error while processing your request. Sorry about that!"),
    )
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# --------------------------------------------------------------------------------------------
# Reading requests
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """What the fake needs to know about a request."""

    user_texts: list[str]
    tool_result: str | None
    tools: list[dict[str, Any]]
    tool_name: str = ""  # the tool whose result is ``tool_result`` (Responses API only)

    @property
    def last_user_text(self) -> str:
        """The newest user text ("" when there is none)."""
        return self.user_texts[-1] if self.user_texts else ""


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in ("input_text", "text", "output_text")
        ]
        return "\n".join(parts)
    return ""


# Context the CLIs add as user messages (codex's environment context, AGENTS.md instructions):
# not what the user typed.
_INJECTED_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md", "<permissions")


def _typed(text: str) -> bool:
    return bool(text.strip()) and not text.lstrip().startswith(_INJECTED_PREFIXES)


def responses_turn(body: dict[str, Any]) -> Turn:
    """Summarise a Responses API request."""
    raw = body.get("input")
    items: list[dict[str, Any]] = (
        [{"type": "message", "role": "user", "content": raw}]
        if isinstance(raw, str)
        else [i for i in raw or [] if isinstance(i, dict)]
    )
    texts = [
        _content_text(i.get("content"))
        for i in items
        if i.get("role") == "user" and i.get("type", "message") == "message"
    ]
    last = items[-1] if items else {}
    result = None
    name = ""
    if last.get("type") in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        output = last.get("output")
        result = output if isinstance(output, str) else _content_text(output) or json.dumps(output)
        calls = [i for i in items if i.get("call_id") == last.get("call_id") and "name" in i]
        name = str(calls[-1]["name"]) if calls else ""
    return Turn([t for t in texts if _typed(t)], result, list(body.get("tools") or []), name)


def chat_turn(body: dict[str, Any]) -> Turn:
    """Summarise a Chat Completions request."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    texts = [_content_text(m.get("content")) for m in messages if m.get("role") == "user"]
    last = messages[-1] if messages else {}
    result = _content_text(last.get("content")) if last.get("role") == "tool" else None
    return Turn([t for t in texts if _typed(t)], result, list(body.get("tools") or []))


def tool_output(result: str) -> str:
    """What a command printed, from a tool result: codex wraps it in a header (``Chunk ID``, ``Wall
    time``, exit code, ...) ending in an ``Output:`` line; opencode sends the output as is."""
    head, sep, tail = result.partition("\nOutput:\n")
    return (tail if sep and "Process exited" in head else result).strip()


def _tool_spec(tool: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(name, JSON-schema parameters) of a declared tool in either API's shape."""
    function = tool.get("function")
    spec: dict[str, Any] = function if isinstance(function, dict) else tool
    return str(spec.get("name", "")), dict(spec.get("parameters") or {})


#: Built-in shell tools, most preferred first.
SHELL_TOOLS = ("shell_command", "exec_command", "shell", "bash", "local_shell")


def shell_call(tools: list[dict[str, Any]], command: str) -> tuple[str, dict[str, Any]]:
    """(tool name, arguments) calling the declared shell tool with ``command``."""
    declared = dict(_tool_spec(t) for t in tools)
    name = next((n for n in SHELL_TOOLS if n in declared), None)
    if name is None:
        raise LookupError(f"no shell tool among {sorted(declared)}")
    props = declared[name].get("properties") or {}
    args: dict[str, Any] = {}
    if "cmd" in props:
        args["cmd"] = command
    else:
        is_list = (props.get("command") or {}).get("type") == "array"
        args["command"] = ["bash", "-lc", command] if is_list else command
    if "description" in (declared[name].get("required") or []):
        args["description"] = "Print hi"
    return name, args


# --------------------------------------------------------------------------------------------
# Writing replies
# --------------------------------------------------------------------------------------------


def _chunks(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def responses_usage(usage: Usage) -> dict[str, Any]:
    """The Responses API ``usage`` object."""
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.total_tokens,
    }


def responses_stream(
    reply: Text | tuple[str, dict[str, Any]] | McpCall, model: str, usage: Usage
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event, data) pairs of one streamed Responses API reply: a text, a (tool, args) call or a
    call of an MCP tool (its namespace named in the item)."""
    resp_id = _new_id("resp")
    created = int(time.time())
    base: dict[str, Any] = {
        "id": resp_id,
        "object": "response",
        "created_at": created,
        "model": model,
        "output": [],
        "status": "in_progress",
        "usage": None,
    }
    seq = iter(range(1_000_000))

    def ev(kind: str, **data: Any) -> tuple[str, dict[str, Any]]:
        return kind, {"type": kind, "sequence_number": next(seq), **data}

    yield ev("response.created", response=base)
    yield ev("response.in_progress", response=base)
    at, before = 0, []
    if isinstance(reply, Text) and reply.thinking:
        rs_id = _new_id("rs")
        summary = {"type": "summary_text", "text": reply.thinking}
        thought: dict[str, Any] = {"id": rs_id, "type": "reasoning", "summary": []}
        yield ev("response.output_item.added", output_index=0, item=thought)
        empty = {"type": "summary_text", "text": ""}
        yield ev(
            "response.reasoning_summary_part.added",
            item_id=rs_id,
            output_index=0,
            summary_index=0,
            part=empty,
        )
        for piece in _chunks(reply.thinking):
            yield ev(
                "response.reasoning_summary_text.delta",
                item_id=rs_id,
                output_index=0,
                summary_index=0,
                delta=piece,
            )
        yield ev(
            "response.reasoning_summary_text.done",
            item_id=rs_id,
            output_index=0,
            summary_index=0,
            text=reply.thinking,
        )
        yield ev(
            "response.reasoning_summary_part.done",
            item_id=rs_id,
            output_index=0,
            summary_index=0,
            part=summary,
        )
        thought = dict(thought, summary=[summary])
        yield ev("response.output_item.done", output_index=0, item=thought)
        at, before = 1, [thought]
    if isinstance(reply, Text):
        item_id = _new_id("msg")
        item: dict[str, Any] = {
            "id": item_id,
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        yield ev("response.output_item.added", output_index=at, item=item)
        part = {"type": "output_text", "text": "", "annotations": []}
        yield ev("response.content_part.added", item_id=item_id, output_index=at, content_index=0, part=part)
        for piece in _chunks(reply.text):
            yield ev(
                "response.output_text.delta", item_id=item_id, output_index=at, content_index=0, delta=piece
            )
        yield ev(
            "response.output_text.done", item_id=item_id, output_index=at, content_index=0, text=reply.text
        )
        done_part = dict(part, text=reply.text)
        yield ev(
            "response.content_part.done", item_id=item_id, output_index=at, content_index=0, part=done_part
        )
        item = dict(item, status="completed", content=[done_part])
    else:
        name, args = (reply.tool, reply.args) if isinstance(reply, McpCall) else reply
        item_id = _new_id("fc")
        arguments = json.dumps(args)
        item = {
            "id": item_id,
            "type": "function_call",
            "status": "in_progress",
            "name": name,
            "call_id": _new_id("call"),
            "arguments": "",
        }
        if isinstance(reply, McpCall):
            item["namespace"] = reply.namespace
        yield ev("response.output_item.added", output_index=at, item=item)
        for piece in _chunks(arguments, 16):
            yield ev("response.function_call_arguments.delta", item_id=item_id, output_index=at, delta=piece)
        yield ev(
            "response.function_call_arguments.done", item_id=item_id, output_index=at, arguments=arguments
        )
        item = dict(item, status="completed", arguments=arguments)
    yield ev("response.output_item.done", output_index=at, item=item)
    yield ev(
        "response.completed",
        response=dict(base, status="completed", output=[*before, item], usage=responses_usage(usage)),
    )


def chat_usage(usage: Usage) -> dict[str, Any]:
    """The Chat Completions ``usage`` object."""
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def _chat_tool_call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": _new_id("call"),
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def chat_stream(
    reply: Text | tuple[str, dict[str, Any]], model: str, usage: Usage, include_usage: bool
) -> Iterator[dict[str, Any]]:
    """``chat.completion.chunk`` objects of one streamed reply (without the final ``[DONE]``)."""
    base = {
        "id": _new_id("chatcmpl"),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_fake",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return dict(base, choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])

    yield chunk({"role": "assistant", "content": ""})
    if isinstance(reply, Text):
        for piece in _chunks(reply.thinking):
            if piece:
                yield chunk({"reasoning_content": piece})
        for piece in _chunks(reply.text):
            yield chunk({"content": piece})
        finish = "stop"
    else:
        call = _chat_tool_call(*reply)
        arguments = call["function"]["arguments"]
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": reply[0], "arguments": ""},
                    }
                ]
            }
        )
        for piece in _chunks(arguments, 16):
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        finish = "tool_calls"
    yield chunk({}, finish)
    if include_usage:
        yield dict(base, choices=[], usage=chat_usage(usage))


def chat_completion(reply: Text | tuple[str, dict[str, Any]], model: str, usage: Usage) -> dict[str, Any]:
    """A whole (non-streamed) chat completion."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if isinstance(reply, Text):
        message["content"] = reply.text
    else:
        message["tool_calls"] = [_chat_tool_call(*reply)]
    return {
        "id": _new_id("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "stop" if isinstance(reply, Text) else "tool_calls",
            }
        ],
        "usage": chat_usage(usage),
    }


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


class FakeOpenAI(ServedFake):
    """A fake Responses + Chat Completions API on 127.0.0.1 (thread-safe; one instance per test).

    ``api_key``: when set, requests must carry ``Authorization: Bearer <api_key>`` or get 401.
    ``missing_models``: model names answered with 404 ``model_not_found``.
    """

    def __init__(
        self,
        rules: list[Rule] | None = None,
        *,
        api_key: str | None = None,
        missing_models: tuple[str, ...] = (),
        usage: Usage | None = None,
        default_text: str = "OK.",
        side_text: str = "Fake session",
        models: tuple[str, ...] = ("gpt-fake",),
        log_path: Path | str | None = None,
        port: int = 0,
    ) -> None:
        self.rules = list(DEFAULT_RULES if rules is None else rules)
        self.api_key = api_key
        self.missing_models = missing_models
        self.usage = usage or Usage()
        self.default_text = default_text
        self.side_text = side_text
        self.models = models
        self._init_served(port, log_path, "fake-openai")

    # ---- lifecycle ------------------------------------------------------------------------

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler_for(self)

    # ---- queries for tests ----------------------------------------------------------------

    # ---- used by the handler --------------------------------------------------------------

    def choose(self, turn: Turn, model: str, key: str | None, side: bool) -> Reply:
        """The reply for a model request."""
        if self.api_key is not None and key != self.api_key:
            return HttpError(401)
        if model in self.missing_models:
            return HttpError(404)
        if turn.tool_result is not None:
            after = next((r for r in self.rules if r.after_tool and r.after_tool == turn.tool_name), None)
            return after.reply if after is not None else Text(TOOL_ECHO + tool_output(turn.tool_result))
        rule = next((r for r in self.rules if r.after_tool is None and r.marker in turn.last_user_text), None)
        if rule is not None and isinstance(rule.reply, HttpError):
            return rule.reply
        if side:
            return Text(self.side_text)
        return rule.reply if rule is not None else Text(self.default_text)


def _handler_for(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        pass

    Handler.fake = fake
    return Handler


def _mask(key: str | None) -> str | None:
    if key is None:
        return None
    return "*" * max(len(key) - 4, 0) + key[-4:]


class _Handler(JsonHandler):
    fake: FakeOpenAI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        pass  # requests go to FakeOpenAI.requests, not stderr

    def _key(self) -> str | None:
        auth = self.headers.get("Authorization") or ""
        return auth[7:] if auth.lower().startswith("bearer ") and auth[7:] else None

    def do_GET(self) -> None:  # noqa: N802 (stdlib naming)
        path = urlsplit(self.path).path.rstrip("/")
        if path.endswith("/models"):
            self._record("models", "other", {}, None)
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.fake.models]
            self._json(200, {"object": "list", "data": data})
            return
        self._record("other", "other", {}, None)
        self._json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})

    def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
        path = urlsplit(self.path).path.rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        try:
            if path.endswith("/responses"):
                self._model_request("responses", body, responses_turn(body))
            elif path.endswith("/chat/completions"):
                self._model_request("chat", body, chat_turn(body))
            else:
                self._record("other", "other", body, None)
                self._json(404, {"error": {"message": f"no route {path}", "type": "invalid_request_error"}})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the CLI gave up on the request

    def _model_request(self, api: str, body: dict[str, Any], turn: Turn) -> None:
        model = str(body.get("model", ""))
        side = not turn.tools
        reply = self.fake.choose(turn, model, self._key(), side)
        self._record(api, "side" if side else "main", body, reply, turn)
        if isinstance(reply, HttpError):
            self._json(reply.status, *reply.payload(model))
            return
        if isinstance(reply, Text) and reply.delay:
            time.sleep(reply.delay)
        content: Text | tuple[str, dict[str, Any]] | McpCall
        if isinstance(reply, McpCall) and api != "responses":
            content = (f"{reply.server}_{reply.tool}", reply.args)
        elif isinstance(reply, ShellCall):
            try:
                content = shell_call(turn.tools, reply.command)
            except LookupError as exc:
                self._json(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
                return
        else:
            content = reply
        usage = self.fake.usage
        if api == "responses":
            self._sse(responses_stream(content, model, usage))
        elif body.get("stream"):
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            self._sse(((None, c) for c in chat_stream(content, model, usage, include)), done=True)
        else:
            self._json(200, chat_completion(content, model, usage))

    # ---- plumbing -------------------------------------------------------------------------

    def _record(
        self, api: str, kind: str, body: dict[str, Any], reply: Reply | None, turn: Turn | None = None
    ) -> None:
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() != "authorization"}
        self.fake.record(
            {
                "api": api,
                "kind": kind,
                "method": self.command,
                "path": self.path,
                "headers": headers,
                "auth": _mask(self._key()),
                "body": body,
                "user_texts": turn.user_texts if turn else [],
                "last_user_text": turn.last_user_text if turn else "",
                "tool_result": turn.tool_result if turn else None,
                "reply": _describe(reply),
                "timestamp": time.time(),
            }
        )

    def _sse(self, events: Iterator[tuple[str | None, dict[str, Any]]], done: bool = False) -> None:
        # No Content-Length: the body ends when the connection closes.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for event, data in events:
            head = f"event: {event}\n" if event else ""
            self.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
        if done:
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        self.close_connection = True


def _describe(reply: Reply | None) -> dict[str, Any] | None:
    if isinstance(reply, Text):
        return {"type": "text", "text": reply.text}
    if isinstance(reply, ShellCall):
        return {"type": "shell_call", "command": reply.command}
    if isinstance(reply, McpCall):
        return {"type": "mcp_call", "namespace": reply.namespace, "tool": reply.tool, "args": reply.args}
    if isinstance(reply, HttpError):
        return {"type": "http_error", "status": reply.status}
    return None


def main(argv: list[str] | None = None) -> None:
    """Serve the default rules until Ctrl+C."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", type=Path, default=None, help="append each request as a JSON line here")
    parser.add_argument("--api-key", default=None, help="require this bearer key (else 401)")
    args = parser.parse_args(argv)
    fake = FakeOpenAI(api_key=args.api_key, log_path=args.log, port=args.port)
    print(f"fake OpenAI API listening on {fake.start()}/v1", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
