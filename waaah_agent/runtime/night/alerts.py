"""Notifications through apprise (`--notify URL`, ``WAAAH_NOTIFY``), never on the relay's path.

The session's events go to :meth:`Notifier.observe` (an observer of ``SessionDir.event``); an
alert core/alerts.py picks and its rate limit admits is queued to a thread that sends it to
every URL (desktop, ntfy, Slack, Telegram, email, webhooks: apprise's URL schemes). A URL that
fails is logged once per alert, never raised.

Each alert is sent by a process of its own (``python -m waaah_agent.runtime.night.alerts``) that is
ended at its deadline (:data:`ALERT_SECONDS` in all, however slowly an endpoint answers: a
timeout per read would let an endpoint that trickles a byte a second hold it forever). At the
end the queue gets :data:`DRAIN_SECONDS` in all, then what is still being sent is ended, so the
supervisor's exit never waits on an endpoint. The URLs often hold tokens: they reach that
process on its stdin (never its arguments or environment), are added to the session's redactor
and never saved.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from waaah_agent.core.night.alerts import Alert, RateLimit, Where, alert_for
from waaah_agent.errors import UsageError

log = logging.getLogger(__name__)
#: Seconds the queue gets to drain when the session ends.
DRAIN_SECONDS = 10.0
#: Seconds one alert may take to reach every URL, from the start of its sending to the end.
ALERT_SECONDS = 10.0
#: What the sending process gets of the environment: what apprise needs to reach a network
#: (proxies, CA bundles) or a desktop (its session bus), nothing else.
_SENDER_ENV = (
    "PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy", "DISPLAY", "WAYLAND_DISPLAY",
    "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR",
)  # fmt: skip
#: The largest alert the sending process reads from its stdin.
_PAYLOAD_CAP = 1024 * 1024


def _known_schemes() -> set[str]:
    import apprise

    known: set[str] = set()
    for plugin in apprise.Apprise().details().get("schemas", []):
        for key in ("protocols", "secure_protocols"):
            given = plugin.get(key) or ()
            known.update([given] if isinstance(given, str) else given)
    return {scheme.lower() for scheme in known}


def check_urls(urls: Sequence[str]) -> list[str]:
    """The URLs apprise can use; one line naming the first it cannot (its scheme) otherwise."""
    if not urls:  # nothing to check: apprise (0.1 s to import) is not loaded at start-up
        return []
    import apprise

    quiet = logging.getLogger("apprise")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # its own words would be a second line
    try:
        unknown = [url for url in urls if not apprise.Apprise().add(url)]
    finally:
        quiet.setLevel(level)
    if unknown:
        url = unknown[0]
        if "://" not in url:  # the value itself may be a token: not shown
            raise UsageError(
                "--notify: a value is not a URL (no scheme://); give one such as ntfys://ntfy.sh/my-topic"
            )
        scheme = url.split("://", 1)[0]
        if scheme.lower() in _known_schemes():
            raise UsageError(
                f"--notify: apprise cannot use that {scheme}:// URL (a part is missing or malformed); "
                "see https://github.com/caronc/apprise/wiki"
            )
        raise UsageError(
            f"--notify: apprise does not know the URL scheme {scheme!r}; see https://github.com/caronc/apprise/wiki"
        )
    return list(urls)


class Notifier:
    def __init__(
        self,
        urls: Sequence[str],
        where: Where,
        clock: Callable[[], float] = time.monotonic,
        deadline: float = ALERT_SECONDS,
    ) -> None:
        self.where = where
        self.clock = clock
        self.limit = RateLimit()
        self.sent: list[Alert] = []
        self._urls = list(urls)
        self._deadline = deadline
        self._sending: subprocess.Popen[bytes] | None = None
        self._closed = threading.Event()
        self._queue: queue.Queue[Alert | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="waaah-notify", daemon=True)
        self._thread.start()

    def observe(self, event: dict[str, Any]) -> None:
        alert = alert_for(event, self.where)
        if alert is None:
            return
        admitted = self.limit.admit(alert, self.clock())
        if admitted is not None:
            self._queue.put(admitted)

    def _run(self) -> None:
        while (alert := self._queue.get()) is not None:
            try:
                outcome = self._send(alert)
            except Exception as err:  # a notification service must never take the supervisor down
                log.warning("notification %r failed: %s", alert.title, err)
                continue
            if outcome == "sent":
                self.sent.append(alert)
            elif outcome == "late":
                log.warning(
                    "notification %r was stopped: not delivered within %g s", alert.title, self._deadline
                )
            else:
                log.warning("notification %r was not delivered to every --notify URL", alert.title)

    def _send(self, alert: Alert) -> str:
        """Send one alert through a process of its own, ended at the deadline: sent, failed, late."""
        if self._closed.is_set():
            return "late"
        payload = {"urls": self._urls, "title": alert.title, "body": alert.body, "type": alert.level}
        proc = subprocess.Popen(
            [sys.executable, "-m", "waaah_agent.runtime.night.alerts"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # apprise's own words may quote a URL
            env={k: v for k, v in os.environ.items() if k in _SENDER_ENV or k.startswith("LC_")},
            cwd=Path(__file__)
            .resolve()
            .parents[3],  # this waaah, installed or not; never the workspace's files
            start_new_session=True,
        )
        self._sending = proc
        try:
            proc.communicate(json.dumps(payload).encode(), timeout=self._deadline)
        except subprocess.TimeoutExpired:
            _end(proc)
            return "late"
        finally:
            self._sending = None
        if proc.returncode != 0 and self._closed.is_set():  # ended by close(): its time was up
            return "late"
        return "sent" if proc.returncode == 0 else "failed"

    def close(self, seconds: float = DRAIN_SECONDS) -> None:
        """Let the queue drain for ``seconds`` at most, then end what is still being sent."""
        self._queue.put(None)
        self._thread.join(seconds)
        self._closed.set()
        sending = self._sending
        if sending is not None:
            _end(sending)
        self._thread.join(1.0)


def _end(proc: subprocess.Popen[bytes]) -> None:
    """End the sending process we started (by its pid) and collect it."""
    with contextlib.suppress(OSError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        proc.wait(timeout=5)


def _send_from_stdin() -> int:
    """The sending process: one alert (JSON on stdin) to every URL; 0 when all took it."""
    import signal

    import apprise

    signal.alarm(int(ALERT_SECONDS) + 2)  # never outlives its deadline, even if its parent is gone
    logging.getLogger("apprise").setLevel(logging.CRITICAL)
    try:
        payload = json.loads(sys.stdin.buffer.read(_PAYLOAD_CAP))
        urls, title, body, level = payload["urls"], payload["title"], payload["body"], payload["type"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return 2
    sender = apprise.Apprise()
    for url in urls:
        sender.add(str(url))
    ok = sender.notify(title=str(title), body=str(body), notify_type=str(level))
    sys.stdout.flush()
    os._exit(0 if ok else 1)  # nothing of apprise's to wait for at exit


if __name__ == "__main__":
    raise SystemExit(_send_from_stdin())
