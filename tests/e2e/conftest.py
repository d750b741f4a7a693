"""The real CLIs, offline: a fake model API and a WAAAH server double on 127.0.0.1."""

from __future__ import annotations

import atexit
import gzip
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.doubles.cli_homes import CLI_BIN_DIR, cli_bin


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(autouse=True)
def _timed(request: pytest.FixtureRequest) -> Iterator[None]:
    started = time.monotonic()
    yield
    print(f"\n[e2e] {request.node.name}: {time.monotonic() - started:.1f}s")


@pytest.fixture(params=["gemini", "claude"])
def cli(request: pytest.FixtureRequest) -> str:
    """Each e2e test runs against both real CLIs; a missing install is a failure, never a skip."""
    cli_bin(request.param)  # raises with "run scripts/install_clis.sh" when absent
    return str(request.param)


OUR_NOISE = (b"Traceback (most recent call last)", b"Exception ignored")


def assert_no_python_noise(raw: bytes, where: str) -> None:
    """Nothing of the supervisor's own (a traceback, an "Exception ignored" report) in ``raw``."""
    for noise in OUR_NOISE:
        at = raw.find(noise)
        assert at < 0, f"{where} holds {noise.decode()!r}: {raw[max(0, at - 200) : at + 400]!r}"


def casts_under(root: Path) -> list[Path]:
    return sorted(root.glob("**/.waaah/logs/*.cast*"))


@pytest.fixture(autouse=True)
def _no_traceback_in_any_cast(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every session's .cast (the agent's screen as the user saw it) of a test holds no traceback
    and no "Exception ignored" of ours; a test that runs a CLI directly checks its PTY itself."""
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    for cast in casts_under(root) if root is not None else []:
        raw = cast.read_bytes()
        assert_no_python_noise(gzip.decompress(raw) if cast.suffix == ".gz" else raw, str(cast))


def with_cli_path(env: dict[str, str], bin_dir: Path = CLI_BIN_DIR) -> dict[str, str]:
    """The CLIs of ``bin_dir`` (default: the pinned releases) first on PATH; what waaah learns of
    a release is cached for the whole test run (asked once per binary, as for a user)."""
    env["PATH"] = f"{bin_dir}:{env.get('PATH', '')}"
    env["WAAAH_CACHE_DIR"] = _RELEASES_CACHE
    return env


_RELEASES_CACHE = tempfile.mkdtemp(prefix="waaah-e2e-releases-")
atexit.register(shutil.rmtree, _RELEASES_CACHE, True)


def workspace_for(tmp_path: Path) -> Path:
    import subprocess

    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    return ws.resolve()
