"""The built image (`make image-test`, after `make image`): its entrypoint run from the image's own
root file system, as a container engine would run it (its user, its environment, /data a volume,
SIGTERM to PID 1), and the pinned CLIs in it.

Podman cannot run a container on this kind of machine (crun: "setrlimit `RLIMIT_NPROC`: Operation
not permitted", and with crun's cgroup set-up "cgroups in hybrid mode not supported"), so the
image is mounted with `buildah mount` and its command run by `chroot` in a mount namespace of its
own with /dev, /proc and /tmp mounted as an engine mounts them. Skipped unless WAAAH_IMAGE names
the image (the build takes minutes: it is kept out of `make test`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

IMAGE = os.environ.get("WAAAH_IMAGE", "")
ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.skipif(not IMAGE, reason="WAAAH_IMAGE names no image: `make image-test` builds and runs it"),
    pytest.mark.timeout(300),
]


def buildah(*args: str) -> str:
    return subprocess.run(["buildah", *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def image() -> Iterator[tuple[Path, dict[str, Any]]]:
    """The image's root file system (mounted) and its configuration."""
    container = buildah("from", "--pull-never", IMAGE)
    try:
        config = json.loads(buildah("inspect", "--type", "container", container))["OCIv1"]["config"]
        yield Path(buildah("mount", container)), config
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def engine_run(root: Path, data: Path, config: dict[str, Any], env: dict[str, str], argv: list[str]):
    """Run ``argv`` in the image as an engine would: a mount namespace, the image's user."""
    user = config["User"]
    variables = dict(e.split("=", 1) for e in config["Env"]) | env
    setup = " && ".join(
        [
            f"mount --rbind /dev {shlex.quote(str(root / 'dev'))}",
            f"mount -t proc proc {shlex.quote(str(root / 'proc'))}",
            f"mount -t tmpfs -o mode=1777 tmpfs {shlex.quote(str(root / 'tmp'))}",
            f"mount --bind {shlex.quote(str(data))} {shlex.quote(str(root / 'data'))}",
            "exec chroot --userspec=" + shlex.quote(user) + " " + shlex.quote(str(root))
            + " /usr/bin/env -i " + " ".join(shlex.quote(f"{k}={v}") for k, v in variables.items())
            + " " + shlex.join(argv),
        ]
    )  # fmt: skip
    # A PID namespace of its own (tini is its PID 1) and a mount namespace; unshare waits for it.
    return subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount", "--propagation", "private", "sh", "-c", f"cd / && {setup}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def pid_one(unshare: int) -> int:
    """The container's PID 1 (tini), as this machine numbers it: the child unshare forked."""
    (child,) = Path(f"/proc/{unshare}/task/{unshare}/children").read_text().split()
    return int(child)


def volume(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir(parents=True)
    os.chown(data, 10001, 10001)  # what a fresh volume with fsGroup / the image's /data gives
    return data


def test_the_pinned_clis_are_in_the_image(image, tmp_path):
    root, config = image
    pins = (ROOT / "scripts" / "install_clis.sh").read_text()
    for cli in ("gemini", "claude"):
        pinned = re.search(rf'^{cli.upper()}_VERSION="([^"]+)"', pins, re.M).group(1)
        proc = engine_run(root, volume(tmp_path / cli), config, {}, [cli, "--version"])
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and out.decode().strip().startswith(pinned), (out, err)


def test_the_record_is_escaped_and_looked_through_in_native_code_in_the_image(image, tmp_path):
    """The image was built with a compiler (its wheel stage) and carries none itself: the three C
    pieces are in it (the .cast's escaping, the separators removed for the secrets' look, the
    PTY's reads in one call)."""
    root, config = image
    probe = (
        "from waaah_agent.core.supervise import castjson; from waaah_agent.core.secrets import separators; "
        "from waaah_agent.runtime.supervise import child; "
        "print(castjson.NATIVE, separators.NATIVE_VISIBLE, child.NATIVE_READ)"
    )
    proc = engine_run(root, volume(tmp_path), config, {}, ["python3", "-c", probe])
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out.decode().strip() == "True True True", (out, err)
    assert not (root / "usr" / "bin" / "gcc").exists()


def test_the_entrypoint_runs_as_its_user_stops_on_sigterm_and_resumes_from_the_volume(image, tmp_path):
    root, config = image
    assert config["User"] == "10001:10001" and config["Cmd"] == ["waaah", "agent", "--resume-or-start"]
    assert config.get("StopSignal") == "SIGTERM" and "/data" in config.get("Volumes", {})
    data, port = volume(tmp_path), free_port()
    env = {"WAAAH_START": "simulated", "WAAAH_METRICS_PORT": str(port)}
    sessions = data / "workspace" / ".waaah" / "sessions"
    for boot in (1, 2):
        proc = engine_run(root, data, config, env, [*config["Entrypoint"], *config["Cmd"]])
        try:
            deadline = time.monotonic() + 60
            while scrape(port, "/healthz")[0] != 200:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "no /healthz answer within 60 s"
                time.sleep(0.2)
            code, text = scrape(port, "/metrics")
            assert code == 200 and 'waaah_agent_state{agent="simulated"' in text
        finally:
            sent = time.monotonic()
            os.kill(pid_one(proc.pid), signal.SIGTERM)  # as an engine stops it: PID 1 (tini) passes it on
            _, err = proc.communicate(timeout=60)
            took = time.monotonic() - sent
        print(f"boot {boot}: SIGTERM to exit {took:.2f} s")
        assert proc.returncode == 0 and took < 15, err
        events = [json.loads(x) for x in err.decode().splitlines()]  # the collector's JSON lines
        assert [e["event"] for e in events if e["event"] == "end"] == ["end"]
    (session,) = sessions.iterdir()
    starts = [json.loads(x) for x in (session / "events.jsonl").read_text().splitlines()]
    assert [e["resumed"] for e in starts if e["event"] == "start"] == [False, True]
    assert (session / "session.json").stat().st_uid == 10001  # written by the image's user
    assert all(p.stat().st_uid == 10001 for p in data.rglob("*") if not p.is_symlink())


def scrape(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, ""
    except OSError:
        return 0, ""
