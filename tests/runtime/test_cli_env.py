"""What `waaah run` gives a CLI of the environment: its own provider's variables, none of the others'."""

from __future__ import annotations

import json
import os

from waaah_agent import adapters
from waaah_agent.runtime.cli_env import for_cli

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
}


def given(name: str, ws, passed: tuple[str, ...] = ()) -> set[str]:
    known = adapters.registry()
    adapter = known[name]
    own = (*adapter.provider_env, *adapter.config_env(ENV, ws))
    others = [p for a in known.values() if a is not adapter for p in a.provider_env]
    return set(for_cli(ENV, own, others, passed))


def test_each_cli_gets_essentials_its_provider_and_ours_and_no_other_secret(tmp_path):
    common = {"PATH", "HOME", "LC_ALL", "https_proxy", "EDITOR", "WAAAH_API_KEY"}
    assert given("gemini", tmp_path) == common | {"GEMINI_API_KEY", "GOOGLE_CLOUD_PROJECT"}
    assert given("claude", tmp_path) == common | {"ANTHROPIC_API_KEY"}
    assert given("codex", tmp_path) == common | {"OPENAI_API_KEY"}
    assert given("claude", tmp_path, ("AWS_", "GITHUB_TOKEN")) == common | {
        "ANTHROPIC_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_REGION",
        "GITHUB_TOKEN",
    }


def test_a_variable_the_cli_s_own_config_names_is_passed(tmp_path):
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text('[model_providers.gw]\nenv_key = "MY_GATEWAY_KEY"\n')
    env = {**ENV, "CODEX_HOME": str(codex_home)}
    assert adapters.registry()["codex"].config_env(env, tmp_path) == ("MY_GATEWAY_KEY",)
    (tmp_path / "opencode.json").write_text(
        json.dumps({"provider": {"x": {"options": {"apiKey": "{env:MY_GATEWAY_KEY}"}}}})
    )
    assert adapters.registry()["opencode"].config_env(ENV, tmp_path) == ("MY_GATEWAY_KEY",)


def test_unreadable_configs_name_nothing_and_never_block(tmp_path):
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    os.mkfifo(codex_home / "config.toml")
    (tmp_path / "opencode.json").mkdir()
    assert adapters.registry()["codex"].config_env({**ENV, "CODEX_HOME": str(codex_home)}, tmp_path) == ()
    assert adapters.registry()["opencode"].config_env(ENV, tmp_path) == ()
