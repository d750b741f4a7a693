"""A small HTTP client of the WAAAH server: health, the agents' status, the task list."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from waaah_agent.core.nesting import loads_json


@dataclass(frozen=True)
class Health:
    ok: bool
    detail: str  # "ok", "unreachable: ...", "bad key", "error: ..."


def _get(url: str, api_key: str | None, timeout: float) -> tuple[int, Any]:
    request = urllib.request.Request(url, headers={"X-API-Key": api_key} if api_key else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
            status = response.status
    except urllib.error.HTTPError as err:
        body, status = err.read(), err.code
    try:
        return status, loads_json(body or b"null")
    except ValueError:
        return status, None


def check_server(url: str, api_key: str | None, timeout: float = 3.0) -> Health:
    """GET /health (no key needed), then an authenticated call to see whether the key works."""
    base = url.rstrip("/")
    try:
        status, body = _get(f"{base}/health", None, timeout)
    except (OSError, urllib.error.URLError) as err:
        reason = getattr(err, "reason", err)
        return Health(False, f"unreachable: {reason}")
    if status != 200:
        return Health(False, f"error: /health answered HTTP {status}")
    try:
        status, _ = _get(f"{base}/admin/agents/status", api_key, timeout)
    except (OSError, urllib.error.URLError) as err:
        return Health(False, f"unreachable: {getattr(err, 'reason', err)}")
    if status == 401:
        return Health(False, "bad key")
    return Health(True, "ok")


def agent_status(url: str, api_key: str | None, agent_id: str, timeout: float = 3.0) -> str | None:
    """WAITING / PROCESSING / OFFLINE for ``agent_id``, or None when unknown or unreachable."""
    try:
        status, body = _get(f"{url.rstrip('/')}/admin/agents/status", api_key, timeout)
    except (OSError, urllib.error.URLError):
        return None
    if status != 200 or not isinstance(body, list):
        return None
    for agent in body:
        if isinstance(agent, dict) and agent.get("id") == agent_id:
            return str(agent.get("status")) if agent.get("status") else None
    return None


def tasks(url: str, api_key: str | None, status: str, timeout: float = 10.0) -> tuple[int, Any]:
    """``GET /admin/tasks?status=<status>``: (HTTP status, the decoded answer or None); a server
    that cannot be reached raises OSError (urllib's URLError is one)."""
    query = urllib.parse.urlencode({"status": status})
    return _get(f"{url.rstrip('/')}/admin/tasks?{query}", api_key, timeout)
