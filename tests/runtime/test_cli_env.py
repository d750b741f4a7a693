"""What `waaah run` gives a CLI of the environment: the essentials, its own variables, what the
user passes; nothing else."""

from __future__ import annotations

import json
import os

from waaah_agent import adapters
from waaah_agent.runtime.oneshot.cli_env import for_cli

ENV = {
    "PATH": "/usr/bin",
    "HOME": "/home/u",
    "LC_ALL": "C.UTF-8",
    "https_proxy": "http://proxy:3128",
    "EDITOR": "vim",
    "GEMINI_API_KEY": "g" * 20,
    "GOOGLE_CLOUD_PROJECT": "p",
    "ANTHROPIC_API_KEY": "a" * 20,
    "OPENAI_API_KEY": "o" * 20,
    "AWS_SECRET_ACCESS_KEY": "w" * 20,
    "AWS_REGION": "eu-west-1",
    "GITHUB_TOKEN": "t" * 20,
    "WAAAH_API_KEY": "k" * 20,
    "MY_GATEWAY_KEY": "m" * 20,
    "WAAAH_SERVER_URL": "http://127.0.0.1:9",
    "WAAAH_NOTIFY": "slack://T0AAAA/B0BBBB/cccccccccccccccccccccccc",
    "DATABASE_URL": "postgres://app:hunter2hunter2@db:5432/app",
    "SSH_AUTH_SOCK": "/tmp/ssh-x/agent.1",
    "KUBECONFIG": "/home/u/.kube/config",
    "BUILD_FLAVOUR": "release",
}


def given(name: str, ws, passed: tuple[str, ...] = ()) -> set[str]:
    known = adapters.registry()
    adapter = known[name]
    own = (*adapter.provider_env, *adapter.config_env(ENV, ws))
    return set(for_cli(ENV, own, passed))


def test_each_cli_gets_essentials_its_provider_and_ours_and_nothing_else(tmp_path):
    common = {"PATH", "HOME", "LC_ALL", "https_proxy", "EDITOR", "WAAAH_API_KEY", "WAAAH_SERVER_URL"}
    assert given("gemini", tmp_path) == common | {"GEMINI_API_KEY", "GOOGLE_CLOUD_PROJECT"}
    assert given("claude", tmp_path) == common | {"ANTHROPIC_API_KEY"}
    assert given("codex", tmp_path) == common | {"OPENAI_API_KEY"}
    assert given("claude", tmp_path, ("AWS_", "GITHUB_TOKEN")) == common | {
        "ANTHROPIC_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_REGION",
        "GITHUB_TOKEN",
    }
    assert given("gemini", tmp_path, ("DATABASE_URL", "BUILD_")) == common | {
        "GEMINI_API_KEY",
        "GOOGLE_CLOUD_PROJECT",
        "DATABASE_URL",
        "BUILD_FLAVOUR",
    }


def test_a_variable_the_cli_s_own_config_names_is_passed(tmp_path):
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text('[model_providers.gw]\nenv_key = "MY_GATEWAY_KEY"\n')
    env = {**ENV, "CODEX_HOME": str(codex_home)}
    assert adapters.registry()["codex"].config_env(env, tmp_path) == ("MY_GATEWAY_KEY",)
    mine = tmp_path / "config" / "opencode"
    mine.mkdir(parents=True)
    (mine / "opencode.json").write_text(
        json.dumps({"provider": {"x": {"options": {"apiKey": "{env:MY_GATEWAY_KEY}"}}}})
    )
    opencode = adapters.registry()["opencode"]
    env = {**ENV, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    assert opencode.config_env(env, tmp_path) == ("MY_GATEWAY_KEY",)
    assert opencode.config_env_refused(env, tmp_path) == ()


def test_a_workspace_s_opencode_config_may_name_only_model_providers_keys(tmp_path):
    # Anyone who can commit to the repository wrote it: a provider's key, yes; a cloud
    # credential, a database URL, a token, or a name in a comment: not given, and said so.
    (tmp_path / "opencode.jsonc").write_text(
        "// {env:GITHUB_TOKEN}\n/* {env:DATABASE_URL} */\n"
        + json.dumps(
            {
                "provider": {"a": {"options": {"apiKey": "{env:ANTHROPIC_API_KEY}"}}},
                "x": "{env:AWS_SECRET_ACCESS_KEY} {env:MY_GATEWAY_KEY} {env:UNSET_TOKEN}",
                "url": "http://host//{env:BUILD_FLAVOUR}",
            }
        )
    )
    opencode = adapters.registry()["opencode"]
    assert opencode.config_env(ENV, tmp_path) == ("ANTHROPIC_API_KEY",)
    assert opencode.config_env_refused(ENV, tmp_path) == (
        "AWS_SECRET_ACCESS_KEY",
        "MY_GATEWAY_KEY",
        "BUILD_FLAVOUR",
    )
    assert given("opencode", tmp_path) >= {"ANTHROPIC_API_KEY"}
    assert not given("opencode", tmp_path) & {"AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "DATABASE_URL"}


def test_unreadable_configs_name_nothing_and_never_block(tmp_path):
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    os.mkfifo(codex_home / "config.toml")
    (tmp_path / "opencode.json").mkdir()
    assert adapters.registry()["codex"].config_env({**ENV, "CODEX_HOME": str(codex_home)}, tmp_path) == ()
    assert adapters.registry()["opencode"].config_env(ENV, tmp_path) == ()
