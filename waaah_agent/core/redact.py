"""Secret redaction for everything we write to a file or print. Pure.

Two kinds of secret are masked:

* **Known values**: the values of environment variables whose names say they are secrets
  (``*_KEY``, ``*_TOKEN``, ``*SECRET*``, ``*PASSWORD*``, ``*CREDENTIAL*``, ``*AUTH*``, ...; the
  WAAAH key among them). Found wherever they appear, also with terminal escape sequences,
  carriage returns or backspaces between their characters (a TUI redrawing a line, an echo
  typed key by key).
* **Shapes**: what keys and tokens look like: ``sk-…``, ``sk-ant-…``, ``AIza…``, ``ya29.…``,
  ``ghp_/gho_/ghu_/ghs_/ghr_…``, ``github_pat_…``, ``xox?-…``, ``AKIA…``/``ASIA…``, JWTs,
  ``Bearer …``, ``key-…``, ``ant-api…`` and ``api_key=…``/``token: …`` assignments.

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
MIN_SECRET = 8  # shorter values are too common to mask everywhere ("true", a port, a user name)

# Between two characters of a known secret on the raw stream: escape sequences, CR, backspace.
_BETWEEN = rb"(?:\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]{0,256}(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[0-~]|[\r\x08])*"
_ESCAPE = re.compile(_BETWEEN[:-1] + rb"+")

_TOKEN = r"[A-Za-z0-9_\-]"
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
# Assignments: api_key=..., "token": "...", password: ... (anchors looked for case-insensitively).
_ASSIGN_ANCHORS = ("key", "token", "secret", "passw", "credential", "auth")
_ASSIGN = (
    r"(?i)(\b(?:[a-z]+[_-])?(?:api[_-]?key|apikey|key|access[_-]?token|auth[_-]?token|token|secret|"
    r"client[_-]?secret|password|passwd|credentials?|authorization)[\"']?\s*[:=]\s*[\"']?)"
    r"(?!\[REDACTED\])[^\s\"',;&<>]{8,}"
)
_TEXT_SHAPES = tuple(re.compile(p) for _, p in _SHAPES) + (re.compile(_ASSIGN),)
_TEXT_ANCHORED = tuple(
    (tuple(a.lower() for a in anchors), pattern)
    for anchors, pattern in zip([a for a, _ in _SHAPES] + [_ASSIGN_ANCHORS], _TEXT_SHAPES, strict=True)
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
    parts = name.upper().split("_")
    return bool(_SECRET_PARTS.intersection(parts)) and parts[-1] not in _NOT_A_VALUE


def known_secrets(env: Mapping[str, str]) -> tuple[str, ...]:
    """The secret values in ``env``: variables whose names say so, long enough to be worth masking."""
    return tuple(
        v
        for k, v in env.items()
        if is_secret_name(k) and len(v) >= MIN_SECRET and not v.startswith(("/", "~", "./")) and " " not in v
    )


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
            if any(a in lowered for a in anchors):
                text = pattern.sub(_keep_prefix, text)
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


def _keep_prefix(match: re.Match[str]) -> str:
    prefix = match.group(1) if match.re.groups else ""
    return f"{prefix}{MASK}"


def _keep_raw_prefix(match: re.Match[bytes]) -> bytes:
    prefix = match.group(1) if match.re.groups else b""
    return prefix + _RAW_MASK
