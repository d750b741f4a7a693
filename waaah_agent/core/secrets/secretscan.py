"""Where known secrets are in terminal output, whole or in part, however they arrive. Pure.

A part of a known secret is a *run*: MIN_RUN or more of its characters in a row, as a terminal
shows them. A key typed into a TUI's input box is echoed as it grows (each frame a longer
prefix); a long key in a narrow box shows its end; a diff-based TUI writes a character at a time
with cursor moves between them. So a run is found

* contiguous, by its MIN_RUN-byte pieces ("grams"): every run of MIN_RUN or more is covered by
  them, and
* spread: with escape sequences, CR or backspaces (``core/secrets/separators.py``) between its characters. That
  search works on the text with the separators removed (``visible``), and runs only when the
  native pass saw a separator between two characters that secrets have (plain text has none;
  a TUI's coloured frames often do). Where the package was built with a C compiler, the
  separators are removed in C (``_visible.c``, ~1 GB/s); elsewhere in Python, ~100 times
  slower, so there a second native look first asks whether the characters on the two sides
  of a separator follow each other in a secret.

The searches over the whole stream run in native code (``hyperscan``, one pass per chunk for the
grams, the spread prefilter and the callers' own patterns); where its wheels do not exist the
same searches run in Python, slower, with the same result. Only a chunk that holds something
goes on to the Python work.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from waaah_agent.core.secrets import separators

_hs: Any
try:  # native multi-pattern search; absent on platforms without its wheels
    import hyperscan as _hs
except ImportError:  # pragma: no cover - exercised through ``native=False``
    _hs = None

PREFILTER = _hs.HS_FLAG_PREFILTER if _hs is not None else 0  # for ``extra``: a superset is fine
MIN_RUN = 8  # characters of a known secret in a row that are never written anywhere
TAIL_STEP = 64  # bytes of a chunk's end looked at first for a run that may go on

Span = tuple[int, int]


def native_available() -> bool:
    return _hs is not None


def merge(spans: Iterable[Span]) -> list[Span]:
    """Overlapping or touching spans joined, in order."""
    out: list[Span] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def mask_spans(data: bytes, spans: Iterable[Span], mask: bytes) -> bytes:
    """``data`` with each span replaced by ``mask``."""
    parts: list[bytes] = []
    at = 0
    for start, end in merge(spans):
        parts += [data[at:start], mask]
        at = end
    parts.append(data[at:])
    return b"".join(parts)


@dataclass
class Found:
    """What one pass over a chunk saw."""

    runs: list[Span] = field(default_factory=list)  # contiguous runs (gram by gram, unmerged)
    spread: bool = False  # a run with separators in it may be there: look closer
    patterns: set[int] = field(default_factory=set)  # which of the caller's patterns may match


def _python_pattern(pattern: bytes) -> re.Pattern[bytes] | None:
    """``pattern`` for Python's re; None (always reported) where re does not take it."""
    try:
        return re.compile(pattern)
    except re.error:
        return None


class PatternSet:
    """Which of ``patterns`` ((pattern, flags) pairs) a chunk holds, in one native pass (each
    reported once). A pattern Python's re does not take is always reported without the native
    search."""

    def __init__(self, patterns: Sequence[tuple[bytes, int]], native: bool = True) -> None:
        self._db: Any = None
        self._python: list[re.Pattern[bytes] | None] = []
        if native and _hs is not None:
            self._db = _hs.Database()
            self._db.compile(
                expressions=[p for p, _ in patterns],
                ids=list(range(len(patterns))),
                flags=[f | _hs.HS_FLAG_SINGLEMATCH for _, f in patterns],
            )
        else:
            self._python = [_python_pattern(p) for p, _ in patterns]

    def present(self, data: bytes) -> set[int]:
        found: set[int] = set()
        if self._db is not None:
            self._db.scan(data, match_event_handler=lambda pid, *_: found.add(pid))
        else:
            found.update(i for i, p in enumerate(self._python) if p is None or p.search(data))
        return found


class MatchEnds:
    """Every offset at which ``pattern`` ends a match in a chunk (each once, in order), in one
    native pass. None where the native search is missing, or where there are more than
    ``at_most`` (the caller then searches the whole chunk its own way)."""

    def __init__(self, pattern: bytes, native: bool = True) -> None:
        self._db: Any = None
        if native and _hs is not None:
            self._db = _hs.Database()
            self._db.compile(expressions=[pattern], ids=[0], flags=[0])

    def __call__(self, data: bytes, at_most: int) -> list[int] | None:
        if self._db is None:
            return None
        ends: list[int] = []

        def on_match(_pid: int, _start: int, end: int, _flags: int, _ctx: object) -> bool:
            ends.append(end)
            return len(ends) > at_most  # enough: stop

        try:
            self._db.scan(data, match_event_handler=on_match)
        except _hs.ScanTerminated:
            return None
        return ends


class PatternRemover:
    """``data`` without what ``pattern`` matches (patterns whose matches never overlap, such as
    a set of literal characters), found in one native pass; Python's ``re.sub`` where the native
    search is missing. On a frame of box drawing (hundreds of ``\xe2`` leads) the native pass is
    ~6x faster than ``re.sub`` over an alternation that starts with ``\xe2``."""

    def __init__(self, pattern: bytes, native: bool = True) -> None:
        self._re = re.compile(pattern)
        self._db: Any = None
        if native and _hs is not None:
            self._db = _hs.Database()
            self._db.compile(expressions=[pattern], ids=[0], flags=[_hs.HS_FLAG_SOM_LEFTMOST])

    def removed(self, data: bytes) -> bytes:
        if self._db is None:
            return self._re.sub(b"", data)
        spans: list[Span] = []
        self._db.scan(data, match_event_handler=lambda _id, start, end, *_: spans.append((start, end)))
        if not spans:
            return data
        parts, at = [], 0
        for start, end in spans:  # in the order of their ends; an overlap is cut from ``at`` on
            if end > at:
                parts.append(data[at : max(at, start)])
                at = end
        parts.append(data[at:])
        return b"".join(parts)


_CACHE: dict[tuple[tuple[bytes, ...], tuple[tuple[bytes, int], ...], bool], SecretScan] = {}


def scanner(
    secrets: Sequence[bytes], extra: Sequence[tuple[bytes, int]] = (), native: bool = True
) -> SecretScan:
    """A :class:`SecretScan`, compiled once per set of secrets and patterns in a process."""
    key = (tuple(secrets), tuple(extra), native)
    if (found := _CACHE.get(key)) is None:
        if len(_CACHE) >= 32:
            _CACHE.clear()
        found = _CACHE[key] = SecretScan(secrets, extra, native)
    return found


class SecretScan:
    """The known secrets' runs, and the caller's own patterns (``extra``: (pattern, flags) pairs,
    each reported at most once per chunk; ``PREFILTER`` in its flags: a report means "run the
    exact pattern"), found in one pass."""

    def __init__(
        self, secrets: Sequence[bytes], extra: Sequence[tuple[bytes, int]] = (), native: bool = True
    ) -> None:
        self.secrets = tuple(s for s in secrets if len(s) >= MIN_RUN)
        self.grams = sorted({s[i : i + MIN_RUN] for s in self.secrets for i in range(len(s) - MIN_RUN + 1)})
        self.joined = b"\0".join(self.secrets)  # substring tests for all secrets at once
        self.extra = tuple(extra)
        self._db: Any = None
        self._som: Any = None  # the second look (compiled at its first use)
        self._grams_db: Any = None  # the grams alone, for the text without separators (ditto)
        self._alphabet = b"[" + re.escape(bytes(sorted({b for s in self.secrets for b in s}))) + b"]"
        self._pairs = frozenset(s[i : i + 2] for s in self.secrets for i in range(len(s) - 1))
        self._chars = frozenset(b for s in self.secrets for b in s)
        self._extra_re = [_python_pattern(p) for p, _ in self.extra] if not (native and _hs) else []
        if native and _hs is not None:
            self._compile()

    # -- building ----------------------------------------------------------------------------
    def _compile(self) -> None:
        assert _hs is not None
        single = _hs.HS_FLAG_SINGLEMATCH
        exprs: list[bytes] = [re.escape(g) for g in self.grams]
        flags: list[int] = [0] * len(exprs)
        if self.secrets:  # a separator between two characters a secret has: maybe a spread run
            alphabet = self._alphabet
            exprs.append(alphabet + b"(?:" + separators.SEPARATOR + b")+" + alphabet)
            flags.append(single)
        exprs += [p for p, _ in self.extra]
        flags += [f | single for _, f in self.extra]
        if exprs:
            self._db = _hs.Database()
            self._db.compile(expressions=exprs, ids=list(range(len(exprs))), flags=flags)

    # -- the pass over a chunk ---------------------------------------------------------------
    def scan(self, data: bytes) -> Found:
        found = Found()
        if self._db is not None:
            grams, spread_id = len(self.grams), len(self.grams) + (1 if self.secrets else 0)

            def on_match(pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
                if pid < grams:
                    found.runs.append((end - MIN_RUN, end))
                elif pid < spread_id:
                    found.spread = True
                else:
                    found.patterns.add(pid - spread_id)

            self._db.scan(data, match_event_handler=on_match)
            if found.spread and not separators.native():
                # The second look (only where the separators are removed in Python): a separator
                # between characters that follow each other in a secret.
                found.spread = self._pairs_across(data)
            return found
        found.runs = self._python_runs(data)
        found.spread = bool(self.secrets) and separators.may_hold(data)
        found.patterns = {
            i for i, pattern in enumerate(self._extra_re) if not pattern or pattern.search(data)
        }
        return found

    def _pairs_across(self, data: bytes) -> bool:
        """Whether a separator stands between two characters that follow each other in a secret
        (each such place found with where it starts: the character before the separators)."""
        if self._som is None:
            assert _hs is not None
            self._som = _hs.Database()
            # A bounded payload is too large with SOM: any length here.
            between = separators.SEPARATOR.replace(rb"{0,256}", b"*")
            self._som.compile(
                expressions=[self._alphabet + b"(?:" + between + b")+" + self._alphabet],
                ids=[0],
                flags=[_hs.HS_FLAG_SOM_LEFTMOST],
            )
        pairs, hit = self._pairs, []

        def on_match(_pid: int, start: int, end: int, _flags: int, _ctx: object) -> bool:
            if data[start : start + 1] + data[end - 1 : end] in pairs:
                hit.append(True)
                return True  # enough: stop
            return False

        try:
            self._som.scan(data, match_event_handler=on_match)
        except _hs.ScanTerminated:
            pass
        return bool(hit)

    def _python_runs(self, data: bytes) -> list[Span]:
        runs: list[Span] = []
        for gram in self.grams:
            at = data.find(gram)
            while at >= 0:
                runs.append((at, at + MIN_RUN))
                at = data.find(gram, at + 1)
        return runs

    def runs(self, data: bytes) -> list[Span]:
        """Every run in ``data`` as it stands (no separators looked through)."""
        if self._db is None:
            return self._python_runs(data)
        return self.scan(data).runs

    def spread_runs(self, data: bytes) -> list[Span]:
        """Every run in ``data`` with separators between its characters (the slow look)."""
        # Most chunks hold none: the text alone first, the offsets only for a chunk that does.
        text = separators.visible_text(data)
        if text is not None and not self._gram_runs(text):
            return []
        plain, where = separators.visible(data)
        return [(where[start], where[end - 1] + 1) for start, end in self._gram_runs(plain)]

    def _gram_runs(self, plain: bytes) -> list[Span]:
        """The contiguous runs of a text without separators: only the grams are looked for (the
        prefilter and the callers' patterns are the raw chunk's business)."""
        if self._db is None or not self.grams:
            return self._python_runs(plain)
        if self._grams_db is None:
            assert _hs is not None
            self._grams_db = _hs.Database()
            exprs = [re.escape(g) for g in self.grams]
            self._grams_db.compile(expressions=exprs, ids=list(range(len(exprs))), flags=[0] * len(exprs))
        runs: list[Span] = []
        self._grams_db.scan(
            plain, match_event_handler=lambda _pid, _start, end, *_: runs.append((end - MIN_RUN, end))
        )
        return runs

    def spans(self, data: bytes) -> tuple[list[Span], set[int]]:
        """What to mask in ``data`` (runs, contiguous or spread), and which extra patterns may match."""
        found = self.scan(data)
        spans = found.runs + (self.spread_runs(data) if found.spread else [])
        return spans, found.patterns

    # -- the end of a chunk ------------------------------------------------------------------
    def run_tail(self, data: bytes, window: int) -> int:
        """Where the characters of a secret at the very end of ``data`` begin (separators between
        them allowed): they may go on in the next read. ``len(data)`` if there are none."""
        n = len(data)
        if not self.secrets or not n or data[-1] == 0x0A:  # a new line: nothing goes on
            return n
        # A character cut off at the end (a zero width's first bytes), or a sequence left open
        # (a DCS whose ST has not come): the run is looked for before it.
        end = min(separators.complete_end(data), separators.open_start(data))
        if not end:
            return n
        start = self._run_start(data[:end] if end < n else data, window)
        return n if start == end else start

    def _run_start(self, data: bytes, window: int) -> int:
        """:meth:`run_tail` of ``data`` that ends in no open sequence or cut character."""
        n = len(data)
        # The plain text after the last separator first (most ends stop there).
        low = max(0, n - TAIL_STEP)
        plain = max(data.rfind(b"\r", low), data.rfind(b"\x08", low)) + 1
        if (esc := data.rfind(b"\x1b", low)) >= 0:
            m = separators.SEPARATOR_RE.match(data, esc)
            plain = max(plain, m.end() if m else n)  # an open sequence at the end: look across it
        for m in separators.QUIET_RE.finditer(data, max(plain, low)):  # a control, a zero width
            plain = m.end()
        k = self._suffix_in_secrets(data[max(plain, low) :])
        if k < n - max(plain, low):
            return n - k
        if not k and not self._before_separators_is_secret(data, low):
            return n  # the last character shown before the trailing separators is no secret's
        lo = low
        while True:  # the run reaches a separator (or the window): look through separators
            lo = separators.character_start(data, separators.sequence_start(data, lo))
            piece = data[lo:]
            text, where = separators.visible(piece)
            k = self._suffix_in_secrets(text)
            if not k:
                return n
            if k < len(text) or lo == 0 or lo <= n - window:
                return lo + where[len(text) - k]
            lo = max(0, lo - 4 * TAIL_STEP, n - window)

    def _before_separators_is_secret(self, data: bytes, low: int) -> bool:
        """Whether the byte before the separators that end ``data`` is one a secret has (True when
        not sure: the slow look decides)."""
        at = len(data)
        while at > low:
            start = max(
                data.rfind(b"\x1b", low, at), data.rfind(b"\r", low, at), data.rfind(b"\x08", low, at)
            )
            m = separators.SEPARATOR_RE.match(data, start) if start >= 0 else None
            if m is not None and m.end() == at:
                at = start
            elif (quiet := separators.quiet_start(data, at)) < at:  # a control, a zero width
                at = quiet
            else:
                break
        return at <= low or data[at - 1] in self._chars

    def _suffix_in_secrets(self, text: bytes) -> int:
        """The length of the longest end of ``text`` that is part of a secret."""
        k = 0
        while k < len(text) and text[len(text) - k - 1 :] in self.joined:
            k += 1
        return k
