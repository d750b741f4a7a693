"""`waaah run`'s models over the real gemini and claude CLIs, offline: the fake model API answers
an unknown model the way the real APIs do (gemini 404 NOT_FOUND, anthropic 404 not_found_error),
and records which model each request was for (gemini: the URL, anthropic: the body)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.doubles.fake_model import FakeModel, HttpError, Rule, Text
from tests.e2e.conftest import workspace_for
from tests.e2e.test_waaah_run import both_env, records, waaah_run

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

ANSWER = "answered by the default model"
#: Each CLI's own default model, as the pinned releases ask for it (see the recorded streams).
CLI_DEFAULT = {"gemini": "gemini-2.5-pro", "claude": "claude-opus-5-5"}


def requested_model(request: dict[str, Any]) -> str:
    """The model a recorded request was for."""
    if request["api"] == "gemini":
        return str(request["path"]).split("/models/", 1)[1].split(":", 1)[0]
    return str(request["body"].get("model", ""))


def main_models(fake: FakeModel, marker: str) -> list[str]:
    """The models the prompt's requests were for, in order, a CLI's own repeats of one request
    counted once (claude asks again without streaming after a failed stream)."""
    models = [requested_model(r) for r in fake.main_requests() if marker in r["prompt_text"]]
    return [m for i, m in enumerate(models) if i == 0 or models[i - 1] != m]


def test_a_rejected_model_is_retried_once_with_the_cli_default(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    bad = f"{cli}-9-ultra"
    rules = [Rule(HttpError(404), model=bad), Rule(Text(ANSWER), marker="MODEL-MARKER")]
    with FakeModel(rules) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(
            ws, env, "MODEL-MARKER hi", "--agent", cli, "--model", bad, "--timeout", "120"
        )
        assert code == 0, err
        assert out["ok"] is True and out["response"] == ANSWER and out["agent"] == cli
        assert [a["outcome"] for a in out["attempts"]] == ["invalid_model", "ok"]
        # The API saw the rejected model, then the CLI's own default (no --model flag).
        assert main_models(fake, "MODEL-MARKER") == [bad, CLI_DEFAULT[cli]]
        assert out["model"] == CLI_DEFAULT[cli]
        resolution = out["model_resolution"]
        assert resolution.startswith(f"{bad} -> (CLI default) (invalid model: ") and resolution.endswith(")")
        assert [a["model_resolution"] for a in out["attempts"]] == [f"{bad} -> {bad} (--model)", resolution]
        log = out["log_path"]
        assert records(log, "start")[0]["model_resolution"] == f"{bad} -> {bad} (--model)"
        attempts = records(log, "attempt")
        assert attempts[0]["argv"][-2:] == ["--model", bad] and "--model" not in attempts[1]["argv"]
        assert [a["model_resolution"] for a in attempts] == [f"{bad} -> {bad} (--model)", resolution]
        decision = records(log, "decision")[0]
        assert decision["action"] == "retry" and decision["reason"] == resolution


def test_an_alias_of_the_workspace_providers_file_is_the_model_the_api_sees(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    (ws / "providers.yaml").write_text(
        "gemini:\n  aliases:\n    quick: gemini-2.5-flash\nclaude:\n  aliases: {quick: claude-haiku-5-5}\n",
        encoding="utf-8",
    )
    target = {"gemini": "gemini-2.5-flash", "claude": "claude-haiku-5-5"}[cli]
    with FakeModel([Rule(Text(ANSWER), marker="ALIAS-MARKER")]) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "ALIAS-MARKER hi", "--agent", cli, "--model", "quick")
        assert code == 0, err
        assert out["response"] == ANSWER and out["model"] == target
        assert out["model_resolution"] == f"quick -> {target} (alias, providers.yaml)"
        assert set(main_models(fake, "ALIAS-MARKER")) == {target}


def test_after_its_retry_the_next_cli_runs_with_its_own_resolved_model(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    (ws / ".waaah").mkdir()
    (ws / ".waaah" / "providers.yaml").write_text("gemini:\n  model: gemini-2.5-flash\n", encoding="utf-8")
    # claude rejects the model asked for and its own default: it has nothing left to try.
    rules = [
        Rule(HttpError(404), model="claude-9-ultra"),
        Rule(HttpError(404), model=CLI_DEFAULT["claude"]),
        Rule(Text("gemini answered"), marker="CHAIN-MARKER", api="gemini"),
    ]
    with FakeModel(rules) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(
            ws,
            env,
            "CHAIN-MARKER hi",
            "--agent",
            "claude",
            "--model",
            "claude-9-ultra",
            "--fallback",
            "gemini",
            "--timeout",
            "150",
        )
        assert code == 0, err
        assert out["agent"] == "gemini" and out["response"] == "gemini answered"
        assert [(a["agent"], a["outcome"]) for a in out["attempts"]] == [
            ("claude", "invalid_model"),
            ("claude", "invalid_model"),
            ("gemini", "ok"),
        ]
        assert main_models(fake, "CHAIN-MARKER") == [
            "claude-9-ultra",
            CLI_DEFAULT["claude"],
            "gemini-2.5-flash",
        ]
        assert out["model"] == "gemini-2.5-flash"
        assert out["model_resolution"] == (
            "claude-9-ultra -> gemini-2.5-flash "
            "(default, .waaah/providers.yaml; gemini has no alias 'claude-9-ultra')"
        )
        assert [r["action"] for r in records(out["log_path"], "decision")] == ["retry", "fallback"]


def test_gemini_without_capacity_for_its_model_is_retried_once_with_the_smaller_one(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    # The API's answer when a model has no capacity (gemini-cli retries it a few times itself).
    no_capacity = {
        "error": {
            "code": 429,
            "message": "No capacity available for model gemini-2.5-pro on the server",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "MODEL_CAPACITY_EXHAUSTED",
                    "domain": "cloudcode-pa.googleapis.com",
                    "metadata": {"model": "gemini-2.5-pro"},
                }
            ],
        }
    }
    rules = [
        Rule(HttpError(429, body=no_capacity), model="gemini-2.5-pro"),
        Rule(Text("the smaller model answered"), marker="CAPACITY-MARKER"),
    ]
    with FakeModel(rules) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "CAPACITY-MARKER hi", "--agent", "gemini", "--timeout", "150")
        assert code == 0, err
        assert out["response"] == "the smaller model answered" and out["model"] == "gemini-2.5-flash"
        assert main_models(fake, "CAPACITY-MARKER") == ["gemini-2.5-pro", "gemini-2.5-flash"]
        assert len(out["attempts"]) == 2 and out["attempts"][1]["outcome"] == "ok"
        assert out["model_resolution"] == (
            "gemini-2.5-pro -> gemini-2.5-flash "
            "(no capacity: [API Error: No capacity available for model gemini-2.5-pro on the server])"
        )
        assert out["attempts"][0]["model_resolution"] == "(none) -> (CLI default) (nothing configured)"
