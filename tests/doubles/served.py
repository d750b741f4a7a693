"""The part every fake model API shares: serving on 127.0.0.1 in a thread, recording requests."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

_Self = TypeVar("_Self", bound="ServedFake")


class ServedFake:
    """Start/stop/``with`` on a random port of 127.0.0.1; ``requests`` (also appended to
    ``log_path`` as JSON lines) and ``main_requests()`` for assertions. Subclasses say which
    handler serves them (``handler()``) and set ``requests``, ``log_path``, ``_port`` and ``_lock``
    through ``_init_served``."""

    requests: list[dict[str, Any]]
    log_path: Path | None

    def _init_served(self, port: int, log_path: Path | str | None, name: str) -> None:
        self.requests = []
        self.log_path = Path(log_path) if log_path else None
        self._port = port
        self._name = name
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def start(self) -> str:
        """Start serving in a background thread; returns the base URL (``http://127.0.0.1:<port>``)."""
        if self._server is None:
            self._server = ThreadingHTTPServer(("127.0.0.1", self._port), self.handler())
            self._server.daemon_threads = True
            threading.Thread(target=self._server.serve_forever, name=self._name, daemon=True).start()
        return self.url

    def stop(self) -> None:
        """Stop serving; replies still waiting on a delay are dropped."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self: _Self) -> _Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL to give the CLI."""
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def main_requests(self) -> list[dict[str, Any]]:
        """Recorded agent-turn requests (not side requests, not token counts)."""
        with self._lock:
            return [r for r in self.requests if r["kind"] == "main"]

    def record(self, entry: dict[str, Any]) -> None:
        """Keep a request in memory and append it to the log file."""
        with self._lock:
            self.requests.append(entry)
            if self.log_path is not None:
                with self.log_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry) + "\n")


class JsonHandler(BaseHTTPRequestHandler):
    """Request handler with the JSON reply both fake model APIs send."""

    def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
