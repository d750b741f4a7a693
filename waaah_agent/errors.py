"""One base error and precise subclasses, each with a message a user can act on.

Every subclass carries the process exit code the CLI maps it to; the table in
``EXIT_CODES`` is what ``waaah agent --help`` and the README list.
"""

from __future__ import annotations


class WaaahError(Exception):
    """Base of every error we expect and explain. ``str(err)`` is the one-line message."""

    exit_code = 1


class UsageError(WaaahError):
    exit_code = 2


class CliNotFound(WaaahError):
    exit_code = 3


class WorkflowNotFound(WaaahError):
    exit_code = 4


class SessionBusy(WaaahError):
    """Another supervisor holds the session lock."""

    exit_code = 5


class LoginRequired(WaaahError):
    exit_code = 6


class SessionNotFound(WaaahError):
    exit_code = 7


class AgentFailed(WaaahError):
    """The agent exited on its own with a non-zero code (the code is in the message)."""

    exit_code = 10


class RestartBudgetExhausted(WaaahError):
    """The agent kept crashing or stalling: the restart budget for the window is spent."""

    exit_code = 11


EXIT_CODES: dict[int, str] = {
    0: "the agent finished, or you chose save and exit (state saved, resumable)",
    1: "unexpected internal error (see the log)",
    2: "bad arguments or configuration",
    3: "the agent CLI is not installed",
    4: "the workflow was not found",
    5: "another supervisor is driving this session",
    6: "the agent CLI needs a login first",
    7: "no session to resume",
    10: "the agent CLI exited with an error of its own",
    11: "the agent kept crashing: the restart budget (5 per 30 minutes) was spent",
    130: "interrupted before the agent started",
}
