"""The circuit breakers' files on a real file system: whatever is found in a breaker's place is
survived, and concurrent runs (real processes) neither lose a count nor share the one probe."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from waaah_agent.core import failures as F
from waaah_agent.core.failures import Failure
from waaah_agent.core.oneshot.breaker import Breaker, BreakerConfig
from waaah_agent.runtime.oneshot.breakers import BreakerStore, breaker_line

CRASH = Failure(F.CRASH, "it crashed", True, 1)


def store(tmp_path: Path, cooldown: float = 60.0) -> BreakerStore:
    return BreakerStore(tmp_path / "state", BreakerConfig(cooldown=cooldown))


def put(tmp_path: Path, maker: str) -> Path:
    folder = tmp_path / "state" / "breakers"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "claude.json"
    if maker == "damaged":
        path.write_bytes(b'{"failures": 2, "opened_at": \xff')
    elif maker == "wrong shape":
        path.write_text(json.dumps({"failures": "many", "opened_at": []}))
    elif maker == "huge":
        path.write_text('{"failures": 1, "last_error": "' + "x" * (2 * 1024 * 1024) + '"}')
    elif maker == "symlink":
        target = tmp_path / "users-own-file"
        target.write_text("precious\n")
        path.symlink_to(target)
    elif maker == "fifo":
        os.mkfifo(path)
    elif maker == "folder":
        path.mkdir()
    return path


@pytest.mark.parametrize("maker", ["damaged", "wrong shape", "huge", "symlink", "fifo", "folder"])
def test_whatever_is_in_a_breaker_s_place_is_moved_aside_and_counts_as_closed(
    tmp_path: Path, maker: str
) -> None:
    path = put(tmp_path, maker)
    breakers = store(tmp_path)
    started = time.monotonic()
    assert breakers.get("claude").state(time.time()) == "closed"
    assert time.monotonic() - started < 2  # a FIFO is never waited on
    assert len(breakers.warnings) == 1 and "moved to claude.corrupt-" in breakers.warnings[0]
    assert not path.exists() and not path.is_symlink()
    assert [p.name.startswith("claude.corrupt-") for p in path.parent.iterdir()] == [True]
    breakers.update("claude", False, time.time(), CRASH)  # and it works again from there
    assert json.loads(path.read_text())["failures"] == 1
    if maker == "symlink":
        assert (tmp_path / "users-own-file").read_text() == "precious\n"


def test_a_lock_file_that_is_a_symlink_is_refused_not_followed(tmp_path: Path) -> None:
    folder = tmp_path / "state" / "breakers"
    folder.mkdir(parents=True)
    target = tmp_path / "elsewhere"
    target.write_text("")
    (folder / "claude.lock").symlink_to(target)
    with pytest.raises(OSError):
        store(tmp_path).update("claude", False, time.time(), CRASH)
    assert not (folder / "claude.json").exists()


def test_each_cli_has_its_own_file(tmp_path: Path) -> None:
    breakers = store(tmp_path)
    breakers.update("claude", False, 1.0, CRASH)
    breakers.update("gemini", True, 1.0)
    folder = tmp_path / "state" / "breakers"
    assert sorted(p.name for p in folder.glob("*.json")) == ["claude.json", "gemini.json"]
    assert oct((folder / "claude.json").stat().st_mode & 0o777) == "0o600"
    with pytest.raises(ValueError):
        breakers.file("../escape")


WORKER = """
import sys, time
from pathlib import Path
from waaah_agent.core import failures as F
from waaah_agent.core.oneshot.breaker import BreakerConfig
from waaah_agent.core.failures import Failure
from waaah_agent.runtime.oneshot.breakers import BreakerStore
folder, go, what = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
store = BreakerStore(folder, BreakerConfig(threshold=10**5, timeout_threshold=10**5, cooldown=0.0))
while not go.exists():
    time.sleep(0.005)
if what == "count":
    for _ in range(25):
        store.update("claude", False, time.time(), Failure(F.TIMEOUT, "slow", True, None))
else:
    print(store.admit("claude", time.time(), 60.0)[0])
"""


def workers(tmp_path: Path, what: str, n: int) -> list[str]:
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tmp_path / "state"), str(go), what],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]
    time.sleep(0.5)  # all of them started and waiting
    go.touch()
    return [p.communicate(timeout=60)[0].strip() for p in procs]


def test_concurrent_runs_lose_no_count(tmp_path: Path) -> None:
    workers(tmp_path, "count", 4)
    assert store(tmp_path).get("claude").timeouts == 100


def test_concurrent_runs_share_one_half_open_probe(tmp_path: Path) -> None:
    opened = BreakerStore(tmp_path / "state", BreakerConfig(threshold=1, cooldown=0.0))
    opened.update("claude", False, time.time() - 5, CRASH)
    answers = workers(tmp_path, "admit", 6)
    assert sorted(answers) == ["False"] * 5 + ["True"]
    assert store(tmp_path, cooldown=0.0).get("claude").probing(time.time())


@pytest.mark.parametrize("field", ["opened_at", "probe_until"])
def test_a_time_far_in_the_future_is_a_damaged_file_not_a_cli_skipped_for_centuries(
    tmp_path: Path, field: str
) -> None:
    path = put(tmp_path, "none")
    path.write_text(json.dumps({"failures": 3, "opened_at": time.time() - 61, field: 9999999999}))
    breakers = store(tmp_path)
    breaker = breakers.get("claude")
    assert breaker.state(time.time()) == "closed" and breaker.allows(time.time())
    assert len(breakers.warnings) == 1 and "moved to claude.corrupt-" in breakers.warnings[0]
    path.write_text(json.dumps({"failures": 3, "opened_at": time.time() + 5}))  # clocks a moment apart
    assert store(tmp_path).get("claude").state(time.time()) == "open"


def test_two_damaged_files_in_one_second_are_both_kept(tmp_path: Path) -> None:
    breakers = store(tmp_path)
    for _ in range(2):
        put(tmp_path, "damaged")
        breakers.get("claude")
    aside = sorted(p.name for p in (tmp_path / "state" / "breakers").iterdir())
    assert len(aside) == 2 and all(name.startswith("claude.corrupt-") for name in aside)


def test_a_damaged_file_that_cannot_be_moved_is_not_said_to_be_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = put(tmp_path, "damaged")

    def refused(self: Path, target: Path) -> Path:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "rename", refused)
    breakers = store(tmp_path)
    assert breakers.get("claude").state(time.time()) == "closed"
    (said,) = breakers.warnings
    assert "could not be moved aside (Permission denied)" in said and "moved to" not in said
    assert path.exists()


def test_the_time_an_open_breaker_is_skipped_until_has_its_date_when_not_today() -> None:
    now = time.time()
    soon = Breaker(failures=3, opened_at=now, config=BreakerConfig(cooldown=1))
    later = Breaker(failures=3, opened_at=now, config=BreakerConfig(cooldown=3 * 24 * 3600))
    assert re.search(r"until \d\d:\d\d:\d\d \(", breaker_line("claude", soon, now - 0.5))
    assert re.search(r"until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(", breaker_line("claude", later, now))
