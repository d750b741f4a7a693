"""core/restore.py: which runs a tree holds, in what order, and the replay text with its cut."""

from __future__ import annotations

from waaah_agent.core.oneshot.restore import (
    CLOSE_TAG,
    Entry,
    Item,
    Turn,
    cut_piece,
    own_prompt,
    replay_text,
    tree_order,
)


def ids(order: list[tuple[Item, int]]) -> list[tuple[str, int]]:
    return [(item.id, depth) for item, depth in order]


def test_tree_order_is_depth_first_children_oldest_first() -> None:
    items = [
        Item("root", "", 1.0),
        Item("late-child", "root", 5.0),
        Item("early-child", "root", 2.0),
        Item("grandchild", "early-child", 3.0),
        Item("stranger", "", 0.5),
        Item("other-tree-child", "stranger", 4.0),
    ]
    assert ids(tree_order(items, "root")) == [
        ("root", 0),
        ("early-child", 1),
        ("grandchild", 2),
        ("late-child", 1),
    ]
    assert ids(tree_order(items, "early-child")) == [("early-child", 0), ("grandchild", 1)]


def test_a_child_may_name_its_parent_by_a_cli_session_id() -> None:
    items = [Item("log-1", "", 1.0, aliases=("thread-9",)), Item("kid", "thread-9", 2.0)]
    assert ids(tree_order(items, "thread-9")) == [("log-1", 0), ("kid", 1)]


def test_unknown_root_missing_parents_and_loops_end_cleanly() -> None:
    assert tree_order([Item("a")], "nobody") == []
    orphan = [Item("a", "", 1.0), Item("b", "gone", 2.0)]
    assert ids(tree_order(orphan, "a")) == [("a", 0)]
    assert ids(tree_order(orphan, "b")) == [("b", 0)]
    loop = [Item("a", "c", 1.0), Item("b", "a", 2.0), Item("c", "b", 3.0), Item("self", "self", 4.0)]
    assert ids(tree_order(loop, "a")) == [("a", 0), ("b", 1), ("c", 2)]
    assert ids(tree_order(loop, "self")) == [("self", 0)]


def test_a_chain_of_thousands_is_no_recursion_problem() -> None:
    chain = [Item("n0", "", 0.0)] + [Item(f"n{i}", f"n{i - 1}", float(i)) for i in range(1, 5000)]
    order = tree_order(chain, "n0")
    assert len(order) == 5000 and order[-1] == (chain[-1], 4999)


def test_own_prompt_drops_the_context_and_an_earlier_replay() -> None:
    logged = (
        '<context source="CONTEXT.md">\nfacts\n</context>\n\n'
        '<restored from="x" kind="run" runs="1">\nold stuff\n</restored>\n\nthe question'
    )
    assert own_prompt(logged) == "the question"
    assert own_prompt("plain") == "plain"
    # With an agent file, its block comes first (agent, context, replay, the prompt).
    agent = '<agent source="reviewer.md" persona="strict">\nBe strict. SECRETWORD\n</agent>\n\n'
    assert own_prompt(agent + logged) == "the question"
    assert own_prompt(agent + "just this") == "just this"
    assert own_prompt("<context source=unclosed") == "<context source=unclosed"


def entry(name: str, depth: int, *turns: Turn, agent: str = "gemini") -> Entry:
    return Entry(name, agent, depth, "run", turns)


def test_replay_labels_each_run_and_keeps_order() -> None:
    text = replay_text(
        [
            entry("p", 0, Turn("plan it", "PLAN-ANSWER")),
            entry("c", 1, Turn("do part one", "", "timeout", "no answer in 30 s"), agent="claude"),
            Entry("s", "codex", 1, "session", (), "night: fix the tests"),
        ],
        "p",
        tree=True,
    )
    assert text.startswith('<restored from="p" kind="tree" runs="3">') and text.endswith(CLOSE_TAG)
    assert "=== run p · gemini · depth 0 ===" in text and "=== run c · claude · depth 1 ===" in text
    assert "=== supervised session s · codex · depth 1 ===" in text and "night: fix the tests" in text
    assert text.index("PLAN-ANSWER") < text.index("do part one")
    assert "(no answer: timeout: no answer in 30 s)" in text


def test_several_turns_of_one_run_are_numbered() -> None:
    text = replay_text([entry("r", 0, Turn("one", "A1"), Turn("two", "", "no end"))], "r", tree=False)
    assert "[prompt (turn 1 of 2)]\none\n[answer (turn 1 of 2)]\nA1" in text
    assert "[answer (turn 2 of 2)]\n(no answer: the run ended without one" in text


def test_a_huge_answer_keeps_its_head_and_tail() -> None:
    cut = cut_piece("HEAD" + "x" * 100_000 + "TAIL", cap=1000)
    assert cut.startswith("HEAD") and cut.endswith("TAIL") and "bytes cut here" in cut
    assert len(cut.encode()) < 1100
    assert cut_piece("short") == "short"


def test_the_cut_drops_the_deepest_then_the_oldest_first() -> None:
    big = "y" * 3000
    entries = [
        entry("root", 0, Turn("root old", "ROOT-OLD " + big), Turn("root new", "ROOT-NEW " + big)),
        entry("kid", 1, Turn("kid", "KID " + big)),
        entry("grandkid", 2, Turn("gk", "GRANDKID " + big)),
    ]
    whole = replay_text(entries, "root", tree=True, cap=100_000)
    assert all(m in whole for m in ("ROOT-OLD", "ROOT-NEW", "KID", "GRANDKID"))
    cut = replay_text(entries, "root", tree=True, cap=len(whole.encode()) - 1000)
    assert "GRANDKID" not in cut and "KID " in cut and "ROOT-OLD" in cut
    assert "[... turn 1 elided to fit:" in cut and "=== run grandkid" in cut  # the label stays
    tighter = replay_text(entries, "root", tree=True, cap=len(whole.encode()) - 7000)
    assert "KID " not in tighter and "ROOT-OLD" not in tighter and "ROOT-NEW" in tighter
    for cap in (9000, 5000, 2000, 500):
        assert len(replay_text(entries, "root", tree=True, cap=cap).encode()) <= cap


def test_thousands_of_runs_are_elided_to_one_counted_line() -> None:
    entries = [entry("root", 0, Turn("root prompt", "ROOT-ANSWER"))] + [
        entry(f"kid-{i}", 1, Turn(f"prompt {i}", f"answer {i}")) for i in range(3000)
    ]
    text = replay_text(entries, "root", tree=True, cap=8000)
    assert len(text.encode()) <= 8000 and "ROOT-ANSWER" in text
    assert "earlier run(s) elided to fit 8,000 bytes" in text
