"""gemini's home of its own per run, on real files: what it links, what it carries back, what it
leaves alone, and what it does with a home left behind by a killed supervisor."""

from __future__ import annotations

import json
import os
import stat
from datetime import datetime
from pathlib import Path

import pytest

from waaah_agent import adapters
from waaah_agent.errors import UsageError
from waaah_agent.runtime.mcp.cli_home import MANIFEST, PerRunHome, homes_root
from waaah_agent.runtime.mcp.givers import giver
from waaah_agent.runtime.mcp.setup import ServerChoice

GEMINI = giver(adapters.registry()["gemini"].mcp)
assert isinstance(GEMINI, PerRunHome)
SERVER = ServerChoice("http://127.0.0.1:9", "secret-key-123", "--server")
USER_SETTINGS = {"ui": {"theme": "Dracula"}, "mcpServers": {"github": {"command": "gh"}}}


def fixed(now: datetime) -> PerRunHome:
    return PerRunHome(
        GEMINI.home_var,
        GEMINI.folder,
        GEMINI.entry,
        GEMINI.run_settings,
        GEMINI.persistent,
        GEMINI.comments,
        now=lambda: now,
    )


@pytest.fixture
def user(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    """A HOME whose ~/.gemini holds settings, a session folder, a state file; (env, .gemini, session)."""
    home = tmp_path / "home"
    folder = home / ".gemini"
    (folder / "tmp" / "proj" / "chats").mkdir(parents=True)
    (folder / "settings.json").write_text(json.dumps(USER_SETTINGS))
    (folder / "projects.json").write_text(json.dumps({"projects": {"/old": "old"}}))
    (folder / "installation_id").write_text("id-1")
    session = tmp_path / "ws" / ".waaah" / "sessions" / "gemini-20261125-010203-abcdef"
    session.mkdir(parents=True)
    return {"HOME": str(home)}, folder, session


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_run_gets_the_user_s_folder_linked_and_its_settings_laid_over(user):
    env, folder, session = user
    before = snapshot(folder)
    given = GEMINI.give(env, SERVER, session, {})
    home = Path(given.env["GEMINI_CLI_HOME"])
    assert home.parent == homes_root(env) and home.name == session.name
    assert not home.is_relative_to(session.parent.parent.parent)  # never inside the workspace
    run = home / ".gemini"
    assert os.readlink(run / "tmp") == str(folder / "tmp") and os.readlink(run / "projects.json")
    settings = json.loads((run / "settings.json").read_text())
    assert settings["ui"] == USER_SETTINGS["ui"] and settings["mcpServers"]["github"] == {"command": "gh"}
    # The key is gemini's to fill in from its environment: no file of the home holds it.
    assert settings["mcpServers"]["waaah"]["env"]["WAAAH_API_KEY"] == "${WAAAH_API_KEY}"
    assert given.env["WAAAH_API_KEY"] == "secret-key-123"
    assert not [
        p for p in home.rglob("*") if p.is_file() and not p.is_symlink() and b"secret-key" in p.read_bytes()
    ]
    assert settings["model"]["disableLoopDetection"] is True
    for private in (home, run):
        assert stat.S_IMODE(private.stat().st_mode) == 0o700
    for secret in (run / "settings.json", home / MANIFEST):
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert snapshot(folder) == before  # the user's files: not a byte changed
    assert GEMINI.finish(env, session) == [] and not home.exists()
    assert snapshot(folder) == before


def test_what_gemini_renamed_created_or_changed_goes_back_and_only_that(user):
    env, folder, session = user
    run = Path(GEMINI.give(env, SERVER, session, {}).env["GEMINI_CLI_HOME"]) / ".gemini"
    # gemini renames a new projects.json over the link; meanwhile another gemini adds a project.
    (run / "projects.json").unlink()
    (run / "projects.json").write_text(json.dumps({"projects": {"/old": "old", "/ws": "ws"}}))
    (folder / "projects.json").write_text(json.dumps({"projects": {"/old": "old", "/other": "other"}}))
    # It renames a new installation_id over its link (the user's file unchanged since).
    (run / "installation_id").unlink()
    (run / "installation_id").write_text("id-2")
    # It creates what the user had none of: a folder and a file.
    (run / "history" / "ws").mkdir(parents=True)
    (run / "history" / "ws" / "log").write_text("x")
    (run / "oauth_creds.json").write_text('{"token": "t"}')
    # It records a login method chosen at its first start in its settings.
    settings = json.loads((run / "settings.json").read_text())
    settings.setdefault("security", {})["auth"] = {"selectedType": "gemini-api-key"}
    (run / "settings.json").write_text(json.dumps(settings))

    notes = fixed(datetime(2026, 11, 25, 1, 2, 3)).after_run(env, session)
    assert json.loads((folder / "projects.json").read_text())["projects"] == {
        "/old": "old",
        "/other": "other",
        "/ws": "ws",
    }
    assert (folder / "installation_id").read_text() == "id-2"
    assert (folder / "history" / "ws" / "log").read_text() == "x"
    assert json.loads((folder / "oauth_creds.json").read_text()) == {"token": "t"}
    for name in ("projects.json", "installation_id", "history", "oauth_creds.json"):
        assert os.readlink(run / name) == str(folder / name)  # linked again for the next run
    user_settings = json.loads((folder / "settings.json").read_text())
    assert user_settings == {**USER_SETTINGS, "security": {"auth": {"selectedType": "gemini-api-key"}}}
    assert "secret-key-123" not in (folder / "settings.json").read_text()
    backup = folder / "settings.json.waaah-backup-20261125-010203"
    assert json.loads(backup.read_text()) == USER_SETTINGS
    assert any("backed up" in n for n in notes)
    assert fixed(datetime(2026, 11, 25, 1, 2, 4)).after_run(env, session) == []  # nothing new
    assert len(list(folder.glob("settings.json.waaah-backup-*"))) == 1


def test_a_changed_user_file_is_kept_when_the_run_s_cannot_be_merged(user):
    env, folder, session = user
    run = Path(GEMINI.give(env, SERVER, session, {}).env["GEMINI_CLI_HOME"]) / ".gemini"
    (run / "installation_id").unlink()
    (run / "installation_id").write_text("id-run")
    (folder / "installation_id").write_text("id-user")  # changed by someone else meanwhile
    notes = GEMINI.after_run(env, session)
    assert (folder / "installation_id").read_text() == "id-user"
    assert any("kept your" in n for n in notes)


def test_a_home_left_by_a_killed_supervisor_is_settled_at_the_next_start(user):
    env, folder, session = user
    run = Path(GEMINI.give(env, SERVER, session, {}).env["GEMINI_CLI_HOME"]) / ".gemini"
    (run / "google_accounts.json").write_text('{"active": "me"}')  # then the supervisor is SIGKILLed
    given = GEMINI.give(env, SERVER, session, {})  # --resume of the same session
    assert json.loads((folder / "google_accounts.json").read_text()) == {"active": "me"}
    assert os.readlink(Path(given.env["GEMINI_CLI_HOME"]) / ".gemini" / "google_accounts.json")


def test_a_fresh_home_without_a_gemini_folder(tmp_path):
    env = {"HOME": str(tmp_path / "home")}
    session = tmp_path / "s1"
    session.mkdir()
    run = Path(GEMINI.give(env, SERVER, session, {}).env["GEMINI_CLI_HOME"]) / ".gemini"
    assert sorted(os.listdir(run)) == ["settings.json"]
    (run / "tmp").mkdir()  # gemini makes its folders
    GEMINI.finish(env, session)
    assert (tmp_path / "home" / ".gemini" / "tmp").is_dir()
    assert not (tmp_path / "home" / ".gemini" / "settings.json").exists()  # we wrote none for the user


def test_the_user_s_own_gemini_home_variable_is_where_the_user_s_files_are(tmp_path):
    own = tmp_path / "elsewhere"
    (own / ".gemini").mkdir(parents=True)
    (own / ".gemini" / "settings.json").write_text("{}")
    env = {"HOME": str(tmp_path / "home"), "GEMINI_CLI_HOME": str(own)}
    session = tmp_path / "s2"
    session.mkdir()
    home = Path(GEMINI.give(env, SERVER, session, {}).env["GEMINI_CLI_HOME"])
    assert home != own and json.loads((home / ".gemini" / "settings.json").read_text())["mcpServers"]


def test_a_damaged_user_settings_file_is_refused_and_an_unwritable_state_folder_is_one_line(user, tmp_path):
    env, folder, session = user
    (folder / "settings.json").write_text("{ not json")
    with pytest.raises(UsageError, match="cannot parse"):
        GEMINI.give(env, SERVER, session, {})
    (folder / "settings.json").write_text("{}")
    blocked = tmp_path / "state-is-a-file"
    blocked.write_text("")
    with pytest.raises(UsageError, match="cannot prepare this run's .gemini") as err:
        GEMINI.give({**env, "XDG_STATE_HOME": str(blocked)}, SERVER, session, {})
    assert "\n" not in str(err.value)


def test_settle_never_follows_or_removes_through_the_links(user):
    env, folder, session = user
    home = Path(GEMINI.give(env, SERVER, session, {}).env["GEMINI_CLI_HOME"])
    GEMINI.finish(env, session)
    assert not home.exists()
    assert (folder / "tmp" / "proj" / "chats").is_dir() and (folder / "projects.json").exists()


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_text("{not json"),
        lambda p: p.write_text("[1, 2]"),
        lambda p: p.write_text(json.dumps({"user_folder": 7, "written": {}})),
        lambda p: p.write_text(json.dumps({"user_folder": "/x", "snapshot": [1], "written": {}})),
        lambda p: p.write_text(json.dumps({"user_folder": "/x", "written": ["not", "a", "dict"]})),
        lambda p: p.write_bytes(b"\xff\xfe" * 10),
        lambda p: p.write_bytes(b" " * (2 * 1024 * 1024)),  # over the cap: never read whole
        lambda p: (p.unlink(), os.mkfifo(p)),  # a FIFO in its place: never blocks
        lambda p: p.unlink(),
    ],
)
def test_a_damaged_manifest_carries_nothing_back_and_never_fails_the_start(user, damage):
    """The manifest of a home left behind is ours, but a disk, a crash or a hand can damage it:
    the next start carries nothing back from that home (one can't tell what came from where), the
    user's folder stays as it was, that home is kept aside (what gemini wrote there is not lost)
    and the session starts with a fresh home."""
    env, folder, session = user
    run = Path(GEMINI.give(env, SERVER, session, {}).env["GEMINI_CLI_HOME"]) / ".gemini"
    (run / "google_accounts.json").write_text('{"active": "me"}')  # a login gemini made in the run
    damage(run.parent / MANIFEST)
    before = snapshot(folder)
    given = GEMINI.give(env, SERVER, session, {})  # the next start of the session
    assert snapshot(folder) == before
    fresh = Path(given.env["GEMINI_CLI_HOME"]) / ".gemini"
    assert json.loads((fresh / "settings.json").read_text())["mcpServers"]["waaah"]
    assert json.loads((fresh.parent / MANIFEST).read_text())["user_folder"] == str(folder)
    (kept,) = fresh.parent.parent.glob(f"{session.name}.kept-*")
    assert json.loads((kept / ".gemini" / "google_accounts.json").read_text()) == {"active": "me"}
    assert any(str(kept) in note for note in given.notes)
