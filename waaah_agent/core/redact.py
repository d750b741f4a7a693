"""Secret redaction for everything we write to a file or print. Pure.

Two kinds of secret are masked:

* **Known values** (:func:`known_secrets`): the values of environment variables whose names say
  they are secrets (``*_KEY``, ``*_TOKEN``, ``*SECRET*``, ``*PASSWORD*``, ``*_PWD``, ``*DSN*``,
  ``*WEBHOOK*``, ``*CREDENTIAL*``, ``*AUTH*``, ``WAAAH_NOTIFY``'s URLs, ...; the WAAAH key among
  them), and in any variable a URL's credentials (``postgres://user:password@``) and a webhook
  URL. Found wherever they appear, also with terminal escape sequences, carriage returns or
  backspaces between their characters (a TUI redrawing a line, an echo typed key by key).
* **Shapes**: what keys and tokens look like: ``sk-…``, ``sk-ant-…``, ``AIza…``, ``ya29.…``,
  ``ghp_/gho_/ghu_/ghs_/ghr_…``, ``github_pat_…``, ``xox?-…``, ``AKIA…``/``ASIA…``, JWTs,
  ``Bearer …``, ``key-…``, ``ant-api…`` and ``api_key=…``/``token: …`` assignments; in text
  (not on the raw stream) also a URL's password and webhook URLs (Slack, Discord, Teams,
  Telegram, any URL that says webhook). A shape is looked for only around its anchors.

The raw stream (the ``.cast``) is bytes and hot: :meth:`Redactor.raw` looks for each shape only
when a cheap ``bytes.find`` saw its anchor, and :meth:`Redactor.hold_from` says how much of a
chunk's tail to keep back because a secret may continue in the next read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

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

# Between two characters of a known secret on the raw stream: escape sequences, CR, backspace.
_BETWEEN = rb"(?:\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]{0,256}(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[0-~]|[\r\x08])*"
_ESCAPE = re.compile(_BETWEEN[:-1] + rb"+")

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
_ASSIGN = (
    r"(?i)(\b(?:[a-z]+[_-])?(?:api[_-]?key|apikey|key|access[_-]?token|auth[_-]?token|token|secret|"
    r"client[_-]?secret|password|passwd|credentials?|authorization)[\"']?\s*[:=]\s*[\"']?)"
    r"(?!\[REDACTED\])[^\s\"',;&<>]{8,}"
)
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
_RAW_SHAPES = tuple((tuple(a.encode() for a in anchors), re.compile(p.encode())) for anchors, p in _SHAPES)
_RAW_ASSIGN = re.compile(_ASSIGN.encode())
_RAW_ASSIGN_ANCHORS = tuple(a.encode() for a in _ASSIGN_ANCHORS)
# A secret that may go on in the next read: a token-like word at the very end of a chunk (it
# may become one of the shapes or a known value), and before it, what introduces a token.
_WORD_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.=+/~"
_RAW_INTRO_TAIL = re.compile(
    rb"(?i:bearer\s+|(?:key|token|secret|passw\w*|credentials?|auth\w*)[\"']?\s*[:=]\s*[\"']?)\Z"
)
TAIL_WINDOW = 512  # how far back from a chunk's end an unfinished secret is looked for
# Every raw shape has a run of at least 12 token characters. One C-speed pass maps token
# characters to "a" and the rest to " ": output without such a run needs no shape search.
_RUN_MAP = bytes(
    b"a"[0] if chr(i).isascii() and (chr(i).isalnum() or chr(i) in "_-") else 32 for i in range(256)
)
_RUN = b"a" * 12


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
    """Masks known secret values and anything shaped like a key or a token."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._learn(secrets)

    def add(self, secret: str | None) -> None:
        """One more known value (a key given by a flag or typed at a prompt)."""
        if secret and len(secret) >= MIN_SECRET and secret not in self._secrets:
            self._learn((*self._secrets, secret))

    def _learn(self, secrets: Iterable[str]) -> None:
        self._secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
        raw = {s.encode("utf-8", "surrogateescape") for s in self._secrets}
        self._raw_secrets = tuple(sorted(raw, key=len, reverse=True))
        # Each known value, allowing escapes between its characters (one pattern for all).
        spelled = [_BETWEEN.join(re.escape(bytes([b])) for b in s) for s in self._raw_secrets]
        self._raw_spread = re.compile(b"|".join(spelled)) if spelled else None
        self._firsts = bytes(sorted({s[0] for s in self._raw_secrets}))
        # Per known value: for each byte, the lengths of its prefixes that end with that byte,
        # longest first (a tail can only be a prefix that ends with the tail's last byte).
        self._prefix_ends: list[tuple[bytes, dict[int, list[int]]]] = []
        for secret in self._raw_secrets:
            ends: dict[int, list[int]] = {}
            for k in range(len(secret) - 1, 0, -1):
                ends.setdefault(secret[k - 1], []).append(k)
            self._prefix_ends.append((secret, ends))

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

    def __call__(self, text: str) -> str:
        """Mask known values and shapes in a text (a log line, a message, a JSON document).

        Each shape's pattern runs only when one of its anchors is in the text (compared in lower
        case, so a mixed-case "BeArEr" is still looked at): most lines hold none."""
        text = self.exact(text)
        lowered = text.lower()
        for anchors, pattern in _TEXT_ANCHORED:
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

    def spread_in(self, texts: Iterable[str]) -> bool:
        """Whether a known secret shows in these clean texts (escapes removed, a cheap test)."""
        return bool(self._secrets) and any(s in t for t in texts for s in self._secrets)

    def raw(self, data: bytes, spread: bool = False) -> bytes:
        """Mask known values and shapes in raw terminal output.

        ``spread``: a known value may be there with escapes, CR or backspaces between its
        characters (the clean text showed it): look for that too (slow, so only then).
        """
        for secret in self._raw_secrets:
            if secret in data:
                data = data.replace(secret, _RAW_MASK)
        if spread and self._raw_spread is not None:
            data = self._raw_spread.sub(_RAW_MASK, data)
        if _RUN not in data.translate(_RUN_MAP):
            return data  # nothing long enough to be a key or a token
        for anchors, pattern in _RAW_SHAPES:
            if any(a in data for a in anchors):
                data = pattern.sub(_keep_raw_prefix, data)
        lowered = data.lower()
        if any(a in lowered for a in _RAW_ASSIGN_ANCHORS):
            data = _RAW_ASSIGN.sub(_keep_raw_prefix, data)
        return data

    def hold_from(self, data: bytes, spread_tail: bool = False) -> int:
        """Where to cut ``data`` so that a secret that may go on in the next read is kept back.

        ``spread_tail``: the clean text ends with the start of a known value, which may be
        spread by escapes in the raw bytes (look for where it begins: slow, so only then).
        """
        start = max(0, len(data) - TAIL_WINDOW)
        hold = start + len(data[start:].rstrip(_WORD_BYTES))  # a word still being written
        if m := _RAW_INTRO_TAIL.search(data, max(0, hold - 48), hold):
            hold = m.start()
        for secret, ends in self._prefix_ends:  # a known value begun (one not all word bytes)
            for k in ends.get(data[hold - 1], ()) if hold else ():
                if k <= hold and data.endswith(secret[:k], 0, hold):
                    hold -= k
                    break
        if spread_tail:
            for i in range(max(start, len(data) - self._spread_reach()), hold):
                if data[i] in self._firsts and self._unfinished(data[i:]):
                    return i
        return hold

    def starts_secret(self, text: str) -> bool:
        """Whether ``text`` (clean) ends with the beginning of a known value (4 characters at least)."""
        return any(text.endswith(s[:k]) for s in self._secrets for k in range(4, len(s)))

    def _spread_reach(self) -> int:
        return min(TAIL_WINDOW, self.longest_raw * 12)

    def _unfinished(self, tail: bytes) -> bool:
        plain = _ESCAPE.sub(b"", tail)
        return any(len(plain) < len(s) and s.startswith(plain) for s in self._raw_secrets)


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
