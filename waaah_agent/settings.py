"""Every default, ``WAAAH_*`` environment variable and flag of waaah, resolved in one place.

Precedence is always: the flag, else the environment variable, else the default. The
environment comes in as a mapping (``os.environ`` is read only by the command line's entry
points), so nothing deeper down reads it on its own. The defaults of the supervisor's policy
and restart budget are the pure ones of core/policy.py and core/backoff.py; every other default
is defined here and nowhere else.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from waaah_agent.core.oneshot.breaker import BreakerConfig
from waaah_agent.core.supervise.backoff import BackoffConfig
from waaah_agent.core.supervise.machine import MachineConfig
from waaah_agent.core.supervise.policy import PolicyConfig
from waaah_agent.errors import UsageError

# ----- environment variables ----------------------------------------------------------------------

SERVER_URL = "WAAAH_SERVER_URL"
API_KEY = "WAAAH_API_KEY"
AGENT_ID = "WAAAH_AGENT_ID"  # the supervised agent's id, filled into MCP calls by the proxy
INBOX = "WAAAH_INBOX"  # the session inbox the proxy and the hooks append to
LINK = "WAAAH_LINK"  # the session link's socket: the proxy's waits and acks go through it
LINK_POLL_SECONDS = "WAAAH_LINK_POLL_SECONDS"  # how often the link reads the server's task list
SESSION_ID = "WAAAH_SESSION_ID"  # the supervised session, for what the agent runs
PARENT_ID = "WAAAH_PARENT_ID"  # links a `waaah run` under the session or run that started it
DEFAULT_AGENT_VAR = "WAAAH_DEFAULT_AGENT"
PASS_ENV = "WAAAH_PASS_ENV"
VIA_MAKE = "WAAAH_VIA_MAKE"
CLI_DIR = "WAAAH_CLI_DIR"  # where `make` installed the CLIs (default: the checkout's .cache/clis)  # set by `make run`: the resume hint offers the make form too  # `waaah run`: more variables for the CLI, e.g. "AWS_,MY_TOKEN"
CACHE_DIR = "WAAAH_CACHE_DIR"  # what waaah learned of the installed CLIs (default: the user cache dir)
RECORD_BUDGET_MB = "WAAAH_RECORD_BUDGET_MB"  # disk for one session's logs and record, in MB
RECORD_BUDGET = 200
LOG_ROLL_MB = "WAAAH_LOG_ROLL_MB"  # a log file rolls over into a compressed part at this size
LOG_ROLL = 20.0
LOG_LEVEL = "WAAAH_LOG_LEVEL"
PROXY_LOG_LEVEL = "WAAAH_PROXY_LOG_LEVEL"
SERVER_CHECK_SECONDS = "WAAAH_SERVER_CHECK_SECONDS"
LIMIT_MARGIN_SECONDS = "WAAAH_LIMIT_MARGIN_SECONDS"
LIMIT_DEFAULT_SECONDS = "WAAAH_LIMIT_DEFAULT_SECONDS"
RESTART_BASE_SECONDS = "WAAAH_RESTART_BASE_SECONDS"
MAX_TOKENS = "WAAAH_MAX_TOKENS"
RUN_MAX_TOKENS = "WAAAH_RUN_MAX_TOKENS"  # `waaah run --max-tokens` (the session's is MAX_TOKENS)
RUN_MAX_COST = "WAAAH_RUN_MAX_COST"  # `waaah run --max-cost`
MAX_COST = "WAAAH_MAX_COST"  # US dollars: the session's cost budget (prices: PRICES)
TOKENS_CHECK_SECONDS = "WAAAH_TOKENS_CHECK_SECONDS"  # how often --max-tokens reads the transcript
TOKENS_CHECK_EVERY = 60.0
NOTIFY = "WAAAH_NOTIFY"  # apprise URLs for alerts, space-separated (added to --notify)
BREAKER_COOLDOWN_SECONDS = "WAAAH_BREAKER_COOLDOWN"  # `waaah run`: seconds a breaker stays open
LOG_DIR = "WAAAH_LOG_DIR"  # `waaah run`'s log folder, in place of <workspace>/.waaah/runs
ROUTES = "WAAAH_ROUTES"  # a routing table file for `waaah route` and `waaah run --role`
PRICES = "WAAAH_PRICES"  # the price table file (--max-cost, costs in reports)
START = "WAAAH_START"  # `waaah agent --start` (what a service's or a container's environment sets)
WORKFLOW = "WAAAH_WORKFLOW"  # `waaah agent --as`
WORKSPACE = "WAAAH_WORKSPACE"  # `waaah agent --workspace`
METRICS_PORT = "WAAAH_METRICS_PORT"  # /healthz, /readyz and /metrics on this port (off by default)
METRICS_HOST = "WAAAH_METRICS_HOST"  # ... on this address
LOG_FORMAT = "WAAAH_LOG_FORMAT"  # headless: text (one line a person reads) or json (one object per event)
TICKET_ID = "WAAAH_TICKET_ID"  # `waaah run --ticket`: the run log's name starts with it
OLD_TICKET_ID = "A8_TICKET_ID"  # the same, as the older wrappers' callers set it
FALLBACK = "WAAAH_FALLBACK"  # `waaah run --fallback` ("none": no fallback, not even the default)

# ----- defaults -------------------------------------------------------------------------------------

_POLICY = PolicyConfig()
_BACKOFF = BackoffConfig()
_MACHINE = MachineConfig(agent="", interactive=False)

DEFAULT_SERVER_URL = "http://localhost:3456"
METRICS_HOST_DEFAULT = "127.0.0.1"  # the metrics port answers this machine only unless told otherwise
LOG_FORMATS = ("text", "json")
DEFAULT_AGENT = "gemini"  # `waaah run` without --agent, --session or WAAAH_DEFAULT_AGENT
DEFAULT_WORKFLOW = "waaah-orc"
HEARTBEAT = _POLICY.heartbeat  # seconds idle at the prompt before a heartbeat prompt
STALL_TIMEOUT = _POLICY.stall_timeout  # seconds busy with an unchanged screen before Esc
STALL_GRACE = _POLICY.stall_grace  # seconds after that Esc before a restart
RESTART_BUDGET = _BACKOFF.budget  # restarts allowed per RESTART_WINDOW
RESTART_WINDOW = _BACKOFF.window
RESTART_BASE = _BACKOFF.base  # the first restart delay
STOP_GRACE = _MACHINE.stop_grace  # seconds between SIGTERM and SIGKILL
LIMIT_MARGIN = _MACHINE.limit_margin  # seconds added to a usage limit's stated reset time
LIMIT_DEFAULT = _MACHINE.limit_default  # wait when a usage limit states no reset time
SERVER_CHECK_EVERY = 30.0  # seconds between background checks of the WAAAH server
RUN_TIMEOUT = 600.0  # `waaah run`: one budget for every attempt, wait and fallback
BREAKER_COOLDOWN = BreakerConfig().cooldown  # seconds open before one probe run
LOG_LEVEL_DEFAULT = "WARNING"


def minutes(seconds: float) -> str:
    """``1800.0`` -> ``"30 minutes"``, for help texts and messages."""
    return f"{seconds / 60:g} minutes"


# ----- resolution -----------------------------------------------------------------------------------


def text(flag: str | None, env: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    """The flag, else the (non-empty) variable ``name``, else ``default``."""
    return flag or env.get(name) or default


def seconds(
    env: Mapping[str, str], name: str, default: float, flag: float | None = None, unit: str = "seconds"
) -> float:
    """A duration: the flag, else the variable ``name``, else ``default``; a value that is not a
    number of seconds (0 or more) is a UsageError that names the variable."""
    if flag is not None:
        return flag
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"{name} must be a number of {unit} (0 or more), not {raw!r}")
    return value


@dataclass(frozen=True)
class AgentEnv:
    """What `waaah agent` takes from the environment (its flags come on top)."""

    server_check_every: float = SERVER_CHECK_EVERY
    limit_margin: float = LIMIT_MARGIN
    limit_default: float = LIMIT_DEFAULT
    restart_base: float = RESTART_BASE
    log_roll: int = int(LOG_ROLL * 1024 * 1024)  # bytes
    tokens_every: float = TOKENS_CHECK_EVERY


def agent_env(env: Mapping[str, str]) -> AgentEnv:
    return AgentEnv(
        server_check_every=seconds(env, SERVER_CHECK_SECONDS, SERVER_CHECK_EVERY),
        limit_margin=seconds(env, LIMIT_MARGIN_SECONDS, LIMIT_MARGIN),
        limit_default=seconds(env, LIMIT_DEFAULT_SECONDS, LIMIT_DEFAULT),
        restart_base=seconds(env, RESTART_BASE_SECONDS, RESTART_BASE),
        log_roll=max(4096, int(seconds(env, LOG_ROLL_MB, LOG_ROLL, unit="MB") * 1024 * 1024)),
        tokens_every=seconds(env, TOKENS_CHECK_SECONDS, TOKENS_CHECK_EVERY),
    )


@dataclass(frozen=True)
class ProxySettings:
    """What `waaah mcp-proxy` serves with."""

    server_url: str
    api_key: str | None
    agent_id: str | None
    inbox: Path | None
    log_level: str
    link: Path | None = None


def proxy_settings(
    env: Mapping[str, str],
    server: str | None = None,
    api_key: str | None = None,
    agent_id: str | None = None,
    inbox: Path | None = None,
) -> ProxySettings:
    inbox_var, link = env.get(INBOX), env.get(LINK)
    given = waaah_server(server, api_key, env)
    return ProxySettings(
        server_url=given.url,
        api_key=given.api_key,
        agent_id=text(agent_id, env, AGENT_ID),
        inbox=inbox or (Path(inbox_var) if inbox_var else None),
        log_level=(env.get(PROXY_LOG_LEVEL) or LOG_LEVEL_DEFAULT).upper(),
        link=Path(link) if link else None,
    )


def proxy_env(url: str, api_key: str | None) -> dict[str, str]:
    """The environment that points a proxy at a server (written into the CLIs' MCP entries)."""
    env = {SERVER_URL: url}
    if api_key:
        env[API_KEY] = api_key
    return env


def user_folder(env: Mapping[str, str], kind: str) -> Path:
    """The user's ``config`` or ``state`` folder (``$XDG_CONFIG_HOME``, ``$XDG_STATE_HOME``, else
    under ``$HOME``), from the environment given: a test's throwaway HOME counts, the real one not."""
    variable, default = {
        "config": ("XDG_CONFIG_HOME", ".config"),
        "state": ("XDG_STATE_HOME", ".local/state"),
    }[kind]
    given = env.get(variable)
    return Path(given) if given else Path(env.get("HOME") or "~").expanduser() / default


#: Variables no child process may get (the agent, the MCP proxy, hooks, a CLI of `waaah run`,
#: git): alert URLs hold tokens. The command line's entry takes them out of its own environment
#: at the start (:func:`take_private`), so nothing we spawn inherits them.
PRIVATE = (NOTIFY,)
_TAKEN: dict[str, str] = {}


def take_private(environ: MutableMapping[str, str]) -> None:
    """Move the :data:`PRIVATE` variables out of ``environ`` (this process's), kept for us alone."""
    for name in PRIVATE:
        if name in environ:
            _TAKEN[name] = environ.pop(name)


def with_private(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the :data:`PRIVATE` variables taken out at the start put back: what the
    redactors learn their secrets from (an alert URL's password is masked wherever it shows)."""
    return {**_TAKEN, **env}


def private(env: Mapping[str, str], name: str) -> str:
    """A :data:`PRIVATE` variable: from ``env``, else as it was taken out at the start."""
    return env.get(name) or _TAKEN.get(name, "")


def notify_urls(flags: list[str] | None, env: Mapping[str, str]) -> tuple[str, ...]:
    """--notify URLs, then those of the variable (space-separated), each once."""
    urls = [*(flags or []), *private(env, NOTIFY).split()]
    return tuple(dict.fromkeys(u.strip() for u in urls if u.strip()))


@dataclass(frozen=True)
class WaaahServer:
    url: str  # --server, else WAAAH_SERVER_URL, else DEFAULT_SERVER_URL
    source: str  # where the URL came from: "--server", the variable's name, or "default"
    api_key: str | None  # --api-key, else WAAAH_API_KEY


def waaah_server(flag_url: str | None, flag_key: str | None, env: Mapping[str, str]) -> WaaahServer:
    """The WAAAH server and its key, the one place their variables are read: every command that
    talks to the server (agent, doctor, mcp install, mcp-proxy) comes here with its flags."""
    url, source = (flag_url, "--server") if flag_url else (env.get(SERVER_URL), SERVER_URL)
    return WaaahServer(url or DEFAULT_SERVER_URL, source if url else "default", text(flag_key, env, API_KEY))


def api_key(flag: str | None, env: Mapping[str, str]) -> str | None:
    return waaah_server(None, flag, env).api_key


def server_url(flag: str | None, env: Mapping[str, str]) -> tuple[str, str] | None:
    """The server URL and where it came from (``--server`` or the variable); None when neither."""
    given = waaah_server(flag, None, env)
    return None if given.source == "default" else (given.url, given.source)


def log_dir(env: Mapping[str, str]) -> str:
    """``WAAAH_LOG_DIR`` (where `waaah run` logs go instead of the workspace's .waaah/runs), or ""."""
    return env.get(LOG_DIR, "").strip()


def run_agent_name(
    flag: str | None, resumed: str | None, env: Mapping[str, str], routed: str | None = None
) -> str:
    """`waaah run`'s first CLI: --agent, else the one of --session, else the one --role routed
    to, else the variable, else gemini."""
    return flag or resumed or routed or env.get(DEFAULT_AGENT_VAR) or DEFAULT_AGENT


def breaker_config(env: Mapping[str, str], cooldown: float | None = None) -> BreakerConfig:
    """The circuit breakers' settings: the cooldown from the flag, else the variable, else 60 s."""
    return BreakerConfig(cooldown=seconds(env, BREAKER_COOLDOWN_SECONDS, BREAKER_COOLDOWN, cooldown))


def parent_id(flag: str | None, env: Mapping[str, str]) -> str:
    return text(flag, env, PARENT_ID) or ""


def pass_env(flags: list[str] | None, env: Mapping[str, str]) -> tuple[str, ...]:
    """The variables `waaah run` passes besides its defaults: every --pass-env, and PASS_ENV."""
    given = [*(flags or []), env.get(PASS_ENV, "")]
    return tuple(n.strip() for g in given for n in g.replace(";", ",").split(",") if n.strip())


def ticket(flag: str | None, env: Mapping[str, str]) -> str:
    """`waaah run`'s ticket id: --ticket, else WAAAH_TICKET_ID, else A8_TICKET_ID (unsanitised)."""
    return (flag or env.get(TICKET_ID) or env.get(OLD_TICKET_ID) or "").strip()


def log_level(env: Mapping[str, str]) -> str:
    return env.get(LOG_LEVEL, LOG_LEVEL_DEFAULT)
