"""Secret redaction for everything we write to a file or print. Pure.

Two kinds of secret are masked:

* **Known values** (``core/secrets/secretenv.py``): the values of environment variables whose names say
  they are secrets (``*_KEY``, ``*_TOKEN``, ``*SECRET*``, ``*PASSWORD*``, ``*_PWD``, ``*DSN*``,
  ``*WEBHOOK*``, ``*CREDENTIAL*``, ``*AUTH*``, ``WAAAH_NOTIFY``'s URLs' tokens, ...; the WAAAH key among
  them), and in any variable a URL's credentials (``postgres://user:password@``) and a webhook
  URL. Found whole or in part (any run of ``MIN_RUN`` of their characters: a key echoed as it is
  typed grows a character at a time), wherever they appear, also with terminal escape sequences,
  carriage returns or backspaces between their characters (a TUI redrawing a line, a diff-based
  TUI writing a character at a time); see ``core/secrets/secretscan.py``.
* **Shapes**: what keys and tokens look like: ``sk-…``, ``sk-ant-…``, ``AIza…``, ``ya29.…``,
  ``ghp_/gho_/ghu_/ghs_/ghr_…``, ``github_pat_…``, ``xox?-…``, ``AKIA…``/``ASIA…``, JWTs,
  ``Bearer …``, ``key-…``, ``ant-api…`` and ``api_key=…``/``token: …`` assignments; in text
  (not on the raw stream) also a URL's password and webhook URLs (Slack, Discord, Teams,
  Telegram, any URL that says webhook). A shape is looked for only around its anchors; they are
  defined in ``core/secrets/shapes.py``.

The raw stream (the ``.cast``) is bytes and hot: :meth:`Redactor.raw` makes one native pass
for the known values' runs and the shapes' prefilters, and runs a shape's regex only when that
pass saw it; :meth:`Redactor.hold_from` says how much of a chunk's tail to keep back because a
secret may continue in the next read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from waaah_agent.core.secrets.rawshapes import RawShapes
from waaah_agent.core.secrets.secretenv import MIN_SECRET
from waaah_agent.core.secrets.secretscan import PatternSet, SecretScan, mask_spans, scanner
from waaah_agent.core.secrets.shapes import (
    ASSIGN_NAME,
    PRIVATE_KEY,
    PRIVATE_KEY_ANCHOR,
    RAW_ASSIGN,
    RAW_PREFILTERS,
    RAW_SHAPES,
    RAW_STARTS,
    TAIL_WINDOW,
    TEXT_ANCHORED,
    word_from,
)
from waaah_agent.core.supervise.castjson import FACTS, NATIVE, UNSURE

MASK = "[REDACTED]"
_RAW_MASK = MASK.encode()

# Which shapes' anchors an ASCII text holds, in one native pass over it (case-insensitive, as
# the anchors are compared with the lowered text): a long text with none costs one scan, not a
# ``find`` per anchor (a 64 MB answer is 8,000 texts of 8 KB in `waaah run`'s log).
_TEXT_ANCHOR_SHAPE = tuple(i for i, (anchors, _) in enumerate(TEXT_ANCHORED) for _ in anchors)
_text_anchors: PatternSet | None = None


def _shapes_present(text: str) -> set[int] | None:
    """The indexes of ``TEXT_ANCHORED`` whose anchors ``text`` holds; None: look at each."""
    global _text_anchors
    if not text.isascii():  # lower() of a non-ASCII character can be an anchor's (KELVIN SIGN: k)
        return None
    if _text_anchors is None:
        _text_anchors = PatternSet(
            [(b"(?i)" + re.escape(a).encode(), 0) for anchors, _ in TEXT_ANCHORED for a in anchors]
        )
    return {_TEXT_ANCHOR_SHAPE[i] for i in _text_anchors.present(text.encode("ascii"))}


_facts: PatternSet | None = None


def cast_facts(data: bytes) -> set[int]:
    """Which of ``castjson.FACTS`` ``data`` holds (the native pattern set is built once)."""
    global _facts
    if _facts is None:
        _facts = PatternSet(FACTS)
    return _facts.present(data)


class Redactor:
    """Masks known secret values, every run of MIN_RUN of their characters, and anything shaped
    like a key or a token."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._learn(secrets)

    def add(self, secret: str | None) -> None:
        """One more known value (a key given by a flag or typed at a prompt)."""
        self.extend([secret] if secret else [])

    def extend(self, secrets: Iterable[str]) -> None:
        """More known values (shorter ones than ``MIN_SECRET`` are not), compiled once."""
        new = [s for s in secrets if len(s) >= MIN_SECRET and s not in self._secrets]
        if new:
            self._learn((*self._secrets, *new))
            self.prepare()

    def _learn(self, secrets: Iterable[str]) -> None:
        self._secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
        raw = {s.encode("utf-8", "surrogateescape") for s in self._secrets}
        self._raw_secrets = tuple(sorted(raw, key=len, reverse=True))
        self._scan: SecretScan | None = None  # compiled on first use
        self._ascii = all(s.isascii() for s in self._raw_secrets)  # a mask never cuts a character

    def prepare(self) -> None:
        """Compile the native searches now (~0.1 s), before output streams through :meth:`record`."""
        if not NATIVE:
            cast_facts(b"")
        assert self.scanner is not None

    @property
    def scanner(self) -> SecretScan:
        """The native search for the known values' runs and the shapes (built once per set)."""
        if self._scan is None:
            self._scan = scanner(self._raw_secrets, RAW_PREFILTERS)
        return self._scan

    @property
    def longest(self) -> int:
        """Length of the longest known secret (0 if none)."""
        return len(self._secrets[0]) if self._secrets else 0

    @property
    def longest_raw(self) -> int:
        """Length in UTF-8 bytes of the longest known secret (0 if none)."""
        return len(self._raw_secrets[0]) if self._raw_secrets else 0

    def exact(self, text: str) -> str:
        """Mask only the known secret values."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def runs(self, text: str) -> str:
        """Mask the known values and every run of MIN_RUN or more of their characters in ``text``,
        also with separators between them (a text log line keeps zero widths and combining marks:
        a key with one between each two of its characters is shown as the key; with a mark on
        its characters it is still the key to a reader, and is masked too)."""
        if not self._secrets:
            return text
        data = text.encode("utf-8", "surrogateescape")
        found = self.scanner.spans(data)[0]
        return mask_spans(data, found, _RAW_MASK).decode("utf-8", "surrogateescape") if found else text

    def __call__(self, text: str) -> str:
        """Mask known values (whole or in part) and shapes in a text (a log line, a message, a JSON
        document).

        Each shape's pattern runs only when one of its anchors is in the text (compared in lower
        case, so a mixed-case "BeArEr" is still looked at): most lines hold none. A PEM private
        key's body is masked wherever it is, however long."""
        text = self.runs(self.exact(text))
        if PRIVATE_KEY_ANCHOR in text:  # a key's whole body, however long (no window)
            text = PRIVATE_KEY.sub(_keep_prefix, text)
        present = _shapes_present(text)
        if present is not None and not present:
            return text
        lowered = text.lower()
        for shape, (anchors, pattern) in enumerate(TEXT_ANCHORED):
            if present is not None and shape not in present:
                continue
            spans = _near(lowered, anchors) if len(lowered) == len(text) else [(0, len(text))]
            if spans:
                masked = _sub_within(pattern, text, spans)
                if masked is not text:
                    text, lowered = masked, masked.lower()
        return text

    def value(self, obj: object) -> object:
        """``obj`` (JSON-like: dicts, lists, strings) with every string masked."""
        if isinstance(obj, str):
            return self(obj)
        if isinstance(obj, dict):
            return {k: self.value(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.value(v) for v in obj]
        return obj

    def raw(self, data: bytes) -> bytes:
        """Mask known values (whole, in part, or with escapes, CR or backspaces between their
        characters) and shapes in raw terminal output."""
        return self.record(data)[0]

    def record(self, data: bytes) -> tuple[bytes, set[int]]:
        """:meth:`raw`, and which of ``castjson.FACTS`` the chunk holds (none looked for where the
        escaping is native: it checks the bytes itself). One native pass finds the secrets' runs
        and shapes; only a chunk that holds something goes on to the Python work."""
        facts = set() if NATIVE else cast_facts(data)
        spans, shapes = self.scanner.spans(data)
        if spans:
            data = mask_spans(data, spans, _RAW_MASK)
        if shapes:  # which shapes may be there (the native pass's prefilters): each where it may begin
            data = _raw_shapes().masked(data, shapes)
        if spans and not self._ascii:
            facts.add(UNSURE)  # a run's mask may have cut a character of a non-ASCII secret
        return data, facts

    def hold_from(self, data: bytes) -> int:
        """Where to cut ``data`` so that a secret that may go on in the next read is kept back:
        a token-like word at the very end (and what introduces it: ``Bearer``, ``key=``), and
        characters of a known value at the very end, escapes between them or not."""
        hold = word_from(data)
        if self._raw_secrets:
            hold = min(hold, self.scanner.run_tail(data, TAIL_WINDOW))
        return hold


#: Where a shape is looked for: from this far before one of its anchors to this far after it,
#: then on to the end of the word there (a value is never cut). Outside these windows the
#: patterns never run, so a long text without anchors costs a few ``find`` calls, and a long
#: one with a few costs a few windows, not a regex attempt at each of its characters.
_BEFORE, _AFTER = 64, 80
_WORD_END = re.compile(r"[\s\"':=]*[^\s\"',;&<>]*")


def _near(lowered: str, anchors: tuple[str, ...]) -> list[tuple[int, int]]:
    """The windows of ``lowered`` around each occurrence of ``anchors`` (merged, in order)."""
    found = []
    for anchor in anchors:
        at = lowered.find(anchor)
        while at >= 0:
            found.append(at)
            at = lowered.find(anchor, at + 1)
    spans: list[tuple[int, int]] = []
    for at in sorted(found):
        start, end = max(0, at - _BEFORE), at + _AFTER
        if spans and start <= spans[-1][1]:
            if end <= spans[-1][1]:
                continue
            start = spans[-1][0]
            spans.pop()
        end = _WORD_END.match(lowered, min(end, len(lowered))).end()  # type: ignore[union-attr]
        spans.append((start, end))
    return spans


def _sub_within(pattern: re.Pattern[str], text: str, spans: list[tuple[int, int]]) -> str:
    """``pattern`` masked in ``text`` only within ``spans``; ``text`` itself when nothing was."""
    if spans == [(0, len(text))]:
        return pattern.sub(_keep_prefix, text)
    pieces, last, changed = [], 0, False
    for start, end in spans:
        window = text[start:end]
        masked = pattern.sub(_keep_prefix, window)
        if masked != window:
            pieces += [text[last:start], masked]
            last, changed = end, True
    return "".join([*pieces, text[last:]]) if changed else text


def _keep_prefix(match: re.Match[str]) -> str:
    prefix = match.group(1) if match.re.groups else ""
    return f"{prefix}{MASK}"


def _keep_raw_prefix(match: re.Match[bytes]) -> bytes:
    prefix = match.group(1) if match.re.groups else b""
    return prefix + _RAW_MASK


_raw: RawShapes | None = None


def _raw_shapes() -> RawShapes:
    """The raw stream's shapes (built once, at first use: its native pass is compiled then)."""
    global _raw
    if _raw is None:
        shapes = [
            (p, starts, caseless) for (_, p), (starts, caseless) in zip(RAW_SHAPES, RAW_STARTS, strict=True)
        ]
        _raw = RawShapes(shapes, RAW_ASSIGN, b"(?i)" + ASSIGN_NAME.encode(), _keep_raw_prefix)
    return _raw
