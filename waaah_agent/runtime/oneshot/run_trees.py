"""`waaah run --continue-from` / `--continue-from-tree`: earlier runs' logs read back as the
context of a new run.

The decisions (tree order, the replay text and its cut) are in core/restore.py; this module reads
the logs (runtime/runlog.py's reader: a torn line, a huge log, a symlink or FIFO in place of one
are skipped or read no further).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from waaah_agent.core.oneshot import restore
from waaah_agent.errors import SessionNotFound, UsageError
from waaah_agent.runtime.oneshot import listing, run_reasoning, runlog
from waaah_agent.runtime.oneshot.run_io import RunOptions

# --------------------------------------------------------------------------------------------
# waaah run --continue-from ID / --continue-from-tree ID
# --------------------------------------------------------------------------------------------


@dataclass
class Restored:
    root: str  # the restored run's id
    agent: str  # its agent (the new run's default)
    text: str  # the replay put before the new prompt
    runs: list[str]  # the ids replayed, in tree order
    tree: bool

    def to_log(self) -> dict[str, Any]:
        return {
            "id": self.root,
            "tree": self.tree,
            "runs": self.runs,
            "bytes": len(self.text.encode("utf-8")),
        }


def turns(path: Path) -> tuple[restore.Turn, ...]:
    """Each prompt of a run log (its start records) with what came of it (the end record after)."""
    found: list[restore.Turn] = []
    for record in runlog.records(path):
        kind = record["record"]
        if kind == "start":
            prompt = record.get("prompt")
            found.append(
                restore.Turn(restore.own_prompt(prompt if isinstance(prompt, str) else ""), "", "no end")
            )
        elif kind == "end" and found and found[-1].outcome == "no end":
            envelope = record.get("envelope")
            envelope = envelope if isinstance(envelope, dict) else {}
            answer, error = envelope.get("response"), envelope.get("error")
            kind_of = envelope.get("error_kind", envelope.get("error_type"))  # the precise type
            found[-1] = restore.Turn(
                found[-1].prompt,
                answer if isinstance(answer, str) else "",
                kind_of if isinstance(kind_of, str) and error else "ok",
                error if isinstance(error, str) else "",
            )
    return tuple(_with_partial_answers(path, found))


def _with_partial_answers(path: Path, found: list[restore.Turn]) -> list[restore.Turn]:
    """A run that left no end record (killed, or still running) keeps what its CLI had written
    by then, read again from the stream events its log kept."""
    if not any(turn.outcome == "no end" for turn in found):
        return found
    by_run = run_reasoning.replayed_by_run(path)
    out = []
    for number, turn in enumerate(found, start=1):
        attempts = by_run.get(number) or []
        partial = attempts[-1][1].response.strip() if attempts else ""
        out.append(replace(turn, answer=partial) if turn.outcome == "no end" and partial else turn)
    return out


def restored(workspace: Path, wanted: str, whole_tree: bool) -> Restored:
    """The run ``wanted`` (a log id or CLI session id; with ``whole_tree`` also every run under
    it) as replay text for a new run."""
    runlog.check_log_dir(workspace, write=False)
    every = listing.nodes(workspace)
    by_id = {n.id: n for n in every}
    items = [restore.Item(n.id, n.parent_id, n.started, n.aliases) for n in every]
    order = restore.tree_order(items, wanted)
    flag = "--continue-from-tree" if whole_tree else "--continue-from"
    if not order:
        raise SessionNotFound(
            f"unknown run id '{wanted}' for {flag}: no run with that log or session id in "
            f"{runlog.runs_root(workspace)} (see: waaah sessions)"
        )
    if not whole_tree:
        order = order[:1]
    entries = []
    for item, depth in order:
        node = by_id[item.id]
        if node.kind == "session":
            entries.append(restore.Entry(node.id, node.agent, depth, "session", (), node.first_prompt))
        else:
            entries.append(
                restore.Entry(node.id, node.agent, depth, "run", turns(listing.log_path(workspace, node)))
            )
    root = by_id[order[0][0].id]
    text = restore.replay_text(entries, root.id, whole_tree)
    return Restored(root.id, root.agent, text, [e.id for e in entries], whole_tree)


def for_run(opts: RunOptions, workspace: Path) -> Restored | None:
    """What --continue-from or --continue-from-tree of this run restores (None without them)."""
    wanted = opts.continue_from or opts.continue_from_tree
    if opts.continue_from and opts.continue_from_tree:
        raise UsageError(
            "give --continue-from ID (one run) or --continue-from-tree ID (a run and its tree), not both"
        )
    if wanted is None:
        return None
    if opts.session:
        raise UsageError(
            "--session continues a CLI's own conversation; --continue-from and --continue-from-tree start a new "
            "one with earlier runs as context: give one of them"
        )
    if not wanted.strip():
        raise UsageError("--continue-from and --continue-from-tree take a run id (see: waaah sessions)")
    return restored(workspace, wanted.strip(), whole_tree=bool(opts.continue_from_tree))


def with_replay(prompt: str, found: Restored | None) -> str:
    return restore.with_replay(prompt, found.text) if found else prompt
