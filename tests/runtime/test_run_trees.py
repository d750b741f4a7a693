"""Run trees from the logs on disk: --continue-from / --continue-from-tree's replay, `waaah sessions`,
WAAAH_LOG_DIR.

The logs are written here the way `waaah run` writes them, then damaged the ways a disk, a kill or
a hand edit can damage them; the command itself runs as a script calls it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.envelope_schema import refused
from tests.runtime.helpers import WAAAH
from waaah_agent.errors import SessionNotFound, UsageError
from waaah_agent.runtime.night import files as night_files
from waaah_agent.runtime.oneshot import listing, run_trees
from waaah_agent.runtime.oneshot.run_io import RunOptions

DAY = "2026-01-02"


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    monkeypatch.delenv("WAAAH_LOG_DIR", raising=False)
    return folder


def write_log(
    root: Path,
    log_id: str,
    *turns: tuple[str, dict[str, Any] | None],
    agent: str = "gemini",
    parent: str | None = None,
    started: float = 1000.0,
    session_id: str | None = None,
) -> Path:
    """A run log: a start record per prompt, then its end envelope (None: the run never ended)."""
    path = root / DAY / f"{log_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for n, (prompt, envelope) in enumerate(turns):
        start = {"record": "start", "ts": started + n, "prompt": prompt, "agent": agent, "parent_id": parent}
        lines.append(json.dumps(start))
        lines.append(json.dumps({"record": "event", "ts": started + n, "agent": agent, "event": {"x": 1}}))
        if envelope is not None:
            envelope.setdefault("agent", agent)
            envelope.setdefault("session_id", session_id or log_id)
            envelope.setdefault("duration_ms", 1500)
            envelope.setdefault("tokens", {"input": 10, "output": 2, "cached": 0, "total": 12})
            lines.append(json.dumps({"record": "end", "ts": started + n + 0.5, "envelope": envelope}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def ok(answer: str) -> dict[str, Any]:
    return {"ok": True, "response": answer}


def runs(ws: Path) -> Path:
    return ws / ".waaah" / "runs"


def a_tree(folder: Path) -> None:
    write_log(folder, "root", ("plan the work", ok("ROOT-ANSWER")), started=1000)
    write_log(folder, "kid", ("do part one", ok("KID-ANSWER")), agent="claude", parent="root", started=1010)
    write_log(
        folder,
        "grandkid",
        ("sub-step", {"ok": False, "response": "", "error": "took too long", "error_type": "timeout"}),
        parent="kid",
        started=1020,
    )
    write_log(folder, "other", ("unrelated", ok("OTHER-ANSWER")), started=900)


def test_resume_replays_one_run_every_prompt_of_its_log(ws: Path) -> None:
    write_log(
        runs(ws),
        "r1",
        ('<context source="CONTEXT.md">\nCTX\n</context>\n\nfirst question', ok("FIRST-ANSWER")),
        ("second question", ok("SECOND-ANSWER")),
        ("third, killed", None),
        agent="codex",
        session_id="thread-7",
    )
    found = run_trees.restored(ws, "thread-7", whole_tree=False)  # a CLI session id works too
    assert (found.root, found.agent, found.runs, found.tree) == ("r1", "codex", ["r1"], False)
    assert "=== run r1 · codex · depth 0 ===" in found.text
    assert "first question" in found.text and "CTX" not in found.text  # its context is not replayed
    assert found.text.index("FIRST-ANSWER") < found.text.index("SECOND-ANSWER")
    assert "(no answer: the run ended without one" in found.text
    assert found.to_log() == {"id": "r1", "tree": False, "runs": ["r1"], "bytes": len(found.text.encode())}


def test_resume_tree_replays_the_descendants_in_tree_order(ws: Path) -> None:
    a_tree(runs(ws))
    found = run_trees.restored(ws, "root", whole_tree=True)
    assert found.runs == ["root", "kid", "grandkid"]
    text = found.text
    assert text.index("ROOT-ANSWER") < text.index("KID-ANSWER") < text.index("sub-step")
    assert "=== run kid · claude · depth 1 ===" in text and "=== run grandkid · gemini · depth 2 ===" in text
    assert "(no answer: timeout: took too long)" in text and "OTHER-ANSWER" not in text
    only = run_trees.restored(ws, "root", whole_tree=False)
    assert only.runs == ["root"] and "KID-ANSWER" not in only.text


def test_hostile_logs_are_read_as_far_as_they_make_sense(ws: Path) -> None:
    root = write_log(runs(ws), "root", ("plan", ok("ROOT-ANSWER")), started=1000)
    # A torn last line and invalid UTF-8 in a child's log; a record of the wrong shape.
    kid = write_log(runs(ws), "kid", ("part", ok("KID-ANSWER")), parent="root", started=1010)
    with kid.open("ab") as fh:
        fh.write(b'["not", "a record"]\n{"record": "start", "prompt": "\xff\xfe torn')
    # Parent ids in a loop, under the root; and a run whose parent is gone.
    write_log(runs(ws), "loop-a", ("a", ok("LOOP-A")), parent="loop-b", started=1020)
    write_log(runs(ws), "loop-b", ("b", ok("LOOP-B")), parent="loop-a", started=1030)
    write_log(runs(ws), "orphan", ("o", ok("ORPHAN")), parent="gone", started=1040)
    # A symlink in place of a log, and a folder with a log's name: neither is read.
    (root.parent / "link.jsonl").symlink_to(root)
    (root.parent / "dir.jsonl").mkdir()
    found = run_trees.restored(ws, "root", whole_tree=True)
    assert found.runs == ["root", "kid"] and "KID-ANSWER" in found.text
    assert run_trees.restored(ws, "loop-a", whole_tree=True).runs == ["loop-a", "loop-b"]
    assert run_trees.restored(ws, "orphan", whole_tree=True).runs == ["orphan"]
    with pytest.raises(SessionNotFound, match="unknown run id 'gone' for --continue-from-tree"):
        run_trees.restored(ws, "gone", whole_tree=True)
    # The loop still shows in the tree (its first run stands as a root), each run once.
    listed = listing.list_text(ws, None, paths=False)
    assert listed.count("loop-a  run") == 1 and listed.count("loop-b  run") == 1
    as_json = json.dumps([n.to_json() for n in listing.tree(ws)])  # a tree: no walk of it loops
    assert as_json.count('"id": "loop-a"') == 1 and as_json.count('"id": "loop-b"') == 1
    rows = night_files.run_rows(ws, [])
    assert sorted(r["id"] for r in rows if r["id"].startswith("loop")) == ["loop-a", "loop-b"]
    assert next(r for r in rows if r["id"] == "kid")["took"]  # a run's duration, from its envelope
    assert "link" not in listed


def test_a_huge_log_is_replayed_within_the_cap(ws: Path) -> None:
    answers = [(f"question {i} " + "q" * 5000, ok(f"ANSWER-{i} " + "a" * 20_000)) for i in range(60)]
    write_log(runs(ws), "big", *answers)
    found = run_trees.restored(ws, "big", whole_tree=False)
    size = len(found.text.encode())
    assert size <= 48 * 1024 and "ANSWER-59" in found.text and "ANSWER-0 " not in found.text
    assert "elided to fit" in found.text and "bytes cut here" in found.text


def test_resume_options_that_cannot_go_together(ws: Path) -> None:
    a_tree(runs(ws))
    with pytest.raises(UsageError, match="not both"):
        run_trees.for_run(RunOptions(continue_from="root", continue_from_tree="root"), ws)
    with pytest.raises(UsageError, match="--session continues"):
        run_trees.for_run(RunOptions(continue_from="root", session="root"), ws)
    assert run_trees.for_run(RunOptions(), ws) is None
    restored = run_trees.for_run(RunOptions(continue_from_tree="kid"), ws)
    assert restored is not None and restored.runs == ["kid", "grandkid"]


def test_list_shows_one_tree_with_durations_tokens_and_paths(ws: Path) -> None:
    a_tree(runs(ws))
    text = listing.list_text(ws, "kid", paths=True)
    lines = text.splitlines()
    assert lines[1].strip().startswith('kid  run  claude  ok  1.5s  tokens 10/2  "do part one"')
    assert f"log: {runs(ws) / DAY / 'kid.jsonl'}" in text
    assert f"log: {runs(ws) / DAY / 'grandkid.jsonl'}" in text
    assert "grandkid  run  gemini  error  1.5s" in text and "plan the work" not in text
    with pytest.raises(SessionNotFound, match="unknown run id 'nope'"):
        listing.list_text(ws, "nope", paths=False)


def waaah(ws: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(ws.parent),
        "XDG_STATE_HOME": str(ws.parent / "state"),
        "LANG": "C.UTF-8",
        "WAAAH_CLI_DIR": str(ws.parent / "no-clis"),
    }
    return subprocess.run(
        [WAAAH, *args], cwd=ws, env={**base, **env}, capture_output=True, text=True, timeout=60
    )


def test_the_log_dir_variable_is_where_runs_are_found(ws: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "logs"
    a_tree(elsewhere)
    done = waaah(ws, "sessions", "--paths", WAAAH_LOG_DIR=str(elsewhere))
    assert done.returncode == 0, done.stderr
    assert f"log: {elsewhere / DAY / 'grandkid.jsonl'}" in done.stdout
    # --json: the same tree as JSON, each run with its log path.
    done = waaah(ws, "sessions", "kid", "--paths", "--json", WAAAH_LOG_DIR=str(elsewhere))
    assert done.returncode == 0, done.stderr
    (kid,) = json.loads(done.stdout)
    assert (kid["id"], kid["kind"], kid["log"]) == ("kid", "run", str(elsewhere / DAY / "kid.jsonl"))
    assert [(c["id"], c["log"]) for c in kid["children"]] == [
        ("grandkid", str(elsewhere / DAY / "grandkid.jsonl"))
    ]
    plain = waaah(ws, "sessions", "kid", "--json", WAAAH_LOG_DIR=str(elsewhere))
    assert "log" not in json.loads(plain.stdout)[0]
    sessions = waaah(ws, "sessions", "--json", WAAAH_LOG_DIR=str(elsewhere))
    assert [n["id"] for n in json.loads(sessions.stdout)][-1] == "other"
    # A relative value is taken from the workspace root.
    a_tree(ws / "rel-logs")
    done = waaah(ws, "sessions", "root", WAAAH_LOG_DIR="rel-logs")
    assert done.returncode == 0 and "kid  run  claude" in done.stdout, done.stderr
    # Unset: the workspace's own folder, empty here.
    assert "no sessions or runs" in waaah(ws, "sessions").stdout
    # --continue-from of an id only the folder holds: found there (the CLI is then not installed: 15).
    done = waaah(ws, "run", "next step", "--continue-from-tree", "root", WAAAH_LOG_DIR=str(elsewhere))
    assert done.returncode == 15, done.stderr
    assert json.loads(done.stdout)["restored_from"] == "root"
    new = [p for p in (elsewhere).glob("*/*.jsonl") if p.stem not in ("root", "kid", "grandkid", "other")]
    start = json.loads(new[0].read_text().splitlines()[0])
    assert start["restored_from"]["runs"] == ["root", "kid", "grandkid"]
    assert "KID-ANSWER" in start["prompt"] and start["prompt"].endswith("next step")
    assert not (ws / ".waaah" / "runs").exists()
    # Its first line in the tree is its own prompt, not the replay before it.
    listed = waaah(ws, "sessions", new[0].stem, WAAAH_LOG_DIR=str(elsewhere)).stdout
    assert '"next step"' in listed and "<restored" not in listed
    assert start["agent"] == "gemini"  # the restored run's agent, none being given


@pytest.mark.parametrize("kind", ["file", "loop", "under-a-file", "uncreatable", "unwritable"])
def test_a_hostile_log_dir_is_one_clear_line(ws: Path, tmp_path: Path, kind: str) -> None:
    target = tmp_path / "target"
    message = {
        "file": "is not a folder",
        "loop": "is a symlink loop",
        "under-a-file": "a part of that path is a file",
        "uncreatable": "cannot be created (No such file or directory)",
        "unwritable": "is not writable by this user",
    }[kind]
    if kind == "file":
        target.write_text("x")
    elif kind == "loop":
        target.symlink_to(tmp_path / "target2")
        (tmp_path / "target2").symlink_to(target)
    elif kind == "under-a-file":
        (tmp_path / "plain").write_text("x")
        target = tmp_path / "plain" / "logs"
    elif kind == "uncreatable":
        target = Path("/proc/waaah-logs")  # no one creates folders in /proc, root neither
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes to any folder")
        target.mkdir(mode=0o500)
    commands = [("run", "hi", "--agent", "claude"), ("sessions",), ("sessions", "root", "--paths")]
    if kind in ("unwritable", "uncreatable"):
        commands = commands[:1]  # only writing needs it writable (a missing folder holds no runs)
    for args in commands:
        done = waaah(ws, *args, WAAAH_LOG_DIR=str(target))
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith(f"waaah: WAAAH_LOG_DIR={target} {message}"[: len("waaah: ") + 20])
        assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr
        assert done.stdout == "" if args[0] != "run" else refused(done.stdout, "invalid_input", 2)


def test_resume_of_an_unknown_run_is_a_clear_error(ws: Path) -> None:
    done = waaah(ws, "run", "hi", "--continue-from", "nobody", "--agent", "claude")
    assert done.returncode == 7 and "unknown run id 'nobody' for --continue-from" in done.stderr
    assert refused(done.stdout, "invalid_session", 7) and not list(ws.glob(".waaah/runs/*/*.jsonl"))
    done = waaah(ws, "run", "hi", "--continue-from", "x", "--session", "y")
    assert done.returncode == 2 and "--session continues" in done.stderr


def test_a_session_is_continued_by_its_own_cli_only(ws: Path) -> None:
    """--session of a claude run with --agent gemini: said before any CLI starts (gemini would
    only report an unknown session), and the run's log is left as it was."""
    log = write_log(runs(ws), "c-run", ("plan it", ok("PLAN")), agent="claude")
    before = log.read_text()
    done = waaah(ws, "run", "go on", "--session", "c-run", "--agent", "gemini")
    assert done.returncode == 7 and refused(done.stdout, "invalid_session", 7), done.stderr
    assert done.stderr == (
        "waaah: --session c-run is a claude conversation, which gemini cannot continue: drop --agent "
        "gemini, or give gemini that run as context with --continue-from c-run\n"
    )
    assert log.read_text() == before
    resumed = waaah(ws, "run", "go on", "--continue-from", "c-run", "--agent", "gemini", "--dry-run")
    assert resumed.returncode == 0 and json.loads(resumed.stdout)["agent"] == "gemini", resumed.stderr
    # A default CLI from the environment is no --agent: the session goes on in its own CLI.
    done = waaah(ws, "run", "go on", "--session", "c-run", "--dry-run", WAAAH_DEFAULT_AGENT="gemini")
    assert done.returncode == 0 and json.loads(done.stdout)["agent"] == "claude", done.stderr


def test_session_of_a_supervised_session_says_how_to_carry_it_on(ws: Path) -> None:
    """`waaah sessions` lists supervised sessions beside runs: --session with one of their ids is
    not "unknown" but said to be one, with the commands that carry it on."""
    from tests.doubles.scripted_night import SESSION, write_night

    write_night(ws)
    done = waaah(ws, "run", "go on", "--session", SESSION)
    assert done.returncode == 7 and refused(done.stdout, "invalid_session", 7), done.stderr
    assert done.stderr == (
        f"waaah: --session {SESSION} is a supervised session, not a run: carry it on with waaah agent "
        f"--start=gemini --resume {SESSION}, or give it to a new run as context with --continue-from-tree {SESSION}\n"
    )
    assert not runs(ws).exists()
    tree = waaah(ws, "run", "go on", "--continue-from-tree", SESSION, "--dry-run")
    assert tree.returncode == 0, tree.stderr
