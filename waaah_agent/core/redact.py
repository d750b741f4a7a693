"""Secret redaction for everything we write to a file or print. Pure.

Two kinds of secret are masked:

* **Known values** (:func:`known_secrets`): the values of environment variables whose names say
  they are secrets (``*_KEY``, ``*_TOKEN``, ``*SECRET*``, ``*PASSWORD*``, ``*_PWD``, ``*DSN*``,
  ``*WEBHOOK*``, ``*CREDENTIAL*``, ``*AUTH*``, ``WAAAH_NOTIFY``'s URLs, ...; the WAAAH key among
  them), and in any variable a URL's credentials (``postgres://user:password@``) and a webhook
  URL. Found whole or in part (any run of ``MIN_RUN`` of their characters: a key echoed as it is
  typed grows a character at a time), wherever they appear, also with terminal escape sequences,
  carriage returns or backspaces between their characters (a TUI redrawing a line, a diff-based
  TUI writing a character at a time); see ``core/secretscan.py``.
* **Shapes**: what keys and tokens look like: ``sk-…``, ``sk-ant-…``, ``AIza…``, ``ya29.…``,
  ``ghp_/gho_/ghu_/ghs_/ghr_…``, ``github_pat_…``, ``xox?-…``, ``AKIA…``/``ASIA…``, JWTs,
  ``Bearer …``, ``key-…``, ``ant-api…`` and ``api_key=…``/``token: …`` assignments; in text
  (not on the raw stream) also a URL's password and webhook URLs (Slack, Discord, Teams,
  Telegram, any URL that says webhook). A shape is looked for only around its anchors.

The raw stream (the ``.cast``) is bytes and hot: :meth:`Redactor.raw` makes one native pass
for the known values' runs and the shapes' prefilters, and runs a shape's regex only when that
pass saw it; :meth:`Redactor.hold_from` says how much of a chunk's tail to keep back because a
secret may continue in the next read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from waaah_agent.core.rawshapes import RawShapes
from waaah_agent.core.secretscan import PREFILTER, PatternSet, SecretScan, mask_spans, scanner, sequence_start
from waaah_agent.core.supervise.castjson import FACTS, NATIVE, UNSURE

MASK = "[REDACTED]"
_RAW_MASK = MASK.encode()

#: Name parts that make an environment variable a secret (split on ``_``).
_SECRET_PARTS = frozenset(
    [
        "KEY",
        "APIKEY",
        "TOKEN",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "PASSPHRASE",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "PAT",
    ]
)
#: ... unless the name says the value is where a secret lives, not the secret.
_NOT_A_VALUE = frozenset(
    ["SOCK", "FILE", "PATH", "DIR", "URL", "HOST", "TYPE", "MODE", "METHOD", "ID", "NAME"]
)
#: Names that look like a secret's and are not: variable names to pass (``--pass-env``).
_NOT_SECRETS = frozenset(["WAAAH_PASS_ENV"])
MIN_SECRET = 8  # shorter values are too common to mask everywhere ("true", a port, a user name)


_TOKEN = r"[A-Za-z0-9_\-]"
_URL_PASSWORD = r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@\"'<>]*:)([^\s@/\"'<>]+)(?=@)"
# Webhooks: the path is the secret (Slack, Discord, Teams, Telegram's bot token, any host or
# path that says webhook); the part kept is the first group.
_WEBHOOK_SHAPES = (
    r"(\bhooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9_\-/]{8,}",
    r"(\bdiscord(?:app)?\.com/api/webhooks/)[0-9]+/[A-Za-z0-9_\-]{8,}",
    r"(\bapi\.telegram\.org/bot)[0-9]+:[A-Za-z0-9_\-]{8,}",
    r"(\bhttps?://[^\s/\"'<>]*(?:webhook|hooks\.)[^\s/\"'<>]*/)[^\s\"'<>]{8,}",
    r"(\bhttps?://[^\s/\"'<>]+/[^\s\"'<>]*?webhooks?[/=])[^\s\"'<>]{8,}",
)
_SHAPES: tuple[tuple[tuple[str, ...], str], ...] = (
    # (anchors, pattern): every match contains one of the anchors (looked for with a plain find).
    (("sk-",), rf"\bsk-(?:ant-)?{_TOKEN}{{16,}}"),
    (("AIza",), rf"\bAIza{_TOKEN}{{30,}}"),
    (("ya29.",), r"\bya29\.[0-9A-Za-z_\-.]{20,}"),
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    (("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    (("xox",), r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    (("AKIA", "ASIA"), r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    (("eyJ",), rf"\beyJ{_TOKEN}{{8,}}\.eyJ{_TOKEN}{{8,}}\.{_TOKEN}{{8,}}"),
    (("earer", "EARER"), r"(?i)(\bbearer\s+)[A-Za-z0-9_\-.=+/~]{12,}"),
    (("key-",), r"\bkey-[0-9A-Za-z]{20,}"),
    (("ant-api",), rf"\bant-api{_TOKEN}{{10,}}"),
)
# In text only (logs, events, envelopes, printed lines), not on the relay's raw stream, where
# URLs go by all night: the password of a URL (scheme://user:password@host; the rest is kept)
# and webhooks. Their values in the environment are known values, masked there too.
_TEXT_ONLY_SHAPES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("://",), _URL_PASSWORD),
    *((("hooks.slack.com", "discord", "telegram.org/bot", "webhook", "hooks."), p) for p in _WEBHOOK_SHAPES),
)
# Assignments: api_key=..., "token": "...", password: ... (anchors looked for case-insensitively).
_ASSIGN_ANCHORS = ("key", "token", "secret", "passw", "credential", "auth")
_ASSIGN_NAME = (  # up to the ":" or "=" (the raw stream's assignments are found from where it ends)
    r"\b(?:[a-z]+[_-])?(?:api[_-]?key|apikey|key|access[_-]?token|auth[_-]?token|token|secret|"
    r"client[_-]?secret|password|passwd|credentials?|authorization)[\"']?\s*[:=]"
)
_ASSIGN = rf"(?i)({_ASSIGN_NAME}\s*[\"']?)(?!\[REDACTED\])[^\s\"',;&<>]{{8,}}"
_TEXT_SHAPES = tuple(re.compile(p) for _, p in (*_SHAPES, *_TEXT_ONLY_SHAPES)) + (re.compile(_ASSIGN),)
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>]+")
_URL_CREDENTIALS = re.compile(_URL_PASSWORD)
_WEBHOOKS = tuple(re.compile(p) for p in _WEBHOOK_SHAPES)
_TEXT_ANCHORED = tuple(
    (tuple(a.lower() for a in anchors), pattern)
    for anchors, pattern in zip(
        [a for a, _ in (*_SHAPES, *_TEXT_ONLY_SHAPES)] + [_ASSIGN_ANCHORS], _TEXT_SHAPES, strict=True
    )
)
# Which shapes' anchors an ASCII text holds, in one native pass over it (case-insensitive, as
# the anchors are compared with the lowered text): a long text with none costs one scan, not a
# ``find`` per anchor (a 64 MB answer is 8,000 texts of 8 KB in `waaah run`'s log).
_TEXT_ANCHOR_SHAPE = tuple(i for i, (anchors, _) in enumerate(_TEXT_ANCHORED) for _ in anchors)
_text_anchors: PatternSet | None = None


def _shapes_present(text: str) -> set[int] | None:
    """The indexes of ``_TEXT_ANCHORED`` whose anchors ``text`` holds; None: look at each."""
    global _text_anchors
    if not text.isascii():  # lower() of a non-ASCII character can be an anchor's (KELVIN SIGN: k)
        return None
    if _text_anchors is None:
        _text_anchors = PatternSet(
            [(b"(?i)" + re.escape(a).encode(), 0) for anchors, _ in _TEXT_ANCHORED for a in anchors]
        )
    return {_TEXT_ANCHOR_SHAPE[i] for i in _text_anchors.present(text.encode("ascii"))}


_RAW_SHAPES = tuple((tuple(a.encode() for a in anchors), re.compile(p.encode())) for anchors, p in _SHAPES)
_RAW_ASSIGN = re.compile(_ASSIGN.encode())
# On the raw stream a shape is tried only where a match of it can begin (core/rawshapes.py):
# each of _SHAPES begins with one of these literals (bearer in any case: looked for in lower case).
_RAW_STARTS: tuple[tuple[tuple[bytes, ...], bool], ...] = (
    ((b"sk-",), False),
    ((b"AIza",), False),
    ((b"ya29.",), False),
    ((b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_"), False),
    ((b"github_pat_",), False),
    ((b"xox",), False),
    ((b"AKIA", b"ASIA"), False),
    ((b"eyJ",), False),
    ((b"bearer",), True),
    ((b"key-",), False),
    ((b"ant-api",), False),
)
# A secret that may go on in the next read: a token-like word at the very end of a chunk (it
# may become one of the shapes or a known value), and before it, what introduces a token.
_WORD_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.=+/~"
_RAW_INTRO_TAIL = re.compile(  # (an assignment's name alone too: its ":" or "=" may come next)
    rb"(?i:bearer\s+|(?:key|token|secret|passw\w*|credentials?|auth\w*)[\"']?\s*(?:[:=]\s*[\"']?)?)\Z"
)
_INTRO_ENDS = frozenset(b" \t\r\n\x0b\x0c:=\"'")  # the last byte of what _RAW_INTRO_TAIL finds
TAIL_WINDOW = 512  # how far back from a chunk's end an unfinished secret is looked for
# The native pass over the raw stream looks for the shapes too (each reports "run the exact
# pattern"); where the escaping is not native, a second one says what the .cast's JSON escaping
# needs to know (core/castjson.py): hyperscan runs the two sets apart faster than together.
_RAW_PREFILTERS = tuple((p.encode(), PREFILTER) for _, p in _SHAPES) + (
    (_ASSIGN.replace(r"(?!\[REDACTED\])", "").encode(), PREFILTER),
)
_facts: PatternSet | None = None


def cast_facts(data: bytes) -> set[int]:
    """Which of ``castjson.FACTS`` ``data`` holds (the native pattern set is built once)."""
    global _facts
    if _facts is None:
        _facts = PatternSet(FACTS)
    return _facts.present(data)


def is_secret_name(name: str) -> bool:
    """Whether the variable ``name`` holds a secret: a key, token, password (``*_PWD`` too), a
    DSN, a webhook or our alert URLs (``WAAAH_NOTIFY``), and not where one lives (``*_FILE``)."""
    upper = name.upper()
    if upper in _NOT_SECRETS:
        return False
    parts = upper.split("_")
    if "WEBHOOK" in upper or "DSN" in parts or (len(parts) > 1 and "PWD" in parts) or "NOTIFY" in parts:
        return True
    return bool(_SECRET_PARTS.intersection(parts)) and parts[-1] not in _NOT_A_VALUE


def known_secrets(env: Mapping[str, str]) -> tuple[str, ...]:
    """The secret values in ``env``, long enough to be worth masking: each value of a variable
    whose name says it is a secret (each word of a list: ``WAAAH_NOTIFY``'s URLs), and in any
    variable the credentials of a URL (``scheme://user:password@``, the whole URL too) and a
    webhook URL (its secret path, the whole URL too)."""
    found: list[str] = []
    for name, value in env.items():
        if is_secret_name(name) and not value.startswith(("/", "~", "./")):
            words = value.split()
            found += words if len(words) > 1 else [value]
            for word in words:
                found += _url_tokens(word) if "://" in word else ()
        found += secrets_in(value)
    return tuple(dict.fromkeys(v for v in found if len(v) >= MIN_SECRET))


def secrets_in(value: str) -> list[str]:
    """What in ``value`` is a secret by its shape alone: URL credentials and webhook URLs (with
    the whole URL each is in), and whatever :data:`_SHAPES` finds."""
    found: list[str] = []
    for url in _URL.findall(value) if "://" in value else ():
        if (creds := _URL_CREDENTIALS.search(url)) is not None:
            found += [url, creds.group(2), f"{creds.group(1).split('://', 1)[1]}{creds.group(2)}@"]
        if any(p.search(url) for p in _WEBHOOKS):
            found += [url, *_url_tokens(url)]
    for pattern in _TEXT_SHAPES:
        for match in pattern.finditer(value):
            found.append(match.group(0)[len(match.group(1)) :] if pattern.groups else match.group(0))
    return found


def _url_tokens(url: str) -> list[str]:
    """The parts of a secret URL that look like tokens: its user and password, path segments and
    query values of 16 characters or more, or of 8 or more with letters and digits (a host name,
    with its dots, is not one)."""
    segments = re.split(r"[/@?&=#]", url.split("://", 1)[-1])
    return [
        s
        for s in segments
        if "." not in s
        and (
            len(s) >= 16
            or (len(s) >= MIN_SECRET and any(c.isdigit() for c in s) and any(c.isalpha() for c in s))
        )
    ]


class Redactor:
    """Masks known secret values, every run of MIN_RUN of their characters, and anything shaped
    like a key or a token."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._learn(secrets)

    def add(self, secret: str | None) -> None:
        """One more known value (a key given by a flag or typed at a prompt)."""
        if secret and len(secret) >= MIN_SECRET and secret not in self._secrets:
            self._learn((*self._secrets, secret))
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
            self._scan = scanner(self._raw_secrets, _RAW_PREFILTERS)
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
        """Mask the known values and every run of MIN_RUN or more of their characters in ``text``."""
        if not self._secrets:
            return text
        data = text.encode("utf-8", "surrogateescape")
        found = self.scanner.runs(data)
        return mask_spans(data, found, _RAW_MASK).decode("utf-8", "surrogateescape") if found else text

    def __call__(self, text: str) -> str:
        """Mask known values (whole or in part) and shapes in a text (a log line, a message, a JSON
        document).

        Each shape's pattern runs only when one of its anchors is in the text (compared in lower
        case, so a mixed-case "BeArEr" is still looked at): most lines hold none."""
        text = self.runs(self.exact(text))
        present = _shapes_present(text)
        if present is not None and not present:
            return text
        lowered = text.lower()
        for shape, (anchors, pattern) in enumerate(_TEXT_ANCHORED):
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


def word_from(data: bytes) -> int:
    """Where a token-like word at the very end of ``data`` begins (and what introduces it:
    ``Bearer``, ``key=``, an assignment's name): it may go on in the next read."""
    start = max(0, len(data) - TAIL_WINDOW)
    hold = start + len(data[start:].rstrip(_WORD_BYTES))  # a word still being written
    if (
        hold
        and data[hold - 1] in _INTRO_ENDS
        and (m := _RAW_INTRO_TAIL.search(data, max(0, hold - 48), hold))
    ):
        hold = m.start()
    return sequence_start(data, hold)  # never inside an escape sequence: its rest would read as text


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
            (p, starts, caseless) for (_, p), (starts, caseless) in zip(_RAW_SHAPES, _RAW_STARTS, strict=True)
        ]
        _raw = RawShapes(shapes, _RAW_ASSIGN, b"(?i)" + _ASSIGN_NAME.encode(), _keep_raw_prefix)
    return _raw
