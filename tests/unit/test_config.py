"""The config file's keys and values, checked (pure)."""

from __future__ import annotations

import pytest

from waaah_agent.core.config import KEYS, ConfigProblem, parse, template


def test_each_key_becomes_its_variable():
    text = """
server = "http://127.0.0.1:3456"
api_key_file = "~/keys/waaah"
heartbeat = 300
stall_timeout = 1800.5
max_tokens = 5_000_000
notify = ["ntfys://ntfy.sh/a", "json://127.0.0.1:9/x"]
record_budget_mb = 500
default_agent = "claude"
fallback = ["claude", "gemini"]
routes = "~/routes.json"
breaker_cooldown = 120
"""
    assert parse(text) == {
        "WAAAH_SERVER_URL": "http://127.0.0.1:3456",
        "WAAAH_API_KEY_FILE": "~/keys/waaah",
        "WAAAH_HEARTBEAT": "300.0",
        "WAAAH_STALL_TIMEOUT": "1800.5",
        "WAAAH_MAX_TOKENS": "5000000",
        "WAAAH_NOTIFY": "ntfys://ntfy.sh/a json://127.0.0.1:9/x",
        "WAAAH_RECORD_BUDGET_MB": "500",
        "WAAAH_DEFAULT_AGENT": "claude",
        "WAAAH_FALLBACK": "claude,gemini",
        "WAAAH_ROUTES": "~/routes.json",
        "WAAAH_BREAKER_COOLDOWN": "120.0",
    }
    assert parse("") == {}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("hartbeat = 3", "did you mean 'heartbeat'"),
        ("heartbeat = 0", "a number of seconds above 0"),
        ("heartbeat = true", "a number of seconds above 0"),
        ('heartbeat = "300"', "a number of seconds above 0"),
        ("max_tokens = 1.5", "a whole number above 0"),
        ('server = "localhost:3456"', "an http(s) URL"),
        ('notify = "ntfy://x"', "a list of URLs"),
        ('fallback = ["claude", 3]', "a list of CLI names"),
        ("[server]\nurl = 1", "an http(s) URL"),
        ("heartbeat = [", "not TOML"),
        ("max_cost = 0", "an amount of US dollars"),
        ('run_max_cost = "1"', "an amount of US dollars"),
    ],
)
def test_a_wrong_key_or_value_is_one_line_with_an_example(text, said):
    with pytest.raises(ConfigProblem) as err:
        parse(text)
    assert said in str(err.value) and "\n" not in str(err.value)


def test_the_example_is_a_valid_config_once_uncommented():
    lines = [line[2:] for line in template().splitlines() if line.startswith("# ") and " = " in line]
    assert len(parse("\n".join(lines))) == len(KEYS) == 16
