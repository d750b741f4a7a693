"""The circuit breakers of `waaah run` (their decisions: core/oneshot/breaker.py), shared by every
run of the user: one file per CLI,
``breakers/<cli>.json`` in the user's state folder (``$XDG_STATE_HOME/waaah-agent``), changed
read-modify-write under that CLI's lock file and replaced atomically.

The file is state we own, so whatever is found there is survived: damaged JSON, a wrong shape, a
file over the cap, a symlink, a FIFO or a folder in its place is moved aside (one warning) and
the breaker counts as closed; a lock file that is a symlink is refused (an ``OSError``, which
`waaah run` reports as a warning next to its answer).

:class:`RunBreakers` is them as one run uses them: may this CLI be tried (claiming the one
half-open probe), its result counted once per run, a probe freed when the run is interrupted, and
a usage limit noted in the quota state. None of it may cost the run its answer: a state folder that
cannot be written is one warning in the envelope.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from waaah_agent.core import failures as F
from waaah_agent.core.failures import Failure
from waaah_agent.core.nesting import loads_json
from waaah_agent.core.oneshot.breaker import Breaker, BreakerConfig, BreakerState, from_the_future, shaped
from waaah_agent.core.printable import one_line
from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.errors import storage_error
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
            if why := from_the_future(data, time.time()):
                raise ValueError(why)
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
        # A name of its own (the time and a random part): a second damaged file, in the same
        # second or by another run, never replaces the first one moved aside.
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = path.with_name(f"{path.stem}.corrupt-{stamp}-{uuid.uuid4().hex[:8]}.json")
        try:
            path.rename(aside)  # a symlink is renamed itself, its target left alone
        except OSError as err:
            self.warnings.append(
                f"{path} was not a circuit breaker ({why}) and could not be moved aside "
                f"({err.strerror or err}); counted as closed"
            )
            return
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
    retry = datetime.fromtimestamp(breaker.retry_at() or now).astimezone()
    today = datetime.fromtimestamp(now).astimezone().date()
    until = retry.strftime("%H:%M:%S" if retry.date() == today else "%Y-%m-%d %H:%M:%S")
    last = one_line(breaker.last_error[:120])  # a file older runs wrote: shown, never acted on
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


# ----- one run's use of them -----


class RunBreakers:
    def __init__(self, config: BreakerConfig, redact: Redactor, warnings: list[str]) -> None:
        self.store = BreakerStore(config=config, redact=redact)
        self.warnings = warnings
        self.probes: set[str] = set()
        self._failed = False

    def allows(self, name: str, now: float) -> bool:
        """Whether ``name`` would be let through now (nothing claimed: for planning shares)."""
        return self._get(name).allows(now)

    def state(self, name: str, now: float) -> str:
        """The breaker's state now: ``closed``, ``open`` or ``half-open``."""
        return str(self._get(name).state(now))

    def admit(self, name: str, now: float, lease: float) -> tuple[bool, str]:
        """May this run try ``name``? When not: why, in one line."""
        try:
            allowed, breaker = self.store.admit(name, now, lease)
        except OSError as err:
            self._cannot(err)
            return True, ""
        finally:
            self._take_warnings()
        if allowed and breaker.probe_until is not None:
            self.probes.add(name)
        return allowed, "" if allowed else breaker_line(name, breaker, now)

    def record(self, name: str, ok: bool, now: float, failure: Failure | None = None) -> None:
        """One result of this run for ``name`` (once per CLI and run, not per attempt)."""
        from waaah_agent.runtime import quota  # it reads state_dir() from here

        self.probes.discard(name)
        try:
            self.store.update(name, ok, now, failure)
        except OSError as err:
            self._cannot(err)
        if failure is not None and failure.type in (F.RATE_LIMIT, F.QUOTA):  # `waaah quota` shows both
            # A quota is a stated limit; a rate limit is one only with its reset time (or again).
            stated = failure.type is F.QUOTA or failure.reset_at is not None
            seen = datetime.fromtimestamp(now).astimezone()
            with contextlib.suppress(OSError):
                quota.record(name, failure.reset_at, seen, "waaah run", stated=stated)
        elif ok:
            quota.answered(name)

    def release(self) -> None:
        """Free the probes this run holds, counting nothing: the run was interrupted, or the CLI
        could not even be started (neither says whether it works)."""
        for name in sorted(self.probes):
            self.record(name, False, _now(), Failure(F.INTERRUPTED, "interrupted", True, None))

    def _get(self, name: str) -> Breaker:
        try:
            return self.store.get(name)
        except OSError as err:
            self._cannot(err)
            return Breaker(config=self.store.config)
        finally:
            self._take_warnings()

    def _take_warnings(self) -> None:
        self.warnings.extend(w for w in self.store.warnings if w not in self.warnings)
        self.store.warnings.clear()

    def _cannot(self, err: OSError) -> None:
        if not self._failed:
            self._failed = True
            self.warnings.append(
                str(storage_error(err, self.store.path, "update the circuit breakers in"))
                + " (or set XDG_STATE_HOME to a writable folder)"
            )


def _now() -> float:
    return time.time()
