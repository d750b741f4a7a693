"""Secret redaction for anything we write to a log or print."""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "[REDACTED]"
_RAW_MASK = MASK.encode()

_PATTERNS = (
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{10,}"),  # Anthropic keys
    re.compile(r"sk-[A-Za-z0-9_\-]{20,}"),  # OpenAI-style keys
    re.compile(r"AIza[0-9A-Za-z_\-]{30,}"),  # Google API keys
    re.compile(r"ya29\.[0-9A-Za-z_\-.]{20,}"),  # Google OAuth access tokens
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9_\-.=+/]{12,}"),
    re.compile(r"(?i)((?:api[_-]?key|x-api-key|token|secret|password)[\"']?\s*[:=]\s*[\"']?)[^\s\"',;]{8,}"),
)

# Environment variables whose values are secrets wherever they appear.
SECRET_ENV_NAMES = (
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "WAAAH_API_KEY",
)


def known_secrets(env: dict[str, str]) -> tuple[str, ...]:
    """The secret values present in ``env`` (long enough to be worth masking)."""
    return tuple(v for k, v in env.items() if k in SECRET_ENV_NAMES and len(v) >= 6)


class Redactor:
    """Masks known secret values and anything shaped like a key or bearer token."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
        raw = {s.encode("utf-8", "surrogateescape") for s in self._secrets}
        self._raw_secrets = tuple(sorted(raw, key=len, reverse=True))

    @property
    def longest(self) -> int:
        """Length of the longest known secret (0 if none)."""
        return len(self._secrets[0]) if self._secrets else 0

    @property
    def longest_raw(self) -> int:
        """Length in UTF-8 bytes of the longest known secret (0 if none)."""
        return len(self._raw_secrets[0]) if self._raw_secrets else 0

    def exact(self, text: str) -> str:
        """Mask only the known secret values (cheap enough for the raw stream)."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def exact_raw(self, data: bytes) -> bytes:
        """Mask only the known secret values in raw UTF-8 output."""
        for secret in self._raw_secrets:
            if secret in data:
                data = data.replace(secret, _RAW_MASK)
        return data

    def __call__(self, text: str) -> str:
        text = self.exact(text)
        for pattern in _PATTERNS:
            text = pattern.sub(_keep_prefix, text)
        return text


def _keep_prefix(match: re.Match[str]) -> str:
    prefix = match.group(1) if match.re.groups else ""
    return f"{prefix}{MASK}"
