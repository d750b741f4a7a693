"""The providers files of `waaah run` (model defaults and aliases per CLI), found and read.

The layers, in precedence order: the file ``$WAAAH_PROVIDERS`` names (it must exist), the
workspace's ``providers.yaml`` (else its ``.waaah/providers.yaml``), then the bundled aliases
(core/models.py, which also resolves). Any file may be hostile: missing when named, unreadable,
a FIFO, huge, not YAML, the wrong shape; each is one line (a UsageError, exit 2) naming the file
and the key, never a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from waaah_agent import adapters
from waaah_agent.core.nesting import TooDeep, check
from waaah_agent.core.oneshot import models
from waaah_agent.core.oneshot.models import Providers
from waaah_agent.errors import UsageError
from waaah_agent.runtime import config_file
from waaah_agent.safe_read import read_text, why

#: The variable naming a providers file.
PROVIDERS = "WAAAH_PROVIDERS"
#: The workspace's own files, the first that exists.
WORKSPACE_FILES = ("providers.yaml", ".waaah/providers.yaml")
#: A providers file is a few lines; anything over this is refused.
PROVIDERS_CAP = 64 * 1024


def headless_clis() -> list[str]:
    return sorted(n for n, a in adapters.registry().items() if a.headless is not None)


def files(env: Mapping[str, str], workspace: Path) -> list[tuple[Path, str]]:
    """The providers files in force, (path, how resolutions name it), highest precedence first."""
    out = []
    if env.get(PROVIDERS):
        named = Path(env[PROVIDERS]).expanduser()
        try:
            found = named.exists() or named.is_symlink()
        except (OSError, ValueError) as err:  # a name too long, a NUL byte
            raise UsageError(
                f"{config_file.origin(PROVIDERS)} names a path that cannot be used ({why(err)})"
            ) from None
        if not found:
            raise UsageError(f"{config_file.origin(PROVIDERS)} names {named}, which does not exist")
        out.append((named, str(named)))
    for relative in WORKSPACE_FILES:
        candidate = workspace / relative
        if candidate.exists() or candidate.is_symlink():
            out.append((candidate, relative))
            break
    return out


def load(env: Mapping[str, str], workspace: Path, requested: str | None = None) -> list[Providers]:
    """Every layer, highest precedence first, the bundled one last; ``requested`` (--model) is
    checked too: a name with spaces or one starting with "-" would reach the CLI as a flag."""
    if requested and not models.valid_name(requested):  # "" (an unset variable): none given
        raise UsageError(
            "--model takes one word of at most 200 characters, not starting with '-' (a model or an alias)"
        )
    known = headless_clis()
    return [
        *(read(path, label, known) for path, label in files(env, workspace)),
        models.bundled(known, {n: a.model_aliases for n, a in adapters.registry().items()}),
    ]


def read(path: Path, label: str, known: list[str]) -> Providers:
    import yaml

    try:
        text = read_text(path, PROVIDERS_CAP)
    except UnicodeDecodeError:
        raise UsageError(f"providers file {path} is not UTF-8 text; fix it or remove it") from None
    except OSError as bad:
        raise UsageError(f"providers file {path} cannot be read: {why(bad)}") from None
    try:
        check(text, "yaml")
        data = yaml.safe_load(text)
    except yaml.YAMLError as bad:
        mark = getattr(bad, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(bad, "problem", None) or "not YAML"
        raise UsageError(f"providers file {path} is not valid YAML{where}: {problem}") from None
    except (TooDeep, RecursionError):  # RecursionError: nested by indentation alone
        raise UsageError(f"providers file {path} is {TooDeep()}; fix it or remove it") from None
    try:
        parsed = models.parse(data, known, str(path))  # errors name the file in full
    except models.BadProviders as bad:
        raise UsageError(f"providers file {bad}") from None
    return Providers(label, parsed.clis)  # resolutions name it short
