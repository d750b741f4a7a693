"""The circuit breakers as one `waaah run` uses them: may this CLI be tried (claiming the one
half-open probe), its result counted once per run, a probe freed when the run is interrupted,
and a usage limit noted in the quota state. None of it may cost the run its answer: a state
folder that cannot be written is one warning in the envelope."""

from __future__ import annotations

import contextlib
from datetime import datetime

from waaah_agent.core import failures as F
from waaah_agent.core.failures import Failure
from waaah_agent.core.oneshot.breaker import Breaker, BreakerConfig
from waaah_agent.core.redact import Redactor
from waaah_agent.errors import storage_error
from waaah_agent.runtime import quota
from waaah_agent.runtime.oneshot import breakers


class RunBreakers:
    def __init__(self, config: BreakerConfig, redact: Redactor, warnings: list[str]) -> None:
        self.store = breakers.BreakerStore(config=config, redact=redact)
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
        return allowed, "" if allowed else breakers.breaker_line(name, breaker, now)

    def record(self, name: str, ok: bool, now: float, failure: Failure | None = None) -> None:
        """One result of this run for ``name`` (once per CLI and run, not per attempt)."""
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
    import time

    return time.time()
