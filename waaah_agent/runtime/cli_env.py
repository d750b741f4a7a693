"""The environment `waaah run` gives a CLI: what it needs, and no one else's secrets.

A one-shot run often happens inside a script or another agent's shell, where every provider's
key and the machine's cloud credentials sit in the environment. Each CLI gets:

* the system essentials (PATH, HOME, locale, terminal, temp folders, CA bundles) and the proxy
  variables;
* its own provider's variables (``Adapter.provider_env``: gemini ``GEMINI_*``/``GOOGLE_*``,
  claude ``ANTHROPIC_*``/``CLAUDE_*``, ...);
* ``WAAAH_*``;
* whatever the user names with ``--pass-env NAME`` or ``WAAAH_PASS_ENV=NAME,PREFIX_`` (a name
  ending in ``_`` is a prefix);
* every other variable that is neither secret-looking (``*_KEY``, ``*_TOKEN``, ``*SECRET*``,
  ...) nor another provider's or a cloud's (``AWS_*``, ``AZURE_*``, ...).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from waaah_agent.core.redact import is_secret_name

ESSENTIALS = frozenset(
    [
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TERM",
        "COLORTERM",
        "TZ",
        "TMPDIR",
        "TMP",
        "TEMP",
        "PWD",
        "COLUMNS",
        "LINES",
        "NO_COLOR",
        "FORCE_COLOR",
        "EDITOR",
        "VISUAL",
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "NODE_EXTRA_CA_CERTS",
        "NODE_OPTIONS",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
    ]
)
ESSENTIAL_PREFIXES = ("LC_", "XDG_")
PROXIES = frozenset(
    v for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY") for v in (name, name.lower())
)
OURS = ("WAAAH_",)
CLOUDS = (
    "AWS_",
    "AZURE_",
    "ARM_",
    "GCP_",
    "GCLOUD_",
    "CLOUDSDK_",
    "GOOGLE_",
    "DIGITALOCEAN_",
    "HCLOUD_",
    "OCI_",
)


def matches(name: str, patterns: Iterable[str]) -> bool:
    """``name`` is one of ``patterns`` (a pattern ending in ``_`` is a prefix)."""
    return any(name.startswith(p) if p.endswith("_") else name == p for p in patterns)


def for_cli(
    env: Mapping[str, str], own: Iterable[str], others: Iterable[str], passed: Iterable[str] = ()
) -> dict[str, str]:
    """``env`` as the CLI whose provider variables are ``own`` should see it.

    ``others``: every other CLI's provider variables; ``passed``: what the user asked to pass.
    """
    own, passed = tuple(own), tuple(passed)
    foreign = tuple(p for p in (*others, *CLOUDS) if not matches(p, own))
    out = {}
    for name, value in env.items():
        wanted = (
            name in ESSENTIALS
            or name in PROXIES
            or matches(name, (*ESSENTIAL_PREFIXES, *OURS, *own, *passed))
        )
        if wanted or not (is_secret_name(name) or matches(name, foreign)):
            out[name] = value
    return out
