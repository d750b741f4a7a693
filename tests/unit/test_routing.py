"""The routing table and the recommendation (`waaah route`), and the quota state (pure)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from waaah_agent import settings
from waaah_agent.core import quota as Q
from waaah_agent.core.oneshot import routing
from waaah_agent.core.oneshot.routing import Availability
from waaah_agent.errors import UsageError

KNOWN = {"gemini", "claude", "codex", "opencode"}
BUNDLED = routing.parse(routing.DEFAULT_TABLE, KNOWN, "bundled")


def up(*names: str, down: dict[str, str] | None = None) -> dict[str, Availability]:
    found = {n: Availability(n, True) for n in names}
    found.update({n: Availability(n, False, why) for n, why in (down or {}).items()})
    return found


def test_the_bundled_table_has_every_role_with_every_cli() -> None:
    assert set(BUNDLED) == set(routing.ROLES)
    for role in BUNDLED.values():
        assert set(role.chain) == KNOWN and role.why


def test_the_first_usable_cli_is_recommended_the_others_are_its_fallback() -> None:
    role = BUNDLED["developer"]
    found = routing.recommend("developer", role, "", up("claude", "gemini", "codex", "opencode"))
    assert found.agent == "claude" and found.fallback == ("codex", "gemini", "opencode")
    found = routing.recommend(
        "developer", role, "", up("gemini", "opencode", down={"claude": "OPEN", "codex": "not installed"})
    )
    assert found.agent == "gemini" and found.fallback == ("opencode",)
    assert found.to_json()["unavailable"] == {"claude": "OPEN", "codex": "not installed"}
    nothing = routing.recommend("developer", role, "", up(down={n: "x" for n in KNOWN}))
    assert nothing.agent is None and nothing.fallback == () and nothing.chain == role.chain


def test_the_task_s_words_may_pick_another_chain() -> None:
    role = BUNDLED["developer"]
    found = routing.recommend("developer", role, "Please REVIEW the diff", up(*KNOWN))
    assert found.agent == "gemini" and found.matched == ("review",) and "review" in found.why
    # a word, not a part of one
    assert routing.chain_for(role, "reviewers unite")[0] == role.chain


def test_a_table_file_replaces_the_roles_it_names() -> None:
    mine = routing.parse(
        {"roles": {"developer": {"chain": ["gemini", "gemini", "claude"]}, "tester": {"chain": ["codex"]}}},
        KNOWN,
        "f",
    )
    table = routing.merged(BUNDLED, mine)
    assert table["developer"].chain == ("gemini", "claude")  # duplicates dropped
    assert table["tester"].chain == ("codex",) and table["reviewer"] == BUNDLED["reviewer"]


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ([], "expected"),
        ({"roles": {}}, "expected"),
        ({"roles": {"dev": "claude"}}, "role 'dev': expected an object"),
        ({"roles": {"dev": {"chain": []}}}, "chain must be a list"),
        ({"roles": {"dev": {"chain": ["claude", 3]}}}, "chain must be a list"),
        ({"roles": {"dev": {"chain": ["cursor"]}}}, "unknown CLI 'cursor'"),
        (
            {"roles": {"dev": {"chain": ["claude"], "tasks": [{"words": [], "chain": ["gemini"]}]}}},
            "needs words",
        ),
        ({"roles": {"dev": {"chain": ["claude"], "tasks": "x"}}}, "tasks must be a list"),
        ({"roles": {"dev": {"chain": ["claude"], "why": 5}}}, "why a string"),
    ],
)
def test_a_bad_table_says_where_and_what(data: object, says: str) -> None:
    with pytest.raises(routing.BadTable, match="^/x/routes.json") as bad:
        routing.parse(data, KNOWN, "/x/routes.json")
    assert says in str(bad.value)


NOW = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)


def test_the_newest_limit_per_cli_and_whether_it_holds() -> None:
    old = Q.LimitSeen("claude", NOW - timedelta(hours=5), NOW - timedelta(hours=4), "waaah run")
    new = Q.LimitSeen("claude", NOW - timedelta(minutes=5), NOW + timedelta(hours=1), "session s1")
    gem = Q.LimitSeen("gemini", NOW - timedelta(minutes=10), None, "waaah run")
    newest = Q.latest([new, old, gem])
    assert newest["claude"] is new
    claude = Q.state(newest["claude"], NOW)
    assert claude["state"] == "limited" and claude["resets_in_s"] == 3600 and claude["source"] == "session s1"
    assert "LIMITED until 2026-11-25T13:00:00+00:00" in Q.line("claude", claude)
    # no reset named: taken to hold 30 minutes from when it was seen
    assert Q.state(gem, NOW)["state"] == "limited" and Q.state(gem, NOW)["reset_at"] is None
    assert Q.line("gemini", Q.state(gem, NOW)).startswith(
        "gemini: LIMITED until 2026-11-25T12:20:00+00:00 (no reset time given: 30 minutes assumed)"
    )
    assert Q.state(gem, NOW + timedelta(minutes=21))["state"] == "ok"
    assert Q.state(old, NOW)["state"] == "ok" and Q.state(None, NOW)["seen_at"] is None
    assert Q.line("codex", Q.state(None, NOW)) == "codex: ok (no usage limit seen)"


def test_one_429_without_a_reset_time_is_no_usage_limit_but_two_in_a_row_are() -> None:
    one = Q.LimitSeen("claude", NOW - timedelta(minutes=1), None, "waaah run", stated=False)
    found = Q.state(one, NOW)
    assert found["state"] == "ok" and "not taken as a usage limit" in found["note"]
    assert Q.line("claude", found).startswith("claude: ok (one rate limit (429) without a reset time")
    again = Q.LimitSeen("claude", NOW, None, "waaah run", stated=False, repeats=Q.repeats_after(one, NOW))
    assert again.repeats == 2 and Q.state(again, NOW)["state"] == "limited"
    # Counted in a row only within the half hour; a stated limit before starts a new count.
    assert Q.repeats_after(one, NOW + timedelta(hours=1)) == 1
    assert Q.repeats_after(Q.LimitSeen("claude", NOW, None, "session s1"), NOW) == 1
    # A rate limit that named its reset time is a limit until then.
    timed = Q.LimitSeen("claude", NOW, NOW + timedelta(minutes=2), "waaah run", stated=False)
    assert Q.state(timed, NOW)["state"] == "limited" and Q.state(timed, NOW)["resets_in_s"] == 120


def test_the_breaker_cooldown_comes_from_the_flag_else_the_variable_else_a_minute() -> None:
    assert settings.breaker_config({}).cooldown == 60.0
    assert settings.breaker_config({"WAAAH_BREAKER_COOLDOWN": "5"}).cooldown == 5.0
    assert settings.breaker_config({"WAAAH_BREAKER_COOLDOWN": "5"}, 300.0).cooldown == 300.0
    with pytest.raises(UsageError, match="WAAAH_BREAKER_COOLDOWN must be a number of seconds"):
        settings.breaker_config({"WAAAH_BREAKER_COOLDOWN": "soon"})
