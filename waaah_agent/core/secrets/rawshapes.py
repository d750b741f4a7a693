"""The shapes of keys and tokens masked in raw terminal output, each tried only where it may begin.

Python's ``re.sub`` over a chunk tries each of its bytes (~3 ms per 256 KB for any pattern, 22
for the assignments'), paid for every chunk with an anchor anywhere in it, and code names keys
and tokens on most of its lines. So a shape that begins with a literal (``sk-``, ``AIza``,
``bearer`` in any case, ...) is tried with ``match`` only where one of its literals is, and an
assignment (``api_key = ...``) only in a window around each place its name ends (its ``:`` or
``=``, found by one native pass): from the start of what a name may hold to the end of its value.
The result is what each pattern's ``sub`` over the whole chunk gives. Where the places are
denser than one per ``DENSE`` bytes, the whole chunk goes through ``re`` at once, which is then
cheaper (~12 ns a byte against ~0.5-1 µs a place tried from Python). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence

from waaah_agent.core.secrets.secretscan import MatchEnds

DENSE = 64
_NAME_BYTES_BACKWARDS = re.compile(rb"[A-Za-z_\-\"'\s]*")  # what a name and the blanks after it hold
_VALUE_AHEAD = re.compile(rb"\s*[\"']?[^\s\"',;&<>]*")  # the blanks, a quote, the value

Replace = Callable[[re.Match[bytes]], bytes]


class RawShapes:
    """``shapes``: (pattern, the literals each of its matches begins with, whether those are
    looked for in lower case); ``assign``: the assignments' pattern, ``assign_name`` the part of
    it up to the ``:`` or ``=``; ``replace``: what a match becomes."""

    def __init__(
        self,
        shapes: Sequence[tuple[re.Pattern[bytes], tuple[bytes, ...], bool]],
        assign: re.Pattern[bytes],
        assign_name: bytes,
        replace: Replace,
    ) -> None:
        self.shapes = tuple(shapes)
        self.assign = assign
        self.replace = replace
        self.assign_ends = MatchEnds(assign_name)

    def masked(self, data: bytes, flagged: Iterable[int]) -> bytes:
        """``data`` with the shapes numbered in ``flagged`` (those the native pass saw may be
        there) masked, in order, then the assignments."""
        for i in sorted(flagged):
            if i < len(self.shapes):
                data = self._sub_from(data, *self.shapes[i])
        return self._assignments(data)

    def _subbed(self, data: bytes, matches: Iterable[re.Match[bytes]]) -> bytes:
        """``data`` with each of ``matches`` (in order, apart) replaced."""
        pieces, last = [], 0
        for m in matches:
            pieces += [data[last : m.start()], self.replace(m)]
            last = m.end()
        return b"".join([*pieces, data[last:]]) if pieces else data

    def _sub_from(
        self, data: bytes, pattern: re.Pattern[bytes], starts: tuple[bytes, ...], caseless: bool
    ) -> bytes:
        """``pattern.sub`` for a pattern whose matches begin with one of ``starts``: tried only
        there (in order, none inside the match before), the same result."""
        hay = data.lower() if caseless else data
        if sum(hay.count(literal) for literal in starts) > len(data) // DENSE:
            return pattern.sub(self.replace, data)  # so many places: one pass over it all is less
        at: list[int] = []
        for literal in starts:
            found = hay.find(literal)
            while found >= 0:
                at.append(found)
                found = hay.find(literal, found + 1)
        if not at:
            return data

        def matches() -> Iterator[re.Match[bytes]]:
            last = 0
            for pos in sorted(at):
                if pos >= last and (m := pattern.match(data, pos)) is not None:
                    last = m.end()
                    yield m

        return self._subbed(data, matches())

    def _assignments(self, data: bytes) -> bytes:
        """``assign.sub``, with the exact pattern run only in windows around the places where an
        assignment's name ends (found natively): from the start of the run of bytes a name may
        hold before its ":" or "=" (a match cannot begin before it) to the end of the value after
        it (nor end after it). The same result; the whole chunk through Python's re where the
        native search is missing, and where the places are many."""
        ends = self.assign_ends(data, at_most=len(data) // DENSE)
        if ends is None:
            return self.assign.sub(self.replace, data)
        windows: list[tuple[int, int]] = []
        for end in sorted(ends):
            if windows and end < windows[-1][1]:  # in the value of the one before: the same window
                continue
            lo = _name_start(data, end - 1)
            hi = _VALUE_AHEAD.match(data, end).end()  # type: ignore[union-attr]
            if windows and lo <= windows[-1][1]:
                windows[-1] = (windows[-1][0], max(hi, windows[-1][1]))
            else:
                windows.append((lo, hi))
        return self._subbed(data, (m for lo, hi in windows for m in self.assign.finditer(data, lo, hi)))


def _name_start(data: bytes, at: int) -> int:
    """Where the run of bytes an assignment's name may hold (letters, ``_``, ``-``, quotes,
    blanks) that ends at ``at`` begins."""
    step = 256
    while True:
        low = max(0, at - step)
        run = _NAME_BYTES_BACKWARDS.match(data[low:at][::-1]).end()  # type: ignore[union-attr]
        if run < at - low or low == 0:
            return at - run
        step *= 4
