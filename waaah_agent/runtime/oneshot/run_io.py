"""What `waaah run` reads and prints: the prompt (argv or stdin; NUL refused, invalid UTF-8
replaced and reported), the context put before it, and the envelope as json, text or llm."""

from __future__ import annotations

import json
import os
import select
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from waaah_agent import settings
from waaah_agent.core import failures as F
from waaah_agent.core.nesting import dumps_json
from waaah_agent.core.oneshot import outputs, present
from waaah_agent.core.oneshot.resilience import RetryConfig
from waaah_agent.core.oneshot.run_inputs import RunInputs
from waaah_agent.core.secrets.redact import Redactor
from waaah_agent.errors import UsageError, run_exit_code, storage_error
from waaah_agent.runtime.store import atomic_write

#: Prompts longer than this (bytes) go to the CLI's stdin, never its argv.
ARGV_PROMPT_LIMIT = 30 * 1024
#: A prompt (stdin or argument) longer than this (bytes) is refused.
PROMPT_CAP = 8 * 1024 * 1024


@dataclass
class RunOptions:
    prompt: str | None = None  # None: read it from stdin
    agent: str | None = None
    model: str | None = None
    session: str | None = None
    parent: str | None = None
    timeout: float = settings.RUN_TIMEOUT
    fallback: list[str] = field(default_factory=list)
    context: Path | None = None
    format: str = "json"
    extra_args: list[str] = field(default_factory=list)
    workspace: Path | None = None
    retry: RetryConfig = field(default_factory=RetryConfig)
    pass_env: tuple[str, ...] = ()  # more variables for the CLI (names, or prefixes ending in "_")
    role: str | None = None  # --role: the CLI and fallbacks come from the routing table
    breaker_cooldown: float | None = None  # --breaker-cooldown (else the variable, else 60 s)
    max_tokens: int | None = None  # --max-tokens: no attempt starts once the run used this many
    max_cost: float | None = None  # --max-cost: the same in US dollars
    continue_from: str | None = None  # --continue-from ID: that run's log replayed before the prompt
    continue_from_tree: str | None = None  # --continue-from-tree ID: that run and every run under it
    inputs: RunInputs = field(default_factory=RunInputs)  # agent file, context, knobs, --dry-run
    stream: bool = False  # --stream: JSON lines as the run goes (runtime/run_stream.py)
    default_fallback: bool = True  # no --fallback: the other usable CLIs follow (--no-fallback: none)
    cli_env: dict[str, str] = field(default_factory=dict)  # --env KEY=VAL: more variables for the CLI
    ticket: str = ""  # --ticket / WAAAH_TICKET_ID: the log file's name starts with it
    verbose: bool = False  # --verbose / --debug: each log record on stderr as it is written
    llm_max_lines: int = present.LLM_MAX_LINES  # --format llm: longer answers are cut to a head and tail


def ms(seconds: float) -> int:
    """Seconds as whole milliseconds, as the envelope gives durations."""
    return int(round(seconds * 1000))


class InvalidPrompt(UsageError):
    """A prompt no CLI can be given (a NUL byte, too big): an ``invalid_input`` envelope."""


def read_prompt(opts: RunOptions, stdin: IO[str], warnings: list[str]) -> str:
    """The prompt from the argument or stdin. Invalid UTF-8 is decoded with U+FFFD in place of
    each bad byte and a warning; a NUL byte or more than PROMPT_CAP bytes is refused."""
    if opts.prompt is not None and opts.prompt != "-":
        source = "the prompt argument"
        # Python hands undecodable argv bytes over as surrogates: back to bytes, then decoded.
        data = opts.prompt.encode("utf-8", "surrogateescape")
    elif stdin.isatty():
        raise UsageError(
            'no prompt: give it as an argument (waaah run "...") or on stdin' + _after_dashes(opts)
        )
    else:
        source = "the prompt on stdin"
        data = read_stdin(stdin, PROMPT_CAP + 1, opts.timeout)
    if len(data) > PROMPT_CAP:
        raise InvalidPrompt(
            f"{source} is more than {PROMPT_CAP:,} bytes; put the rest in a file the CLI can read"
        )
    prompt = decoded(data, source, warnings)
    if not prompt.strip():
        raise UsageError("the prompt is empty" + ("" if opts.prompt else _after_dashes(opts)))
    refuse_nul(prompt, source)
    return prompt


def read_stdin(stdin: IO[str], limit: int, seconds: float) -> bytes:
    """At most ``limit`` bytes of stdin, up to its end; a stdin still open with nothing more
    after ``seconds`` (the run's --timeout: a pipe whose writer never closes it) is a UsageError,
    never a wait past the run's own bound."""
    raw = getattr(stdin, "buffer", None)
    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's StringIO): read as it is
        return raw.read(limit) if raw is not None else stdin.read(limit).encode("utf-8")
    deadline = time.monotonic() + seconds
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise UsageError(
                f"the prompt on stdin did not end within --timeout {seconds:g} s (stdin is still open, "
                f"{size:,} bytes read): close it (waaah run - < file), or give the prompt as an argument"
            )
        chunk = os.read(fd, min(1 << 20, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _after_dashes(opts: RunOptions) -> str:
    """A prompt put after `--` went to the CLI as an argument: said so when there is none before."""
    if opts.extra_args:
        return '; what follows -- goes to the CLI as its arguments: give the prompt before it (waaah run "..." -- ARGS)'
    return ""


def decoded(data: bytes, source: str, warnings: list[str]) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        warnings.append(
            f"{source} is not valid UTF-8 (byte {data[err.start]:#04x} at offset {err.start}); "
            "each invalid byte was replaced with U+FFFD"
        )
        return data.decode("utf-8", "replace")


def refuse_nul(text: str, source: str) -> None:
    at = text.find("\x00")
    if at >= 0:
        raise InvalidPrompt(
            f"{source} holds a NUL byte (character {at}), which no CLI can be given; remove it "
            "(e.g. tr -d '\\0')"
        )


def input_envelope(error: str, agent: str, model: str | None, skill: str | None = None) -> dict[str, Any]:
    """The envelope of a run refused before any CLI started (invalid input)."""
    return outputs.failure_envelope(
        F.INVALID_INPUT,
        error,
        run_exit_code(F.INVALID_INPUT),
        version=present.ENVELOPE_VERSION,
        agent=agent,
        model=model,
        skill=skill,
    )


def show(
    envelope: dict[str, Any],
    stderr: str,
    fmt: str,
    log_path: Path | None,
    out: IO[str],
    redact: Redactor,
    max_lines: int = present.LLM_MAX_LINES,
) -> None:
    if fmt == "text":
        text = present.plain_text(envelope)
        out.write(text + ("" if text.endswith("\n") or not text else "\n"))
    elif fmt == "llm":

        def save(full: str) -> str:
            if log_path is None:
                return "nowhere (no run log)"
            path = log_path.with_name(f"{log_path.stem}.response-{int(time.time() * 1000)}.txt")
            try:
                atomic_write(path, redact(full), 0o600)  # beside the run log: private, secrets masked
            except OSError as err:
                return f"nowhere ({storage_error(err, path, 'write')})"
            return str(path)

        out.write(present.llm_text(envelope, redact(stderr), save, max_lines=max_lines) + "\n")
    else:
        out.write(present.json_text(envelope) + "\n")
    out.flush()


def show_failure(envelope: dict[str, Any], opts: RunOptions, out: IO[str], redact: Redactor) -> None:
    """The envelope of a run that failed before (or while) it was set up: JSON (one line with
    --stream), the llm form, or nothing for --format text (its stdout is the answer alone)."""
    if opts.format == "text":
        return
    if opts.stream and opts.format == "json":
        out.write(redact(dumps_json(envelope, ensure_ascii=False)) + "\n")
        out.flush()
        return
    masked = json.loads(redact(dumps_json(envelope, ensure_ascii=False)))  # masks hold no quotes
    show(masked, "", opts.format, None, out, redact, opts.llm_max_lines)


def check_format(fmt: str) -> str:
    if fmt not in ("json", "text", "llm"):
        raise UsageError(f"unknown format '{fmt}'; choose json, text or llm")
    return fmt
