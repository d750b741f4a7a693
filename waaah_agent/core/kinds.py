"""The base of the string enums whose values are written to JSON and logs as they are."""

from __future__ import annotations

from enum import Enum


class StrEnum(str, Enum):
    """A ``str`` enum that prints, formats and serialises as its value (``"rate_limit"``, never
    ``"ErrorType.RATE_LIMIT"``), so JSON files and messages keep the plain strings."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)
