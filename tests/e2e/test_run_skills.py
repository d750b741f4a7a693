"""`waaah run --skill NAME` through the real gemini and claude CLIs, offline: the model gets the
skill's instructions with the prompt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.doubles.fake_model import FakeModel
from tests.e2e.conftest import workspace_for
from tests.e2e.test_waaah_run import ANSWER, both_env, rules, waaah_run

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

SKILL = """---
name: greet
description: Greets the user in the house style. Use when asked to greet.
---
SKILL-BODY-TEXT: greet with a haiku.
"""


def test_a_skill_of_the_workspace_reaches_the_model(cli: str, tmp_path: Path) -> None:
    ws = workspace_for(tmp_path)
    folder = {"gemini": ".gemini", "claude": ".claude"}[cli]
    skill = ws / folder / "skills" / "greet" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(SKILL, encoding="utf-8")
    with FakeModel(rules()) as fake:
        env = both_env(tmp_path, ws, fake.url)
        code, out, err = waaah_run(ws, env, "ANSWER-MARKER greet me", "--agent", cli, "--skill", "greet")
        assert code == 0, err
        assert out["response"] == ANSWER
        body = json.dumps(fake.main_requests()[-1]["body"])
        assert "SKILL-BODY-TEXT" in body and "ANSWER-MARKER greet me" in body
