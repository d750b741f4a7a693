"""Work that must not block the relay loop, run in a thread that only queues and wakes.

The thread never touches the loop's state: it puts a message on a queue and writes one
byte to a pipe the loop selects on, and the loop handles the message on its own thread.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from waaah_agent import settings
from waaah_agent.runtime.waaah import agent_status, check_server


@dataclass(frozen=True)
class Message:
    kind: str
    data: dict[str, Any]


class Mailbox:
    """A queue the loop drains when its wake-up fd becomes readable."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Message] = queue.SimpleQueue()
        self.read_fd, self._write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self._write_fd, False)

    def post(self, kind: str, **data: Any) -> None:
        self._queue.put(Message(kind, data))
        try:
            os.write(self._write_fd, b"\0")
        except (BlockingIOError, OSError):
            pass  # the pipe is full (the loop will drain it) or closed (we are shutting down)

    def drain(self) -> list[Message]:
        try:
            while os.read(self.read_fd, 4096):
                pass
        except (BlockingIOError, OSError):
            pass
        out = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                return out

    def close(self) -> None:
        for fd in (self.read_fd, self._write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


class ServerWatch(threading.Thread):
    """Re-checks the WAAAH server and this agent's status; posts only changes.

    Its own attributes never take a name ``threading.Thread`` uses: Python calls
    ``Thread._stop()`` on every thread in a forked child (the agent's, before exec), and an
    attribute named ``_stop`` made that fail in the child, on the agent's screen.
    """

    def __init__(
        self,
        mailbox: Mailbox,
        url: str,
        api_key: str | None,
        agent_id: str,
        every: float = settings.SERVER_CHECK_EVERY,
        check: Callable[..., Any] = check_server,
    ) -> None:
        super().__init__(name="waaah-server-watch", daemon=True)
        self._mailbox, self._url, self._key, self._agent_id = mailbox, url, api_key, agent_id
        self._every = every
        self._check = check
        self._halt = threading.Event()
        self.last_health: str | None = None
        self.last_status: str | None = None

    def run(self) -> None:
        while not self._halt.wait(self._every):
            health = self._check(self._url, self._key)
            if health.detail != self.last_health:
                self.last_health = health.detail
                self._mailbox.post("server", ok=health.ok, detail=health.detail, url=self._url)
            status = agent_status(self._url, self._key, self._agent_id) if health.ok else None
            if status != self.last_status:
                self.last_status = status
                self._mailbox.post("agent-status", status=status)

    def stop(self) -> None:
        self._halt.set()

