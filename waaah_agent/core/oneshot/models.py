"""Which model each CLI of a `waaah run` chain is given (pure), and the one model retry a CLI gets.

Resolution, for one CLI, first match wins:

1. ``--model NAME``: an alias of this CLI in a providers file or the bundled aliases, else the
   literal model name. A literal name is for the first CLI only; an alias is resolved for every
   CLI of the chain (each by its own table), so ``--model fast --fallback claude`` gives each
   CLI its own fast model.
2. the CLI's ``model`` in the providers file of ``$WAAAH_PROVIDERS``;
3. the CLI's ``model`` in the workspace's providers file (``providers.yaml``, else
   ``.waaah/providers.yaml``);
4. the bundled default (none: the CLI's own default and the user's own CLI settings are kept);
5. no ``--model`` flag at all: the CLI's own default.

A providers file (YAML), every key optional::

    gemini:
      model: gemini-2.5-pro          # this CLI's default model
      aliases:                        # names for --model
        fast: gemini-2.5-flash
    claude:
      aliases: {fast: claude-haiku-5-5}

After a failed attempt (:func:`retry_model`): a model the CLI rejected (``invalid_model``) is
tried once more with the CLI's own default (no model flag); a capacity error once more with
the smaller model of the same family, where the CLI's adapter names one (``smaller_model``). Each resolution reads ``requested -> effective (why)``; after a
model retry, ``requested`` is the model that failed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from waaah_agent.core import failures as F

#: What the CLI is told when no model is named: nothing (its own default).
CLI_DEFAULT = "(CLI default)"
#: What a resolution names as requested when no --model was given.
NOTHING_REQUESTED = "(none)"

#: Failures after which a model retry may try a smaller model (``Adapter.smaller_model`` decides).
_CAPACITY_TYPES = (F.RATE_LIMIT, F.TRANSIENT, F.PROVIDER_ERROR, F.CRASH, F.UNKNOWN)

#: (the model that failed, what the CLI said) -> the smaller model to try once more, or None.
Smaller = Callable[[str, str], str | None]

#: A model name: no spaces or control characters, not starting with "-" (it would read as a flag).
_NAME = re.compile(r"^[^\s\x00-\x1f\x7f-][^\s\x00-\x1f\x7f]{0,199}$")

_CLI_KEYS = ("model", "aliases")


class BadProviders(ValueError):
    """A providers file that is not one; the message names the file and the key."""


@dataclass(frozen=True)
class CliModels:
    model: str | None = None
    aliases: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Providers:
    """One layer of model settings: a providers file, or the bundled one."""

    source: str  # how a resolution names it: "providers.yaml", a path, "bundled"
    clis: Mapping[str, CliModels] = field(default_factory=dict)


@dataclass(frozen=True)
class Resolution:
    """The model one attempt of a CLI runs with."""

    requested: str  # the --model value, or "" when none was given
    model: str | None  # what --model the CLI is given; None: no flag (the CLI's own default)
    why: str

    def text(self) -> str:
        """``requested -> effective (why)``, e.g. ``fast -> gemini-2.5-flash (alias, providers.yaml)``."""
        return f"{self.requested or NOTHING_REQUESTED} -> {self.model or CLI_DEFAULT} ({self.why})"


def valid_name(name: str) -> bool:
    return bool(_NAME.match(name))


def parse(data: object, known: Iterable[str], source: str) -> Providers:
    """The layer a loaded providers file describes; :class:`BadProviders` says what is wrong,
    naming ``source`` and the key (never a value: a file may hold anything)."""
    names = sorted(known)
    if data is None:
        return Providers(source)  # an empty file configures nothing
    if not isinstance(data, dict):
        raise BadProviders(f"{source}: the top level must be a mapping of CLI names ({', '.join(names)})")
    clis: dict[str, CliModels] = {}
    for cli, body in data.items():
        if not isinstance(cli, str) or cli not in names:
            shown = str(cli)[:40] if isinstance(cli, str | int | float | bool) else type(cli).__name__
            raise BadProviders(f"{source}: unknown CLI '{shown}'; choose among: {', '.join(names)}")
        clis[cli] = _cli(body, f"{source}: {cli}")
    return Providers(source, clis)


def _cli(body: object, where: str) -> CliModels:
    if body is None:
        return CliModels()
    if not isinstance(body, dict):
        raise BadProviders(f"{where} must be a mapping with the keys {' and '.join(_CLI_KEYS)}")
    for key in body:
        if key not in _CLI_KEYS:
            shown = str(key)[:40] if isinstance(key, str | int | float | bool) else type(key).__name__
            raise BadProviders(f"{where}.{shown}: unknown key; the keys are {' and '.join(_CLI_KEYS)}")
    model = body.get("model")
    if model is not None:
        _check_name(model, f"{where}.model")
    aliases = body.get("aliases")
    if aliases is None:
        aliases = {}
    if not isinstance(aliases, dict):
        raise BadProviders(f"{where}.aliases must be a mapping of alias: model")
    for alias, target in aliases.items():
        if not isinstance(alias, str) or not valid_name(alias):
            raise BadProviders(f"{where}.aliases: an alias must be one word (text, no spaces)")
        _check_name(target, f"{where}.aliases.{alias}")
    return CliModels(model, dict(aliases))


def _check_name(value: object, where: str) -> None:
    if not isinstance(value, str):
        raise BadProviders(f"{where} must be a model name (text), not {_kind(value)}")
    if not valid_name(value):
        raise BadProviders(
            f"{where} is not a model name (one word of at most 200 characters, not starting with '-')"
        )


def _kind(value: object) -> str:
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def bundled(known: Iterable[str], aliases: Mapping[str, Mapping[str, str]]) -> Providers:
    """The bundled layer: each known CLI's own aliases (``Adapter.model_aliases``)."""
    names = set(known)
    return parse({k: {"aliases": dict(v)} for k, v in aliases.items() if k in names and v}, names, "bundled")


def resolve(cli: str, requested: str | None, first: bool, layers: Iterable[Providers]) -> Resolution:
    """The model ``cli`` starts with. ``requested`` is --model; ``first``: ``cli`` heads the chain;
    ``layers`` in precedence order ($WAAAH_PROVIDERS, workspace file, bundled)."""
    layers = list(layers)
    tables = [(layer.source, layer.clis.get(cli) or CliModels()) for layer in layers]
    if requested:
        for source, table in tables:
            if requested in table.aliases:
                return Resolution(requested, table.aliases[requested], f"alias, {source}")
        if first:
            return Resolution(requested, requested, "--model")
    for source, table in tables:
        if table.model:
            why = f"default, {source}"
            if requested:  # an alias of another CLI, or a model name meant for the first one
                why += f"; {cli} has no alias '{requested}'"
            return Resolution(requested or "", table.model, why)
    if requested:
        return Resolution(requested, None, f"{cli} has no alias '{requested}'")
    return Resolution("", None, "nothing configured")


def retry_model(
    smaller: Smaller | None,
    current: Resolution,
    failure: F.Failure,
    evidence: str,
    reported_model: str,
    already_retried: bool,
) -> Resolution | None:
    """The model of the one retry a CLI gets after ``failure``, or None (no model retry).

    ``evidence`` is what the CLI said (its error and stderr); ``reported_model`` the model its
    stream named (what "the CLI default" was); ``smaller``: the CLI's ``Adapter.smaller_model``."""
    if already_retried:
        return None
    why = _short(failure.message)
    if failure.type == F.INVALID_MODEL and current.model is not None:
        return Resolution(current.model, None, f"invalid model: {why}")
    # A CLI may end a run without capacity with an exit code of its own and no HTTP status (an
    # unknown error to the classifier); a 429 or 503 naming the capacity is a rate limit or a
    # provider error.
    if smaller is not None and failure.type in _CAPACITY_TYPES:
        failed = current.model or reported_model
        model = smaller(failed, evidence)
        if model:
            return Resolution(failed, model, f"no capacity: {why}")
    return None


def _short(message: str, limit: int = 120) -> str:
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 4].rstrip() + " ..."
