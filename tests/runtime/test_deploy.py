"""deploy/: the Kubernetes crew rendered by `kubectl kustomize` (pinned, from PyPI) and every object
validated against the Kubernetes schemas offline (kubernetes-validate, strict); the container's
Containerfile read for what must hold; its entrypoint run for real on this machine, as the
container runs it: SIGTERM within the grace, the same session resumed at the next start."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.runtime.helpers import events, retry_until, session_dirs, sim_env
from waaah_agent import settings

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
CONTAINERFILE = ROOT / "deploy" / "container" / "Containerfile"
KUBECTL = str(Path(sys.executable).parent / "kubectl")


def render(folder: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [KUBECTL, "kustomize", str(KUBE / folder)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def of_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def image_env() -> dict[str, str]:
    """The ENV of the Containerfile (continued lines joined)."""
    text = CONTAINERFILE.read_text().replace("\\\n", " ")
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            found |= dict(re.findall(r"(\w+)=(\S+)", line))
    return found


def test_the_crew_renders_and_every_object_passes_the_kubernetes_schemas():
    crew = render("crew")
    for obj in crew:
        kubernetes_validate.validate(obj, "1.37.0", strict=True)  # raises on any error
    with_monitor = render("monitoring")
    monitors = of_kind(with_monitor, "ServiceMonitor")
    for obj in with_monitor:
        if obj["kind"] != "ServiceMonitor":  # a CRD of the Prometheus Operator: no schema here
            kubernetes_validate.validate(obj, "1.37.0", strict=True)
    services = of_kind(crew, "Service")
    (monitor,) = monitors.values()
    wanted = monitor["spec"]["selector"]["matchLabels"]
    assert all(wanted.items() <= s["metadata"]["labels"].items() for s in services.values())
    assert {e["port"] for e in monitor["spec"]["endpoints"]} == {"metrics"}


def test_each_agent_is_a_statefulset_of_one_with_its_state_probes_and_keys():
    crew = render("crew")
    sets, services = of_kind(crew, "StatefulSet"), of_kind(crew, "Service")
    (config,) = of_kind(crew, "ConfigMap").values()
    assert set(sets) == {"waaah-agent-orc", "waaah-agent-worker"}
    port = int(image_env()["WAAAH_METRICS_PORT"])
    workflows = {}
    for name, s in sets.items():
        spec, pod = s["spec"], s["spec"]["template"]["spec"]
        (agent,) = pod["containers"]
        assert spec["replicas"] == 1 and spec["serviceName"] == name and name in services
        (claim,) = spec["volumeClaimTemplates"]
        assert {"name": claim["metadata"]["name"], "mountPath": "/data"} in agent["volumeMounts"]
        # Above the supervisor's own stop grace and the time it takes to save and exit.
        assert pod["terminationGracePeriodSeconds"] >= settings.STOP_GRACE + 30
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
        assert agent["ports"] == [{"name": "metrics", "containerPort": port}]
        assert agent["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
        assert agent["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
        assert agent["startupProbe"]["httpGet"]["path"] == "/healthz"
        refs = {(k, v["name"]) for e in agent["envFrom"] for k, v in e.items()}
        assert refs == {("configMapRef", config["metadata"]["name"]), ("secretRef", "waaah-keys")}
        assert "WAAAH_SERVER_URL" in config["data"]
        assert not any("KEY" in e["name"] for e in agent["env"])  # keys only from the Secret
        annotations = s["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"] == str(
            port
        )
        workflows[name] = {e["name"]: e["value"] for e in agent["env"]}["WAAAH_WORKFLOW"]
        # Its Service selects its own pod and no other agent's.
        labels = s["spec"]["template"]["metadata"]["labels"]
        for other_name, svc in services.items():
            selects = svc["spec"]["selector"].items() <= labels.items()
            assert selects == (other_name == name), (name, other_name)
    assert workflows == {"waaah-agent-orc": "waaah-orc", "waaah-agent-worker": "waaah-worker"}
    overlay = (KUBE / "worker" / "kustomization.yaml").read_text().splitlines()
    assert len([x for x in overlay if x.strip() and not x.lstrip().startswith("#")]) <= 16


def test_the_containerfile_pins_the_clis_runs_as_a_user_and_keeps_all_state_under_data():
    text = CONTAINERFILE.read_text()
    pins = (ROOT / "scripts" / "install_clis.sh").read_text()
    for cli in ("GEMINI", "CLAUDE"):
        pinned = re.search(rf'^{cli}_VERSION="([^"]+)"', pins, re.M)
        assert pinned and f"ARG {cli}_VERSION={pinned.group(1)}\n" in text, cli
    env = image_env()
    for name in ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "WAAAH_WORKSPACE"):
        assert env[name].startswith("/data/"), name
    assert env["WAAAH_METRICS_HOST"] == "0.0.0.0" and env["WAAAH_LOG_FORMAT"] == "json"
    assert re.search(r"^USER 10001:10001$", text, re.M) and "VOLUME /data\n" in text
    assert 'CMD ["waaah", "agent", "--resume-or-start"]' in text and "STOPSIGNAL SIGTERM" in text
    assert 'ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/waaah-entrypoint"]' in text


def test_the_entrypoint_starts_stops_on_sigterm_within_the_grace_and_resumes(tmp_path):
    data = tmp_path / "data"  # an empty volume: the entrypoint makes the home and the workspace
    port = free_port()
    env = sim_env(
        data / "home",
        WAAAH_START="simulated",
        WAAAH_WORKSPACE=str(data / "workspace"),
        WAAAH_METRICS_PORT=str(port),
        WAAAH_LOG_FORMAT="json",
    )
    argv = [str(ROOT / "deploy" / "container" / "entrypoint.sh"), "waaah", "agent", "--resume-or-start"]
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    ws = data / "workspace"
    for boot in (1, 2):
        proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        try:
            retry_until(
                lambda n=boot: session_dirs(ws) and sum(e["event"] == "start" for e in events(ws)) >= n, 30
            )
            retry_until(lambda: healthz(port) == 200, 20)
        finally:
            sent = time.monotonic()
            proc.send_signal(signal.SIGTERM)  # what the engine sends at a stop
            code = proc.wait(timeout=60)
            took = time.monotonic() - sent
        print(f"boot {boot}: SIGTERM to exit {took:.2f} s")
        assert code == 0 and took < settings.STOP_GRACE + 10
        lines = proc.stderr.read().decode().splitlines()
        assert lines and all(json.loads(x)["event"] for x in lines)  # the collector's JSON
    starts = [e for e in events(ws) if e["event"] == "start"]
    assert len(session_dirs(ws)) == 1 and [s["resumed"] for s in starts] == [False, True]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def healthz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
            return int(answer.status)
    except OSError:
        return 0
