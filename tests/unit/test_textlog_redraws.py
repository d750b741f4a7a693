"""The text log keeps every distinct reply, once per appearance, and drops only redraws."""

from __future__ import annotations

from pathlib import Path

import pytest

from waaah_agent.core.supervise.textlog import LineCleaner

SCREENS = Path(__file__).parent.parent / "fixtures" / "screens"
UP, ERASE = "\x1b[1A", "\x1b[2K"


def feed_all(cleaner: LineCleaner, *chunks: str, now: float = 0.0) -> list[str]:
    out: list[str] = []
    for chunk in chunks:
        out += cleaner.feed(chunk.encode(), now)
    return out


def ink_frame(static: list[str], live: list[str], previous_live: int) -> str:
    """What an Ink CLI writes per frame: erase its live area row by row, the new static lines
    (written once, above it), then the whole live area again."""
    erase = (ERASE + UP) * previous_live + ERASE + "\x1b[G"
    return erase + "".join(line + "\n" for line in [*static, *live])


def test_a_spinner_redrawn_a_hundred_times_appears_once() -> None:
    c = LineCleaner()
    out = feed_all(c, ink_frame([], ["⠋ Thinking (0s)", " > box"], 0))
    for i in range(1, 100):
        out += feed_all(c, ink_frame([], [f"{'⠙⠹⠸'[i % 3]} Thinking ({i}s)", " > box"], 2), now=i)
    assert [line for line in out if "Thinking" in line] == ["⠋ Thinking (0s)"]
    assert out.count(" > box") == 1


def test_a_reply_the_agent_repeats_after_other_lines_appears_twice() -> None:
    c = LineCleaner()
    live = ["⠋ Working", " > box"]
    out = feed_all(c, ink_frame(["✦ Done."], live, 0))
    out += feed_all(c, ink_frame(["✦ Checking the tests."], live, 2))
    out += feed_all(c, ink_frame(["✦ Done."], live, 2))
    assert out.count("✦ Done.") == 2
    assert out.count(" > box") == 1  # the live area moved down under each new line: the same lines


def test_a_repeat_in_plain_output_is_kept() -> None:
    c = LineCleaner()
    assert feed_all(c, "ok\n", "other\n", "ok\n", "ok\n") == ["ok", "other", "ok", "ok"]


def test_a_long_quiet_spell_does_not_restamp_a_redrawn_frame() -> None:
    """The old 30 s window let a redraw after a quiet spell write old lines again."""
    c = LineCleaner()
    first = feed_all(c, ink_frame(["✦ The answer."], ["⠋ Waiting (0s)", " > box"], 0), now=0.0)
    later = feed_all(c, ink_frame([], ["⠙ Waiting (95s)", " > box"], 2), now=95.0)
    assert first == ["✦ The answer.", "⠋ Waiting (0s)", " > box"] and later == []


def test_a_full_screen_redraw_keeps_only_what_is_new() -> None:
    """Full-screen CLIs (claude) clear or position each row: history scrolled up by one row is the
    same history; only the new bottom line is new."""
    c = LineCleaner()
    rows = [f"history line {chr(65 + i)}" for i in range(5)]
    draw = "".join(f"\x1b[{i + 1};1H{line}\x1b[K" for i, line in enumerate(rows))
    out = feed_all(c, "\x1b[?1049h\x1b[2J" + draw)
    scrolled = [*rows[1:], "a new reply"]
    out += feed_all(c, "".join(f"\x1b[{i + 1};1H{line}\x1b[K" for i, line in enumerate(scrolled)), now=60)
    out += feed_all(c, "\x1b[2J" + "".join(f"\x1b[{i + 1};1H{line}\x1b[K" for i, line in enumerate(scrolled)))
    assert out == [*rows, "a new reply"]


def replay(path: Path, piece: int = 512) -> list[str]:
    c, data, out = LineCleaner(), path.read_bytes(), []
    for i in range(0, len(data), piece):
        out += c.feed(data[i : i + piece], 0.0)
    return out + c.flush(0.0)


@pytest.mark.parametrize("piece", [1, 7, 512, 1 << 20])
def test_recorded_gemini_screens_keep_the_reply_once_whatever_the_reads(piece: int) -> None:
    reply = replay(SCREENS / "gemini-0.61.0" / "reply.bin", piece)
    assert reply.count("✦ Hello from the fake model.") == 1
    assert sum("Thinking..." in line for line in reply) == 1
    assert reply == replay(SCREENS / "gemini-0.61.0" / "reply.bin")  # the reads do not matter
    tool = replay(SCREENS / "gemini-0.61.0" / "tool.bin", piece)
    # The tool box is redrawn ~15 times a second while the call waits: its line once per look.
    assert sum("wait_for_prompt (waaah MCP Server)" in line for line in tool) == 2  # ⊶ then ⊷


def test_recorded_claude_screen_keeps_its_reply_words_once() -> None:
    reply = replay(SCREENS / "claude-2.1.332" / "reply.bin")
    assert reply.count("Hello") == 1 and reply.count("REPLY-MARKER") == 1
