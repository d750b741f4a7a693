"""The circuit breakers of `waaah run`, shared by every run of the user: ``breakers.json`` in the
user's state folder (``$XDG_STATE_HOME/waaah-agent``), read-modify-write under a lock."""

from __future__ import annotations

import contextlib
import fcntl
import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from waaah_agent.core.redact import Redactor
from waaah_agent.core.resilience import Breaker, BreakerConfig, BreakerState
from waaah_agent.runtime.safe_read import STATE_CAP, read_capped
from waaah_agent.runtime.store import atomic_write


def state_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_state_dir("waaah-agent"))


class BreakerStore:
    """``breakers.json`` under the user state dir; read-modify-write under a lock file, replaced
    atomically. A corrupt file is moved aside and counts as all-closed."""

    def __init__(
        self, folder: Path | None = None, config: BreakerConfig | None = None, redact: Redactor | None = None
    ) -> None:
        self.folder = folder or state_dir()
        self.redact = redact or Redactor()  # its last errors are shown by `waaah doctor`
        self.path = self.folder / "breakers.json"
        self.config = config or BreakerConfig()

    def load(self) -> dict[str, Breaker]:
        try:
            data = json.loads(read_capped(self.path, STATE_CAP, follow=False))
            if not isinstance(data, dict) or not all(_breaker_shape(e) for e in data.values()):
                raise ValueError("not an object of breakers")
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                self.path.replace(self.path.with_name(f"breakers.corrupt-{int(time.time())}.json"))
            return {}
        return {name: Breaker.from_json(entry, self.config) for name, entry in data.items()}

    def get(self, agent: str) -> Breaker:
        return self.load().get(agent) or Breaker(config=self.config)

    def update(self, agent: str, ok: bool, now: float, failure: Any = None) -> Breaker:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with (self.folder / "breakers.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            breakers = self.load()
            breaker = breakers.get(agent) or Breaker(config=self.config)
            breaker.record(ok, now, failure)
            breakers[agent] = breaker
            text = json.dumps({k: b.to_json() for k, b in breakers.items()}, indent=2)
            atomic_write(self.path, self.redact(text) + "\n", 0o600)
        return breaker


def _breaker_shape(entry: Any) -> bool:
    """A breakers.json entry as ``Breaker.to_json`` writes it."""
    if not isinstance(entry, dict):
        return False
    failures, opened, last = entry.get("failures", 0), entry.get("opened_at"), entry.get("last_error", "")
    number = (int, float)
    return (
        isinstance(failures, int)
        and not isinstance(failures, bool)
        and failures >= 0
        and (opened is None or (isinstance(opened, number) and not isinstance(opened, bool)))
        and isinstance(last, str)
    )


def breaker_line(agent: str, breaker: Breaker, now: float) -> str:
    state = breaker.state(now)
    if state is BreakerState.CLOSED:
        return (
            f"{agent}: closed ({breaker.failures} failure(s) in a row)"
            if breaker.failures
            else f"{agent}: closed"
        )
    until = datetime.fromtimestamp(breaker.retry_at() or now).astimezone().strftime("%H:%M:%S")
    if state is BreakerState.OPEN:
        return f"{agent}: OPEN after {breaker.failures} failures in a row, skipped until {until} (last: {breaker.last_error[:120]})"
    return f"{agent}: half-open (the next run tries it once; last: {breaker.last_error[:120]})"
