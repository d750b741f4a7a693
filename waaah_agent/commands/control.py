"""`waaah send`, `pause`, `unpause`, `stop`, `tail`, `attach`: a running session from another shell."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from waaah_agent.commands.options import SessionOption, WorkspaceOption, deprecated
from waaah_agent.commands.running import _exit
from waaah_agent.errors import ExitCode


def send(
    prompt: Annotated[
        str, typer.Argument(help='The prompt; "-" reads it from stdin. Example: waaah send "run the tests"')
    ],
    session: SessionOption = None,
    workspace: WorkspaceOption = None,
) -> None:
    """Type a prompt into the running agent when it is ready.

    Type a prompt into the running agent, with the same verified delivery as waaah's own: once
    it is ready (a wait_for_prompt in flight is ended with Esc; a turn at work is left to finish),
    never over a draft. Queued in order; kept across restarts."""
    from waaah_agent.runtime.night import control

    def go() -> int:
        folder, state = control.running(workspace or Path.cwd(), session)
        text = control.read_prompt(sys.stdin.buffer) if prompt == "-" else prompt
        control.send_prompt(folder, text, state.queued)
        print(f"waaah: queued for {state.id}: typed once the agent is ready (waaah tail -f shows it)")
        return 0

    _exit(go)


def _resume_command(state: Any) -> str:
    """The command that carries the stopped session on, as it runs when pasted here: waaah by
    its full path when it is not on PATH, and the workspace when it is not the current folder."""
    import shlex

    from waaah_agent.runtime.supervise.session.ending import waaah_command

    parts = [waaah_command(), "agent", f"--start={state.agent}", "--resume", state.id]
    if state.workspace and Path(state.workspace) != Path.cwd().resolve():
        parts += ["--workspace", state.workspace]
    return shlex.join(parts)


def _command(name: str, said: str, session: str | None, workspace: Path | None) -> None:
    from waaah_agent.core.mcp.inbox_records import ControlCommand, ControlRecord
    from waaah_agent.runtime.night import control

    def go() -> int:
        import time

        folder, state = control.running(workspace or Path.cwd(), session)
        control.tell(folder, ControlRecord(time.time(), ControlCommand(name), None))
        if name != "stop":
            print(f"waaah: {state.id}: {said}")
            return 0
        print(f"waaah: {state.id}: saving and stopping ...")
        if control.wait_until_stopped(folder, 60):
            print(f"waaah: {state.id} stopped; carry on with: {_resume_command(state)}")
            return 0
        print(
            f"waaah: {state.id} has not stopped within 60 s; waaah status tells what it does", file=sys.stderr
        )
        return int(ExitCode.INTERNAL)

    _exit(go)


def pause(session: SessionOption = None, workspace: WorkspaceOption = None) -> None:
    """Hold the continue prompts and heartbeats.

    The agent carries on; tasks still reach it."""
    _command("pause", "nudges held until waaah unpause", session, workspace)


def unpause(session: SessionOption = None, workspace: WorkspaceOption = None) -> None:
    """Send continue prompts and heartbeats again.

    An agent idle at its prompt gets one continue prompt."""
    _command("resume", "nudges again", session, workspace)  # the control record's name is unchanged


def resume(session: SessionOption = None, workspace: WorkspaceOption = None) -> None:
    """Old name of `waaah unpause` (removed in the next release)."""
    deprecated("waaah resume", "waaah unpause")
    _command("resume", "nudges again", session, workspace)


def stop(session: SessionOption = None, workspace: WorkspaceOption = None) -> None:
    """Save the running session and exit.

    As the Ctrl+C menu's "save and exit" does; waits for it (60 s)."""
    _command("stop", "", session, workspace)


def tail(
    session: SessionOption = None,
    workspace: WorkspaceOption = None,
    lines: Annotated[int, typer.Option("-n", "--lines", min=0, help="Lines to show first.")] = 20,
    follow: Annotated[bool, typer.Option("-f", "--follow", help="Keep printing what is added.")] = False,
) -> None:
    """Show the running session's text log.

    Timestamped, secrets masked."""
    from waaah_agent.runtime.night import control

    def go() -> int:
        folder, state = control.running(workspace or Path.cwd(), session)
        live = functools.partial(control.session_live, folder)
        if control.follow(Path(state.log_path), control.stdout_bytes(), lines, lambda: follow, live=live):
            print(f"waaah: {state.id} has ended", file=sys.stderr)
        return 0

    _exit(go)


def attach(session: SessionOption = None, workspace: WorkspaceOption = None) -> None:
    """Watch the running session's screen, read-only.

    Watch the running session's screen as it is drawn (read-only; Ctrl+C detaches). For a
    headless session: what its agent shows, from now on."""
    from waaah_agent.runtime.night import control

    def go() -> int:
        folder, state = control.running(workspace or Path.cwd(), session)
        out = control.stdout_bytes()
        out.write(b"\x1b[2J\x1b[H")
        ended = False
        try:
            live = functools.partial(control.session_live, folder)
            ended = control.follow(Path(state.cast_path), out, 0, lambda: True, cast=True, live=live)
        except KeyboardInterrupt:
            pass
        finally:
            out.write(b"\x1b[0m\x1b[?25h\r\n")
            out.flush()
            print(
                f"waaah: {state.id} has ended" if ended else f"waaah: detached from {state.id}",
                file=sys.stderr,
            )
        return 0

    _exit(go)
