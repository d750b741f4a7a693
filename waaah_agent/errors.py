"""One base error and precise subclasses, each with a message a user can act on, and the
process exit codes of `waaah agent` and `waaah run`, each code defined once in :class:`ExitCode`.

Every subclass carries the exit code the CLI maps it to; ``exit_codes()`` (what ``waaah agent
--help`` and the README list) and ``RUN_EXIT_CODES`` (``waaah run --help``, the envelope's
``exit_code``) say what each code means.
"""

from __future__ import annotations

import errno
import shlex
from enum import IntEnum
from pathlib import Path

from waaah_agent.core.failures import ErrorType


class ExitCode(IntEnum):
    OK = 0
    INTERNAL = 1
    USAGE = 2  # `waaah run`: invalid input
    CLI_NOT_FOUND = 3
    WORKFLOW_NOT_FOUND = 4
    SESSION_BUSY = 5
    LOGIN = 6  # `waaah run`: auth
    NO_SESSION = 7  # `waaah run`: unknown or invalid session
    STORAGE = 8
    AGENT_FAILED = 10
    RESTARTS_SPENT = 11
    RUN_TIMEOUT = 12
    RATE_LIMIT = 13
    INVALID_MODEL = 14
    CRASH = 15
    TRANSIENT = 16
    BUDGET = 17  # --max-tokens or --max-cost reached
    QUOTA = 18  # `waaah run`: a usage quota or plan limit is spent
    PROVIDER_ERROR = 19  # `waaah run`: the model provider's own server error
    UNKNOWN = 20  # `waaah run`: a failure no other class explains
    INTERRUPTED = 130


class WaaahError(Exception):
    """Base of every error we expect and explain. ``str(err)`` is the one-line message."""

    exit_code: int = ExitCode.INTERNAL


class UsageError(WaaahError):
    exit_code = ExitCode.USAGE


#: What to tell the user when a file of theirs is refused.
FIX_FILE = "fix or move it, then start again (or start with --no-mcp)"


class ConfigRefused(UsageError):
    """A user's config file we will not read or edit: what is wrong with it, and the fix."""

    def __init__(self, what: str, fix: str = FIX_FILE) -> None:
        super().__init__(f"{what}; {fix}")
        self.what = what
        self.fix = fix


class CliNotFound(WaaahError):
    exit_code = ExitCode.CLI_NOT_FOUND


class WorkflowNotFound(WaaahError):
    exit_code = ExitCode.WORKFLOW_NOT_FOUND


class SessionBusy(WaaahError):
    """Another supervisor holds the session lock."""

    exit_code = ExitCode.SESSION_BUSY


class LoginRequired(WaaahError):
    exit_code = ExitCode.LOGIN


class SessionNotFound(WaaahError):
    exit_code = ExitCode.NO_SESSION


class StorageError(WaaahError):
    """A file or folder of ours cannot be created, written or read; the message names the path
    and the fix (see :func:`storage_error`)."""

    exit_code = ExitCode.STORAGE


def fix_for(err: OSError, path: Path) -> str:
    """What the user can do about ``err`` at ``path``."""
    code = err.errno
    if getattr(err, "reason", None):  # safe_read.UnsafeFile: a symlink, a FIFO, a folder there
        return f"move it aside (mv {shlex.quote(str(path))} {shlex.quote(str(path))}.bak)"
    if code in (errno.ENOSPC, errno.EDQUOT):
        return f"free some disk space on the file system of {path}"
    if code == errno.EROFS:
        return f"{path} is on a read-only file system; run in a writable workspace (--workspace)"
    if code in (errno.EACCES, errno.EPERM):
        return f"make it writable (chmod u+w {path}) or run in another workspace (--workspace)"
    if code in (errno.ENOTDIR, errno.EEXIST):
        return f"a file is in the way of a folder: move it aside (mv {path} {path}.bak)"
    if code == errno.ELOOP:
        return f"remove the link (rm {path})"
    if code == errno.EISDIR:
        return f"a folder is in the way of a file: move it aside (mv {path} {path}.bak)"
    if code == errno.ENOENT and not path.parent.exists():
        return f"its folder does not exist: create it (mkdir -p {shlex.quote(str(path.parent))})"
    return "check the path and its permissions"


def storage_error(err: OSError, path: Path, doing: str) -> StorageError:
    """One line for ``err`` while ``doing`` (e.g. "create the session folder") at ``path``."""
    named = [Path(n) for n in (err.filename2, err.filename) if isinstance(n, str)]
    # The file the user knows, never the temporary one an atomic write puts beside it.
    where = next((n for n in named if not _temporary_of(n, path)), path)
    if err.errno in (errno.ENOTDIR, errno.EEXIST):
        where = _blocker(where)
    reason = err.strerror or str(err)
    return StorageError(f"cannot {doing} {where}: {reason}; {fix_for(err, where)}")


def _temporary_of(name: Path, path: Path) -> bool:
    """Whether ``name`` is the temporary file written beside ``path`` (``.<name>.<pid>.tmp``)."""
    return name.parent == path.parent and name.name.startswith(f".{path.name}.") and name.suffix == ".tmp"


def _blocker(path: Path) -> Path:
    """The file standing where a folder of ``path`` should be (else ``path``)."""
    for folder in (*reversed(path.parents), path):
        if folder.exists() and not folder.is_dir():
            return folder
    return path


class AgentFailed(WaaahError):
    """The agent exited on its own with a non-zero code (the code is in the message)."""

    exit_code = ExitCode.AGENT_FAILED


class BudgetReached(WaaahError):
    """The session used the tokens --max-tokens allows: it stopped after the task in hand."""

    exit_code = ExitCode.BUDGET


class RestartBudgetExhausted(WaaahError):
    """The agent kept crashing or stalling: the restart budget for the window is spent."""

    exit_code = ExitCode.RESTARTS_SPENT


def exit_codes(restart_budget: int, restart_window: float) -> dict[int, str]:
    """What each exit code of `waaah agent` means (``restart_budget`` per ``restart_window`` s)."""
    return {
        ExitCode.OK: "the agent finished, or you chose save and exit (state saved, resumable)",
        ExitCode.INTERNAL: "unexpected internal error (see the log)",
        ExitCode.USAGE: "bad arguments or configuration",
        ExitCode.CLI_NOT_FOUND: "the agent CLI is not installed, or cannot be executed",
        ExitCode.WORKFLOW_NOT_FOUND: "the workflow was not found",
        ExitCode.SESSION_BUSY: "another supervisor is driving this session",
        ExitCode.LOGIN: "the agent CLI needs a login first",
        ExitCode.NO_SESSION: "no session to resume (or it belongs to another workspace)",
        ExitCode.STORAGE: "a file or folder of waaah cannot be created, written or read",
        ExitCode.AGENT_FAILED: "the agent CLI exited with an error of its own",
        ExitCode.RESTARTS_SPENT: "the agent kept crashing: the restart budget "
        f"(--restart-budget, default {restart_budget} per {restart_window / 60:g} minutes) was spent",
        ExitCode.BUDGET: "the session reached --max-tokens or --max-cost and stopped after the task in hand (saved, resumable)",
        ExitCode.INTERRUPTED: "interrupted before the agent started",
    }


#: The exit code of `waaah run` for each error type of its envelope.
RUN_EXIT_BY_TYPE: dict[ErrorType, ExitCode] = {
    ErrorType.INVALID_INPUT: ExitCode.USAGE,
    ErrorType.AUTH: ExitCode.LOGIN,
    ErrorType.INVALID_SESSION: ExitCode.NO_SESSION,
    ErrorType.TIMEOUT: ExitCode.RUN_TIMEOUT,
    ErrorType.RATE_LIMIT: ExitCode.RATE_LIMIT,
    ErrorType.INVALID_MODEL: ExitCode.INVALID_MODEL,
    ErrorType.CRASH: ExitCode.CRASH,
    ErrorType.TRANSIENT: ExitCode.TRANSIENT,
    ErrorType.INTERRUPTED: ExitCode.INTERRUPTED,
    ErrorType.BUDGET: ExitCode.BUDGET,
    ErrorType.QUOTA: ExitCode.QUOTA,
    ErrorType.PROVIDER_ERROR: ExitCode.PROVIDER_ERROR,
    ErrorType.UNKNOWN: ExitCode.UNKNOWN,
}

#: What each exit code of `waaah run` means.
RUN_EXIT_CODES: dict[int, str] = {
    ExitCode.OK: "answered",
    ExitCode.USAGE: "invalid input",
    ExitCode.LOGIN: "auth",
    ExitCode.NO_SESSION: "unknown or invalid session",
    ExitCode.RUN_TIMEOUT: "timeout (the --timeout budget)",
    ExitCode.RATE_LIMIT: "rate limit",
    ExitCode.INVALID_MODEL: "invalid model",
    ExitCode.CRASH: "crash (or the CLI is not installed)",
    ExitCode.TRANSIENT: "transient error",
    ExitCode.BUDGET: "budget spent (--max-tokens, --max-cost) before an answer",
    ExitCode.QUOTA: "quota (a usage quota or plan limit is spent)",
    ExitCode.PROVIDER_ERROR: "provider error (the model provider's server error or overload)",
    ExitCode.UNKNOWN: "unknown (a failure no other class explains)",
    ExitCode.INTERRUPTED: "interrupted",
}


def run_exit_code(error_type: ErrorType | None) -> int:
    """The exit code of a `waaah run` that ended with ``error_type`` (None: it answered)."""
    return int(ExitCode.OK if error_type is None else RUN_EXIT_BY_TYPE.get(error_type, ExitCode.INTERNAL))


def table(codes: dict[int, str], between: str) -> str:
    """``"0: ...<between>2: ..."``, for help epilogs."""
    return between.join(f"{int(code)}: {text}" for code, text in codes.items())
