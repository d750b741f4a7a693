"""`waaah run` with hostile providers files: one clear line naming the file and the key, exit 2,
before any CLI starts; a good file's resolution lands in the run log."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.envelope_schema import refused
from tests.runtime.helpers import WAAAH
from waaah_agent.runtime.oneshot import providers


def run(ws: Path, *args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(ws.parent),
        "XDG_STATE_HOME": str(ws.parent / "state"),
        "LANG": "C.UTF-8",
        "WAAAH_CLI_DIR": str(ws.parent / "no-clis"),  # no CLI installed: nothing could start anyway
        **(extra or {}),
    }
    return subprocess.run(
        [WAAAH, "run", "hi", "--agent", "gemini", *args],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert refused(done.stdout, "invalid_input", 2) and "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("waaah: providers file ")
    return lines[0]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"gemini: [unclosed\n", "is not valid YAML at line"),
        (b"gemini:\n  model: a\n---\nclaude: {}\n", "is not valid YAML"),  # two documents
        (b"- gemini\n- claude\n", "the top level must be a mapping of CLI names"),
        (b"gemnii:\n  model: x\n", "unknown CLI 'gemnii'; choose among: claude, codex, gemini, opencode"),
        (b"gemini:\n  modle: x\n", "gemini.modle: unknown key; the keys are model and aliases"),
        (
            b"gemini:\n  aliases:\n    fast: [a, b]\n",
            "gemini.aliases.fast must be a model name (text), not a list",
        ),
        (b"gemini:\n  model: --yolo\n", "gemini.model is not a model name"),
        (b"gemini:\n  model: \xff\xfe\n", "is not UTF-8 text"),
        (b"a: &a [*a, *a]\n", "unknown CLI 'a'"),  # a self-referencing alias
        (b"[" * 5000 + b"]" * 5000, "is nested deeper than 100 levels"),
    ],
)
def test_a_bad_workspace_file_is_one_line(ws: Path, content: bytes, says: str) -> None:
    (ws / "providers.yaml").write_bytes(content)
    line = one_line(run(ws))
    assert str(ws / "providers.yaml") in line and says in line, line


def test_a_named_file_that_is_missing_a_fifo_a_folder_or_huge(ws: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    done = run(ws, extra={"WAAAH_PROVIDERS": str(missing)})
    assert (
        done.returncode == 2
        and done.stderr == f"waaah: WAAAH_PROVIDERS names {missing}, which does not exist\n"
    )
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # nobody writes: a blocking read would hang the run
    assert "is a FIFO, not a regular file" in one_line(run(ws, extra={"WAAAH_PROVIDERS": str(fifo)}))
    assert "is a directory" in one_line(run(ws, extra={"WAAAH_PROVIDERS": str(tmp_path)}))
    huge = tmp_path / "huge.yaml"
    huge.write_bytes(b"# " + b"x" * providers.PROVIDERS_CAP + b"\n")
    assert "more than the 65,536 this file may have" in one_line(
        run(ws, extra={"WAAAH_PROVIDERS": str(huge)})
    )
    dangling = tmp_path / "link.yaml"
    dangling.symlink_to(tmp_path / "gone.yaml")
    assert "No such file or directory" in one_line(run(ws, extra={"WAAAH_PROVIDERS": str(dangling)}))


def test_an_unreadable_file_in_dot_waaah(ws: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    (ws / ".waaah").mkdir()
    locked = ws / ".waaah" / "providers.yaml"
    locked.write_text("gemini: {}\n")
    locked.chmod(0)
    assert "cannot be read: Permission denied" in one_line(run(ws))


def test_the_named_file_wins_and_the_log_records_the_resolution(ws: Path, tmp_path: Path) -> None:
    (ws / ".waaah").mkdir()
    (ws / ".waaah" / "providers.yaml").write_text("gemini:\n  model: gemini-from-dot-waaah\n")
    done = run(ws)
    assert done.returncode == 15, done.stderr  # crash: gemini is not installed here
    envelope = json.loads(done.stdout)
    start = json.loads(Path(envelope["log_path"]).read_text().splitlines()[0])
    assert start["model_resolution"] == "(none) -> gemini-from-dot-waaah (default, .waaah/providers.yaml)"
    # providers.yaml comes before .waaah/providers.yaml; $WAAAH_PROVIDERS before both.
    (ws / "providers.yaml").write_text("gemini:\n  aliases: {fast: gemini-from-root}\n")
    named = tmp_path / "mine.yaml"
    named.write_text("gemini:\n  model: gemini-from-env\n")
    done = run(ws, "--model", "fast", extra={"WAAAH_PROVIDERS": str(named)})
    start = json.loads(Path(json.loads(done.stdout)["log_path"]).read_text().splitlines()[0])
    assert start["model_resolution"] == "fast -> gemini-from-root (alias, providers.yaml)"
    # An empty --model (a script's unset variable) is none given.
    done = run(ws, "--model", "", extra={"WAAAH_PROVIDERS": str(named)})
    start = json.loads(Path(json.loads(done.stdout)["log_path"]).read_text().splitlines()[0])
    assert start["model_resolution"] == f"(none) -> gemini-from-env (default, {named})"


@pytest.mark.parametrize("model", ["--yolo", "two words", "x" * 201])
def test_a_model_flag_that_is_no_model_name_is_refused(ws: Path, model: str) -> None:
    done = run(ws, "--model", model)
    assert done.returncode == 2 and refused(done.stdout, "invalid_input", 2)
    assert done.stderr == (
        "waaah: --model takes one word of at most 200 characters, not starting with '-' (a model or an alias)\n"
    )
