"""`waaah agent --metrics-port`: /healthz, /readyz and /metrics, served off the relay's path.

The HTTP server runs in its own threads. The loop's thread only folds each recorded event into
``core/vitals.py`` and, when that changed something, replaces ``MetricsServer.snapshot`` (one
reference assignment: a scrape never takes a lock the loop needs, and the loop never waits on a
scrape). /healthz asks the loop itself: it posts a ping to the loop's mailbox (one wake-up) and
waits, in the server's thread, for the answer. /metrics is rendered by the official Prometheus
client library from the newest snapshot.

A client has :data:`HEAD_SECONDS` from its connection to send its request line and headers, in
all (a timeout per read would let one that trickles a byte every few seconds hold its slot
forever). When all :data:`MAX_CLIENTS` slots are taken, a new client takes the slot of the
oldest one still sending its request, so clients that never finish theirs cannot keep a probe
out; one that has sent its request is served, never cut.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from waaah_agent.core.supervise.vitals import Snapshot, Vitals, families, liveness, readiness
from waaah_agent.errors import UsageError
from waaah_agent.runtime.store import SessionDir
from waaah_agent.runtime.supervise.background import PING, Mailbox

log = logging.getLogger(__name__)

PING_WAIT = 3.0  # seconds /healthz waits for the loop's answer
FRESH = 1.0  # an answer this recent is not asked again
MAX_CLIENTS = 8  # requests served at once; more take the slot of the oldest still sending its request
HEAD_SECONDS = 5.0  # from the connection to the end of the request's headers, in all
CLIENT_TIMEOUT = 5.0  # a client that takes an answer's write for this long is dropped


class _Families(Collector):
    """The snapshot's metrics, as the client library's families."""

    def __init__(self, server: MetricsServer) -> None:
        self.server = server

    def collect(self) -> Iterator[Metric]:
        for f in families(self.server.snapshot, time.time()):
            kind = CounterMetricFamily if f.kind == "counter" else GaugeMetricFamily
            metric = kind(f.name, f.help, labels=list(f.labels))
            for labels, value in f.samples:
                metric.add_metric(list(labels), value)
            yield metric


class _Http(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: MetricsServer

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self._clients: set[Any] = set()  # the connections holding a slot
        self._heads: dict[Any, float] = {}  # of them, those still sending their request: when they came
        self._slots_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        came = time.monotonic()
        with self._slots_lock:
            if len(self._clients) >= MAX_CLIENTS:
                if not self._heads:  # every slot is serving an answer: a flood costs no threads
                    self.shutdown_request(request)
                    return
                oldest = min(self._heads, key=self._heads.__getitem__)
                self._let_go(oldest)
                with contextlib.suppress(OSError):  # its read ends now; its thread closes it
                    oldest.shutdown(socket.SHUT_RDWR)
            self._clients.add(request)
            self._heads[request] = came
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._slots_lock:
                self._let_go(request)

    def _let_go(self, request: Any) -> None:
        self._clients.discard(request)
        self._heads.pop(request, None)

    def head_deadline(self, request: Any) -> float:
        """The monotonic time by which ``request``'s client must have sent its request."""
        with self._slots_lock:
            return self._heads.get(request, time.monotonic()) + HEAD_SECONDS

    def head_read(self, request: Any) -> bool:
        """Its request is in: the client is served, no longer one whose slot can be taken.
        False: its slot was taken by a newer client first (its connection is shut)."""
        with self._slots_lock:
            self._heads.pop(request, None)
            return request in self._clients

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("metrics: a request from %s failed", client_address, exc_info=True)


class _UntilDeadline(io.RawIOBase):
    """A socket's reads, each given only what is left of the time to a deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline = sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request took too long to arrive")
        self.sock.settimeout(left)
        return self.sock.recv_into(buffer)


class _Http6(_Http):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Http
    timeout = CLIENT_TIMEOUT
    protocol_version = "HTTP/1.0"

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the socket's own reader: read through the deadline's instead
        self.rfile = io.BufferedReader(
            _UntilDeadline(self.connection, self.server.head_deadline(self.request))
        )

    def parse_request(self) -> bool:
        parsed = super().parse_request()  # the request line and headers are read by now
        if not self.server.head_read(self.request):
            self.close_connection = True
            return False
        self.connection.settimeout(CLIENT_TIMEOUT)
        return parsed

    def do_GET(self) -> None:  # noqa: N802 (the http.server's name)
        owner = self.server.owner
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, generate_latest(owner.registry), CONTENT_TYPE_LATEST)
        elif path == "/readyz":
            ok, why = readiness(owner.snapshot, time.time())
            self._json(200 if ok else 503, why)
        elif path == "/healthz":
            ok, why = liveness(owner.snapshot, time.time(), owner.answered_ago())
            self._json(200 if ok else 503, why)
        else:
            self._json(404, {"error": "not found", "paths": ["/healthz", "/readyz", "/metrics"]})

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

    def _json(self, code: int, body: dict[str, Any]) -> None:
        self._send(code, (json.dumps(body, separators=(",", ":")) + "\n").encode(), "application/json")

    def _send(self, code: int, body: bytes, kind: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # the terminal is the agent's screen; a scrape is not an event


class MetricsServer:
    """Serves the newest snapshot; :meth:`close` stops it."""

    def __init__(self, host: str, port: int, snapshot: Snapshot, ping: Callable[[Callable[[], None]], None]):
        self.snapshot = snapshot  # replaced whole by the loop's thread (publish)
        self._ping = ping
        self._answered: float | None = None  # monotonic time of the loop's last answer
        self._pending: threading.Event | None = None
        self._lock = threading.Lock()  # the server's threads only
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Families(self))
        ProcessCollector(registry=self.registry)
        try:
            self.http = (_Http6 if ":" in host else _Http)((host, port), _Handler)
        except (OSError, OverflowError) as err:
            why = getattr(err, "strerror", None) or str(err)
            raise UsageError(
                f"--metrics-port {port}: cannot listen on {host}:{port} ({why}); pick another port "
                "or --metrics-host"
            ) from None
        self.http.owner = self
        self.port = self.http.server_address[1]
        self._thread = threading.Thread(target=self.http.serve_forever, name="waaah-metrics", daemon=True)
        self._thread.start()

    def publish(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def answered_ago(self) -> float | None:
        """Seconds since the loop answered a ping, asking it again (and waiting up to
        ``PING_WAIT``) unless the last answer is fresh."""
        if self._answered is not None and time.monotonic() - self._answered < FRESH:
            return time.monotonic() - self._answered
        with self._lock:
            pending = self._pending
            if pending is None or pending.is_set():
                pending = self._pending = threading.Event()
                self._ping(lambda: self._answer(pending))
        pending.wait(PING_WAIT)
        return None if self._answered is None else time.monotonic() - self._answered

    def _answer(self, pending: threading.Event) -> None:
        """Called on the loop's thread: no lock, nothing that can block."""
        self._answered = time.monotonic()
        pending.set()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self._thread.join(5)


def for_session(
    host: str, port: int | None, start: Snapshot, mailbox: Mailbox, session: SessionDir
) -> MetricsServer | None:
    """With --metrics-port: the server, fed every event the session records; else None."""
    if port is None:
        return None
    server, observe = serve(host, port, start, lambda answer: mailbox.post(PING, answer=answer))
    session.observers.append(observe)
    return server


def serve(
    host: str, port: int, start: Snapshot, ping: Callable[[Callable[[], None]], None]
) -> tuple[MetricsServer, Callable[[dict[str, Any]], None]]:
    """Start the server; the observer to add to the session's (it folds each event)."""
    server = MetricsServer(host, port, start, ping)
    vitals = Vitals(start)

    def observe(event: dict[str, Any]) -> None:
        if vitals.see(event, time.time()):
            server.publish(vitals.snapshot)

    return server, observe
