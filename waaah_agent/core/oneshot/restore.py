"""`waaah run --continue-from` / `--continue-from-tree`: earlier runs replayed as context for a new session.

Pure: which runs a tree holds and in what order (``tree_order``), what of a logged prompt was the
user's own (``own_prompt``), and the text put before the new prompt (``replay_text``), cut to
``RESTORE_CAP`` bytes. What is cut goes first from the deepest runs, then the oldest turns: the
restored run itself, and its last turn most of all, is kept longest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: The replayed runs put before the new prompt are cut to this many bytes (UTF-8).
RESTORE_CAP = 48 * 1024
#: One prompt or answer longer than this keeps its head and tail, the middle replaced by a marker.
PIECE_CAP = 8 * 1024

OPEN_TAG = "<restored"
CLOSE_TAG = "</restored>"


@dataclass(frozen=True)
class Item:
    """A run or supervised session as a tree node: its id, the id it names as its parent, when
    it started and the other ids it answers to (its CLI session ids)."""

    id: str
    parent_id: str = ""
    started: float = 0.0
    aliases: tuple[str, ...] = ()


def tree_order(items: Sequence[Item], root: str) -> list[tuple[Item, int]]:
    """The item named ``root`` (an id or alias) and every item whose parent chain leads to it,
    depth first, children oldest first, each with its depth (the root's is 0). A parent id that
    names nothing, or a loop of parent ids, ends a chain; each item comes once."""
    by_key: dict[str, Item] = {}
    for item in items:
        by_key.setdefault(item.id, item)
    for item in items:
        for alias in item.aliases:
            by_key.setdefault(alias, item)
    start = by_key.get(root)
    if start is None:
        return []
    children: dict[str, list[Item]] = {}
    for item in items:
        parent = by_key.get(item.parent_id) if item.parent_id else None
        if parent is not None and parent.id != item.id:
            children.setdefault(parent.id, []).append(item)
    for kids in children.values():
        kids.sort(key=lambda i: (i.started, i.id))
    order: list[tuple[Item, int]] = []
    seen: set[str] = set()
    stack = [(start, 0)]
    while stack:  # no recursion: a chain of thousands of runs is no deeper for Python
        item, depth = stack.pop()
        if item.id in seen:
            continue
        seen.add(item.id)
        order.append((item, depth))
        stack.extend((kid, depth + 1) for kid in reversed(children.get(item.id, [])))
    return order


def own_prompt(logged: str) -> str:
    """A logged prompt without what `waaah run` put before it, in the order it is written: the
    agent file's block (--agent-file), the context file's block and the runs an earlier --continue-from
    replayed (they are replayed from their own logs, not again)."""
    text = logged
    blocks = (
        ("<agent source=", "\n</agent>\n\n"),
        ("<context source=", "\n</context>\n\n"),
        (OPEN_TAG, f"\n{CLOSE_TAG}\n\n"),
    )
    for opening, closing in blocks:
        if text.startswith(opening):
            end = text.find(closing)
            if end >= 0:
                text = text[end + len(closing) :]
    return text


@dataclass(frozen=True)
class Turn:
    """One prompt of a run and what came of it: its answer, else why there was none."""

    prompt: str
    answer: str = ""
    outcome: str = "ok"  # "ok", an error type, or "no end" (the run was killed or is running)
    error: str = ""


@dataclass(frozen=True)
class Entry:
    """One run (or supervised session) of the replay, in tree order."""

    id: str
    agent: str
    depth: int
    kind: str = "run"  # "run", or "session" (a supervised session: its first line only)
    turns: tuple[Turn, ...] = ()
    summary: str = ""


def cut_piece(text: str, cap: int = PIECE_CAP) -> str:
    """``text`` cut to about ``cap`` bytes: its head and tail, a marker saying what was left out."""
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text
    half = cap // 2
    head = data[:half].decode("utf-8", "ignore")
    tail = data[-half:].decode("utf-8", "ignore")
    return f"{head}\n[... {len(data) - half * 2:,} bytes cut here ...]\n{tail}"


def _header(entry: Entry) -> str:
    kind = "supervised session" if entry.kind == "session" else "run"
    return f"=== {kind} {entry.id} · {entry.agent or '?'} · depth {entry.depth} ==="


def _turn_text(turn: Turn, number: int, count: int) -> str:
    label = f" (turn {number} of {count})" if count > 1 else ""
    if turn.outcome == "ok":
        answer = cut_piece(turn.answer.strip()) or "(an empty answer)"
    elif turn.outcome == "no end" and turn.answer.strip():
        answer = (
            "(the run ended without its answer, killed or still running; what its CLI had written:)\n"
            + cut_piece(turn.answer.strip())
        )
    elif turn.outcome == "no end":
        answer = "(no answer: the run ended without one, killed or still running)"
    else:
        answer = (
            f"(no answer: {turn.outcome}: {turn.error})" if turn.error else f"(no answer: {turn.outcome})"
        )
    return f"[prompt{label}]\n{cut_piece(turn.prompt.strip())}\n[answer{label}]\n{answer}"


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def replay_text(entries: Sequence[Entry], restored_from: str, tree: bool, cap: int = RESTORE_CAP) -> str:
    """The block put before the new prompt: each entry (in the order given) with its header and
    turns, cut to ``cap`` bytes. The other entries' turns go first, deepest first, then oldest, each leaving a
    one-line marker; when even those do not fit, whole entries (deepest, oldest) are dropped and
    counted in one marker line; then the first entry's own turns, oldest first; as a last resort
    the text keeps its tail."""
    units: list[tuple[int, int, str]] = []  # (entry index, turn index, text)
    for e_index, entry in enumerate(entries):
        if entry.kind == "session":
            units.append((e_index, 0, f"[first line] {entry.summary or '(none)'}"))
        for t_index, turn in enumerate(entry.turns):
            units.append((e_index, t_index, _turn_text(turn, t_index + 1, len(entry.turns))))
    what = "tree" if tree else "run"
    opening = (
        f'{OPEN_TAG} from="{restored_from}" kind="{what}" runs="{len(entries)}">\n'
        f"Earlier work, restored from the logs of `waaah run` as context, oldest first. "
        f"The new prompt follows the {CLOSE_TAG} line."
    )
    marker = [f"[... turn {t + 1} elided to fit: {_size(u):,} bytes ...]" for _, t, u in units]
    by_entry: dict[int, list[int]] = {}
    for u_index, (e_index, _, _) in enumerate(units):
        by_entry.setdefault(e_index, []).append(u_index)
    elided: set[int] = set()
    dropped: set[int] = set()

    def render() -> str:
        parts = [opening]
        if dropped:
            parts.append(f"[... {len(dropped)} earlier run(s) elided to fit {cap:,} bytes ...]")
        for e_index, entry in enumerate(entries):
            if e_index in dropped:
                continue
            parts.append(_header(entry))
            for u_index in by_entry.get(e_index, []):
                parts.append(marker[u_index] if u_index in elided else units[u_index][2])
            if not entry.turns and entry.kind == "run":
                parts.append("(no prompt in its log)")
        parts.append(CLOSE_TAG)
        return "\n".join(parts)

    text = render()
    size = _size(text)
    if size > cap:
        # Sizes kept as they change (a tree of thousands of runs is not rendered again each time).
        # First the other runs' turns, deepest first, then oldest (earliest in tree order)...
        def elide(u_index: int) -> int:
            elided.add(u_index)
            return _size(units[u_index][2]) - _size(marker[u_index])

        others = [u for u in range(len(units)) if units[u][0] != 0]
        for u_index in sorted(others, key=lambda u: (-entries[units[u][0]].depth, u)):
            if size <= cap:
                break
            size -= elide(u_index)
        # ... then those runs whole (deepest, oldest first), counted in one line...
        if size > cap:
            size += 80  # that line
        for e_index in sorted(range(1, len(entries)), key=lambda e: (-entries[e].depth, e)):
            if size <= cap:
                break
            dropped.add(e_index)
            shown = [marker[u] if u in elided else units[u][2] for u in by_entry.get(e_index, [])]
            size -= _size(_header(entries[e_index])) + sum(_size(s) + 1 for s in shown) + 1
        # ... and last the restored run's own turns, oldest first.
        for u_index in by_entry.get(0, []):
            if size <= cap:
                break
            size -= elide(u_index)
        text = render()
    if _size(text) > cap:
        data = text.encode("utf-8")
        text = "[... cut to its last bytes ...]\n" + data[-(cap - 64) :].decode("utf-8", "ignore")
    return text


def with_replay(prompt: str, replay: str) -> str:
    return f"{replay}\n\n{prompt}"
