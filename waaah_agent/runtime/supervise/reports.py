"""What the loop's background threads report through the mailbox (runtime/background.py): the
WAAAH server's health and the agent's status as machine events, records of our own output and
of the session's link, and the inbox's records read in slices between looks at the PTY."""

from __future__ import annotations

import time
from collections.abc import Callable

from waaah_agent.core.supervise import events as ev
from waaah_agent.runtime.mcp.link import LINK, record_link
from waaah_agent.runtime.store import SessionDir
from waaah_agent.runtime.supervise.background import (
    AGENT_STATUS,
    INBOX,
    OWN,
    PING,
    SERVER,
    Mailbox,
    record_own,
)
from waaah_agent.runtime.supervise.inbox import Inbox
from waaah_agent.runtime.supervise.logs import SessionLogs

INBOX_SLICE = 0.002  # seconds of inbox records handled between two looks at the PTY


class Reports:
    """Reads the mailbox on the loop's thread and tells the machine (``tell``) what it says."""

    def __init__(
        self,
        mailbox: Mailbox,
        inbox: Inbox | None,
        logs: SessionLogs,
        session: SessionDir,
        tell: Callable[[ev.Event], None],
        over: Callable[[], bool],
    ) -> None:
        self.mailbox, self.inbox, self.logs, self.session = mailbox, inbox, logs, session
        self.tell, self.over = tell, over

    def on_mail(self, mask: int) -> None:
        inbox = False  # one wake-up per write: read once for them all
        for message in self.mailbox.drain():
            data = message.data
            if message.kind == INBOX:
                inbox = True
            elif message.kind == SERVER:
                self.tell(ev.ServerChanged(bool(data["ok"]), str(data["detail"]), str(data["url"])))
            elif message.kind == AGENT_STATUS:
                self.tell(ev.AgentStatusChanged(data.get("status")))
            elif message.kind == OWN:
                record_own(message, self.logs, self.session)
            elif message.kind == LINK:
                record_link(message, self.logs, self.session)
            elif message.kind == PING:  # /healthz: the loop is alive (runtime/metrics.py)
                data["answer"]()
        if inbox:
            self.read_inbox()

    def read_inbox(self) -> None:
        """The inbox's records for INBOX_SLICE at most: a burst of a thousand `waaah send` is
        read over many wake-ups, the agent's output relayed in between."""
        if self.inbox is None:
            return
        deadline = time.monotonic() + INBOX_SLICE
        while not self.over():
            for record in self.inbox.read_new(1):
                self.tell(record)
            if not self.inbox.more:
                return
            if time.monotonic() >= deadline:
                self.mailbox.post(INBOX)  # the rest after the next look at the PTY
                return
