"""Token usage read from the CLIs' own session records (not from what they draw on screen).

Pure: the caller reads the files and passes their lines. Each adapter says how one record of its
CLI's transcript gives (message id, :class:`Usage`, model) (``adapters/<cli>/transcript.py``);
:class:`UsageCounter` keeps the running totals, each message counted once, from its latest
record. ``input`` is every prompt token the model read (``cached`` of them from a cache) and
``output`` every token it produced.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from waaah_agent.core.nesting import loads_json


@dataclass(frozen=True)
class Usage:
    """Token counts: prompt tokens read (``cached`` of them from a cache) and tokens produced."""

    input: int = 0
    output: int = 0
    cached: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input + other.input, self.output + other.output, self.cached + other.cached)

    def __sub__(self, other: Usage) -> Usage:
        return Usage(self.input - other.input, self.output - other.output, self.cached - other.cached)


def count(value: Any) -> int:
    """A non-negative integer from a JSON value; anything else counts as 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return max(0, int(value))


def json_records(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The JSON objects of a session file: one per line, or (an older release's) one document
    over many lines; anything else is skipped."""
    rest = iter(lines)
    for first in rest:
        if first.strip() == "{":  # one JSON document over many lines
            body = list(rest)
            document = _object("{" + "".join(part.strip() for part in body))
            yield from [document] if document is not None else _lines(body)
            return
        if first.strip():
            yield from _lines(itertools.chain([first], rest))
            return


def _object(text: str) -> dict[str, Any] | None:
    try:
        found = loads_json(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _lines(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            record = loads_json(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record


#: One transcript record -> the (message id, usage, model) it holds ("": the model is not named).
Entries = Callable[[dict[str, Any]], Iterator[tuple[str, "Usage", str]]]


def model_name(value: Any) -> str:
    return value[:200] if isinstance(value, str) else ""


@dataclass
class UsageCounter:
    """Running token totals of one CLI's session file, fed its lines as the file grows.

    Messages are told apart by id across calls, so feeding a message's record again (or a later,
    updated record of it) replaces its earlier numbers instead of adding to them. Feed whole lines
    only: keep a trailing line without its newline back until it is complete."""

    entries: Entries
    # For a CLI that names the model once per turn rather than per message: the model a
    # record switches to, else "".
    turn_model: Callable[[dict[str, Any]], str] | None = None
    total: Usage = Usage()
    _seen: dict[str, Usage] = field(default_factory=dict, repr=False)
    _model: dict[str, str] = field(default_factory=dict, repr=False)
    _current: str = ""

    def feed(self, lines: Iterable[str]) -> Usage:
        """Take more lines; returns the totals so far. Malformed or unrelated lines are skipped."""
        for record in json_records(lines):
            if self.turn_model is not None:
                self._current = self.turn_model(record) or self._current
            for key, usage, model in self.entries(record):
                previous = self._seen.get(key)
                self._seen[key] = usage
                self._model[key] = model or self._model.get(key) or self._current
                self.total = self.total + usage - (previous or Usage())
        return self.total

    def by_model(self) -> dict[str, dict[str, int]]:
        """The totals per model ("" for messages whose model no record named)."""
        found: dict[str, Usage] = {}
        for key, usage in self._seen.items():
            model = self._model.get(key, "")
            found[model] = found.get(model, Usage()) + usage
        return {model: usage_dict(usage) for model, usage in sorted(found.items())}

    @property
    def messages(self) -> int:
        """How many distinct model messages were counted."""
        return len(self._seen)


def usage_dict(usage: Usage) -> dict[str, int]:
    return {"input": usage.input, "output": usage.output, "cached": usage.cached}


def record_file(files: Mapping[str, Mapping[str, int]], path: str, usage: Usage) -> dict[str, dict[str, int]]:
    """``files`` (a session's totals per transcript file) with ``path`` read again as ``usage``.

    A session's conversation may be in more than one file: a CLI may append a resumed
    conversation to the file it was in (the same path, read again: replaced, never added), while
    a fresh start after a run that wrote nothing, or a CLI that starts a new file, brings a new
    path, which adds. A count never goes down: tokens a file no longer shows (a rewritten or
    vanished file) were spent all the same. A file carried on whole under a new name (a later
    release's ``.jsonl`` beside an older ``.json``) replaces the one it carries on."""
    out = {name: dict(counts) for name, counts in files.items()}
    earlier = out.pop(path[:-1], {}) if path.endswith(".jsonl") else {}
    earlier = out.get(path, earlier)
    out[path] = {k: max(int(earlier.get(k, 0)), v) for k, v in usage_dict(usage).items()}
    return out


def file_totals(files: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """The session's totals: the sum over its transcript files."""
    total = {"input": 0, "output": 0, "cached": 0}
    for counts in files.values():
        for key in total:
            total[key] += int(counts.get(key, 0))
    return total


def record_models(
    files: Mapping[str, Mapping[str, Mapping[str, int]]], path: str, by_model: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, dict[str, int]]]:
    """``files`` (a session's totals per transcript file and model) with ``path`` read again;
    as for :func:`record_file`, a count never goes down."""
    out = {name: {m: dict(c) for m, c in models.items()} for name, models in files.items()}
    earlier = out.pop(path[:-1], {}) if path.endswith(".jsonl") else {}
    earlier = out.get(path, earlier)
    for model, counts in by_model.items():
        before = earlier.get(model, {})
        earlier[model] = {
            k: max(int(before.get(k, 0)), int(counts.get(k, 0))) for k in ("input", "output", "cached")
        }
    out[path] = earlier
    return out


def model_totals(files: Mapping[str, Mapping[str, Mapping[str, int]]]) -> dict[str, dict[str, int]]:
    """The session's totals per model: the sum over its transcript files."""
    total: dict[str, dict[str, int]] = {}
    for models in files.values():
        for model, counts in models.items():
            into = total.setdefault(model, {"input": 0, "output": 0, "cached": 0})
            for key in into:
                into[key] += int(counts.get(key, 0))
    return total
