"""A waaah entry kept in a user's own settings (`waaah mcp install`), per-run config, server
checks and `waaah doctor`, on a temporary HOME, for real."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
from datetime import datetime

import pytest

from tests.doubles.waaah_server import WaaahServer
from tests.runtime.helpers import WAAAH
from waaah_agent import adapters
from waaah_agent.errors import ExitCode, UsageError
from waaah_agent.runtime.mcp import setup as mcp_setup
from waaah_agent.runtime.mcp import user_file
from waaah_agent.runtime.mcp.cli_home import PerRunHome
from waaah_agent.runtime.mcp.givers import PerRunConfig, giver, write_hooks
from waaah_agent.runtime.mcp.setup import ServerChoice
from waaah_agent.runtime.mcp.waaah import check_server
from waaah_agent.settings import proxy_env

GEMINI_MCP = giver(adapters.registry()["gemini"].mcp)
CLAUDE_MCP = giver(adapters.registry()["claude"].mcp)
assert isinstance(GEMINI_MCP, PerRunHome) and isinstance(CLAUDE_MCP, PerRunConfig)
assert GEMINI_MCP.persistent is not None


def install_gemini(env, server, now):
    """Keep the entry in gemini's own settings as `waaah mcp install` does, at a fixed clock."""
    kept = GEMINI_MCP.persistent
    entry = kept.entry(mcp_setup.PROXY_COMMAND, proxy_env(server.url, server.api_key))
    return mcp_setup.install_entry(kept.path(env), entry, server, now, kept.limit, kept.comments)


def test_gemini_settings_edit_keeps_keys_backs_up_and_is_idempotent(tmp_path):
    home = tmp_path / "home"
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    before = {"ui": {"theme": "Dracula"}, "mcpServers": {"github": {"command": "gh-mcp"}}}
    settings.write_text(json.dumps(before))
    env = {"HOME": str(home)}
    server = ServerChoice("http://127.0.0.1:9", "secret-key-123", "--server")

    notes = install_gemini(env, server, datetime(2026, 1, 2, 3, 4, 5))
    after = json.loads(settings.read_text())
    assert after["ui"] == before["ui"] and after["mcpServers"]["github"] == before["mcpServers"]["github"]
    entry = after["mcpServers"]["waaah"]
    assert entry["args"][-1] == "mcp-proxy" and entry["env"]["WAAAH_SERVER_URL"] == "http://127.0.0.1:9"
    backup = settings.with_name("settings.json.waaah-backup-20260102-030405")
    assert json.loads(backup.read_text()) == before
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
    assert any("plain text" in n for n in notes)

    assert install_gemini(env, server, datetime(2026, 1, 2, 3, 4, 6)) == []  # unchanged: no edit
    assert len(list(settings.parent.glob("settings.json.waaah-backup-*"))) == 1


def test_fresh_home_gets_a_settings_file_without_a_key(tmp_path):
    env = {"HOME": str(tmp_path)}
    install_gemini(env, ServerChoice("http://h", None, "x"), datetime.now())
    settings = tmp_path / ".gemini" / "settings.json"
    assert "WAAAH_API_KEY" not in settings.read_text()
    assert not list(settings.parent.glob("*.waaah-backup-*"))


def test_corrupt_settings_is_a_clear_error_and_untouched(tmp_path):
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text("{ not json")
    with pytest.raises(UsageError, match="cannot parse .*settings.json"):
        install_gemini({"HOME": str(tmp_path)}, ServerChoice("http://h", None, "x"), datetime.now())
    assert settings.read_text() == "{ not json"


def test_claude_gets_a_per_run_config_file(tmp_path):
    given = CLAUDE_MCP.give({}, ServerChoice("http://h", "k", "x"), tmp_path, {"WAAAH_AGENT_ID": "a1"})
    args = given.args
    path = tmp_path / "mcp.json"
    assert args == ["--mcp-config", str(path), "--allowedTools", "mcp__waaah"]
    doc = json.loads(path.read_text())
    assert doc["mcpServers"]["waaah"]["env"] == {
        "WAAAH_SERVER_URL": "http://h",
        "WAAAH_API_KEY": "${WAAAH_API_KEY}",  # claude fills it in from its environment
        "WAAAH_AGENT_ID": "a1",
    }
    assert given.env == {"WAAAH_API_KEY": "k"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and given.notes == []
    keyless = CLAUDE_MCP.give({}, ServerChoice("http://h", None, "x"), tmp_path, {})
    assert keyless.env == {} and "WAAAH_API_KEY" not in path.read_text()


def test_claude_gets_per_run_hooks_and_gemini_none(tmp_path):
    hooks = adapters.registry()["claude"].hooks
    assert hooks is not None and adapters.registry()["gemini"].hooks is None
    path = tmp_path / "claude-settings.json"
    assert write_hooks(hooks, tmp_path) == ["--settings", str(path)]
    doc = json.loads(path.read_text())
    assert set(doc["hooks"]) == {"SessionStart", "UserPromptSubmit", "Stop", "Notification"}
    assert doc["hooks"]["Stop"][0]["hooks"][0]["command"].endswith("-m waaah_agent.runtime.mcp.hook claude")


def test_existing_entries_and_doctor_findings(tmp_path):
    env = {"HOME": str(tmp_path)}
    assert GEMINI_MCP.existing(env) is None and GEMINI_MCP.doctor(env).status == "ok"
    assert "is not touched" in GEMINI_MCP.doctor(env).detail
    install_gemini(env, ServerChoice("http://h:1", None, "x"), datetime.now())
    found = GEMINI_MCP.existing(env)
    assert found is not None and (found.kind, found.url) == ("ours", "http://h:1")
    assert GEMINI_MCP.doctor(env).status == "ok" and "waaah mcp uninstall" in GEMINI_MCP.doctor(env).fix
    (tmp_path / ".claude.json").write_text("{ not json")  # claude's own file: not ours to judge
    assert CLAUDE_MCP.existing(env) is None
    (tmp_path / ".claude.json").write_text(
        json.dumps(
            {"mcpServers": {"waaah": {"command": "waaah-proxy", "env": {"WAAAH_SERVER_URL": "http://u"}}}}
        )
    )
    found = CLAUDE_MCP.existing(env)
    assert found is not None and (found.kind, found.url) == ("upstream", "http://u")
    assert CLAUDE_MCP.doctor(env).status == "ok"


def test_server_choice_precedence_and_headless_error():
    existing = mcp_setup.mcpconf.ExistingEntry("upstream", "http://old", False)
    assert (
        mcp_setup.choose_server(
            "http://flag", None, {"WAAAH_SERVER_URL": "http://env"}, existing, False, input
        ).url
        == "http://flag"
    )
    assert (
        mcp_setup.choose_server(None, None, {"WAAAH_SERVER_URL": "http://env"}, existing, False, input).url
        == "http://env"
    )
    assert mcp_setup.choose_server(None, None, {}, existing, False, input).url == "http://old"
    with pytest.raises(UsageError, match="--no-mcp"):
        mcp_setup.choose_server(None, None, {}, None, False, input)
    questions: list[str] = []
    secret_questions: list[str] = []

    def ask(question: str) -> str:
        questions.append(question)
        return ""

    def ask_secret(question: str) -> str:
        secret_questions.append(question)
        return " k3y "

    asked = mcp_setup.choose_server(None, None, {}, None, True, ask, ask_secret)
    assert (asked.url, asked.api_key) == ("http://localhost:3456", "k3y")
    # The address is asked in the open; the key only through the hidden prompt.
    assert questions == ["WAAAH server address [http://localhost:3456]: "]
    assert secret_questions == ["WAAAH API key (optional, not shown, Enter for none): "]


def test_server_checks_against_the_double():
    with WaaahServer(api_key="right") as server:
        assert check_server(server.url, "right").ok
        assert check_server(server.url, "wrong").detail == "bad key"
    assert check_server(server.url, "right").detail.startswith("unreachable")


def doctor(workspace, env, *args):
    """Run `waaah doctor --json` as a user would; return the process and the checks by name."""
    result = subprocess.run(
        [WAAAH, "doctor", "--json", *args], cwd=workspace, env=env, capture_output=True, text=True, timeout=60
    )
    return result, {c["name"]: c for c in json.loads(result.stdout)["checks"]}


def test_doctor_reports_each_check_and_fails_on_a_failure(tmp_path, workspace):
    home = tmp_path / "home"
    home.mkdir()
    with WaaahServer() as server:
        env = {
            "HOME": str(home),
            "PATH": "/usr/bin:/bin",
            "GEMINI_API_KEY": "k",
            "WAAAH_CLI_DIR": "/nonexistent",
        }
        result, checks = doctor(workspace, env, "--agent", "gemini", "--server", server.url)
    assert (
        checks["gemini CLI"]["status"] == "fail"
        and "scripts/install_clis.sh gemini (the pinned 0.61.0" in checks["gemini CLI"]["fix"]
    )
    # Nothing is said of the login or MCP entry of a CLI that is not installed.
    assert "gemini login" not in checks and "gemini MCP entry" not in checks
    assert checks["WAAAH server"]["status"] == "ok"
    assert checks["git workspace"]["status"] == "ok"
    assert checks["workflow"]["status"] == "ok"
    assert checks[".waaah writable"]["status"] == "ok"
    assert result.returncode == 1


def test_doctor_checks_the_cli_in_use_and_lists_the_others_without_failing(tmp_path, workspace):
    """Someone who uses only gemini (the default): claude, codex and opencode are not set up,
    which is no failure, and no credentials are reported for a CLI that is not installed."""
    from tests.doubles.cli_homes import cli_bin

    only = tmp_path / "bin"
    only.mkdir()
    (only / "gemini").symlink_to(cli_bin("gemini"))
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "HOME": str(home),
        "PATH": f"{only}:/usr/bin:/bin",
        "GEMINI_API_KEY": "k",
        "WAAAH_CLI_DIR": "/nonexistent",
    }
    result, checks = doctor(workspace, env, "--server", "http://127.0.0.1:9")
    print(result.stdout)
    assert checks["gemini CLI"]["status"] == "ok" and checks["gemini login"]["status"] == "ok"
    for other in ("claude", "codex", "opencode"):
        assert checks[f"{other} CLI"]["status"] == "skip", checks[f"{other} CLI"]
        assert "not set up (not installed" in checks[f"{other} CLI"]["detail"]
        assert f"{other} login" not in checks and f"{other} MCP entry" not in checks
    assert [c for c in checks.values() if c["status"] == "fail"] == [checks["WAAAH server"]]
    # Someone who chose claude as the default is checked for claude instead.
    _, chosen = doctor(workspace, {**env, "WAAAH_DEFAULT_AGENT": "claude"}, "--server", "http://127.0.0.1:9")
    assert chosen["claude CLI"]["status"] == "fail" and chosen["gemini CLI"]["status"] == "skip"
    assert "credentials found" in chosen["gemini CLI"]["detail"]


def test_doctor_knows_the_pinned_cli_versions(tmp_path, workspace):
    from tests.doubles.cli_homes import CLI_BIN_DIR, cli_bin

    cli_bin("gemini")  # installed by make test (scripts/install_clis.sh); fails loudly if not
    env = {"HOME": str(tmp_path), "PATH": f"{CLI_BIN_DIR}:/usr/bin:/bin", "GEMINI_API_KEY": "k"}
    _, checks = doctor(workspace, env, "--agent", "gemini")
    assert checks["gemini CLI"]["status"] == "ok" and "0.61.0" in checks["gemini CLI"]["detail"]
    assert checks["gemini CLI"]["version"] == "0.61.0" and checks["gemini CLI"]["standing"] == "pinned"
    assert "version" not in checks["workflow"]  # only a CLI's check says a version


# The user's settings file in every shape the world leaves it in: followed, refused, never blocked.

SERVER = ServerChoice("http://127.0.0.1:9", None, "--server")
GEMINI_LOGIN = adapters.registry()["gemini"].needs_login


def gemini_home(tmp_path):
    """A throwaway HOME with ~/.gemini; returns (env, the settings path)."""
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    return {"HOME": str(home)}, home / ".gemini" / "settings.json"


def within(seconds, call):
    """``call()`` in a thread that must be done in ``seconds``: a read that blocks fails, not hangs."""
    outcome = {}

    def run():
        try:
            outcome["value"] = call()
        except Exception as err:  # the test inspects it
            outcome["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"blocked for more than {seconds} s"
    return outcome


def assert_refused(env, path, match, *, before=None):
    """Reading and editing both raise one clear line naming the file; the file stays as it was."""
    with pytest.raises(UsageError, match=match) as err:
        install_gemini(env, SERVER, datetime(2026, 1, 2, 3, 4, 5))
    assert err.value.exit_code == ExitCode.USAGE and "\n" not in str(err.value)
    assert str(path) in str(err.value)
    if before is not None:
        assert path.read_bytes() == before
    assert not list(path.parent.glob("*.waaah-backup-*")) and not list(path.parent.glob(".*.tmp"))
    return err.value


def test_a_symlinked_settings_file_stays_a_link_and_its_target_is_edited(tmp_path):
    env, settings = gemini_home(tmp_path)
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "gemini-settings.json"
    before = b'{"ui": {"theme": "Dracula"}, "general": {"vimMode": true}}'
    target.write_bytes(before)
    target.chmod(0o640)
    settings.symlink_to(target)

    notes = install_gemini(env, SERVER, datetime(2026, 1, 2, 3, 4, 5))
    assert settings.is_symlink() and os.readlink(settings) == str(target)
    after = json.loads(target.read_text())
    assert list(after) == ["ui", "general", "mcpServers"] and after["mcpServers"]["waaah"]["trust"] is True
    backup = settings.with_name("settings.json.waaah-backup-20260102-030405")
    assert backup.read_bytes() == before and not backup.is_symlink()
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # no key: the mode stays
    assert not list(dotfiles.glob(".*.tmp")) and any(str(target) in n for n in notes)
    assert GEMINI_MCP.existing(env) is not None


def test_a_read_only_settings_file_is_refused_untouched_with_the_entry_to_add(tmp_path):
    env, settings = gemini_home(tmp_path)
    before = b'{"ui": {"theme": "Dracula"}}\n'
    settings.write_bytes(before)
    settings.chmod(0o444)  # no write bit for anyone: read-only even for root
    err = assert_refused(env, settings, "is read-only", before=before)
    assert "chmod u+w" in err.fix and '"waaah": {"command": ' in err.fix
    key = ServerChoice("http://h", "secret-key-123", "x")
    with pytest.raises(UsageError) as keyed:
        install_gemini(env, key, datetime.now())
    assert "secret-key-123" not in str(keyed.value) and "<your WAAAH API key>" in str(keyed.value)
    assert stat.S_IMODE(settings.stat().st_mode) == 0o444 and settings.read_bytes() == before
    assert GEMINI_MCP.existing(env) is None  # reading it is fine


def test_a_settings_file_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path):
    env, settings = gemini_home(tmp_path)
    settings.mkdir()
    assert_refused(env, settings, "is a directory, not a settings file")
    assert GEMINI_MCP.doctor(env).status == "fail" and "directory" in GEMINI_MCP.doctor(env).detail
    settings.rmdir()

    os.mkfifo(settings)
    for call in (
        lambda: GEMINI_MCP.existing(env),
        lambda: install_gemini(env, SERVER, datetime.now()),
        lambda: GEMINI_LOGIN(env),
        lambda: CLAUDE_MCP.existing({"HOME": str(tmp_path)}),
    ):
        outcome = within(5, call)
        if "error" in outcome:
            assert "is a FIFO, not a settings file" in str(outcome["error"])
    assert within(5, lambda: GEMINI_LOGIN(env))["value"] is False  # the MCP step names the file
    (tmp_path / ".claude.json").symlink_to(settings)
    assert within(5, lambda: CLAUDE_MCP.existing({"HOME": str(tmp_path)}))["value"] is None
    assert stat.S_ISFIFO(settings.lstat().st_mode)
    settings.unlink()

    try:
        os.mknod(settings, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null: reads as empty
    except PermissionError:
        settings.symlink_to("/dev/null")
    assert_refused(env, settings, "is a device, not a settings file")
    assert settings.is_symlink() or stat.S_ISCHR(settings.lstat().st_mode)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"[1, 2]", "does not hold a JSON object"),
        (b'"text"', "does not hold a JSON object"),
        (b'{"mcpServers": ["github"]}', '"mcpServers" in .* is not a JSON object'),
        (b'{"ui": "caf\xe9"}', "is not UTF-8 text"),
        (b"{ not json", "cannot parse"),
    ],
)
def test_a_settings_file_of_the_wrong_shape_is_refused_byte_for_byte(tmp_path, content, match):
    env, settings = gemini_home(tmp_path)
    settings.write_bytes(content)
    assert_refused(env, settings, match, before=content)
    with pytest.raises(UsageError, match=match):
        GEMINI_MCP.existing(env)


def test_a_huge_settings_file_is_refused_without_reading_it_all(tmp_path):
    env, settings = gemini_home(tmp_path)
    huge = b'{"pad": "' + b"x" * (4 * 1024 * 1024 + 10) + b'"}'
    settings.write_bytes(huge)
    assert_refused(env, settings, "larger than 4 MB", before=huge)


def test_a_dangling_symlink_is_refused_and_nothing_is_created(tmp_path):
    env, settings = gemini_home(tmp_path)
    missing = tmp_path / "unmounted" / "settings.json"
    settings.symlink_to(missing)
    err = assert_refused(env, settings, "which does not exist")
    assert str(missing) in err.what and "remove the link" in err.fix
    assert os.readlink(settings) == str(missing) and not missing.parent.exists()


def test_a_settings_edit_keeps_every_other_key_in_order(tmp_path):
    env, settings = gemini_home(tmp_path)
    before = {"z": 1, "mcpServers": {"b": {"command": "b"}, "a": {"command": "a"}}, "a": [1, {"x": None}]}
    settings.write_text(json.dumps(before))
    settings.chmod(0o644)
    install_gemini(env, SERVER, datetime.now())
    after = json.loads(settings.read_text())
    waaah = after["mcpServers"].pop("waaah")
    assert after == before and list(after) == list(before) and list(after["mcpServers"]) == ["b", "a"]
    assert waaah["env"] == {"WAAAH_SERVER_URL": SERVER.url}
    assert stat.S_IMODE(settings.stat().st_mode) == 0o644


def test_the_login_check_reads_odd_settings_without_a_traceback(tmp_path):
    env, settings = gemini_home(tmp_path)
    assert GEMINI_LOGIN(env) is True  # no settings, no key
    settings.write_text(json.dumps({"security": "oauth"}))
    assert GEMINI_LOGIN(env) is True
    settings.write_text(json.dumps({"security": {"auth": {"selectedType": "vertex-ai"}}}))
    assert GEMINI_LOGIN(env) is False


def test_a_kept_key_goes_only_to_the_server_it_was_typed_for():
    choose = mcp_setup.choose_server
    kept = {"kept_key": "kept-key", "kept_url": "http://kept"}
    chosen = choose(None, None, {}, None, False, input, **kept)
    assert (chosen.url, chosen.api_key, chosen.key_typed) == ("http://kept", "kept-key", False)
    assert choose("http://kept", None, {}, None, False, input, **kept).api_key == "kept-key"
    assert choose("http://other", None, {}, None, False, input, **kept).api_key is None
    assert choose(None, "flag-key", {}, None, False, input, **kept).api_key == "flag-key"
    entry = mcp_setup.mcpconf.ExistingEntry("ours", "http://entry", True, "entry-key")
    assert choose(None, None, {}, entry, False, input).api_key == "entry-key"  # never silently dropped
    assert choose("http://else", None, {}, entry, False, input).api_key is None
    assert "entry-key" not in repr(entry) and "kept-key" not in repr(chosen)


def test_the_kept_key_file_is_private_and_refused_when_others_may_read_it(tmp_path):
    from waaah_agent.runtime import key_file

    env = {"HOME": str(tmp_path)}
    assert key_file.read(env) is None and key_file.read_server(env) is None
    where = key_file.keep(env, " k3y \n")
    assert key_file.read(env) == "k3y" and stat.S_IMODE(where.stat().st_mode) == 0o600
    assert stat.S_IMODE(where.parent.stat().st_mode) == 0o700
    where.chmod(0o644)
    with pytest.raises(UsageError, match="chmod 600"):
        key_file.read(env)
    where.unlink()
    where.mkdir()
    with pytest.raises(UsageError, match="api-key"):
        key_file.read(env)
    (where.parent / "server").write_text("not a url\n")
    assert key_file.read_server(env) is None
    key_file.keep_server(env, "http://h:1")
    assert key_file.read_server(env) == "http://h:1"


def test_a_settings_file_emptied_by_a_program_rewriting_it_is_waited_for_not_taken_for_none(tmp_path):
    """A program rewriting the file in place empties it first and writes its bytes a moment
    later: read empty then, its settings would be dropped and the backup would be empty."""
    env, settings = gemini_home(tmp_path)
    settings.write_bytes(b"")  # emptied just now; the writer's bytes are still to come
    writer = threading.Timer(0.5, lambda: settings.write_bytes(b'{"ui": {"theme": "Dracula"}}'))
    writer.start()
    try:
        install_gemini(env, SERVER, datetime(2026, 1, 2, 3, 4, 5))
    finally:
        writer.join()
    after = json.loads(settings.read_text())
    assert after["ui"] == {"theme": "Dracula"} and "waaah" in after["mcpServers"]
    (backup,) = settings.parent.glob("settings.json.waaah-backup-*")
    assert json.loads(backup.read_text()) == {"ui": {"theme": "Dracula"}}


def test_a_settings_file_changed_during_the_edit_is_left_as_the_other_program_wrote_it(tmp_path, monkeypatch):
    env, settings = gemini_home(tmp_path)
    settings.write_text('{"ui": {"theme": "Dracula"}}')
    written_meanwhile = b'{"ui": {"theme": "Solarized"}}'
    backup_of = user_file._write_backup

    def backup_then_another_program_writes(*args):
        made = backup_of(*args)
        settings.write_bytes(written_meanwhile)  # the worst moment: between the read and the replace
        return made

    monkeypatch.setattr(user_file, "_write_backup", backup_then_another_program_writes)
    with pytest.raises(UsageError, match="changed while waaah was editing it: nothing was written"):
        install_gemini(env, SERVER, datetime(2026, 1, 2, 3, 4, 5))
    assert settings.read_bytes() == written_meanwhile


def test_two_edits_in_one_second_keep_both_backups_private(tmp_path):
    """Install with a key, then uninstall, in the same second: the second backup holds the key,
    so it is 0600 whatever the file's mode was, and it does not overwrite the first."""
    env, settings = gemini_home(tmp_path)
    before = b'{"ui": {"theme": "Dracula"}}'
    settings.write_bytes(before)
    settings.chmod(0o644)
    now = datetime(2026, 1, 2, 3, 4, 5)
    install_gemini(env, ServerChoice("http://127.0.0.1:9", "sk-test-123456", "--server"), now)
    mcp_setup.remove_entry(settings, now, comments=True)
    backups = sorted(settings.parent.glob("settings.json.waaah-backup-*"))
    assert [b.name for b in backups] == [
        "settings.json.waaah-backup-20260102-030405",
        "settings.json.waaah-backup-20260102-030405.1",
    ]
    assert backups[0].read_bytes() == before and b"sk-test-123456" in backups[1].read_bytes()
    assert all(stat.S_IMODE(b.stat().st_mode) == 0o600 for b in backups)
    assert json.loads(settings.read_text()) == json.loads(before)  # no empty "mcpServers" left


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can edit a file another user owns")
def test_a_file_edited_as_root_keeps_its_owner(tmp_path):
    """`sudo -E waaah mcp install`: the user's file and its backup stay the user's."""
    env, settings = gemini_home(tmp_path)
    settings.write_text('{"ui": {"theme": "Dracula"}}')
    os.chown(settings, 65534, 65534)
    install_gemini(env, ServerChoice("http://127.0.0.1:9", "sk-test-123456", "--server"), datetime.now())
    (backup,) = settings.parent.glob("settings.json.waaah-backup-*")
    for path in (settings, backup):
        assert (path.stat().st_uid, path.stat().st_gid) == (65534, 65534), path
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600  # it holds the key now


def test_an_entry_waaah_did_not_write_is_replaced_or_removed_only_when_asked(tmp_path):
    env, settings = gemini_home(tmp_path)
    theirs = {"mcpServers": {"waaah": {"httpUrl": "https://hub.example.com/mcp"}}}
    settings.write_text(json.dumps(theirs))
    before = settings.read_bytes()
    with pytest.raises(UsageError, match='has a "waaah" entry that waaah did not write: left as it is'):
        install_gemini(env, SERVER, datetime(2026, 1, 2, 3, 4, 5))
    with pytest.raises(UsageError, match="--replace"):
        mcp_setup.remove_entry(settings, datetime(2026, 1, 2, 3, 4, 5))
    assert settings.read_bytes() == before and not list(settings.parent.glob("*.waaah-backup-*"))
    assert mcp_setup.remove_entry(settings, datetime(2026, 1, 2, 3, 4, 5), replace=True)
    assert json.loads(settings.read_text()) == {}


def test_gemini_settings_with_comments_are_read_as_gemini_reads_them_and_never_rewritten(tmp_path):
    env, settings = gemini_home(tmp_path)
    commented = (
        b'// my settings\n{\n  "ui": {"theme": "Dracula"}, /* dark */\n'
        b'  "general": {"url": "http://example.com//x"}\n}\n'
    )
    settings.write_bytes(commented)
    assert GEMINI_MCP.existing(env) is None  # read, not refused
    assert GEMINI_LOGIN(env) is True  # no key, no login method chosen in it: gemini will ask
    read = user_file.read_config(settings, comments=True)
    assert read.data == {"ui": {"theme": "Dracula"}, "general": {"url": "http://example.com//x"}}
    assert read.commented
    with pytest.raises(UsageError, match="holds comments, which rewriting it would lose"):
        install_gemini(env, SERVER, datetime(2026, 1, 2, 3, 4, 5))
    assert settings.read_bytes() == commented and not list(settings.parent.glob("*.waaah-backup-*"))


def test_what_json_cannot_spell_again_is_refused_and_text_stays_as_it_was(tmp_path):
    env, settings = gemini_home(tmp_path)
    settings.write_text('{"n": 1e400}')
    with pytest.raises(UsageError, match="a number too large to write back"):
        install_gemini(env, SERVER, datetime(2026, 1, 2, 3, 4, 5))
    assert settings.read_text() == '{"n": 1e400}'
    settings.write_text('{"ui": {"greeting": "h\u00e9llo \u4f60\u597d"}}', encoding="utf-8")
    install_gemini(env, SERVER, datetime(2026, 1, 2, 3, 4, 6))
    assert '"greeting": "héllo 你好"' in settings.read_text(encoding="utf-8")
