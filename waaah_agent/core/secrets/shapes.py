"""What keys and tokens look like, and where an unfinished one may begin. Pure data and one
pure function; :mod:`core.redact` masks with them.

* ``SHAPES``: keys and tokens by their look (``sk-…``, ``AIza…``, ``ghp_…``, JWTs, ``Bearer …``,
  ...), each with the anchors every match of it contains; in text only, also a URL's password and
  webhook URLs; and assignments (``api_key=…``, ``"token": "…"``).
* The raw stream's spellings: the same shapes as bytes, the literals each begins with
  (``RAW_STARTS``: tried only there, ``core/secrets/rawshapes.py``) and the prefilters of the native pass.
* :func:`word_from`: where a token-like word at a chunk's end begins (it may go on in the next
  read).
"""

from __future__ import annotations

import re

from waaah_agent.core.secrets.secretscan import PREFILTER
from waaah_agent.core.secrets.separators import sequence_start

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
SHAPES: tuple[tuple[tuple[str, ...], str], ...] = (
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
ASSIGN_NAME = (  # up to the ":" or "=" (the raw stream's assignments are found from where it ends)
    r"\b(?:[a-z]+[_-])?(?:api[_-]?key|apikey|key|access[_-]?token|auth[_-]?token|token|secret|"
    r"client[_-]?secret|password|passwd|credentials?|authorization)[\"']?\s*[:=]"
)
ASSIGN = rf"(?i)({ASSIGN_NAME}\s*[\"']?)(?!\[REDACTED\])[^\s\"',;&<>]{{8,}}"
# In text only: a PEM private key's body (a context file, a file an agent printed), whole text
# at a time (a key is longer than a shape's window): from its BEGIN line to its END line, or
# to the end of a JSON string (a cut block).
PRIVATE_KEY_ANCHOR = "PRIVATE KEY-----"
PRIVATE_KEY = re.compile(r"(-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----)(?:[^\"-]|-(?!----END ))+")
TEXT_SHAPES = tuple(re.compile(p) for _, p in (*SHAPES, *_TEXT_ONLY_SHAPES)) + (re.compile(ASSIGN),)
URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>]+")
URL_CREDENTIALS = re.compile(_URL_PASSWORD)
WEBHOOKS = tuple(re.compile(p) for p in _WEBHOOK_SHAPES)
TEXT_ANCHORED = tuple(
    (tuple(a.lower() for a in anchors), pattern)
    for anchors, pattern in zip(
        [a for a, _ in (*SHAPES, *_TEXT_ONLY_SHAPES)] + [_ASSIGN_ANCHORS], TEXT_SHAPES, strict=True
    )
)
RAW_SHAPES = tuple((tuple(a.encode() for a in anchors), re.compile(p.encode())) for anchors, p in SHAPES)
RAW_ASSIGN = re.compile(ASSIGN.encode())
# On the raw stream a shape is tried only where a match of it can begin (core/secrets/rawshapes.py):
# each of SHAPES begins with one of these literals (bearer in any case: looked for in lower case).
RAW_STARTS: tuple[tuple[tuple[bytes, ...], bool], ...] = (
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
RAW_PREFILTERS = tuple((p.encode(), PREFILTER) for _, p in SHAPES) + (
    (ASSIGN.replace(r"(?!\[REDACTED\])", "").encode(), PREFILTER),
)


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
