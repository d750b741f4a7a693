"""The user's gemini settings file in every shape a night can leave it in, through `waaah agent
--start=gemini` and `waaah mcp install`.

`waaah agent` reads ``~/.gemini/settings.json`` and never writes it: each run gets a home of its
own whose settings are the user's with the waaah entry laid over them. A symlinked, read-only or
read-only-mounted file is read and left as it was; one it cannot read as settings (a directory,
a FIFO, the wrong JSON shape) is refused before gemini is started: one line naming the file and
the fix, the exit code of a configuration error, no traceback, the file byte for byte as it
was, and never a hang. `waaah mcp install`, which the user runs to keep an entry there, edits a
symlink's target and refuses a file it must not write, with the entry to add by hand.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.doubles.cli_homes import cli_bin, end_process_group
from tests.faults.conftest import WAAAH, assert_no_traceback, clean_env, run_waaah
from tests.runtime.helpers import retry_until
from waaah_agent.errors import ExitCode

BEFORE = b'{\n  "ui": {"theme": "Dracula"},\n  "general": {"vimMode": true}\n}\n'


def unused_url() -> str:
    """A server address nobody listens on: the start does not ask, its check fails fast."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def gemini_env(home: Path) -> dict[str, str]:
    """gemini on PATH, its home in the throwaway HOME, a dummy key so the login check passes."""
    env = clean_env(home, GEMINI_CLI_HOME=str(home), GEMINI_API_KEY="dummy-key-for-the-login-check")
    env["PATH"] = f"{cli_bin('gemini').parent}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    return env


def settings_path(home: Path) -> Path:
    path = home / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def start(workspace: Path, home: Path, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return run_waaah(
        "agent",
        "--start=gemini",
        "--server",
        unused_url(),
        cwd=workspace,
        env=gemini_env(home),
        timeout=timeout,
    )


def assert_refused(result: subprocess.CompletedProcess[str], path: Path, phrase: str) -> str:
    """One line on stderr naming the file and what is wrong, the usage exit code, no traceback."""
    assert_no_traceback(result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("waaah: ") and str(path) in lines[0] and phrase in lines[0], lines[0]
    assert "--no-mcp" in lines[0]
    assert result.returncode == ExitCode.USAGE, (result.returncode, result.stderr)
    assert not list(path.parent.glob("settings.json.waaah-backup-*"))
    return lines[0]


@contextlib.contextmanager
def read_only_tmpfs(where: Path, files: dict[str, bytes]) -> Iterator[Path]:
    """A tmpfs at ``where`` holding ``files``, then remounted read-only: read-only even for root;
    skipped where mounting is not allowed."""
    where.mkdir(parents=True, exist_ok=True)
    name = f"waaah-fault-{uuid.uuid4().hex[:6]}"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", name, str(where)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}): needs root")
    try:
        for file, content in files.items():
            (where / file).write_bytes(content)
        ro = subprocess.run(["mount", "-o", "remount,ro", str(where)], capture_output=True, text=True)
        if ro.returncode != 0:
            pytest.skip(f"cannot remount the tmpfs read-only ({ro.stderr.strip() or ro.returncode})")
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def started_and_stopped(workspace: Path, home: Path, out: Path) -> str:
    """Start `waaah agent` headless until it has given gemini the server, then stop it (SIGTERM)."""
    with out.open("w") as sink:
        proc = subprocess.Popen(
            [WAAAH, "agent", "--start=gemini", "--server", unused_url()],
            cwd=workspace,
            env=gemini_env(home),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            retry_until(lambda: "gave this run the waaah MCP server" in out.read_text(), timeout=30)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)  # the supervisor saves the session and stops gemini
            try:
                proc.wait(timeout=20)
            finally:
                end_process_group(proc.pid)
    text = out.read_text()
    assert_no_traceback(text)
    assert not list((home / ".local" / "state" / "waaah-agent" / "homes").glob("*"))  # the run's home is gone
    return text


def test_a_symlinked_settings_file_is_read_and_left_as_it_was(workspace, home, tmp_path):
    settings = settings_path(home)
    target = tmp_path / "dotfiles" / "gemini-settings.json"
    target.parent.mkdir()
    target.write_bytes(BEFORE)
    settings.symlink_to(target)
    started_and_stopped(workspace, home, tmp_path / "out.txt")
    assert settings.is_symlink() and os.readlink(settings) == str(target)
    assert target.read_bytes() == BEFORE
    assert not list(settings.parent.glob("settings.json.waaah-backup-*"))
    assert not list(target.parent.glob(".*.tmp"))


def test_mcp_install_edits_a_symlink_s_target_with_a_backup(workspace, home, tmp_path):
    settings = settings_path(home)
    target = tmp_path / "dotfiles" / "gemini-settings.json"
    target.parent.mkdir()
    target.write_bytes(BEFORE)
    settings.symlink_to(target)
    done = run_waaah("mcp", "install", "--server", "http://127.0.0.1:9", cwd=workspace, env=gemini_env(home))
    assert done.returncode == 0, done.stderr
    assert "configured the waaah MCP server" in done.stdout
    assert settings.is_symlink() and os.readlink(settings) == str(target)
    after = json.loads(target.read_text())
    assert list(after) == ["ui", "general", "mcpServers"] and after["ui"] == {"theme": "Dracula"}
    assert after["mcpServers"]["waaah"]["args"][-1] == "mcp-proxy"
    (backup,) = settings.parent.glob("settings.json.waaah-backup-*")
    assert backup.read_bytes() == BEFORE
    assert not list(target.parent.glob(".*.tmp"))
    again = run_waaah("mcp", "uninstall", cwd=workspace, env=gemini_env(home))
    assert again.returncode == 0 and "removed the waaah MCP server" in again.stdout
    assert json.loads(target.read_text()) == json.loads(BEFORE)  # no "mcpServers": {} left behind


def test_a_read_only_settings_file_is_read_by_the_agent_and_refused_by_mcp_install(workspace, home, tmp_path):
    settings = settings_path(home)
    settings.write_bytes(BEFORE)
    settings.chmod(0o444)  # no write bit for anyone: the user's "read-only", which root honours too
    started_and_stopped(workspace, home, tmp_path / "out.txt")
    assert settings.read_bytes() == BEFORE and settings.stat().st_mode & 0o777 == 0o444
    done = run_waaah("mcp", "install", cwd=workspace, env=gemini_env(home))
    assert_no_traceback(done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(settings) in lines[0] and "is read-only" in lines[0], done.stderr
    assert f"chmod u+w {settings}" in lines[0] and '"waaah": {"command": ' in lines[0]
    assert done.returncode == ExitCode.USAGE
    assert settings.read_bytes() == BEFORE and settings.stat().st_mode & 0o777 == 0o444


def test_a_settings_file_on_a_read_only_file_system_is_read_and_left_as_it_was(workspace, home, tmp_path):
    with read_only_tmpfs(home / ".gemini", {"settings.json": BEFORE}) as folder:
        started_and_stopped(workspace, home, tmp_path / "out.txt")
        assert (folder / "settings.json").read_bytes() == BEFORE


def test_a_directory_in_place_of_the_settings_file_is_refused(workspace, home):
    settings = settings_path(home)
    settings.mkdir()
    (settings / "keep").write_bytes(b"x")
    assert_refused(start(workspace, home), settings, "is a directory")
    assert [p.name for p in settings.iterdir()] == ["keep"]


def test_a_fifo_in_place_of_the_settings_file_is_refused_without_a_hang(workspace, home):
    settings = settings_path(home)
    os.mkfifo(settings)
    assert_refused(start(workspace, home, timeout=10), settings, "is a FIFO")
    assert settings.is_fifo()


@pytest.mark.parametrize(
    ("content", "phrase"),
    [
        (b'["ui", "theme"]\n', "does not hold a JSON object"),
        (b'{"mcpServers": ["github"], "ui": {}}\n', '"mcpServers" in'),
    ],
)
def test_a_settings_file_of_the_wrong_json_shape_is_refused_untouched(workspace, home, content, phrase):
    settings = settings_path(home)
    settings.write_bytes(content)
    assert_refused(start(workspace, home), settings, phrase)
    assert settings.read_bytes() == content


def test_doctor_reads_an_unusable_settings_file_without_a_traceback_or_a_hang(workspace, home):
    path = settings_path(home)
    os.mkfifo(path)
    # gemini itself hangs reading a FIFO: its version call times out (10 s); ours reads nothing that blocks
    done = run_waaah("doctor", "--agent", "gemini", cwd=workspace, env=gemini_env(home), timeout=60)
    assert_no_traceback(done.stdout, done.stderr)
    assert "MCP entry" in done.stdout and str(path) in done.stdout
    # gemini relaunches itself in a child node process: the timed-out call leaves neither behind.
    assert retry_until(lambda: not processes_with_home(home), timeout=10)


def processes_with_home(home: Path) -> list[int]:
    """Pids of processes whose environment has HOME=home (ours only; /proc of this machine)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                env = (proc / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"HOME={home}".encode() in env:
                found.append(int(proc.name))
    return found


def test_status_does_not_hang_on_a_fifo_in_place_of_the_events_file(workspace, home):
    folder = workspace / ".waaah" / "sessions" / "gemini-20261123-010203-abcdef"
    folder.mkdir(parents=True)
    state = {"schema": 1, "id": folder.name, "agent": "gemini", "workflow": "waaah-orc",
             "workspace": str(workspace), "native_session_id": str(uuid.uuid4())}  # fmt: skip
    (folder / "session.json").write_text(json.dumps(state))
    os.mkfifo(folder / "events.jsonl")
    done = run_waaah("status", cwd=workspace, env=clean_env(home), timeout=20)
    assert_no_traceback(done.stdout, done.stderr)
    assert folder.name in done.stdout


COMMENTED = b'// mine\n{\n  "ui": {"theme": "Dracula"}, /* dark */\n  "general": {"vimMode": true}\n}\n'


def test_gemini_settings_with_comments_start_the_agent_and_stay_as_they_were(workspace, home, tmp_path):
    """gemini reads its settings with comments (strip-json-comments): so does the agent's start."""
    settings = settings_path(home)
    settings.write_bytes(COMMENTED)
    text = started_and_stopped(workspace, home, tmp_path / "out.txt")
    assert "cannot parse" not in text
    assert settings.read_bytes() == COMMENTED
    done = run_waaah("mcp", "install", "--server", "http://127.0.0.1:9", cwd=workspace, env=gemini_env(home))
    assert (
        done.returncode == ExitCode.USAGE and "holds comments, which rewriting it would lose" in done.stderr
    )
    assert_no_traceback(done.stdout, done.stderr)
    assert settings.read_bytes() == COMMENTED and not list(settings.parent.glob("*.waaah-backup-*"))


def test_a_waaah_entry_of_the_user_s_own_is_kept_unless_they_say_replace(workspace, home):
    settings = settings_path(home)
    theirs = b'{"mcpServers": {"waaah": {"httpUrl": "https://hub.example.com/mcp"}}}\n'
    settings.write_bytes(theirs)
    for command in (["install", "--server", "http://127.0.0.1:9"], ["uninstall"]):
        done = run_waaah("mcp", *command, cwd=workspace, env=gemini_env(home))
        assert done.returncode == ExitCode.USAGE, done.stderr
        assert 'has a "waaah" entry that waaah did not write' in done.stderr and "--replace" in done.stderr
        assert settings.read_bytes() == theirs
    done = run_waaah(
        "mcp", "install", "--server", "http://127.0.0.1:9", "--replace", cwd=workspace, env=gemini_env(home)
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(settings.read_text())["mcpServers"]["waaah"]["args"][-1] == "mcp-proxy"
