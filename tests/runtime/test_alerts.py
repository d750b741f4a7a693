"""`--notify`: alerts reach a local endpoint on 127.0.0.1 through apprise, once, with what
happened, the workspace and the command to resume; the URL is never written anywhere."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.runtime.helpers import WAAAH, events, retry_until, session_dirs, sim_env, spawn_waaah
from tests.runtime.test_session import wait_exit


class Endpoint:
    """A webhook on 127.0.0.1 that keeps every JSON body posted to it."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server name)
                length = int(self.headers.get("Content-Length", "0"))
                owner.received.append({"path": self.path, **json.loads(self.rfile.read(length) or b"{}")})
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"json://127.0.0.1:{self.server.server_address[1]}/hook-secret-token-123"

    def close(self) -> None:
        self.server.shutdown()


def test_a_session_that_gives_up_sends_one_alert_with_the_resume_command(workspace, fake_home):
    endpoint = Endpoint()
    try:
        env = sim_env(fake_home, SIM_CRASH_AT_START="7", WAAAH_RESTART_BASE_SECONDS="0.05")
        env["WAAAH_NOTIFY"] = endpoint.url  # as `--notify URL` is, less visible in `ps`
        child = spawn_waaah(
            workspace, "--start=simulated", "--restart-budget", "2", "--metrics-port", "0", env=env
        )
        child.expect("keeps stopping")
        assert wait_exit(child) == 11
        retry_until(lambda: endpoint.received, timeout=10)
    finally:
        endpoint.close()
    (alert,) = endpoint.received
    assert alert["path"] == "/hook-secret-token-123" and alert["type"] == "failure"
    assert alert["title"] == "waaah: simulated gave up"
    assert f"Workspace: {workspace}" in alert["message"]
    resume = alert["message"].split("Resume: ")[1]
    assert "waaah agent --start=simulated" in resume and resume.endswith("--resume")
    folder = session_dirs(workspace)[0]
    written = [path for path in (workspace / ".waaah").rglob("*") if path.is_file()]  # logs too
    assert {"session.json", "events.jsonl"} <= {path.name for path in written if path.parent == folder}
    for path in written:  # the URL's token is in no file, nor any 8 characters of it
        data = path.read_bytes()
        assert not any(b"hook-secret-token-123"[i : i + 8] in data for i in range(14)), path
    # ... and only the token is masked: the host and port the URL names are shown as they are.
    (served,) = [e for e in events(workspace) if e["event"] == "metrics"]
    assert served["host"] == "127.0.0.1", served
    assert [e["event"] for e in events(workspace)].count("end") == 1


def test_an_unknown_notify_url_is_one_line_before_anything_starts(workspace, fake_home):
    done = subprocess.run(
        [WAAAH, "agent", "--start=simulated", "--notify", "nosuchscheme://x"],
        cwd=workspace,
        env=sim_env(fake_home),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and "does not know the URL scheme 'nosuchscheme'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not session_dirs(workspace)
    for url, said in (
        ("ntfys", "a value is not a URL (no scheme://)"),  # a known scheme without "://"
        ("slack://", "apprise cannot use that slack:// URL"),  # a known scheme, its tokens missing
    ):
        done = subprocess.run([WAAAH, "agent", "--start=simulated", "--notify", url], cwd=workspace,
                              env=sim_env(fake_home), capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)  # fmt: skip
        assert done.returncode == 2 and said in done.stderr and "does not know" not in done.stderr, (
            done.stderr
        )
        assert len(done.stderr.strip().splitlines()) == 1 and not session_dirs(workspace)
