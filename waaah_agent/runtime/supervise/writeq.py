"""A queue of bytes for a non-blocking fd: partial writes kept, EAGAIN waits for the next try."""

from __future__ import annotations

import os
from collections import deque


class WriteQueue:
    def __init__(self) -> None:
        self._chunks: deque[bytes | memoryview] = deque()
        self.pending = 0  # bytes queued and not yet written

    def __bool__(self) -> bool:
        return bool(self._chunks)

    def add(self, data: bytes) -> None:
        if data:
            self._chunks.append(data)
            self.pending += len(data)

    def clear(self) -> None:
        self._chunks.clear()
        self.pending = 0

    def write_to(self, fd: int) -> None:
        """Write what ``fd`` takes now; keep the rest. Other OSErrors go to the caller."""
        while self._chunks:
            head = self._chunks[0]
            try:
                sent = os.write(fd, head)
            except BlockingIOError:
                return
            self.pending -= sent
            if sent < len(head):
                self._chunks[0] = memoryview(head)[sent:]  # the rest, not a copy of it
                return
            self._chunks.popleft()
