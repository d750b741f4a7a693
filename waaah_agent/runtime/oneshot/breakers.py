"""The circuit breakers of `waaah run`, shared by every run of the user: one file per CLI,
``breakers/<cli>.json`` in the user's state folder (``$XDG_STATE_HOME/waaah-agent``), changed
read-modify-write under that CLI's lock file and replaced atomically.

The file is state we own, so whatever is found there is survived: damaged JSON, a wrong shape, a
file over the cap, a symlink, a FIFO or a folder in its place is moved aside (one warning) and
the breaker counts as closed; a lock file that is a symlink is refused (an ``OSError``, which
`waaah run` reports as a warning next to its answer).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from waaah_agent.core.nesting import loads_json
from waaah_agent.core.oneshot.breaker import Breaker, BreakerConfig, BreakerState, shaped
from waaah_agent.core.redact import Redactor
from waaah_agent.runtime.private import untrusted
from waaah_agent.runtime.store import atomic_write
from waaah_agent.safe_read import UnsafeFile, read_capped

#: A breaker's file is a few hundred bytes; anything much bigger is not ours.
BREAKER_CAP = 64 * 1024
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,40}$")


def state_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_state_dir("waaah-agent"))


class BreakerStore:
    """``breakers/<cli>.json`` under the user state dir, one lock file per CLI."""

    def __init__(
        self, folder: Path | None = None, config: BreakerConfig | None = None, redact: Redactor | None = None
    ) -> None:
        self.folder = (folder or state_dir()) / "breakers"
        self.redact = redact or Redactor()  # its last errors are shown by `waaah doctor`
        self.config = config or BreakerConfig()
        self.path = self.folder  # where they live, for messages
        self.warnings: list[str] = []

    def file(self, agent: str) -> Path:
        if not _NAME.match(agent):
            raise ValueError(f"not a CLI name: {agent!r}")
        return self.folder / f"{agent}.json"

    def get(self, agent: str) -> Breaker:
        """The breaker as saved (closed when there is none, or what is there is not one)."""
        path = self.file(agent)
        if why := untrusted(path) or untrusted(self.folder):  # someone else's: not used
            self.warnings.append(why)
            return Breaker(config=self.config)
        try:
            data = loads_json(read_capped(path, BREAKER_CAP, follow=False))
            if not shaped(data):
                raise ValueError("not a breaker")
        except FileNotFoundError:
            return Breaker(config=self.config)
        except (UnsafeFile, ValueError) as bad:  # not ours: a folder that cannot be read is raised
            self._move_aside(path, bad)
            return Breaker(config=self.config)
        return Breaker.from_json(data, self.config)

    def admit(self, agent: str, now: float, lease: float) -> tuple[bool, Breaker]:
        """May this run use ``agent``? Half-open, exactly one run (the first to ask) gets the
        probe for ``lease`` seconds; the others are told no until its result is recorded."""
        breaker = self.get(agent)
        if breaker.state(now) is not BreakerState.HALF_OPEN:
            return breaker.allows(now), breaker
        with self._locked(agent):
            breaker = self.get(agent)
            allowed = breaker.admit(now, lease)
            if allowed:
                self._save(agent, breaker)
        return allowed, breaker

    def update(self, agent: str, ok: bool, now: float, failure: Any = None) -> Breaker:
        with self._locked(agent):
            breaker = self.get(agent)
            breaker.record(ok, now, failure)
            self._save(agent, breaker)
        return breaker

    @contextlib.contextmanager
    def _locked(self, agent: str) -> Iterator[None]:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        lock = self.folder / f"{agent}.lock"
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(lock, flags, 0o600)  # a symlink in its place: ELOOP, never followed
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _save(self, agent: str, breaker: Breaker) -> None:
        text = json.dumps(breaker.to_json(), indent=2)
        atomic_write(self.file(agent), self.redact(text) + "\n", 0o600)

    def _move_aside(self, path: Path, why: Exception) -> None:
        aside = path.with_name(f"{path.stem}.corrupt-{int(time.time())}.json")
        with contextlib.suppress(OSError):
            path.rename(aside)  # a symlink is renamed itself, its target left alone
        self.warnings.append(
            f"{path} was not a circuit breaker ({why}); moved to {aside.name}, counted as closed"
        )


def breaker_line(agent: str, breaker: Breaker, now: float) -> str:
    state = breaker.state(now)
    if state is BreakerState.CLOSED:
        return (
            f"{agent}: closed ({breaker.why()})"
            if breaker.failures or breaker.timeouts
            else f"{agent}: closed"
        )
    until = datetime.fromtimestamp(breaker.retry_at() or now).astimezone().strftime("%H:%M:%S")
    last = breaker.last_error[:120]
    if state is BreakerState.OPEN:
        return f"{agent}: OPEN after {breaker.why()}, skipped until {until} (last: {last})"
    if breaker.probing(now):
        return f"{agent}: half-open, another run is probing it (last: {last})"
    return f"{agent}: half-open (the next run tries it once; last: {last})"


def state_json(breaker: Breaker, now: float) -> dict[str, Any]:
    """The breaker for `waaah doctor --json` and `waaah route --json`."""
    retry = breaker.retry_at()
    return {
        "state": str(breaker.state(now)),
        "failures": breaker.failures,
        "timeouts": breaker.timeouts,
        "probing": breaker.probing(now),
        "retry_at": datetime.fromtimestamp(retry).astimezone().isoformat(timespec="seconds")
        if retry
        else None,
        "last_error": breaker.last_error,
    }
