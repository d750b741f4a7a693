"""How a command's work is run: its errors become one line and an exit code, secrets masked."""

from __future__ import annotations

import os
import sys

import typer

from waaah_agent import settings
from waaah_agent.errors import ExitCode, WaaahError


def _exit(action: object) -> None:
    try:
        code = action()  # type: ignore[operator]
    except WaaahError as err:
        print(f"waaah: {_masked(str(err))}", file=sys.stderr)
        raise typer.Exit(err.exit_code) from None
    except BrokenPipeError:
        raise typer.Exit(ExitCode.INTERNAL) from None
    except KeyboardInterrupt:
        print("waaah: interrupted", file=sys.stderr)
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    raise typer.Exit(int(code or 0))


def _masked(text: str, *secrets: str | None) -> str:
    """What we print, with the secrets of this environment (and any given by a flag) masked and
    the control characters of the data in it shown, not acted on (core/printable.py)."""
    from waaah_agent.core.printable import printable
    from waaah_agent.core.secrets.redact import Redactor
    from waaah_agent.core.secrets.secretenv import known_secrets

    redact = Redactor(known_secrets(settings.with_private(os.environ)))
    for secret in secrets:
        redact.add(secret)
    return printable(redact(text))
