"""The CLIs `make` installed into the checkout's .cache/clis are found without being on PATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from waaah_agent import adapters
from waaah_agent.runtime import clis

WAAAH = str(Path(sys.executable).parent / "waaah")


def path_without_local_clis() -> str:
    return os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if ".cache/clis" not in p)


def test_the_checkout_s_install_is_found_and_commands_name_it_in_full(tmp_path):
    gemini = adapters.registry()["gemini"]
    env = {"PATH": path_without_local_clis(), "HOME": str(tmp_path)}
    found = clis.find(gemini, env)
    assert found == str(clis.LOCAL_BIN / "gemini")  # make test installed it there
    assert clis.login_hint(gemini, env).startswith(f"{found} (then choose")
    on_path = {"PATH": f"{clis.LOCAL_BIN}{os.pathsep}{env['PATH']}"}
    assert clis.login_hint(gemini, on_path).startswith("gemini (then choose")


def test_doctor_counts_the_checkout_s_install_as_installed(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAAAH_")}
    env.update(PATH=path_without_local_clis(), HOME=str(tmp_path))
    done = subprocess.run(
        [WAAAH, "doctor", "--agent", "gemini"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = next(x for x in done.stdout.splitlines() if "gemini CLI" in x)
    assert "not installed" not in line and str(clis.LOCAL_BIN / "gemini") in line, done.stdout
    login = next(x for x in done.stdout.splitlines() if "gemini login" in x)
    assert str(clis.LOCAL_BIN / "gemini") in login  # the command it prints runs when pasted
