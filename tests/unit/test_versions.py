"""What waaah decides for each CLI release: from the recorded --version and --help of real
releases (tests/fixtures/releases, scripts/record_releases.py) and from plain values."""

from __future__ import annotations

from pathlib import Path

import pytest

from waaah_agent.adapters import registry
from waaah_agent.core.versions import (
    Release,
    ReleaseSupport,
    Standing,
    judge,
    options_in_help,
    parse_version,
    standing,
    version_key,
)
from waaah_agent.runtime.clis import CHECKOUT

RELEASES = Path(__file__).resolve().parents[1] / "fixtures" / "releases"


def recorded(name: str) -> Release:
    folder = RELEASES / name
    version = parse_version((folder / "version.txt").read_text(encoding="utf-8"))
    return Release(version, options_in_help((folder / "help.txt").read_text(encoding="utf-8")))


def verdict_for(folder: str):
    cli = folder.split("-", 1)[0]
    support = registry()[cli].releases
    assert support is not None
    return judge(cli, recorded(folder), support)


@pytest.mark.parametrize(
    ("output", "version"),
    [
        ("0.61.0\n", "0.61.0"),
        ("2.1.330 (Claude Code)\n", "2.1.330"),
        ("codex-cli 0.169.0", "0.169.0"),
        ("v1.2.3-beta.1", "1.2.3"),
        ("no version here", ""),
        ("", ""),
    ],
)
def test_the_version_is_read_from_what_the_cli_says(output, version):
    assert parse_version(output) == version


def test_versions_compare_as_numbers_not_text():
    assert version_key("0.9.0") < version_key("0.13.0") < version_key("0.34.0")  # type: ignore[operator]
    assert version_key("junk") is None


SUPPORT = ReleaseSupport(
    tested="0.61.0", oldest="0.34.0", update_hint="npm i -g x@latest", needs=("--resume",)
)


@pytest.mark.parametrize(
    ("version", "where"),
    [
        ("0.61.0", Standing.TESTED),
        ("0.51.0", Standing.OLDER_SUPPORTED),
        ("0.34.0", Standing.OLDER_SUPPORTED),
        ("0.33.9", Standing.TOO_OLD),
        ("0.62.0", Standing.NEWER),
        ("", Standing.UNKNOWN),
    ],
)
def test_where_a_version_stands(version, where):
    assert standing(version, SUPPORT) == where


def test_the_recorded_releases_are_all_there():
    found = {p.name for p in RELEASES.iterdir()}
    for cli in ("gemini", "claude"):
        support = registry()[cli].releases
        assert support is not None
        assert {f"{cli}-{v}" for v in (support.tested, *support.older_tested)} <= found


@pytest.mark.parametrize(
    "folder",
    [
        "gemini-0.61.0",
        "gemini-0.51.0",
        "claude-2.1.332",
        "claude-2.1.330",
        "claude-2.1.300",
        "claude-2.1.200",
    ],
)
def test_releases_with_every_option_waaah_passes_run_as_they_are(folder):
    verdict = verdict_for(folder)
    assert verdict.refusal == "" and verdict.own_ids


def test_gemini_0_34_has_no_session_id_option_so_its_own_id_is_read_back():
    release = recorded("gemini-0.34.0")
    assert "--resume" in release.options and "--session-id" not in release.options
    verdict = verdict_for("gemini-0.34.0")
    assert verdict.refusal == "" and not verdict.own_ids
    assert verdict.standing is Standing.OLDER_SUPPORTED


def test_gemini_0_13_has_no_resume_and_is_refused_in_one_line():
    verdict = verdict_for("gemini-0.13.0")
    assert verdict.standing is Standing.TOO_OLD
    assert verdict.refusal == (
        "gemini 0.13.0 is too old for waaah (it has no --resume): the oldest supported is 0.34.0; "
        f"update it: {CHECKOUT}/scripts/install_clis.sh gemini (the pinned 0.61.0, into "
        f"{CHECKOUT}/.cache/clis; make run AGENT=gemini does it too)"
    )
    assert "\n" not in verdict.refusal


def test_a_newer_release_that_dropped_an_option_waaah_needs_is_refused():
    verdict = judge("gemini", Release("0.70.0", frozenset({"--help", "--session-id"})), SUPPORT)
    assert verdict.standing is Standing.TOO_OLD and "it has no --resume" in verdict.refusal


def test_an_unreadable_help_refuses_nothing_but_an_old_version_still_is():
    assert judge("gemini", Release("0.40.0"), SUPPORT).refusal == ""
    assert judge("gemini", Release(""), SUPPORT).standing is Standing.UNKNOWN
    assert "0.20.0 is too old" in judge("gemini", Release("0.20.0"), SUPPORT).refusal


@pytest.mark.parametrize(
    "data", [None, [], {"version": 1, "options": []}, {"version": "1", "options": [3]}, {}]
)
def test_a_damaged_cache_entry_is_no_release(data):
    assert Release.from_json(data) is None


def test_a_release_survives_its_cache_entry():
    release = recorded("gemini-0.34.0")
    assert Release.from_json(release.to_json()) == release
