"""Which values of an environment are secrets: by the variable's name (``*_KEY``, ``*_TOKEN``,
``*PASSWORD*``, ``*DSN*``, ``*WEBHOOK*``, the secret parts of ``WAAAH_NOTIFY``'s URLs, ...) and,
in any variable, by their shape (a URL's credentials, a webhook URL, a key). :class:`core.redact.Redactor` masks what
:func:`known_secrets` finds wherever it appears, whole or in part. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import unquote

from waaah_agent.core.secrets.shapes import TEXT_SHAPES, URL, URL_CREDENTIALS, WEBHOOKS

#: Words that make a variable a secret wherever they are in its name, run together with
#: others too (``PGPASSWORD``, ``GITHUBTOKEN``, ``SENTRYDSN``): never part of a harmless word,
#: except ``TOKEN`` in ``TOKENIZERS`` and a count of ``TOKENS`` (``MAX_TOKENS``).
_SECRET_WORDS = re.compile(r"PASSWORD|PASSWD|PASSPHRASE|SECRET|CREDENTIAL|APIKEY|TOKEN(?!IZ|S(?:_|$))")
#: Name parts that make a variable a secret only as a part of their own (split on ``_``): run
#: together they are in harmless words (``KEYBOARD``, ``PATH``, ``AUTHOR``, ``PASSENGER``).
_SECRET_PARTS = frozenset(["KEY", "PASS", "AUTH", "PAT"])
#: ... unless the name says the value is where a secret lives, not the secret.
_NOT_A_VALUE = frozenset(
    ["SOCK", "FILE", "PATH", "DIR", "URL", "HOST", "TYPE", "MODE", "METHOD", "ID", "NAME"]
)
#: Names that look like a secret's and are not: variable names to pass (``--pass-env``).
_NOT_SECRETS = frozenset(["WAAAH_PASS_ENV"])
MIN_SECRET = 8  # shorter values are too common to mask everywhere ("true", a port, a user name)


def is_secret_name(name: str) -> bool:
    """Whether the variable ``name`` holds a secret: a key, token, password (``*_PWD`` too), a
    DSN, a webhook or our alert URLs (``WAAAH_NOTIFY``), and not where one lives (``*_FILE``)."""
    upper = name.upper()
    if upper in _NOT_SECRETS:
        return False
    parts = upper.split("_")
    if "WEBHOOK" in upper or "DSN" in upper or (len(parts) > 1 and "PWD" in parts) or "NOTIFY" in parts:
        return True
    named = _SECRET_WORDS.search(upper) is not None or not _SECRET_PARTS.isdisjoint(parts)
    return named and parts[-1] not in _NOT_A_VALUE


def known_secrets(env: Mapping[str, str]) -> tuple[str, ...]:
    """The secret values in ``env``, long enough to be worth masking: each value of a variable
    whose name says it is a secret (of ``WAAAH_NOTIFY``'s alert URLs, their parts that can be:
    :func:`url_secrets`), and in any variable the credentials of a URL (``scheme://user:password@``, the whole URL too) and a
    webhook URL (its secret path, the whole URL too)."""
    found: list[str] = []
    for name, value in env.items():
        if "NOTIFY" in name.upper().split("_"):  # alert URLs: their secret parts, not the host
            found += [part for word in value.split() for part in url_secrets(word)]
        elif is_secret_name(name) and not value.startswith(("/", "~", "./")):
            words = value.split()
            found += words if len(words) > 1 else [value]
            for word in words:
                found += _url_tokens(word) if "://" in word else ()
        found += secrets_in(value)
    return tuple(dict.fromkeys(v for v in found if len(v) >= MIN_SECRET))


def secrets_in(value: str) -> list[str]:
    """What in ``value`` is a secret by its shape alone: URL credentials and webhook URLs (with
    the whole URL each is in), and whatever :data:`SHAPES` finds."""
    found: list[str] = []
    for url in URL.findall(value) if "://" in value else ():
        if (creds := URL_CREDENTIALS.search(url)) is not None:
            found += [url, creds.group(2), f"{creds.group(1).split('://', 1)[1]}{creds.group(2)}@"]
        if any(p.search(url) for p in WEBHOOKS):
            found += [url, *_url_tokens(url)]
    for pattern in TEXT_SHAPES:
        for match in pattern.finditer(value):
            found.append(match.group(0)[len(match.group(1)) :] if pattern.groups else match.group(0))
    return found


#: A URL's network location that is a host, not a token: a name with a dot, an IPv4 or bracketed
#: IPv6 address or ``localhost``, with a port or not.
_HOST = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9-]*\.[A-Za-z0-9.-]*|localhost)(?::[0-9]{1,5})?")


def url_secrets(url: str) -> list[str]:
    """The parts of an alert URL that can be secrets, each once (raw and percent-decoded): its
    userinfo (whole, the user and the password), each path segment, each query value and the
    fragment, and the network location unless it is a host (:data:`_HOST`): apprise URLs carry
    tokens in all of these (``tgram://BOTTOKEN/CHATID``, ``discord://ID/TOKEN``,
    ``slack://A/B/C``). Never the scheme, nor a host name or address with its port: masked
    everywhere, those would hide the words of the logs that name them."""
    rest = url.split("://", 1)[-1]
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    netloc, tail = rest[:cut], rest[cut:]
    userinfo, at, where = netloc.rpartition("@")
    parts = [userinfo, *userinfo.split(":", 1)] if at else []
    if _HOST.fullmatch(where) is None:
        parts.append(where)
    tail, _, fragment = tail.partition("#")
    path, _, query = tail.partition("?")
    parts += path.split("/")
    parts += [pair.partition("=")[2] or pair for pair in query.split("&")]
    parts.append(fragment)
    found = [p for part in parts for p in (part, unquote(part)) if p]
    return list(dict.fromkeys(found))


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
