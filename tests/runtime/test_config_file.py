"""The config file under real commands: its keys are the defaults of flags and variables,
`waaah config` says where each setting comes from, and a bad file is one line, never a hang."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.runtime.helpers import WAAAH, retry_until, session_dirs, sim_env, state, state_or_none
from waaah_agent.errors import UsageError


def config_at(home: Path, text: str) -> Path:
    path = home / ".config" / "waaah-agent" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def run(ws: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WAAAH, *args], cwd=ws, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


def test_the_config_sets_defaults_and_a_flag_or_variable_wins(workspace, fake_home):
    config_at(fake_home, "heartbeat = 300\nstall_timeout = 1200\nmax_tokens = 99999\n")
    env = sim_env(fake_home, WAAAH_STALL_TIMEOUT="600")
    shown = json.loads(run(workspace, env, "config", "--json").stdout)
    rows = {r["key"]: r for r in shown["settings"]}
    assert (
        shown["exists"]
        and rows["heartbeat"]["from"] == "config file"
        and rows["heartbeat"]["value"] == "300.0"
    )
    assert rows["stall_timeout"]["from"] == "environment" and rows["stall_timeout"]["value"] == "600"
    assert rows["server"]["from"] == "default"
    proc = subprocess.Popen(
        [WAAAH, "agent", "--start=simulated", "--no-mcp", "--heartbeat", "200"],
        cwd=workspace, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        # session.json comes a moment after the session's folder
        retry_until(lambda: ((state_or_none(workspace) or {}).get("options") or {}).get("max_tokens"), 20)
        options = state(workspace)["options"]
        assert (options["heartbeat"], options["stall_timeout"], options["max_tokens"]) == (
            200.0,
            600.0,
            99999,
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_bad_config_file_is_one_line_and_exit_2_for_every_command(workspace, fake_home):
    path = config_at(fake_home, 'notify = "ntfy://x"\n')
    env = sim_env(fake_home)
    for args in (["status"], ["config"], ["agent", "--start=simulated"]):
        done = run(workspace, env, *args)
        assert done.returncode == 2 and str(path) in done.stderr and "notify" in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    path.unlink()
    os.mkfifo(path)  # a FIFO in its place: refused at once, never read
    done = run(workspace, env, "config")
    assert done.returncode == 2 and "FIFO" in done.stderr
    path.unlink()
    path.mkdir()
    done = run(workspace, env, "config")
    assert done.returncode == 2 and "directory" in done.stderr


def test_a_cost_budget_needs_a_readable_price_table_said_in_one_line(workspace, fake_home, tmp_path):
    """--max-cost: no table, a FIFO, a huge file, bad bytes or a bad entry stop the start with one
    line naming the file (never a hang, never a budget that can't be judged)."""
    env = sim_env(fake_home)
    table = fake_home / ".config" / "waaah-agent" / "prices.toml"
    table.parent.mkdir(parents=True, exist_ok=True)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases = [
        (None, {}, "--max-cost needs the prices of the models"),
        (b'["m"]\ninput = 1\n', {}, "no output price"),
        (b"\xff\xfe", {}, "is not UTF-8"),
        (b"#" * (300 * 1024), {}, "cannot be read"),
        (None, {"WAAAH_PRICES": str(fifo)}, "cannot be read"),
        (None, {"WAAAH_PRICES": str(tmp_path / "gone.toml")}, "WAAAH_PRICES names"),
    ]
    for content, extra, said in cases:
        if content is None:
            table.unlink(missing_ok=True)
        else:
            table.write_bytes(content)
        done = subprocess.run(
            [WAAAH, "agent", "--start=simulated", "--no-mcp", "--max-cost", "5"],
            cwd=workspace,
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 2, (said, done.stderr)
        assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert session_dirs(workspace) == []  # nothing was started
    table.write_text('["*"]\ninput = 1.0\noutput = 2.0\n')
    shown = run(workspace, env, "config").stdout
    assert "max_cost" in shown and "prices" in shown


def test_a_file_the_config_names_and_that_is_missing_is_said_to_come_from_the_config(workspace, fake_home):
    """The user set no variable: the message names the config file's key, not WAAAH_PROVIDERS."""
    path = config_at(
        fake_home,
        'providers = "~/gone/providers.yaml"\nroutes = "~/gone/routes.json"\nprices = "~/gone/prices.toml"\n',
    )
    env = sim_env(fake_home)
    for args, key in (
        (["run", "hi", "--dry-run"], "providers"),
        (["route", "--role", "reviewer"], "routes"),
        (["run", "hi", "--dry-run", "--max-cost", "1"], "prices"),
    ):
        done = run(workspace, env, *args)
        assert done.returncode == 2, done.stderr
        assert f"{key} in the config file {path} names {fake_home}/gone/" in done.stderr, done.stderr
        assert "WAAAH_" not in done.stderr.split("names")[0] and len(done.stderr.strip().splitlines()) == 1
    done = run(workspace, {**env, "WAAAH_PROVIDERS": "/gone.yaml"}, "run", "hi", "--dry-run")
    assert "WAAAH_PROVIDERS names /gone.yaml, which does not exist" in done.stderr, done.stderr


def test_the_price_table_entry_a_cost_budget_asks_for_is_valid_as_shown(workspace, fake_home):
    env = sim_env(fake_home)
    done = run(workspace, env, "run", "hi", "--agent", "gemini", "--dry-run", "--max-cost", "1")
    assert done.returncode == 2 and "--max-cost needs the prices" in done.stderr, done.stderr
    shown = done.stderr.split("e.g. ", 1)[1].split(") or name a file", 1)[0]
    table = fake_home / ".config" / "waaah-agent" / "prices.toml"
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text(shown + "\n")  # pasted as the message shows it
    done = run(workspace, env, "run", "hi", "--agent", "gemini", "--dry-run", "--max-cost", "1")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["budget"]["max_cost"] == 1


def test_defaults_and_what_was_typed_earlier_are_shown_never_a_dash(workspace, fake_home):
    """A setting nobody set shows waaah's default; the server address and key typed at an
    earlier start show as kept there (the key masked)."""
    env = sim_env(fake_home)
    text = run(workspace, env, "config").stdout
    rows = {line.split()[0]: line for line in text.splitlines()[1:]}
    assert not [line for line in rows.values() if line.split()[1] == "-"], text
    assert rows["heartbeat"].split()[1:3] == ["120", "default"]
    assert rows["default_agent"].split()[1:3] == ["gemini", "default"]
    assert "http://localhost:3456 offered" in rows["server"]
    kept = fake_home / ".config" / "waaah-agent"
    kept.mkdir(parents=True, exist_ok=True)
    (kept / "server").write_text("http://waaah.example:3000\n")
    key = "typed-waaah-key-0123456789"
    (kept / "api-key").write_text(key + "\n")
    os.chmod(kept / "api-key", 0o600)
    shown = json.loads(run(workspace, env, "config", "--json").stdout)
    settings = {r["key"]: r for r in shown["settings"]}
    assert settings["server"]["value"] == "http://waaah.example:3000"
    assert settings["server"]["from"] == f"typed at an earlier start, kept in {kept / 'server'}"
    assert settings["api_key_file"]["value"] == f"{kept / 'api-key'} (holds a key ending ****6789)"
    out = run(workspace, env, "config").stdout
    assert key not in out and key not in json.dumps(shown)


def refused_in_one_line(done: subprocess.CompletedProcess[str], *says: str) -> str:
    (line,) = done.stderr.strip().splitlines()
    assert done.returncode == 2 and not done.stdout and all(s in line for s in says), (done.returncode, line)
    return line


def test_a_config_file_named_by_waaah_config_that_is_missing_is_an_error(workspace, fake_home, tmp_path):
    env = sim_env(fake_home, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    shown = run(workspace, env, "config")  # the default one missing: no config, as before
    assert shown.returncode == 0 and "(none" in shown.stdout, shown.stderr
    typo = tmp_path / "typo.toml"
    for args in (["config"], ["status"]):
        line = refused_in_one_line(run(workspace, {**env, "WAAAH_CONFIG": str(typo)}, *args), str(typo))
        assert "WAAAH_CONFIG" in line and "does not exist" in line, line


def test_a_dangling_link_in_the_config_file_s_place_is_refused(workspace, fake_home, tmp_path):
    env = sim_env(fake_home, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    link = tmp_path / "xdg" / "waaah-agent" / "config.toml"
    link.parent.mkdir(parents=True)
    link.symlink_to(tmp_path / "dotfiles" / "waaah.toml")  # not there: a dotfiles folder not mounted yet
    refused_in_one_line(run(workspace, env, "config"), str(link), str(tmp_path / "dotfiles" / "waaah.toml"))
    (tmp_path / "dotfiles").mkdir()
    (tmp_path / "dotfiles" / "waaah.toml").write_text("heartbeat = 300\n")
    (tmp_path / "dotfiles" / "waaah.toml").chmod(0o600)
    shown = run(workspace, env, "config", "--json")
    rows = {r["key"]: r for r in json.loads(shown.stdout)["settings"]}
    assert rows["heartbeat"] == {**rows["heartbeat"], "value": "300.0", "from": "config file"}


def test_a_config_file_someone_else_can_write_or_owns_is_not_used(workspace, fake_home, tmp_path):
    env = sim_env(fake_home, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    path = tmp_path / "xdg" / "waaah-agent" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text('server = "http://attacker.example:3456"\n')
    path.chmod(0o666)
    line = refused_in_one_line(run(workspace, env, "config"), str(path), "can be written by others")
    assert f"chmod go-w {path}" in line and "attacker" not in line
    path.chmod(0o644)
    assert run(workspace, env, "config").returncode == 0
    if os.geteuid() != 0:
        return  # a file of another user's needs root to be made
    os.chown(path, 65534, 65534)
    line = refused_in_one_line(run(workspace, env, "config"), str(path), "belongs to another user")
    assert "attacker" not in line


def test_a_config_file_root_owns_and_only_reads_is_used(tmp_path, monkeypatch):
    """As home-manager keeps it (a link to a file of root's in /nix/store, mode 0444): read."""
    from waaah_agent.runtime import config_file

    store = tmp_path / "store" / "waaah.toml"
    store.parent.mkdir()
    store.write_text("heartbeat = 300\n")
    store.chmod(0o444)
    if store.stat().st_uid != 0:
        pytest.skip("a file of root's needs root to be made")
    link = tmp_path / "config.toml"
    link.symlink_to(store)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    os.lchown(link, 1000, 1000)
    assert config_file.read({"WAAAH_CONFIG": str(link)}) == {"WAAAH_HEARTBEAT": "300.0"}
    store.chmod(0o666)
    with pytest.raises(UsageError, match="can be written by others"):
        config_file.read({"WAAAH_CONFIG": str(link)})
