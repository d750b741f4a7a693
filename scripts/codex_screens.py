"""codex's part of scripts/record_screens.py: a codex session in a throwaway CODEX_HOME against the
fake OpenAI Responses API (tests/doubles/fake_openai.py), scripted by ``rules``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.doubles import fake_openai
from tests.doubles.cli_homes import CliPty, cli_bin, codex_env


@contextmanager
def codex_session(
    rules: list[fake_openai.Rule],
    root: Path,
    ws: Path,
    extra_args: tuple[str, ...],
    config_edit: Callable[[str], str] | None = None,
    **env_kwargs: Any,
) -> Iterator[CliPty]:
    """codex against the fake OpenAI API; ``config_edit`` rewrites its config.toml first."""
    with fake_openai.FakeOpenAI(rules) as fake:
        env = codex_env(root / "home", f"{fake.url}/v1", ws, **env_kwargs)
        config = Path(env["CODEX_HOME"]) / "config.toml"
        if config_edit is not None:
            config.write_text(config_edit(config.read_text(encoding="utf-8")), encoding="utf-8")
        pty = CliPty([str(cli_bin("codex")), *extra_args], env, ws)
        try:
            yield pty
        finally:
            pty.close()
