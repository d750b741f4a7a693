"""The model of each CLI of a `waaah run` chain (core/models.py): precedence, aliases, the shape
of a providers file, and the one model retry after an invalid model or a capacity error."""

from __future__ import annotations

from typing import Any

import pytest

from waaah_agent.adapters import registry
from waaah_agent.adapters.gemini import models as gemini_models
from waaah_agent.core import failures as F
from waaah_agent.core.failures import Failure
from waaah_agent.core.oneshot import models
from waaah_agent.core.oneshot.models import BadProviders, Providers, Resolution, parse, resolve, retry_model

KNOWN = ["claude", "codex", "gemini", "opencode"]
BUNDLED = models.bundled(KNOWN, {n: a.model_aliases for n, a in registry().items()})


def smaller(cli: str) -> models.Smaller | None:
    return registry()[cli].smaller_model


def layer(source: str, data: dict[str, Any]) -> Providers:
    return parse(data, KNOWN, source)


ENV = layer("/etc/p.yaml", {"gemini": {"model": "gemini-env", "aliases": {"fast": "gemini-env-fast"}}})
WS = layer(
    "providers.yaml",
    {
        "gemini": {"model": "gemini-ws", "aliases": {"fast": "gemini-ws-fast", "cheap": "gemini-ws-cheap"}},
        "claude": {"model": "claude-ws"},
        "codex": {"aliases": {"fast": "gpt-ws-fast"}},
    },
)


def test_model_flag_wins_for_the_first_cli() -> None:
    got = resolve("gemini", "gemini-9-ultra", True, [ENV, WS, BUNDLED])
    assert got == Resolution("gemini-9-ultra", "gemini-9-ultra", "--model")
    assert got.text() == "gemini-9-ultra -> gemini-9-ultra (--model)"


def test_the_environment_file_comes_before_the_workspace_file_then_bundled() -> None:
    assert resolve("gemini", None, True, [ENV, WS, BUNDLED]).text() == (
        "(none) -> gemini-env (default, /etc/p.yaml)"
    )
    assert (
        resolve("gemini", None, True, [WS, BUNDLED]).text() == "(none) -> gemini-ws (default, providers.yaml)"
    )
    assert (
        resolve("claude", None, True, [ENV, WS, BUNDLED]).model == "claude-ws"
    )  # ENV says nothing of claude


def test_nothing_configured_leaves_the_cli_its_own_default() -> None:
    got = resolve("gemini", None, True, [BUNDLED])
    assert got.model is None and got.text() == "(none) -> (CLI default) (nothing configured)"
    assert resolve("opencode", None, False, [ENV, WS, BUNDLED]).model is None


def test_aliases_by_precedence_then_bundled() -> None:
    assert resolve("gemini", "fast", True, [ENV, WS, BUNDLED]).text() == (
        "fast -> gemini-env-fast (alias, /etc/p.yaml)"
    )
    assert resolve("gemini", "cheap", True, [ENV, WS, BUNDLED]).model == "gemini-ws-cheap"
    assert resolve("gemini", "fast", True, [BUNDLED]).text() == "fast -> gemini-2.5-flash (alias, bundled)"
    assert (
        resolve("claude", "pro", True, [ENV, WS, BUNDLED]).text() == "pro -> claude-opus-5-5 (alias, bundled)"
    )
    assert resolve("codex", "fast", True, [ENV, WS, BUNDLED]).model == "gpt-ws-fast"


def test_an_alias_is_resolved_for_each_cli_of_the_chain_a_name_for_the_first_only() -> None:
    layers = [ENV, WS, BUNDLED]
    assert resolve("claude", "fast", False, layers).text() == "fast -> claude-haiku-5-5 (alias, bundled)"
    # A model name meant for the first CLI: the fallback gets its own default...
    assert resolve("claude", "gemini-9-ultra", False, layers).text() == (
        "gemini-9-ultra -> claude-ws (default, providers.yaml; claude has no alias 'gemini-9-ultra')"
    )
    # ...or, with none configured, the CLI's own.
    assert resolve("opencode", "fast", False, layers).text() == (
        "fast -> (CLI default) (opencode has no alias 'fast')"
    )
    # The first CLI takes a name that is no alias of its own as the model's name.
    assert resolve("opencode", "fast", True, layers).model == "fast"


def test_the_bundled_aliases_are_models_the_pinned_clis_list() -> None:
    assert set(BUNDLED.clis) == {"gemini", "claude"}
    for cli, table in BUNDLED.clis.items():
        assert table.model is None  # the CLI's own default (and its user's settings) stay
        assert set(table.aliases) == {"fast", "smart", "pro"}
        assert all(m.startswith(f"{cli}-") for m in table.aliases.values())


def test_an_empty_file_or_cli_configures_nothing() -> None:
    assert parse(None, KNOWN, "p.yaml") == Providers("p.yaml")
    assert parse({"gemini": None}, KNOWN, "p.yaml").clis["gemini"] == models.CliModels()
    assert parse({"gemini": {"aliases": None}}, KNOWN, "p.yaml").clis["gemini"].aliases == {}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            ["gemini"],
            "p.yaml: the top level must be a mapping of CLI names (claude, codex, gemini, opencode)",
        ),
        ("gemini: x", "p.yaml: the top level must be a mapping of CLI names"),
        ({"gemnii": {}}, "p.yaml: unknown CLI 'gemnii'; choose among: claude, codex, gemini, opencode"),
        ({"simulated": {}}, "p.yaml: unknown CLI 'simulated'"),
        ({7: {}}, "p.yaml: unknown CLI '7'"),
        ({"gemini": "gemini-2.5-pro"}, "p.yaml: gemini must be a mapping with the keys model and aliases"),
        ({"gemini": {"modle": "x"}}, "p.yaml: gemini.modle: unknown key; the keys are model and aliases"),
        ({"gemini": {"model": 3}}, "p.yaml: gemini.model must be a model name (text), not a number"),
        ({"gemini": {"model": ["a"]}}, "p.yaml: gemini.model must be a model name (text), not a list"),
        ({"gemini": {"model": True}}, "p.yaml: gemini.model must be a model name (text), not true/false"),
        ({"gemini": {"model": "--yolo"}}, "p.yaml: gemini.model is not a model name (one word"),
        ({"gemini": {"model": "two words"}}, "p.yaml: gemini.model is not a model name"),
        ({"gemini": {"model": "x" * 201}}, "p.yaml: gemini.model is not a model name"),
        ({"gemini": {"model": "a\x00b"}}, "p.yaml: gemini.model is not a model name"),
        ({"gemini": {"aliases": ["fast"]}}, "p.yaml: gemini.aliases must be a mapping of alias: model"),
        (
            {"gemini": {"aliases": {"fast": None}}},
            "p.yaml: gemini.aliases.fast must be a model name (text), not empty",
        ),
        (
            {"gemini": {"aliases": {"fast": {"a": 1}}}},
            "p.yaml: gemini.aliases.fast must be a model name (text), not a mapping",
        ),
        ({"gemini": {"aliases": {1: "x"}}}, "p.yaml: gemini.aliases: an alias must be one word"),
        ({"gemini": {"aliases": {"my fast": "x"}}}, "p.yaml: gemini.aliases: an alias must be one word"),
    ],
)
def test_a_bad_file_names_itself_and_the_key(data: object, message: str) -> None:
    with pytest.raises(BadProviders) as bad:
        parse(data, KNOWN, "p.yaml")
    assert str(bad.value).startswith(message)
    assert "\n" not in str(bad.value)


def test_an_error_never_repeats_a_value() -> None:
    with pytest.raises(BadProviders) as bad:
        parse({"gemini": {"model": "sk-secret value"}}, KNOWN, "p.yaml")
    assert "sk-secret" not in str(bad.value)


def failure(kind: F.ErrorType, message: str) -> Failure:
    return Failure(kind, message, F.RECOVERABLE.get(kind, False), 1)


def test_an_invalid_model_is_retried_once_with_the_cli_default() -> None:
    asked = Resolution("gemini-9-ultra", "gemini-9-ultra", "--model")
    bad = failure(F.INVALID_MODEL, "[API Error: HTTP 404]")
    retry = retry_model(smaller("gemini"), asked, bad, "", "gemini-9-ultra", False)
    assert retry is not None and retry.model is None
    assert retry.text() == "gemini-9-ultra -> (CLI default) (invalid model: [API Error: HTTP 404])"
    assert retry_model(smaller("gemini"), asked, bad, "", "", True) is None  # once
    # The CLI's own default rejected: nothing smaller to try; the next CLI gets the prompt.
    assert (
        retry_model(smaller("gemini"), Resolution("", None, "nothing configured"), bad, "", "", False) is None
    )
    alias = Resolution("fast", "claude-haiku-5-5", "alias, bundled")
    got = retry_model(
        smaller("claude"), alias, failure(F.INVALID_MODEL, "model: claude-haiku-5-5"), "", "", False
    )
    assert got is not None and got.text().startswith("claude-haiku-5-5 -> (CLI default) (invalid model: ")


def test_a_long_reason_is_cut_to_one_short_line() -> None:
    asked = Resolution("m", "m", "--model")
    got = retry_model(
        smaller("claude"), asked, failure(F.INVALID_MODEL, "x " * 200 + "\nmore"), "", "", False
    )
    assert got is not None and len(got.why) < 160 and got.why.endswith(" ...") and "\n" not in got.why


CAPACITY_MESSAGES = [
    "No capacity available for model gemini-2.5-pro on the server",
    '{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"reason":"MODEL_CAPACITY_EXHAUSTED"}]}}',
    "You have exhausted your capacity on this model.",
]


@pytest.mark.parametrize("evidence", CAPACITY_MESSAGES)
def test_gemini_capacity_is_retried_once_with_a_smaller_model(evidence: str) -> None:
    rate = failure(F.RATE_LIMIT, evidence.splitlines()[0])
    default = Resolution("", None, "nothing configured")
    got = retry_model(smaller("gemini"), default, rate, evidence, "gemini-2.5-pro", False)
    assert got is not None and got.model == "gemini-2.5-flash" and got.requested == "gemini-2.5-pro"
    assert got.text().startswith("gemini-2.5-pro -> gemini-2.5-flash (no capacity: ")
    asked = Resolution("pro", "gemini-3-pro-preview", "alias, providers.yaml")
    lower = retry_model(smaller("gemini"), asked, rate, evidence, "gemini-3-pro-preview", False)
    assert lower is not None and lower.model == "gemini-3-flash-preview"
    assert retry_model(smaller("gemini"), asked, rate, evidence, "", True) is None
    # gemini-cli itself ends such a run with exit code 173 and no status: a crash.
    crash = failure(F.CRASH, "[API Error: No capacity available for model gemini-2.5-pro on the server]")
    got = retry_model(smaller("gemini"), default, crash, crash.message, "gemini-2.5-pro", False)
    assert got is not None and got.model == "gemini-2.5-flash"


def test_no_capacity_retry_without_a_capacity_error_a_smaller_model_or_for_other_clis() -> None:
    rate = failure(F.RATE_LIMIT, "Resource has been exhausted (e.g. check quota).")
    default = Resolution("", None, "nothing configured")
    assert retry_model(smaller("gemini"), default, rate, "check quota", "gemini-2.5-pro", False) is None
    capacity = CAPACITY_MESSAGES[0]
    assert retry_model(smaller("gemini"), default, rate, capacity, "gemini-2.5-flash-lite", False) is None
    assert retry_model(smaller("claude"), default, rate, capacity, "gemini-2.5-pro", False) is None
    assert (
        retry_model(smaller("gemini"), default, failure(F.AUTH, capacity), capacity, "gemini-2.5-pro", False)
        is None
    )
    assert gemini_models.is_capacity(capacity) and not gemini_models.is_capacity("rate limit exceeded")


def test_every_smaller_model_is_one_the_bundle_knows_to_stop_at() -> None:
    # No cycle: following "smaller" always ends.
    for start in gemini_models.SMALLER:
        seen, model = set(), start
        while model in gemini_models.SMALLER:
            assert model not in seen
            seen.add(model)
            model = gemini_models.SMALLER[model]
