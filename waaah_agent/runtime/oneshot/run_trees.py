"""Trees of `waaah run` runs: where their logs live (``WAAAH_LOG_DIR``), `waaah run --list`, and
`--resume` / `--resume-tree`, which read earlier runs' logs back as the context of a new run.

The decisions (tree order, the replay text and its cut) are in core/restore.py; this module reads
the logs (runtime/runlog.py's reader: a torn line, a huge log, a symlink or FIFO in place of one
are skipped or read no further) and the folder the variable names.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from waaah_agent import settings
from waaah_agent.core.oneshot import restore
from waaah_agent.errors import SessionNotFound, UsageError
from waaah_agent.runtime.oneshot import run_reasoning, runlog
from waaah_agent.runtime.oneshot.run_io import RunOptions
from waaah_agent.runtime.private import private_dir

# --------------------------------------------------------------------------------------------
# WAAAH_LOG_DIR
# --------------------------------------------------------------------------------------------


def check_log_dir(workspace: Path, write: bool) -> Path:
    """The folder run logs go to, checked: with ``WAAAH_LOG_DIR`` set, a folder that is (or, to
    ``write``, can be made) a writable folder; anything else is a one-line UsageError."""
    root = runlog.runs_root(workspace)
    value = os.environ.get(settings.LOG_DIR, "").strip()
    if not value:
        return root
    where = f"{settings.LOG_DIR}={value}"
    fix = f"point it at a folder, or unset it for {workspace / '.waaah' / 'runs'}"
    try:
        mode = os.stat(root).st_mode
    except ValueError:
        raise UsageError(f"{where} is not a usable path (it holds a NUL byte); {fix}") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UsageError(f"{where} is a symlink loop; {fix}") from None
        if err.errno == errno.ENOTDIR:
            raise UsageError(f"{where}: a part of that path is a file, not a folder; {fix}") from None
        if err.errno != errno.ENOENT:
            raise UsageError(f"{where} cannot be read ({err.strerror}); {fix}") from None
        if not write:
            return root  # nothing logged there yet
        try:
            private_dir(root)
        except OSError as cannot:
            raise UsageError(f"{where} cannot be created ({cannot.strerror}); {fix}") from None
        return root
    if not stat.S_ISDIR(mode):
        raise UsageError(f"{where} is not a folder; {fix}")
    if write and not os.access(root, os.W_OK | os.X_OK):
        raise UsageError(f"{where} is not writable by this user; {fix}")
    return root


def log_path(workspace: Path, node: runlog.Node) -> Path:
    return runlog.runs_root(workspace) / node.day / f"{node.id}.jsonl"


# --------------------------------------------------------------------------------------------
# waaah run --list [ID] [--paths]
# --------------------------------------------------------------------------------------------


def _find(roots: list[runlog.Node], wanted: str) -> runlog.Node | None:
    stack = list(roots)
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if wanted == node.id or wanted in node.aliases:
            return node
        stack.extend(node.children)
    return None


def list_text(workspace: Path, wanted: str | None, paths: bool, as_json: bool = False) -> str:
    """The tree `waaah sessions` shows, or only the tree of ``wanted``; with ``paths``, each run's
    log path under it. ``as_json``: the trees as `waaah sessions --json` prints them, each run
    with its ``log`` path when ``paths``."""
    roots = _listed(workspace, wanted)
    if as_json:
        trees = [r.to_json() for r in roots]

        def add_logs(node: runlog.Node, out: dict[str, Any]) -> None:
            if node.kind == "run":
                out["log"] = str(log_path(workspace, node))
            for child, child_out in zip(node.children, out["children"], strict=True):
                add_logs(child, child_out)

        for root, tree in zip(roots, trees, strict=True) if paths else ():
            add_logs(root, tree)
        return json.dumps(trees, indent=2)

    def path_line(node: runlog.Node) -> str:
        return f"log: {log_path(workspace, node)}" if node.kind == "run" else ""

    return runlog.render_tree(roots, path_line if paths else None)


def _listed(workspace: Path, wanted: str | None) -> list[runlog.Node]:
    check_log_dir(workspace, write=False)
    roots = runlog.tree(workspace)
    if wanted:
        node = _find(roots, wanted)
        if node is None:
            raise SessionNotFound(
                f"unknown run id '{wanted}': no run or supervised session with that id "
                f"(runs in {runlog.runs_root(workspace)}; see: waaah run --list)"
            )
        roots = [node]
    return roots


# --------------------------------------------------------------------------------------------
# waaah run --resume ID / --resume-tree ID
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
    check_log_dir(workspace, write=False)
    every = runlog.nodes(workspace)
    by_id = {n.id: n for n in every}
    items = [restore.Item(n.id, n.parent_id, n.started, n.aliases) for n in every]
    order = restore.tree_order(items, wanted)
    flag = "--resume-tree" if whole_tree else "--resume"
    if not order:
        raise SessionNotFound(
            f"unknown run id '{wanted}' for {flag}: no run with that log or session id in "
            f"{runlog.runs_root(workspace)} (see: waaah run --list)"
        )
    if not whole_tree:
        order = order[:1]
    entries = []
    for item, depth in order:
        node = by_id[item.id]
        if node.kind == "session":
            entries.append(restore.Entry(node.id, node.agent, depth, "session", (), node.first_prompt))
        else:
            entries.append(restore.Entry(node.id, node.agent, depth, "run", turns(log_path(workspace, node))))
    root = by_id[order[0][0].id]
    text = restore.replay_text(entries, root.id, whole_tree)
    return Restored(root.id, root.agent, text, [e.id for e in entries], whole_tree)


def for_run(opts: RunOptions, workspace: Path) -> Restored | None:
    """What --resume or --resume-tree of this run restores (None without them)."""
    wanted = opts.resume or opts.resume_tree
    if opts.resume and opts.resume_tree:
        raise UsageError("give --resume ID (one run) or --resume-tree ID (a run and its tree), not both")
    if wanted is None:
        return None
    if opts.session:
        raise UsageError(
            "--session continues a CLI's own conversation; --resume and --resume-tree start a new "
            "one with earlier runs as context: give one of them"
        )
    if not wanted.strip():
        raise UsageError("--resume and --resume-tree take a run id (see: waaah run --list)")
    return restored(workspace, wanted.strip(), whole_tree=bool(opts.resume_tree))


def with_replay(prompt: str, found: Restored | None) -> str:
    return restore.with_replay(prompt, found.text) if found else prompt
