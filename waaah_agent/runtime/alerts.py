"""Notifications through apprise (`--notify URL`, ``WAAAH_NOTIFY``), never on the relay's path.

The session's events go to :meth:`Notifier.observe` (an observer of ``SessionDir.event``); an
alert core/alerts.py picks and its rate limit admits is queued to a thread that sends it to
every URL (desktop, ntfy, Slack, Telegram, email, webhooks: apprise's URL schemes). A URL that
fails is logged once per alert, never raised; at the end the queue gets a few seconds to drain.
The URLs often hold tokens: they are added to the session's redactor and never saved.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from waaah_agent.core.alerts import Alert, RateLimit, Where, alert_for
from waaah_agent.errors import UsageError

log = logging.getLogger(__name__)
#: Seconds the queue gets to drain when the session ends.
DRAIN_SECONDS = 10.0


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
        self, urls: Sequence[str], where: Where, clock: Callable[[], float] = time.monotonic
    ) -> None:
        import apprise

        self.where = where
        self.clock = clock
        self.limit = RateLimit()
        self.sent: list[Alert] = []
        self._apprise = apprise.Apprise()
        for url in urls:
            self._apprise.add(url)
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
                ok = self._apprise.notify(title=alert.title, body=alert.body, notify_type=alert.level)
            except Exception as err:  # a notification service must never take the supervisor down
                log.warning("notification %r failed: %s", alert.title, err)
                continue
            if ok:
                self.sent.append(alert)
            else:
                log.warning("notification %r was not delivered to every --notify URL", alert.title)

    def close(self, seconds: float = DRAIN_SECONDS) -> None:
        self._queue.put(None)
        self._thread.join(seconds)
