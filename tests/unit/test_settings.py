"""Settings: the flag, else the WAAAH_* variable, else the default; bad values are clear errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from waaah_agent import settings
from waaah_agent.commands.app import EXIT_TABLE, RUN_EXITS, app
from waaah_agent.core.failures import ErrorType
from waaah_agent.core.supervise.backoff import BackoffConfig
from waaah_agent.core.supervise.policy import PolicyConfig
from waaah_agent.errors import RUN_EXIT_BY_TYPE, ExitCode, UsageError, exit_codes, run_exit_code
from waaah_agent.runtime.oneshot.run_io import RunOptions
from waaah_agent.runtime.supervise.session.options import AgentOptions

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_durations_flag_then_env_then_default() -> None:
    env = {settings.SERVER_CHECK_SECONDS: "7.5"}
    assert settings.seconds(env, settings.SERVER_CHECK_SECONDS, 30.0, flag=2.0) == 2.0
    assert settings.seconds(env, settings.SERVER_CHECK_SECONDS, 30.0) == 7.5
    assert settings.seconds({}, settings.SERVER_CHECK_SECONDS, 30.0) == 30.0
    assert settings.seconds({settings.SERVER_CHECK_SECONDS: " "}, settings.SERVER_CHECK_SECONDS, 30.0) == 30.0


@pytest.mark.parametrize("raw", ["soon", "1e999", "nan", "-1", "5s"])
def test_a_bad_duration_names_the_variable(raw: str) -> None:
    with pytest.raises(
        UsageError, match=rf"WAAAH_LIMIT_MARGIN_SECONDS must be a number of seconds.*{re.escape(raw)}"
    ):
        settings.agent_env({settings.LIMIT_MARGIN_SECONDS: raw})


def test_agent_env_defaults_and_values() -> None:
    assert settings.agent_env({}) == settings.AgentEnv(30.0, 60.0, 1800.0, 1.0)
    got = settings.agent_env(
        {
            "WAAAH_SERVER_CHECK_SECONDS": "1",
            "WAAAH_LIMIT_MARGIN_SECONDS": "2",
            "WAAAH_LIMIT_DEFAULT_SECONDS": "3",
            "WAAAH_RESTART_BASE_SECONDS": "0.5",
        }
    )
    assert got == settings.AgentEnv(1.0, 2.0, 3.0, 0.5)


def test_proxy_settings_flag_then_env_then_default(tmp_path: Path) -> None:
    env = {
        "WAAAH_SERVER_URL": "http://env:1",
        "WAAAH_API_KEY": "k-env",
        "WAAAH_AGENT_ID": "a-env",
        "WAAAH_INBOX": str(tmp_path / "env.jsonl"),
        "WAAAH_PROXY_LOG_LEVEL": "debug",
    }
    from_env = settings.proxy_settings(env)
    assert (from_env.server_url, from_env.api_key, from_env.agent_id) == ("http://env:1", "k-env", "a-env")
    assert from_env.inbox == tmp_path / "env.jsonl" and from_env.log_level == "DEBUG"
    flags = settings.proxy_settings(env, "http://flag:2", "k-flag", "a-flag", tmp_path / "flag.jsonl")
    assert (flags.server_url, flags.api_key, flags.agent_id) == ("http://flag:2", "k-flag", "a-flag")
    assert flags.inbox == tmp_path / "flag.jsonl"
    bare = settings.proxy_settings({"WAAAH_API_KEY": ""})
    assert (bare.server_url, bare.api_key, bare.agent_id, bare.inbox) == (
        "http://localhost:3456",
        None,
        None,
        None,
    )
    assert bare.log_level == "WARNING"


def test_server_and_run_choices() -> None:
    env = {"WAAAH_SERVER_URL": "http://env", "WAAAH_DEFAULT_AGENT": "claude", "WAAAH_PARENT_ID": "p-env"}
    assert settings.server_url("http://flag", env) == ("http://flag", "--server")
    assert settings.server_url(None, env) == ("http://env", "WAAAH_SERVER_URL")
    assert settings.server_url(None, {}) is None
    keyed = {**env, "WAAAH_API_KEY": "k-env"}
    assert settings.waaah_server(None, None, keyed) == settings.WaaahServer(
        "http://env", "WAAAH_SERVER_URL", "k-env"
    )
    assert settings.waaah_server("http://flag", "k", keyed) == settings.WaaahServer(
        "http://flag", "--server", "k"
    )
    assert settings.waaah_server(None, None, {}) == settings.WaaahServer(
        settings.DEFAULT_SERVER_URL, "default", None
    )
    assert settings.run_agent_name("codex", "gemini", env) == "codex"
    assert settings.run_agent_name(None, "gemini", env) == "gemini"
    assert settings.run_agent_name(None, None, env) == "claude"
    assert settings.run_agent_name(None, None, {}) == "gemini"
    assert settings.parent_id("p-flag", env) == "p-flag" and settings.parent_id(None, env) == "p-env"
    assert settings.parent_id(None, {}) == ""
    assert settings.proxy_env("http://h", None) == {"WAAAH_SERVER_URL": "http://h"}


def test_each_default_has_one_source() -> None:
    options = AgentOptions(start="gemini")
    assert options.stop_grace == settings.STOP_GRACE and options.workflow == settings.DEFAULT_WORKFLOW
    assert options.limit_margin == settings.LIMIT_MARGIN and options.limit_default == settings.LIMIT_DEFAULT
    assert options.server_check_every == settings.SERVER_CHECK_EVERY
    assert RunOptions().timeout == settings.RUN_TIMEOUT
    assert (
        PolicyConfig().heartbeat == settings.HEARTBEAT
        and PolicyConfig().stall_timeout == settings.STALL_TIMEOUT
    )
    assert (
        BackoffConfig().budget == settings.RESTART_BUDGET
        and BackoffConfig().window == settings.RESTART_WINDOW
    )


def test_a_bad_variable_is_one_line_and_exit_2_not_a_traceback(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["agent", "--start=simulated", "--workspace", str(tmp_path)],
        env={"WAAAH_SERVER_CHECK_SECONDS": "often"},
    )
    assert result.exit_code == ExitCode.USAGE
    assert "waaah: WAAAH_SERVER_CHECK_SECONDS must be a number of seconds" in result.output
    assert "Traceback" not in result.output


def test_exit_code_tables_come_from_one_definition() -> None:
    assert run_exit_code(None) == 0 and run_exit_code(ErrorType.TIMEOUT) == 12
    assert set(RUN_EXIT_BY_TYPE) == set(ErrorType)  # every error type has its code
    assert RUN_EXITS.startswith("0: answered; 2: invalid input; 6: auth; 7: unknown or invalid session")
    assert (
        "11: the agent kept crashing: the restart budget (--restart-budget, default 5 per 30 minutes)"
        in EXIT_TABLE
    )
    assert "default 3 per 10 minutes" in exit_codes(3, 600)[ExitCode.RESTARTS_SPENT]


def test_the_docs_list_the_same_exit_codes() -> None:
    text = (DOCS / "supervisor.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (\d+) \| (.+?) \|$", text, re.MULTILINE))
    assert {int(code) for code in rows} == set(exit_codes(settings.RESTART_BUDGET, settings.RESTART_WINDOW))
    text = (DOCS / "run.md").read_text(encoding="utf-8")
    line = re.search(r"Exit codes of `waaah run`: (.+?)\.\n\n", text, re.DOTALL)
    assert line is not None
    listed = [int(n) for n in re.findall(r"(\d+) [a-z]", line.group(1))]
    assert listed == [int(code) for code in re.findall(r"(\d+): ", RUN_EXITS)]
