"""Asking an installed CLI what it supports: a throwaway HOME, a timeout, a cache per binary."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from waaah_agent.adapters import registry
from waaah_agent.errors import UsageError
from waaah_agent.runtime import releases

CLI = """#!/bin/sh
echo "$HOME" >> "{log}"
case "$1" in
  --version) echo "{version}" ;;
  --help) printf 'Usage: gemini [options]\\n  -r, --resume  Resume\\n{extra}' ;;
esac
"""


def fake_cli(folder: Path, version: str, extra: str = "", body: str = CLI) -> tuple[Path, Path]:
    """A script standing in for an installed CLI; it notes the HOME of every start in a log."""
    folder.mkdir(parents=True, exist_ok=True)
    log, binary = folder / "starts.log", folder / "gemini"
    binary.write_text(body.format(log=log, version=version, extra=extra))
    binary.chmod(0o755)
    return binary, log


def env_for(tmp_path: Path) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "user"),
        "WAAAH_CACHE_DIR": str(tmp_path / "cache"),
    }


def starts(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_the_cli_is_asked_once_in_a_throwaway_home_then_the_cache_answers(tmp_path):
    binary, log = fake_cli(tmp_path / "bin", "0.51.0", "  --session-id  An id\\n")
    env = env_for(tmp_path)
    first = releases.release_of(str(binary), env)
    assert first.version == "0.51.0" and {"--resume", "--session-id"} <= first.options
    assert len(starts(log)) == 2 and all(str(tmp_path / "user") not in h for h in starts(log))
    assert not any(Path(h).exists() for h in starts(log))  # the throwaway HOMEs are gone
    assert releases.release_of(str(binary), env) == first
    assert len(starts(log)) == 2  # cached: not asked again
    cached = json.loads((tmp_path / "cache" / "releases.json").read_text())
    assert [e["version"] for e in cached["binaries"].values()] == ["0.51.0"]


def test_an_upgrade_in_place_is_asked_again(tmp_path):
    binary, log = fake_cli(tmp_path / "bin", "0.34.0")
    env = env_for(tmp_path)
    assert releases.release_of(str(binary), env).version == "0.34.0"
    time.sleep(0.01)
    fake_cli(tmp_path / "bin2", "0.61.0")  # a new file moved over the old one: another inode
    os.replace(tmp_path / "bin2" / "gemini", binary)
    assert releases.release_of(str(binary), env).version == "0.61.0"


@pytest.mark.parametrize(
    "damage", [b"{not json", b"[]", b'{"binaries": 3}', b"\xff\xfe", b'{"binaries": {"x": 1}}']
)
def test_a_damaged_cache_is_ignored_and_rewritten(tmp_path, damage):
    binary, _ = fake_cli(tmp_path / "bin", "0.51.0")
    env = env_for(tmp_path)
    cache = tmp_path / "cache" / "releases.json"
    cache.parent.mkdir()
    cache.write_bytes(damage)
    assert releases.release_of(str(binary), env).version == "0.51.0"
    assert "0.51.0" in cache.read_text()


def test_a_cache_that_cannot_be_written_costs_only_another_ask(tmp_path):
    binary, log = fake_cli(tmp_path / "bin", "0.51.0")
    env = env_for(tmp_path)
    (tmp_path / "cache").write_text("a file where the folder should be")
    assert releases.release_of(str(binary), env).version == "0.51.0"
    assert releases.release_of(str(binary), env).version == "0.51.0"
    assert len(starts(log)) == 4


def test_a_cli_slow_because_the_machine_is_busy_is_waited_for_past_the_timeout(tmp_path, monkeypatch):
    """Each probe costs a node CLI seconds of CPU, and a loaded machine stretched the two past the
    timeout: a probe still using CPU is waited for (to PROBE_MAX); one that hangs is not."""
    monkeypatch.setattr(releases, "PROBE_TIMEOUT", 1.0)
    monkeypatch.setattr(releases, "PROBE_MORE", 0.5)
    burn = "i=0; while [ $i -lt 1500000 ]; do i=$((i+1)); done"  # a few seconds of CPU in sh
    body = CLI.replace('case "$1" in', burn + '\ncase "$1" in')
    binary, _ = fake_cli(tmp_path / "bin", "0.51.0", body=body)
    started = time.monotonic()
    found = releases.release_of(str(binary), env_for(tmp_path))
    took = time.monotonic() - started
    assert found.version == "0.51.0" and "--resume" in found.options, took
    assert took > 1.0  # it was past the timeout, working


def test_a_cli_that_works_forever_is_ended_at_the_most(tmp_path, monkeypatch):
    monkeypatch.setattr(releases, "PROBE_TIMEOUT", 1.0)
    monkeypatch.setattr(releases, "PROBE_MORE", 0.5)
    monkeypatch.setattr(releases, "PROBE_MAX", 3.0)
    binary, _ = fake_cli(tmp_path / "bin", "", body="#!/bin/sh\nwhile :; do :; done\n")
    started = time.monotonic()
    found = releases.release_of(str(binary), env_for(tmp_path))
    assert found.version == "" and 2.5 < time.monotonic() - started < 10


def test_the_cpu_of_a_process_group_is_read_and_a_missing_one_is_none():
    assert releases.group_cpu(os.getpgid(0)) > 0  # this test's own group has worked
    assert releases.group_cpu(2**22 + 12345) == 0.0


def test_a_cli_that_hangs_is_given_up_on_within_the_timeout(tmp_path, monkeypatch):
    monkeypatch.setattr(releases, "PROBE_TIMEOUT", 1.0)
    binary, _ = fake_cli(tmp_path / "bin", "", body="#!/bin/sh\nsleep 30\n")
    started = time.monotonic()
    found = releases.release_of(str(binary), env_for(tmp_path))
    assert found.version == "" and not found.options
    assert time.monotonic() - started < 10
    assert not (tmp_path / "cache" / "releases.json").exists()  # nothing learned, nothing kept


def test_a_too_old_release_is_refused_with_one_line(tmp_path):
    binary, _ = fake_cli(tmp_path / "bin", "0.13.0")
    with pytest.raises(UsageError) as refused:
        releases.checked_release(registry()["gemini"], str(binary), env_for(tmp_path))
    assert str(refused.value).startswith("gemini 0.13.0 is too old for waaah")
    assert "scripts/install_clis.sh gemini (the pinned 0.61.0" in str(refused.value)


def test_what_session_json_keeps_of_a_release(tmp_path):
    binary, _ = fake_cli(tmp_path / "bin", "0.34.0")
    kept = releases.checked_release(registry()["gemini"], str(binary), env_for(tmp_path))
    assert kept == {"version": "0.34.0", "standing": "older, supported", "own_session_ids": False}
    assert not releases.own_ids(kept) and releases.own_ids({})


# gemini 0.34.0 takes no --session-id: the id it picked is read back from its session file.

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts" / "gemini-0.34.0.json"
LEARN = registry()["gemini"].own_session


def session_file(home: Path, workspace: Path, project: str, name: str) -> tuple[Path, str]:
    """The recorded 0.34.0 session file, moved to ``workspace``'s project hash; returns its id."""
    import hashlib

    text = RECORDED.read_text(encoding="utf-8")
    recorded = json.loads(text)
    text = text.replace(recorded["projectHash"], hashlib.sha256(str(workspace).encode()).hexdigest())
    path = home / ".gemini" / "tmp" / project / "chats" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path, recorded["sessionId"]


def test_the_id_gemini_picked_is_read_back_from_its_session_file(tmp_path):
    home, ws = tmp_path / "home", tmp_path / "ws"
    since = time.time() - 1
    path, sid = session_file(home, ws, "ws", "session-2026-11-25T14-53-8ee83813.json")
    assert LEARN({"HOME": str(home)}, ws, since) == sid
    assert LEARN({"HOME": str(home)}, tmp_path / "elsewhere", since) is None  # another project's
    assert LEARN({"HOME": str(home)}, ws, time.time() + 60) is None  # written before this start


def test_a_damaged_or_odd_session_file_is_no_id(tmp_path):
    home, ws = tmp_path / "home", tmp_path / "ws"
    chats = home / ".gemini" / "tmp" / "ws" / "chats"
    chats.mkdir(parents=True)
    (chats / "session-a.json").write_bytes(b"\xff\xfe{not json")
    os.mkfifo(chats / "session-b.json")  # never read: no hang
    (chats / "session-c.json").symlink_to("/etc/hostname")
    (chats / "session-d.json").mkdir()
    assert LEARN({"HOME": str(home)}, ws, 0) is None
