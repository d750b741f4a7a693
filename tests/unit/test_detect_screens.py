"""The detector on screens recorded from the real CLIs (scripts/record_screens.py re-records them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from waaah_agent import adapters
from waaah_agent.core.supervise import detect as reader_module
from waaah_agent.core.supervise.detect import Evidence, detect, read
from waaah_agent.core.supervise.screen import Screen

SCREENS = Path(__file__).resolve().parents[1] / "fixtures" / "screens"

# state recorded -> (what the detector must say, is the input box empty)
EXPECTED = {
    "idle": ("ready", True),
    "draft": ("ready", False),
    "busy": ("busy", None),
    "tool": ("busy", None),  # an MCP call (wait_for_prompt) running: never type into it
    "reply": ("ready", True),
    "dialog": ("dialog", None),
    "trust": ("dialog", None),
    "login": ("login", None),
    "exit": ("exiting", None),
    "limit": ("limited", None),
    "loop": ("dialog", None),  # gemini's loop-detector question: answered by the machine only
    "loop-halted": ("ready", True),  # its halt message above an idle prompt: the turn ended
    "oauth": ("login", None),  # "Sign in with Google" with no browser: the authorization code prompt
    "refused": ("login", None),  # the auth dialog saying the account was refused (read below)
    "ratelimits": ("limited", None),  # codex: its limit line above its "Approaching rate limits" question
}
# Where one CLI differs: claude answers a rejected 429 with an error line and goes idle.
OVERRIDES = {("claude", "limit"): ("ready", None)}

CASES = [
    (folder.name, fixture.stem)
    for folder in sorted(SCREENS.iterdir())
    for fixture in sorted(folder.glob("*.bin"))
]


def test_every_recorded_cli_has_the_core_states():
    for cli in ("gemini", "claude", "codex"):
        recorded = {stem for folder, stem in CASES if folder.startswith(cli)}
        assert {"idle", "draft", "busy", "tool", "reply", "dialog", "login", "exit"} <= recorded, cli


@pytest.mark.parametrize(("folder", "state"), CASES)
def test_recorded_screen_is_classified(folder, state):
    adapter = adapters.registry()[folder.split("-")[0]]
    screen = Screen(120, 40)
    screen.feed((SCREENS / folder / f"{state}.bin").read_bytes())
    view = screen.view()
    label, evidence = detect(adapter.rules, view)
    want, empty = OVERRIDES.get((folder.split("-")[0], state), EXPECTED[state])
    assert label == want, evidence
    if empty is not None:
        assert read(adapter.rules, view).input_empty is empty
    assert screen.errors == 0


@pytest.mark.parametrize("folder", sorted(p.name for p in SCREENS.iterdir()))
def test_screens_fed_in_small_chunks_give_the_same_answer(folder):
    """Reads split escape sequences and UTF-8 characters anywhere; the model must not care."""
    adapter = adapters.registry()[folder.split("-")[0]]
    raw = (SCREENS / folder / "busy.bin").read_bytes()
    screen = Screen(120, 40)
    for i in range(0, len(raw), 7):
        screen.feed(raw[i : i + 7])
    assert detect(adapter.rules, screen.view())[0] == "busy"


def test_stronger_evidence_wins_over_the_screen():
    adapter = adapters.registry()["gemini"]
    screen = Screen(120, 40)
    screen.feed((SCREENS / "gemini-0.61.0" / "tool.bin").read_bytes())
    view = screen.view()
    assert detect(adapter.rules, view, Evidence(wait_in_flight=True)) == (
        "tool",
        "MCP tap: wait_for_prompt in flight",
    )
    assert detect(adapter.rules, view, Evidence(alive=False))[0] == "exited"
    limit = Screen(120, 40)
    limit.feed((SCREENS / "gemini-0.61.0" / "limit.bin").read_bytes())
    assert detect(adapter.rules, limit.view())[0] == "limited"
    assert detect(adapter.rules, limit.view(), Evidence(limits=False))[0] != "limited"


def test_ready_says_whether_a_draft_is_in_the_box():
    adapter = adapters.registry()["claude"]
    for state, word in (("idle", "empty"), ("draft", "with a draft")):
        screen = Screen(120, 40)
        screen.feed((SCREENS / "claude-2.1.332" / f"{state}.bin").read_bytes())
        label, evidence = detect(adapter.rules, screen.view())
        assert label == "ready" and word in evidence


def test_gemini_s_loop_detector_is_read_from_its_own_screens():
    rules = adapters.registry()["gemini"].rules
    readings = {}
    for state in ("loop", "loop-halted", "tool", "idle"):
        screen = Screen(120, 40)
        screen.feed((SCREENS / "gemini-0.61.0" / f"{state}.bin").read_bytes())
        readings[state] = read(rules, screen.view())
    assert readings["loop"].loop_dialog and readings["loop"].loop_halted is None
    assert readings["loop-halted"].loop_halted and readings["loop-halted"].loop_dialog is None
    assert not any(r.loop_dialog or r.loop_halted for k, r in readings.items() if k in ("tool", "idle"))


def test_a_refused_google_account_is_read_from_gemini_s_auth_dialog():
    """IneligibleTierError as gemini shows it (recorded against tests/doubles/fake_code_assist.py):
    the reason joined from the box's wrapped lines; no other recorded screen says it."""
    rules = adapters.registry()["gemini"].rules
    said = {}
    for folder, state in CASES:
        if folder.startswith("gemini"):
            screen = Screen(120, 40)
            screen.feed((SCREENS / folder / f"{state}.bin").read_bytes())
            said[state] = read(rules, screen.view()).login_refused
    assert said.pop("refused") == (
        "Failed to sign in. Message: This Google account can no longer use Gemini CLI. "
        "Personal accounts must migrate to the Antigravity suite"
    )
    assert set(said.values()) == {None}


def test_the_authorization_code_is_typed_unseen():
    screen = Screen(120, 40)
    screen.feed((SCREENS / "gemini-0.61.0" / "oauth.bin").read_bytes())
    reading = read(adapters.registry()["gemini"].rules, screen.view())
    assert reading.secret_entry == "Enter the authorization code:"


def test_codex_s_rate_limit_question_is_a_dialog_once_the_limit_was_waited_out():
    """Its `› 1. Switch to ...` line is no composer holding a draft: nothing is typed into it."""
    screen = Screen(120, 40)
    screen.feed((SCREENS / "codex-0.171.0" / "ratelimits.bin").read_bytes())
    rules = adapters.registry()["codex"].rules
    assert detect(rules, screen.view(), Evidence(limits=False))[0] == "dialog"


STREAMS = SCREENS.parent / "streams"


def _groups(stream: Path) -> list[bytes]:
    """A recorded wait stream's reads as the screen model takes them (30 ms together)."""
    import base64
    import gzip
    import json

    groups: list[list[bytes]] = []
    began = -1.0
    for line in gzip.decompress(stream.read_bytes()).decode().splitlines()[1:]:
        at, data = json.loads(line)
        if not groups or at - began > 0.03:
            groups.append([])
            began = at
        groups[-1].append(base64.b64decode(data))
    return [b"".join(g) for g in groups]


@pytest.mark.parametrize("stream", sorted(STREAMS.glob("*/wait-loop.jsonl.gz")), ids=lambda p: p.parent.name)
def test_the_reader_that_reads_only_what_changed_reads_what_a_whole_reading_does(stream):
    """Along each CLI's recorded wait (its spinner redrawn many times a second), then through
    every screen recorded from it: the same reading at each step, and the rules run again only
    on a region that changed."""
    from waaah_agent.core.supervise.detect import ScreenReader

    cli = stream.parent.name.split("-")[0]
    rules = adapters.registry()[cli].rules
    reader, screen = ScreenReader(rules), Screen(120, 40)
    calls = 0
    tall_facts = reader_module._tall_facts

    def counted(*args):
        nonlocal calls
        calls += 1
        return tall_facts(*args)

    reader_module._tall_facts = counted
    try:
        steps = _groups(stream)
        waiting_calls = 0
        for data in steps:
            screen.feed(data)
            before = calls
            got = reader.read(screen.view())
            waiting_calls += calls - before
            assert got == read(rules, screen.view())
        for folder, state in CASES:
            if folder.startswith(cli):
                screen = Screen(120, 40)
                screen.feed((SCREENS / folder / f"{state}.bin").read_bytes())
                assert reader.read(screen.view()) == read(rules, screen.view()), state
    finally:
        reader_module._tall_facts = tall_facts
    if cli == "codex":  # its lines stay as they were through most of its redraws
        assert waiting_calls < len(steps) / 4, (waiting_calls, len(steps))


def test_a_limit_banner_s_whole_line_is_the_one_on_screen_now():
    from waaah_agent.core.supervise.detect import ScreenReader
    from waaah_agent.core.supervise.screen import ScreenView

    rules = adapters.registry()["codex"].rules
    banner = "■ You've hit your usage limit. Try again in 2 hours."
    rows = ["older output"] * 10 + [""] * 26 + [banner, "", "› ", ""]
    reader = ScreenReader(rules)
    first = ScreenView(lines=tuple(rows), title="", cursor_row=38)
    rows[2] = "■ You've hit your usage limit. Try again in 5 hours."  # above the dialog rows
    second = ScreenView(lines=tuple(rows), title="", cursor_row=38)
    assert reader.read(first) == read(rules, first)
    assert reader.read(second) == read(rules, second)
    assert reader.read(second).limit is not None and "5 hours" in reader.read(second).limit
