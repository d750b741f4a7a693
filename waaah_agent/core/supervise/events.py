"""The vocabulary of the supervisor machine: the events it is fed and the actions it returns.

Plain frozen values, so a test can script a whole night as a list of events and compare the
actions with ``==``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Protocol

from waaah_agent.core.kinds import StrEnum
from waaah_agent.core.mcp.inbox_records import ControlRecord, HookRecord, TapRecord
from waaah_agent.core.supervise.detect import Reading

CTRL_C = (b"\x03", b"\x1b[99;5u")  # plain, and the kitty keyboard protocol's form


class StopReason(str, Enum):
    """Why a run of the agent ended."""

    AGENT_EXIT = "agent-exit"  # the agent exited on its own
    USER = "user"  # save and exit from the Ctrl+C menu
    SIGNAL = "signal"  # SIGTERM, SIGHUP, SIGINT
    LOGIN = "login"
    TERMINAL_CLOSED = "terminal-closed"
    STALLED = "stalled"  # still stuck after Esc: restart
    RESTART = "restart"  # EVICT RESTART from the server
    EVICT = "evict"  # EVICT SHUTDOWN
    GAVE_UP = "gave-up"  # the restart budget is spent
    BUDGET = "budget"  # --max-tokens reached: stopped once the task in hand was done
    REJECTED = "rejected-arguments"  # the CLI refused its command line at once: configuration


class Due(Enum):
    """The machine's own deadlines (the shell's relay timers are its own business)."""

    STALL = "stall"
    LIMIT = "limit"
    MENU = "menu"
    KILL = "kill"


class EventKind(StrEnum):
    """The name of each record in events.jsonl (its ``event`` field): what the machine records
    and what the session around it does. A ``str`` enum: the files keep the plain strings, and
    a record read back compares equal to its kind. Hooks are recorded as ``hook-<name>``."""

    # the machine
    STATE = "state"  # the agent's state read from its screen changed
    DELIVERY = "delivery"  # a prompt's delivery moved (pasted, entered, confirmed, failed)
    NUDGE = "nudge"  # a continue prompt, a heartbeat or the workflow again was decided
    STALL = "stall"  # busy with nothing changing: Esc
    LIMIT = "limit"  # a usage limit is waited out
    LIMIT_OVER = "limit-over"
    LIMIT_RESUME = "limit-resume"  # the CLI's own keys on its limit screen
    LIMIT_IGNORED = "limit-ignored"  # a saved limit that is not a time
    STOP = "stop"  # the agent is being stopped
    KILL = "kill"  # SIGKILL after the grace
    SERVER = "server"  # the WAAAH server's health
    AGENT_STATUS = "agent-status"  # the server's word on this agent
    SECRET_ENTRY = "secret-entry"  # a secret-entry screen shown or gone
    MENU = "menu"  # the Ctrl+C menu
    CONTROL = "control"  # waaah send, pause, resume, stop
    BUDGET = "budget"  # --max-tokens or --max-cost reached
    COMPACTED = "compacted"  # the CLI compacted its conversation
    LOGIN_WAIT = "login-wait"
    LOGIN_DONE = "login-done"
    LOGIN_REFUSED = "login-refused"
    LOOP_DETECTOR = "loop-detector"  # the CLI's own loop detector asked or halted
    RESIZE = "resize"
    PHASE_ILLEGAL = "phase-illegal"  # a phase change the table refuses (a bug)
    MCP_TOOL_START = "mcp-tool_start"  # the MCP tap: a tool call began
    MCP_TOOL_END = "mcp-tool_end"  # ... and ended
    # the session around the machine
    START = "start"  # the agent was spawned
    END = "end"  # the session ended
    RESTART = "restart"  # the agent is started again after a backoff
    TOKENS = "tokens"  # token totals from the CLI's transcript
    LEFTOVERS = "leftovers"  # processes an earlier supervisor left
    DESCENDANTS_ENDED = "descendants-ended"
    WORKFLOW_SETTLED = "workflow-settled"
    NATIVE_SESSION_ID = "native-session-id"
    MCP_CONFIG = "mcp-config"
    METRICS = "metrics"
    LINK = "link"
    PANE_SIZE = "pane-size"
    INTERNAL_ERROR = "internal-error"


class ExitInfo(Protocol):
    """How the child process ended (``runtime.child.ExitStatus``)."""

    @property
    def ok(self) -> bool: ...

    @property
    def code(self) -> int | None: ...

    def describe(self) -> str: ...


@dataclass(frozen=True)
class Outcome:
    """How a run of the agent ended."""

    reason: StopReason
    status: ExitInfo | None = None
    detail: str = ""
    reached_prompt: bool = True  # the CLI showed its prompt (or worked) before the run ended


@dataclass(frozen=True)
class Instant:
    """The time an event happened: monotonic seconds for deadlines, the wall clock for people."""

    mono: float
    wall: datetime  # timezone-aware


# -- events ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Began:
    """The run started (the child is spawned, the loop is about to wait)."""


@dataclass(frozen=True)
class Observed:
    """A fresh reading of the screen; ``last_output`` is when the agent last wrote anything;
    ``unread``: bytes typed to the agent it has not read yet (asked only while a paste awaits
    the screen: ``Machine.asks_unread``; None: unknown)."""

    reading: Reading
    last_output: float
    unread: int | None = 0


@dataclass(frozen=True)
class Keys:
    """The user typed ``data``; ``typed``: it already went to the agent, as :meth:`Machine.passes`
    allowed (a keystroke waits for no decision)."""

    data: bytes
    typed: bool = False


@dataclass(frozen=True)
class Tick:
    """Time passed: deadlines at or before now are due."""


@dataclass(frozen=True)
class ChildExited:
    """The agent process is gone (its last output already drained)."""

    status: ExitInfo | None


@dataclass(frozen=True)
class StopAsked:
    """A stop signal came, or the terminal went away."""

    reason: StopReason
    detail: str


@dataclass(frozen=True)
class ServerChanged:
    ok: bool
    detail: str
    url: str


@dataclass(frozen=True)
class AgentStatusChanged:
    status: str | None  # the WAAAH server's WAITING / PROCESSING / OFFLINE ...


@dataclass(frozen=True)
class TokensCounted:
    """The session's token totals, read again from the CLI's transcript on the slow timer."""

    total: int
    limit: int | None  # --max-tokens; None: no budget
    cost: float | None = None  # US dollars at the user's prices (None: no --max-cost)
    cost_limit: float | None = None  # --max-cost


@dataclass(frozen=True)
class Compacted:
    """The CLI compacted its conversation (seen in its transcript, on the slow timer)."""

    source: str  # where it was seen, for the record


@dataclass(frozen=True)
class LimitStated:
    """The CLI stated when its usage limit resets, elsewhere than on its screen (codex's session
    file: ``rate_limits.resets_at``); read on the slow timer while a limit is waited out."""

    until: datetime  # aware
    source: str  # where it was read, for the record


@dataclass(frozen=True)
class Resized:
    cols: int
    rows: int


Event = (
    Began
    | Observed
    | Keys
    | TapRecord  # the MCP proxy: a tool call starts or ends
    | HookRecord  # one of the CLI's own hooks fired (claude: UserPromptSubmit, Stop, ...)
    | ControlRecord  # the user, from another shell: send, pause, resume, stop
    | Tick
    | ChildExited
    | StopAsked
    | ServerChanged
    | AgentStatusChanged
    | Resized
    | TokensCounted
    | LimitStated
    | Compacted
)

# -- actions -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Type:
    """Write ``data`` to the agent (its PTY's write queue)."""

    data: bytes


@dataclass(frozen=True)
class Look:
    """Read the screen again no later than ``at`` (and feed the reading back)."""

    at: float


@dataclass(frozen=True)
class Record:
    """A line for ``events.jsonl``."""

    name: str
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Notice:
    """A line for the text log (never the agent's screen)."""

    text: str


@dataclass(frozen=True)
class Say:
    """A line for the user outside the agent's screen (headless: stdout)."""

    text: str


@dataclass(frozen=True)
class Title:
    """The terminal title (on a terminal). A held title stays over the agent's own titles until
    the next Title; one not held gives the title back to the agent."""

    text: str
    hold: bool = False


@dataclass(frozen=True)
class Save:
    """Persist these session.json fields now."""

    changes: Mapping[str, Any]


@dataclass(frozen=True)
class Enqueue:
    """Keep this prompt of `waaah send` at the end of the session's queue (beside session.json);
    ``sent``: its record's ``ts`` in the inbox (a later supervisor reads the sends after it)."""

    text: str
    sent: float = 0.0


@dataclass(frozen=True)
class Dequeue:
    """The oldest prompt of the queue is submitted: drop it."""


@dataclass(frozen=True)
class SignalAgent:
    """Signal the agent's process group: SIGTERM, or SIGKILL when ``kill``."""

    kill: bool = False


@dataclass(frozen=True)
class Menu:
    """Show (``open``) or remove the Ctrl+C menu; on removal the agent's screen is repainted."""

    open: bool


@dataclass(frozen=True)
class HideInput:
    """A secret-entry screen came (``hidden``) or went: record ``[input hidden]``, not its echo."""

    hidden: bool


@dataclass(frozen=True)
class Finish:
    """The run is over."""

    outcome: Outcome


Action = (
    Type
    | Look
    | Record
    | Notice
    | Say
    | Title
    | Save
    | Enqueue
    | Dequeue
    | SignalAgent
    | Menu
    | HideInput
    | Finish
)
