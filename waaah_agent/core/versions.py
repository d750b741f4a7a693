"""What an installed CLI release supports, and where its version stands: pure.

The runtime asks the CLI once (``<cli> --version`` and ``<cli> --help``, runtime/releases.py);
this module reads those outputs and decides: the version, the options its help lists, whether
waaah can drive it (and how: with a session id of ours, or learning the one the CLI picks), or
the one line that says it is too old and how to update it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from waaah_agent.core.kinds import StrEnum

__all__ = [
    "Release",
    "ReleaseSupport",
    "Standing",
    "Verdict",
    "judge",
    "options_in_help",
    "parse_version",
    "standing",
    "version_key",
]

_VERSION = re.compile(r"(?<![\w.])v?(\d+(?:\.\d+){1,3})(?:[-+][0-9A-Za-z.-]+)?(?![\w.])")
# An option a usage text lists: "--session-id", "  -r, --resume", "--resume <id>".
_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")


class Standing(StrEnum):
    """Where an installed version stands against the releases waaah is tested with."""

    TESTED = "pinned"  # the pinned release the screens were recorded from, tested
    OLDER_SUPPORTED = "older, supported"
    TOO_OLD = "too old"
    NEWER = "newer than tested"
    UNKNOWN = "unknown"  # no version could be read


def version_key(text: str) -> tuple[int, ...] | None:
    """``"0.34.0"`` -> ``(0, 34, 0)``; None when ``text`` holds no version."""
    found = parse_version(text)
    return tuple(int(part) for part in found.split(".")) if found else None


def parse_version(output: str) -> str:
    """The first version number in a CLI's ``--version`` output ("" when none): ``0.61.0``,
    ``2.1.330 (Claude Code)``, ``codex-cli 0.169.0``."""
    found = _VERSION.search(output)
    return found.group(1) if found else ""


def options_in_help(text: str) -> frozenset[str]:
    """Every long option a ``--help`` text names."""
    return frozenset(_OPTION.findall(text))


@dataclass(frozen=True)
class Release:
    """What was learned from one installed binary."""

    version: str  # "" when --version said nothing readable
    options: frozenset[str] = frozenset()  # empty when --help said nothing readable

    def to_json(self) -> dict[str, object]:
        return {"version": self.version, "options": sorted(self.options)}

    @classmethod
    def from_json(cls, data: object) -> Release | None:
        """The release in a cache entry; None when the entry is not of that shape."""
        if not isinstance(data, dict):
            return None
        version, options = data.get("version"), data.get("options")
        if not isinstance(version, str) or not isinstance(options, list):
            return None
        if not all(isinstance(o, str) for o in options):
            return None
        return cls(version, frozenset(options))


@dataclass(frozen=True)
class ReleaseSupport:
    """An adapter's releases: the pinned one, the oldest supported, what waaah cannot do without."""

    tested: str
    oldest: str
    update_hint: str  # the command that installs the newest release
    needs: tuple[str, ...] = ()  # options without which waaah cannot drive it (e.g. "--resume")
    # The option that gives the CLI a session id of ours; without it the id the CLI picked is read back.
    own_id_option: str = ""
    older_tested: tuple[str, ...] = field(default_factory=tuple)  # listed by `waaah doctor`


@dataclass(frozen=True)
class Verdict:
    """How to drive one release: ``refusal`` is the one line when it cannot be driven."""

    standing: Standing
    own_ids: bool = True  # the CLI takes a session id of ours on a fresh start
    refusal: str = ""


def standing(version: str, support: ReleaseSupport) -> Standing:
    """Where ``version`` stands: tested, older but supported, too old, newer, or unknown."""
    have, tested, oldest = version_key(version), version_key(support.tested), version_key(support.oldest)
    if have is None or tested is None:
        return Standing.UNKNOWN
    if have == tested:
        return Standing.TESTED
    if have > tested:
        return Standing.NEWER
    if oldest is not None and have < oldest:
        return Standing.TOO_OLD
    return Standing.OLDER_SUPPORTED


def judge(name: str, release: Release, support: ReleaseSupport) -> Verdict:
    """Whether waaah can drive ``release`` of CLI ``name``, and how.

    Older than the oldest supported, or its help lacks an option waaah cannot do without: refused
    with one line (the installed version, the oldest supported, the update command). A help that
    names no options at all (unreadable) refuses nothing; an unknown version only by its help."""
    where = standing(release.version, support)
    readable = bool(release.options)
    missing = [o for o in support.needs if readable and o not in release.options]
    own_ids = not support.own_id_option or not readable or support.own_id_option in release.options
    if where is Standing.TOO_OLD or missing:
        version = release.version or "of unknown version"
        lacking = f" (it has no {', '.join(missing)})" if missing else ""
        refusal = (
            f"{name} {version} is too old for waaah{lacking}: the oldest supported is {support.oldest}; "
            f"update it: {support.update_hint}"
        )
        return Verdict(Standing.TOO_OLD, own_ids, refusal)
    return Verdict(where, own_ids)
