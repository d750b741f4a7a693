"""Escape filtering, the screen model, the clean text log and redaction."""

from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.core.secrets.secretenv import known_secrets
from waaah_agent.core.supervise.escapes import MAX_PENDING, Splitter, for_pyte, split_incomplete
from waaah_agent.core.supervise.screen import Screen
from waaah_agent.core.supervise.textlog import LineCleaner


def test_split_keeps_an_unfinished_escape_for_later():
    assert split_incomplete("abc\x1b[3") == ("abc", "\x1b[3")
    assert split_incomplete("abc\x1b[31m") == ("abc\x1b[31m", "")
    assert split_incomplete("x\x1b]0;title") == ("x", "\x1b]0;title")


def test_pyte_filter_drops_private_sequences_it_cannot_handle():
    assert for_pyte("a\x1b[?4mb\x1b[>1uc\x1b[<ud\x1b[>4;?me") == "abcde"
    assert for_pyte("\x1b_Gi=1;payload\x1b\\text") == "text"
    assert for_pyte("\x1b[?2004h") == "\x1b[?2004h"  # modes pyte understands stay


def test_pyte_is_not_given_colours_the_text_model_never_reads():
    """Most of a spinner tick's bytes are colours (codex: `CSI 1m CSI 38;2;138;138;138;49m •
    CSI 39m CSI 49m CSI 0m`), and pyte parses each sequence a character at a time in Python."""
    tick = "\x1b[9;1H\x1b[1m\x1b[38;2;138;138;138;49m•\x1b[39m\x1b[49m\x1b[0m\x1b[37;3H"
    assert for_pyte(tick) == "\x1b[9;1H•\x1b[37;3H"
    assert for_pyte("a\x1b[mb\x1b[38:5:1mc") == "abc"


def test_screen_survives_what_ink_tuis_emit_and_reads_the_title():
    s = Screen(40, 5)
    for chunk in [
        b"\x1b]0;\xe2\x97\x87  Ready (ws)\x07",
        b"\x1b[?4m\x1b[>1u",
        b"\x1b_Gq\x1b\\",
        b"hi \xe2",
        b"\x9c\x93",
    ]:
        s.feed(chunk)
    view = s.view()
    assert view.title == "◇  Ready (ws)"
    assert view.lines[0].rstrip() == "hi ✓"
    assert view.bottom(1) == (view.lines[0],)


def test_line_cleaner_leaves_plain_text():
    raw = "\x1b[1;32mok\x1b[0m \x1b]8;;http://x\x07link\x1b]8;;\x07\x00\x07\x0e\x1b\x7f\ttab 42\r\n"
    assert LineCleaner().feed(raw.encode(), 0.0) == ["ok link\ttab 42"]


def test_line_cleaner_timestamps_nothing_but_cleans_and_collapses_spinners():
    c = LineCleaner()
    out = c.feed(b"hello\r", 0.0) + c.feed(b"\n\x1b[32mgreen\x1b[0m\r\n", 0.0)
    for i in range(30):
        out += c.feed(f"\r\u280b Thinking ({i}s)\x1b[K".encode(), 1.0 + i / 10)
        out += c.feed(b"\x1b[1A\x1b[2K  > box line\n", 1.0 + i / 10)
    out += c.feed(b"\ndone\n", 5.0) + c.flush(6.0)
    assert out[:2] == ["hello", "green"]
    assert sum("Thinking" in line for line in out) == 1
    assert sum("box line" in line for line in out) == 1
    assert out[-1] == "done"


def test_redaction_masks_known_values_and_key_shapes():
    r = Redactor(known_secrets({"GEMINI_API_KEY": "my-test-key-123", "PATH": "/usr/bin"}))
    text = r("key my-test-key-123 Authorization: Bearer abcdefghijklmnop12 sk-ant-api03-aaaaaaaaaaaaaaaa")
    assert "my-test-key" not in text and "abcdefghijklmnop12" not in text and "sk-ant" not in text
    assert "Authorization: Bearer [REDACTED]" in text
    assert r.exact("/usr/bin") == "/usr/bin"


def test_string_sequences_end_at_their_terminator_or_at_the_next_escape():
    # ST split across reads: the payload is held back, not leaked into the log.
    c = LineCleaner()
    assert c.feed(b"a\x1bPsixel-data\x1b", 0.0) == []
    assert c.feed(b"\\b\n", 0.0) == ["ab"]
    # Any other ESC aborts a string sequence: its opener goes, its payload shows as text.
    assert LineCleaner().feed(b"\x1bPstray\x1b[1mbold\n", 0.0) == ["straybold"]
    # BEL ends one at once: what follows is not held back waiting for an ST.
    assert LineCleaner().feed(b"\x1b_Gq\x07done\n", 0.0) == ["done"]
    assert split_incomplete("x\x1bPpay\x1b") == ("x", "\x1bPpay\x1b")
    assert split_incomplete("x\x1bPpay\x07y") == ("x\x1bPpay\x07y", "")


def test_splitter_holds_an_unfinished_sequence_across_reads():
    s = Splitter()
    assert s.feed("a\x1b[3") == "a"
    assert s.feed("1") == ""
    assert s.feed(";4") == ""
    assert s.feed("mb\x1b]0;ti") == "\x1b[31;4mb"
    assert s.feed("tle\x07") == "\x1b]0;title\x07"
    assert s.feed("\x1bPx\x1b") == ""
    assert s.feed("[2Kz") == "\x1bPx\x1b[2Kz"  # the DCS was aborted by a CSI
    assert s.feed("\x1b_" + "x" * MAX_PENDING) == "\x1b_" + "x" * MAX_PENDING  # too long: let go


def test_pyte_filter_drops_unfinished_and_oversized_sequences():
    assert for_pyte("a\x1b]0;ti\x1b[2Kb") == "a0;ti\x1b[2Kb"  # pyte would eat up to the next BEL
    assert for_pyte("a\x1b]0;title\x1b\\b") == "a\x1b]0;title\x1b\\b"
    assert for_pyte("a\x1b[12\x1b[Kb") == "a\x1b[Kb"  # pyte would take the ESC as a final byte
    assert for_pyte("a\x1b[" + "9" * 5000 + "mb") == "ab"
    assert for_pyte("a\x1b#8b\x9b2Jc\x9dd") == "ab2Jcd"
