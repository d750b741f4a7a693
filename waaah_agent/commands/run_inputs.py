"""`waaah run`'s input options: the agent file and persona, a skill, the context, permission and
model knobs, and --dry-run (read by runtime/run_inputs.py, decided in core/run_inputs.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from waaah_agent.core.oneshot.run_inputs import CONTEXT_MAX, PERMISSION_MODES

AgentFileOption = Annotated[
    Path | None,
    typer.Option(
        "--agent-file",
        metavar="FILE.md",
        help="An agent definition put before the prompt: optional front matter, shared text, and "
        "'## persona: ID' sections (see README). Example: --agent-file agents/reviewer.md",
    ),
]
PersonaOption = Annotated[
    str | None,
    typer.Option(
        "--persona",
        metavar="ID",
        help="The persona of --agent-file to send (else its front matter's persona). Not sent "
        "again on --session. Example: --persona strict",
    ),
]
SkillOption = Annotated[
    str | None,
    typer.Option(
        "--skill",
        metavar="NAME",
        help="Run the CLI's skill NAME (gemini: .gemini/skills, claude: .claude/skills, in the "
        "workspace or HOME). Example: --skill code-review",
    ),
]
ContextDirOption = Annotated[
    Path | None,
    typer.Option(
        "--context-dir",
        metavar="DIR",
        help="Use DIR/CONTEXT.md as the context (instead of the workspace's). Example: --context-dir docs",
    ),
]
ContextMaxOption = Annotated[
    int,
    typer.Option(
        "--context-max",
        min=1,
        metavar="BYTES",
        help=f"Cut the context to this many bytes, with a visible marker (default {CONTEXT_MAX}). "
        "Example: --context-max 20000",
    ),
]
SkipContextOption = Annotated[
    bool,
    typer.Option(
        "--skip-context-file",
        help="Do not read the workspace's CONTEXT.md. Example: --skip-context-file",
    ),
]
YoloOption = Annotated[
    bool,
    typer.Option(
        "--yolo",
        help="Let the CLI run every tool without asking (gemini --yolo, claude "
        "--dangerously-skip-permissions, codex --dangerously-bypass-approvals-and-sandbox, "
        "opencode --auto). Example: --yolo",
    ),
]
PermissionModeOption = Annotated[
    str | None,
    typer.Option(
        "--permission-mode",
        metavar="MODE",
        help=f"{'|'.join(PERMISSION_MODES)}, mapped to each CLI's own flags (or a mode a CLI names "
        "itself, e.g. gemini's auto_edit). Example: --permission-mode acceptEdits",
    ),
]
TemperatureOption = Annotated[
    float | None,
    typer.Option(
        "--temperature",
        min=0.0,
        max=2.0,
        metavar="T",
        help="Sampling temperature where the CLI can take one for a run (none of the four can "
        "today: a warning, not an error). Example: --temperature 0.2",
    ),
]
DryRunOption = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Check everything and print one JSON object of what would run (CLI, model, argv, "
        "prompt size); start nothing, log nothing. Example: waaah run --dry-run 'hi'",
    ),
]
