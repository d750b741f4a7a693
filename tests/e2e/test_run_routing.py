"""`waaah run` resilience and routing over the real gemini and claude CLIs, offline: a CLI that
hangs gives up its share of the budget to the fallback, a breaker opened by real failures
routes a role to another CLI, half-open lets one probe through while a concurrent run falls
back, and a usage limit shows in `waaah quota`."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.doubles.fake_model import FakeModel, HttpError, Rule, Text
from tests.e2e.conftest import workspace_for
from tests.e2e.test_waaah_run import both_env, records, waaah_run
from tests.runtime.helpers import WAAAH

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def rules() -> list[Rule]:
    return [
        Rule(Text("hello from the fake model"), marker="ANSWER-MARKER"),
        # gemini hangs (the fake model stalls before its first byte); claude answers at once.
        Rule(Text("too late", delay=120), marker="STALL-MARKER", api="gemini"),
        Rule(Text("claude answered"), marker="STALL-MARKER", api="anthropic"),
        # claude takes its time: a probe that is still in flight while another run starts.
        Rule(Text("the probe answered", delay=8), marker="PROBE-MARKER", api="anthropic"),
        Rule(Text("gemini answered"), marker="PROBE-MARKER", api="gemini"),
        Rule(HttpError(429, retryable=False), marker="LIMIT-MARKER", api="anthropic"),
    ]


def waaah(ws: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([WAAAH, *args], cwd=ws, env=env, capture_output=True, text=True, timeout=120)


def outcomes(envelope: dict[str, Any]) -> list[tuple[str, str]]:
    return [(a["agent"], a["outcome"]) for a in envelope["attempts"]]


def breaker_file(tmp_path: Path, cli: str) -> dict[str, Any]:
    return dict(json.loads((tmp_path / "state" / "waaah-agent" / "breakers" / f"{cli}.json").read_text()))


def test_a_cli_that_hangs_gives_the_fallback_its_share_of_the_budget(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        started = time.monotonic()
        code, out, err = waaah_run(
            ws, env, "STALL-MARKER go", "--agent", "gemini", "--fallback", "claude", "--timeout", "30"
        )
        took = time.monotonic() - started
        assert code == 0, err
        assert out["response"] == "claude answered" and out["agent"] == "claude"
        assert outcomes(out) == [("gemini", "timeout"), ("claude", "ok")]
        assert out["fallback_chain"] == ["gemini", "claude"]
        # gemini had half the budget (its share), not all of it; the whole run stayed within it
        assert 13 <= out["attempts"][0]["duration_ms"] / 1000 < 20, out["attempts"]
        assert took < 30 + 5
        shares = records(out["log_path"], "share")
        assert shares[0]["agent"] == "gemini" and 14 <= shares[0]["seconds"] <= 15  # half of what was left
        assert [r["action"] for r in records(out["log_path"], "decision")] == ["fallback"]
        assert [r["api"] for r in fake.main_requests()] == ["gemini", "anthropic"]
        # slow is not broken: the timeout is counted apart from failures
        gemini = breaker_file(tmp_path, "gemini")
        assert gemini["timeouts"] == 1 and gemini["failures"] == 0 and gemini["opened_at"] is None


def test_the_issue_s_own_example_now_tries_the_fallback(tmp_path: Path) -> None:
    """`--timeout 4 --fallback claude` used to spend all four seconds on the first CLI."""
    ws = workspace_for(tmp_path)
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(
            ws, env, "STALL-MARKER go", "--agent", "gemini", "--fallback", "claude", "--timeout", "4"
        )
        assert [a["agent"] for a in out["attempts"]] == ["gemini", "claude"], err
        assert out["attempts"][0]["outcome"] == "timeout"
        assert out["attempts"][0]["duration_ms"] < 6000  # its share was 2 s, plus the stop (3 s at most)


ROUTES = {"roles": {"developer": {"chain": ["claude", "gemini"], "why": "the test's own table"}}}


def test_an_open_breaker_routes_the_role_to_the_next_cli(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    (ws / ".agent").mkdir(exist_ok=True)
    (ws / ".agent" / "routes.json").write_text(json.dumps(ROUTES))
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        route = json.loads(waaah(ws, env, "route", "--role", "developer", "--json").stdout)
        assert route["agent"] == "claude" and route["fallback"] == ["gemini"]
        assert route["table"] == str(ws / ".agent" / "routes.json")
        # Three real failures (claude without a key says "Not logged in") open claude's breaker.
        broken = both_env(tmp_path, ws, fake.url, api_key=None)
        for _ in range(3):
            assert waaah_run(ws, broken, "ANSWER-MARKER hi", "--agent", "claude")[0] == 6
        assert breaker_file(tmp_path, "claude")["failures"] == 3
        done = waaah(ws, env, "route", "--role", "developer", "--json")
        route = json.loads(done.stdout)
        assert done.returncode == 0 and route["agent"] == "gemini" and route["fallback"] == []
        assert "claude: OPEN after 3 failure(s) in a row" in route["unavailable"]["claude"]
        text = waaah(ws, env, "route", "--role", "developer").stdout
        assert text.startswith("developer: gemini\n") and "skipped claude: claude: OPEN" in text
        # `waaah run --role` follows the route: claude is not even started.
        code, out, err = waaah_run(ws, env, "ANSWER-MARKER hi", "--role", "developer")
        assert code == 0, err
        assert out["agent"] == "gemini" and outcomes(out) == [("gemini", "ok")]
        assert "role developer" in records(out["log_path"], "start")[0]["route"]
        assert [r["api"] for r in fake.main_requests()] == ["gemini"]
        # `waaah doctor --json`: per CLI, with no model call
        doctor = json.loads(waaah(ws, env, "doctor", "--json", "--agent", "claude").stdout)["clis"]["claude"]
        assert doctor["available"] is False and doctor["breaker"]["state"] == "open"
        assert "2.1.332" in doctor["version"] and doctor["version_ms"] > 0
        assert doctor["sessions"] == {
            "run_resume": True,
            "id_chosen_by_waaah": True,
            "supervised_resume": True,
        }
        assert doctor["quota"]["state"] == "ok" and [r["api"] for r in fake.main_requests()] == ["gemini"]


def test_half_open_lets_one_run_probe_while_another_falls_back(tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    with FakeModel(rules()) as fake:
        broken = both_env(tmp_path, ws, fake.url, api_key=None)
        for _ in range(3):
            assert waaah_run(ws, broken, "ANSWER-MARKER hi", "--agent", "claude")[0] == 6
        env = both_env(tmp_path, ws, fake.url)
        args = ["--agent", "claude", "--fallback", "gemini", "--breaker-cooldown", "0"]
        prober = subprocess.Popen(
            [WAAAH, "run", "PROBE-MARKER one", *args],
            cwd=ws,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        fake.wait_for_request(lambda r: "PROBE-MARKER one" in r.get("prompt_text", ""), timeout=60)
        assert breaker_file(tmp_path, "claude")["probe_until"] is not None
        code, other, err = waaah_run(ws, env, "PROBE-MARKER two", *args)
        assert code == 0, err
        assert outcomes(other) == [("claude", "skipped"), ("gemini", "ok")]
        assert "another run is probing it" in other["attempts"][0]["error"]
        out, err = prober.communicate(timeout=60)
        probe = json.loads(out)
        assert prober.returncode == 0, err
        assert outcomes(probe) == [("claude", "ok")] and probe["response"] == "the probe answered"
        state = breaker_file(tmp_path, "claude")  # the probe's success closed it
        assert state["opened_at"] is None and state["failures"] == 0 and state["probe_until"] is None


def test_a_usage_limit_shows_in_waaah_quota_and_in_the_route(tmp_path: Path) -> None:
    """One 429 that names no reset time is no usage limit (the route keeps the CLI); a second
    in a row is, assumed for 30 minutes."""
    ws = workspace_for(tmp_path)
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "LIMIT-MARKER hi", "--agent", "claude", "--timeout", "30")
        assert out["error_type"] == "rate_limit", err
        found = json.loads(waaah(ws, env, "quota", "--json").stdout)
        assert found["claude"]["state"] == "ok" and "not taken as a usage limit" in found["claude"]["note"]
        route = json.loads(waaah(ws, env, "route", "--role", "coordinator", "--json").stdout)
        assert "claude" not in route.get("unavailable", {}), route
        code, out, err = waaah_run(ws, env, "LIMIT-MARKER hi", "--agent", "claude", "--timeout", "30")
        assert out["error_type"] == "rate_limit", err
        found = json.loads(waaah(ws, env, "quota", "--json").stdout)
        assert found["claude"]["state"] == "limited" and found["claude"]["source"] == "waaah run"
        assert found["gemini"]["state"] == "ok"
        assumed = "(no reset time given: 30 minutes assumed)"
        assert waaah(ws, env, "quota").stdout.startswith("claude: LIMITED until 20")
        assert assumed in waaah(ws, env, "quota").stdout
        route = json.loads(waaah(ws, env, "route", "--role", "coordinator", "--json").stdout)
        assert route["agent"] == "gemini" and "usage limit until 20" in route["unavailable"]["claude"]
        assert assumed in route["unavailable"]["claude"]
        # Each run's 429 reached claude (which may try it again on its own before it gives up):
        # no other CLI was asked.
        asked = fake.main_requests()
        assert len(asked) >= 2 and {r["api"] for r in asked} == {"anthropic"}, asked
