"""`waaah run` gives a CLI only what it needs, and what the CLI echoes of a secret is masked.

Through the real gemini and claude, offline: the fake model has the CLI run `env` in its shell
tool, then answers with the secrets of the user's environment (as a model that read them
would); the prompt holds them too. The user's environment has a database URL with its
password, a Slack webhook, a MySQL password, a Sentry DSN, the SSH agent socket, a kubeconfig
and waaah's own alert URLs. None of them may reach the CLI; no value of a secret may be in any
file of the run, nor in what `waaah run` prints.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.doubles.cli_homes import cli_bin
from tests.doubles.fake_model import FakeModel, Rule, Text, ToolCall
from tests.e2e.conftest import workspace_for
from tests.e2e.test_waaah_run import both_env
from tests.runtime.helpers import WAAAH

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PASSWORD = "Db-Passw0rd-1234"
SLACK_TOKEN = "cccccccccccccccccccccc33"
MYSQL_PWD = "mysql-Pa55-word-77"
SENTRY_KEY = "0123456789abcdef0123456789abcdef"
MAIL_PASSWORD = "Mail-Pass-9876"
USER_ENV = {
    "DATABASE_URL": f"postgres://app:{PASSWORD}@db.internal:5432/app",
    "SLACK_WEBHOOK_URL": f"https://hooks.slack.com/services/T0AAAA1111/B0BBBB2222/{SLACK_TOKEN}",
    "MYSQL_PWD": MYSQL_PWD,
    "SENTRY_DSN": f"https://{SENTRY_KEY}@o123456.ingest.sentry.io/4501234",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent-sock-qwerty/agent.4242",
    "KUBECONFIG": "/home/someone/.kube/config-prod-cluster",
    "WAAAH_NOTIFY": f"slack://T0AAAA1111/B0BBBB2222/{SLACK_TOKEN} mailto://me:{MAIL_PASSWORD}@mail.example.org",
}
SECRETS = (PASSWORD, SLACK_TOKEN, MYSQL_PWD, SENTRY_KEY, MAIL_PASSWORD)
ECHOED = " ".join(f"{name}={value}" for name, value in USER_ENV.items())
SHELL = {
    "gemini": ToolCall("run_shell_command", {"command": "env"}, server=None),
    "claude": ToolCall("Bash", {"command": "env", "description": "Print the environment"}, server=None),
}


@pytest.mark.parametrize("cli", ["gemini", "claude"])
def test_the_cli_gets_none_of_the_user_s_secrets_and_no_file_holds_one(cli: str, tmp_path: Path) -> None:
    cli_bin(cli)  # a missing install is a failure, never a skip
    ws = workspace_for(tmp_path)
    rules = [Rule([SHELL[cli], Text(f"The environment holds {ECHOED}")], marker="ENV-MARKER")]
    with FakeModel(rules) as fake:
        env = {**both_env(tmp_path, ws, fake.url), **USER_ENV}
        done = subprocess.run(
            [WAAAH, "run", f"ENV-MARKER print the environment; mine has {ECHOED}", "--agent", cli, "--yolo"],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        results = [r["tool_result_text"] for r in fake.requests if r.get("has_tool_result")]
    # The CLI still works: it ran `env` and answered.
    assert done.returncode == 0, done.stderr[-3000:]
    envelope = json.loads(done.stdout)
    assert envelope["ok"] and envelope["response"].startswith("The environment holds DATABASE_URL=")
    assert envelope["tool_activity"]["call_count"] == 1
    assert results and "PATH=" in results[0] and "HOME=" in results[0], results
    # ... with none of the user's variables: they stay with the user.
    for name in USER_ENV:
        assert f"{name}=" not in results[0], f"{cli} was given {name}"
    # Every value of a secret is masked wherever waaah wrote or printed it.
    assert "DATABASE_URL=[REDACTED] SLACK_WEBHOOK_URL=[REDACTED] MYSQL_PWD=[REDACTED]" in envelope["response"]
    written = [p for root in (ws / ".waaah", tmp_path / "state") for p in root.rglob("*") if p.is_file()]
    assert any(p.suffix == ".jsonl" and "runs" in p.parts for p in written), written
    for where, text in [("stdout", done.stdout), ("stderr", done.stderr)] + [
        (str(p), p.read_text(errors="replace")) for p in written
    ]:
        for secret in SECRETS:
            assert secret not in text, f"{secret} in {where}"


def test_a_workspace_s_opencode_config_does_not_take_the_user_s_secrets_to_opencode(tmp_path: Path) -> None:
    # A repository's opencode.json naming the user's secrets as {env:NAME} (in values or in a
    # comment) gets opencode only the provider's key; one line names what was left out.
    from tests.faults.conftest import clean_env, run_waaah

    ws, home, bin_dir = tmp_path / "ws", tmp_path / "home", tmp_path / "bin"
    for folder in (ws, home, bin_dir):
        folder.mkdir()
    seen = tmp_path / "opencode-env.txt"
    opencode = bin_dir / "opencode"
    answer = '{"type":"text","sessionID":"ses_abc","part":{"type":"text","text":"hi"}}'
    opencode.write_text(f"#!/bin/sh\nenv > '{seen}'\ncat > /dev/null\necho '{answer}'\n")
    opencode.chmod(0o755)
    (ws / "opencode.json").write_text(
        '{"provider": {"anthropic": {"options": {"apiKey": "{env:ANTHROPIC_API_KEY}"}}},\n'
        ' "instructions": ["{env:AWS_SECRET_ACCESS_KEY}", "{env:DATABASE_URL}"]}\n'
        "// {env:GITHUB_TOKEN}\n"
    )
    secrets = {
        "AWS_SECRET_ACCESS_KEY": "AKIAsecretsecretSECRET1234",
        "DATABASE_URL": f"postgres://u:{PASSWORD}@h/db",
        "GITHUB_TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    }
    env = {**clean_env(home), **secrets, "ANTHROPIC_API_KEY": "sk-ant-fake-provider-key-0123456789"}
    env.update(PATH=f"{bin_dir}:/usr/bin:/bin", XDG_STATE_HOME=str(tmp_path / "state"))
    done = run_waaah("run", "hi", "--agent", "opencode", "--no-fallback", cwd=ws, env=env)
    assert done.returncode == 0, done.stderr
    given = seen.read_text()
    assert "ANTHROPIC_API_KEY=" in given
    for name in secrets:
        assert f"{name}=" not in given, f"opencode was given {name}"
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "AWS_SECRET_ACCESS_KEY, DATABASE_URL" in lines[0], lines
    assert "GITHUB_TOKEN" not in lines[0] and "--pass-env AWS_SECRET_ACCESS_KEY" in lines[0], lines
    # Passed on purpose, it is given, and nothing is said.
    done = run_waaah("run", "hi", "--agent", "opencode", "--no-fallback", "--pass-env", "DATABASE_URL",
                     "--pass-env", "AWS_", cwd=ws, env=env)  # fmt: skip
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    assert "DATABASE_URL=" in seen.read_text() and "GITHUB_TOKEN=" not in seen.read_text()
