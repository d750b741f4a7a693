"""The run's settings over the user's, and what of gemini's own changes goes back (pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from waaah_agent.core import home_overlay as ho
from waaah_agent.core.home_overlay import Action, Change, Kind

ENTRY = ("mcpServers", "waaah")
LOOP = ("model", "disableLoopDetection")
RUN = {ENTRY: {"command": "python"}, LOOP: True}


def test_overlay_sets_the_run_keys_and_keeps_every_other_key():
    user = {"ui": {"theme": "Dracula"}, "mcpServers": {"github": {"command": "gh"}}, "model": {"name": "m"}}
    run = ho.overlay(user, RUN)
    assert run["mcpServers"] == {"github": {"command": "gh"}, "waaah": {"command": "python"}}
    assert run["model"] == {"name": "m", "disableLoopDetection": True} and run["ui"] == user["ui"]
    assert "waaah" not in user["mcpServers"]  # the user's document is not changed


def test_overlay_replaces_a_scalar_in_the_way():
    assert ho.overlay({"model": "gemini-2.5-pro"}, {LOOP: True}) == {"model": {"disableLoopDetection": True}}


def test_changes_leave_the_run_keys_out():
    written = ho.overlay({"ui": {"theme": "Dracula"}}, RUN)
    after = ho.overlay(written, {("security", "auth", "selectedType"): "gemini-api-key"})
    after["mcpServers"]["waaah"]["env"] = {"X": "1"}  # under the run's key: not the user's
    after["model"]["disableLoopDetection"] = False
    del after["ui"]["theme"]
    found = ho.changes(written, after, RUN)
    assert found == [
        Change(("ui", "theme"), removed=True),
        Change(("security",), {"auth": {"selectedType": "gemini-api-key"}}),
    ]
    user = {"ui": {"theme": "Dracula", "vim": True}, "general": {}}
    assert ho.apply(user, found) == {
        "ui": {"vim": True},
        "general": {},
        "security": {"auth": {"selectedType": "gemini-api-key"}},
    }


def test_apply_of_a_removal_that_is_not_there_changes_nothing():
    assert ho.apply({"a": 1}, [Change(("b", "c"), removed=True)]) == {"a": 1}


documents = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=4)),
    lambda inner: st.dictionaries(st.sampled_from(["a", "b", "model", "mcpServers"]), inner, max_size=4),
    max_leaves=12,
)


@given(st.dictionaries(st.sampled_from(["a", "b", "ui"]), documents, max_size=4), documents)
def test_changes_applied_to_the_original_give_what_the_cli_wrote(before, after):
    """Whatever gemini makes of the settings, the changes outside the run's keys, applied to
    the user's file as it was, give its result without the run's keys."""
    if not isinstance(after, dict):
        after = {"x": after}
    written = ho.overlay(before, RUN)
    result = ho.apply(before, ho.changes(written, after, RUN))
    assert {k: v for k, v in result.items() if k not in ("mcpServers", "model")} == {
        k: v for k, v in after.items() if k not in ("mcpServers", "model")
    }


def test_merge_state_keeps_what_another_run_added_and_takes_the_run_s_values():
    theirs = {"projects": {"/a": "a", "/b": "b"}, "v": 1}
    ours = {"projects": {"/a": "a", "/c": "c"}, "v": 2}
    assert ho.merge_state(theirs, ours) == {"projects": {"/a": "a", "/b": "b", "/c": "c"}, "v": 2}
    assert ho.merge_state([1], {"x": 1}) == {"x": 1}
    # A list (gemini's logs.json): the user's items, then the run's that are not among them.
    assert ho.merge_state([{"m": 1}, {"m": 2}], [{"m": 2}, {"m": 3}]) == [{"m": 1}, {"m": 2}, {"m": 3}]


def test_holds_says_whether_a_merged_file_kept_all_of_the_run_s():
    ours = {"projects": {"/a": "a"}, "log": [1, 2]}
    assert ho.holds(ho.merge_state({"projects": {"/b": "b"}, "log": [0]}, ours), ours)
    assert not ho.holds({"projects": {"/b": "b"}, "log": [1, 2]}, ours)
    assert not ho.holds({"projects": {"/a": "a"}, "log": [1]}, ours)
    assert not ho.holds(None, ours) and ho.holds(3, 3)


def test_settle_decisions():
    s = ho.settle
    assert s("settings.json", Kind.FILE, Kind.FILE, True, True) == Action.KEEP
    assert s("tmp", Kind.LINK, Kind.DIR, True, False) == Action.KEEP  # still our link
    assert s("history", Kind.DIR, Kind.MISSING, False, False) == Action.DESCEND
    assert s("tmp", Kind.DIR, Kind.DIR, False, False) == Action.DESCEND  # another run made one too
    assert s("tmp/a/settings.json", Kind.FILE, Kind.MISSING, False, False) == Action.MOVE  # not ours
    assert s("projects.json", Kind.FILE, Kind.MISSING, False, False) == Action.MOVE
    assert s("projects.json", Kind.FILE, Kind.FILE, False, True) == Action.MERGE
    assert s("installation_id", Kind.FILE, Kind.FILE, True, False) == Action.REPLACE
    assert s("installation_id", Kind.FILE, Kind.FILE, False, False) == Action.LEAVE
    assert s("tmp", Kind.DIR, Kind.FILE, False, False) == Action.LEAVE
    assert s("fifo", Kind.OTHER, Kind.MISSING, False, False) == Action.KEEP
