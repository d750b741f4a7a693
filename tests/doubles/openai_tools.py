"""The fake OpenAI API (tests/doubles/fake_openai.py) calling any declared tool, such as an MCP
server's (opencode names them ``<server>_<tool>``: ``waaah_wait_for_prompt``), and answering a
tool's result by the tool's name: what an agent's loop looks like to its model.

    rules = [
        ToolRule(ToolCall("register_agent", {...}), marker="stay in the loop"),
        ToolRule(ToolCall("wait_for_prompt", {"timeout": 2}), after="register_agent"),
        ToolRule(Text("LOOP-TURN-DONE"), after="wait_for_prompt"),
    ]
    with ToolFakeOpenAI(rules, api_key=FAKE_KEY) as fake: ...

A rule with ``marker`` matches the last user text (when the request does not end in a tool
result); one with ``after`` matches a request ending in that tool's result. No rule: the base
fake's answer (its default text, or the echo of a tool result).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.doubles.fake_openai import FakeOpenAI, Reply, Text, Turn, _Handler, _tool_spec


@dataclass(frozen=True)
class ToolCall:
    """Call the declared tool whose name is ``tool`` or ends in ``_<tool>`` with ``args``."""

    tool: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Slow:
    """Answer with ``text`` after ``delay`` seconds (a model that takes its time)."""

    text: str
    delay: float


@dataclass(frozen=True)
class ToolRule:
    reply: ToolCall | Text | Slow
    marker: str | None = None
    after: str | None = None


@dataclass(frozen=True)
class ToolTurn(Turn):
    """A request, with the name of the tool whose result ends it ("" when none does)."""

    tool_name: str = ""


def _last_tool_name(body: dict[str, Any]) -> str:
    """The tool the trailing ``role: tool`` message answers (Chat Completions)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if not messages or messages[-1].get("role") != "tool":
        return ""
    call_id = messages[-1].get("tool_call_id")
    for message in reversed(messages):
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and call.get("id") == call_id:
                return str((call.get("function") or {}).get("name", ""))
    return ""


def _declared(tools: list[dict[str, Any]], tool: str) -> str:
    names = [_tool_spec(t)[0] for t in tools]
    found = next((n for n in names if n == tool or n.endswith(f"_{tool}")), None)
    if found is None:
        raise LookupError(f"no tool {tool!r} among {sorted(names)}")
    return found


class ToolFakeOpenAI(FakeOpenAI):
    """:class:`FakeOpenAI` with :class:`ToolRule` scripts (tool calls by name, answers by tool)."""

    def __init__(self, tool_rules: list[ToolRule], **kwargs: Any) -> None:
        super().__init__([], **kwargs)
        self.tool_rules = list(tool_rules)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        class Handler(_ToolHandler):
            pass

        Handler.fake = self
        return Handler

    def choose(self, turn: Turn, model: str, key: str | None, side: bool) -> Reply:
        tool_name = turn.tool_name if isinstance(turn, ToolTurn) else ""
        if side or (self.api_key is not None and key != self.api_key):
            return super().choose(turn, model, key, side)
        for rule in self.tool_rules:
            by_tool = rule.after is not None and tool_name.endswith(rule.after)
            by_text = (
                rule.marker is not None and turn.tool_result is None and rule.marker in turn.last_user_text
            )
            if by_tool or by_text:
                return self._reply(rule.reply, turn)  # type: ignore[return-value]
        return super().choose(turn, model, key, side)

    def _reply(self, reply: ToolCall | Text | Slow, turn: Turn) -> Text | tuple[str, dict[str, Any]]:
        if isinstance(reply, ToolCall):
            return _declared(turn.tools, reply.tool), reply.args
        if isinstance(reply, Slow):
            time.sleep(reply.delay)
            return Text(reply.text)
        return reply


class _ToolHandler(_Handler):
    def _model_request(self, api: str, body: dict[str, Any], turn: Turn) -> None:
        named = ToolTurn(turn.user_texts, turn.tool_result, turn.tools, tool_name=_last_tool_name(body))
        try:
            super()._model_request(api, body, named)
        except LookupError as exc:
            self._json(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
