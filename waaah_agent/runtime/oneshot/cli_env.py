"""The environment `waaah run` gives a CLI: what it needs, and nothing else.

A one-shot run often happens inside a script or another agent's shell, where every provider's
key, the machine's cloud credentials, a database URL with its password, webhooks and the
agent socket sit in the environment. Whatever a CLI is given, the model can make it print (a
shell tool running ``env``), so each CLI gets only:

* the system essentials (PATH, HOME, user, shell, locale, terminal, time zone, temp folders,
  XDG folders, CA bundles, editor, display) and the proxy variables;
* its own variables (``Adapter.provider_env``: gemini ``GEMINI_*``/``GOOGLE_*``/``CODE_ASSIST_*``, claude
  ``ANTHROPIC_*``/``CLAUDE_*`` and its settings variables, ...) and those its own config files
  name (``Adapter.config_env``: codex's ``env_key``, opencode's ``{env:NAME}``);
* the ``WAAAH_*`` variables the waaah MCP proxy and a nested `waaah run` read (never the alert
  URLs of ``WAAAH_NOTIFY``);
* whatever the user names with ``--pass-env NAME`` or ``WAAAH_PASS_ENV=NAME,PREFIX_`` (a name
  ending in ``_`` is a prefix).

Everything else (``DATABASE_URL``, ``SSH_AUTH_SOCK``, ``KUBECONFIG``, ``AWS_*``, another
provider's key, ...) stays with the user; the values of the secret-looking ones are masked
wherever waaah writes (core/secrets/redact.py: :func:`known_secrets`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from waaah_agent import settings

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
#: Ours that a CLI needs: what the waaah MCP proxy reads when its entry does not set it, and what
#: a `waaah run` started by the CLI needs to link into this run's tree and find the same CLIs.
OURS = frozenset(
    [
        settings.SERVER_URL,
        settings.API_KEY,
        settings.AGENT_ID,
        settings.INBOX,
        settings.SESSION_ID,
        settings.PROXY_LOG_LEVEL,
        settings.PARENT_ID,
        settings.LOG_DIR,
        settings.CLI_DIR,
    ]
)


def matches(name: str, patterns: Iterable[str]) -> bool:
    """``name`` is one of ``patterns`` (a pattern ending in ``_`` is a prefix)."""
    return any(name.startswith(p) if p.endswith("_") else name == p for p in patterns)


def for_cli(env: Mapping[str, str], own: Iterable[str], passed: Iterable[str] = ()) -> dict[str, str]:
    """``env`` as the CLI whose own variables are ``own`` should see it; ``passed``: what the
    user asked to pass."""
    wanted = (*ESSENTIAL_PREFIXES, *own, *passed)
    return {
        name: value
        for name, value in env.items()
        if name in ESSENTIALS or name in PROXIES or name in OURS or matches(name, wanted)
    }
