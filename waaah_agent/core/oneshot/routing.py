"""Which CLI for which role (pure): a routing table and the live availability of each CLI in,
a recommended CLI and its fallback chain out (`waaah route`, `waaah run --role`).

A table maps a role to an ordered ``chain`` of CLIs and a ``why``; optional ``tasks`` rules put
another chain first when the task's text has one of their ``words``. The bundled table below is
the default; a table file (runtime/routes.py finds it) replaces the roles it names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ROLES = ("developer", "reviewer", "architect", "researcher", "manager", "coordinator")

#: The bundled table, as a table file would spell it.
DEFAULT_TABLE: dict[str, Any] = {
    "roles": {
        "developer": {
            "chain": ["claude", "codex", "gemini", "opencode"],
            "why": "edits code and runs tools for long turns",
            "tasks": [{"words": ["review", "audit"], "chain": ["gemini", "claude", "codex", "opencode"]}],
        },
        "reviewer": {
            "chain": ["gemini", "claude", "codex", "opencode"],
            "why": "reads a whole diff at once (large context); a second vendor's eyes",
        },
        "architect": {
            "chain": ["claude", "gemini", "codex", "opencode"],
            "why": "plans across many files before anything is written",
        },
        "researcher": {
            "chain": ["gemini", "claude", "opencode", "codex"],
            "why": "reads the most text per prompt",
        },
        "manager": {
            "chain": ["gemini", "claude", "codex", "opencode"],
            "why": "short turns: splits work and follows it up",
        },
        "coordinator": {
            "chain": ["claude", "gemini", "codex", "opencode"],
            "why": "stays in the WAAAH loop and hands out tasks",
        },
    }
}


class BadTable(ValueError):
    """A routing table that is not one; the message says where."""


@dataclass(frozen=True)
class TaskRule:
    words: tuple[str, ...]
    chain: tuple[str, ...]


@dataclass(frozen=True)
class Role:
    chain: tuple[str, ...]
    why: str = ""
    tasks: tuple[TaskRule, ...] = ()


@dataclass(frozen=True)
class Availability:
    """One CLI now: usable, and if not, why (not installed, no credentials, breaker open)."""

    agent: str
    usable: bool
    reason: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Route:
    role: str
    agent: str | None  # None: no CLI of the chain is usable
    fallback: tuple[str, ...]
    chain: tuple[str, ...]  # the role's chain for this task, usable or not
    why: str
    matched: tuple[str, ...] = ()  # the task words that picked the chain
    unavailable: tuple[Availability, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "agent": self.agent,
            "fallback": list(self.fallback),
            "chain": list(self.chain),
            "why": self.why,
            "matched": list(self.matched),
            "unavailable": {a.agent: a.reason for a in self.unavailable},
        }


def parse(data: Any, known: set[str], where: str) -> dict[str, Role]:
    """The roles of a table (``{"roles": {NAME: {"chain": [...], "why": ..., "tasks": [...]}}}``);
    a wrong shape or an unknown CLI is a :class:`BadTable` naming ``where``."""
    roles = data.get("roles") if isinstance(data, dict) else None
    if not isinstance(roles, dict) or not roles:
        raise BadTable(f'{where}: expected {{"roles": {{"<role>": {{"chain": ["<cli>", ...]}}}}}}')
    return {str(name): _role(entry, known, f"{where}: role {name!r}") for name, entry in roles.items()}


def _role(entry: Any, known: set[str], where: str) -> Role:
    if not isinstance(entry, dict):
        raise BadTable(f"{where}: expected an object with a chain")
    rules = entry.get("tasks", [])
    if not isinstance(rules, list) or not isinstance(entry.get("why", ""), str):
        raise BadTable(f"{where}: tasks must be a list and why a string")
    tasks = []
    for rule in rules:
        words = rule.get("words") if isinstance(rule, dict) else None
        if (
            not isinstance(words, list)
            or not words
            or not all(isinstance(w, str) and w.strip() for w in words)
        ):
            raise BadTable(f"{where}: each task rule needs words (a list of strings)")
        chain = _chain(rule.get("chain"), known, where)
        tasks.append(TaskRule(tuple(w.strip().lower() for w in words), chain))
    return Role(_chain(entry.get("chain"), known, where), entry.get("why", ""), tuple(tasks))


def _chain(value: Any, known: set[str], where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise BadTable(f"{where}: chain must be a list of CLI names")
    unknown = [v for v in value if v not in known]
    if unknown:
        raise BadTable(f"{where}: unknown CLI {unknown[0]!r}; choose from {', '.join(sorted(known))}")
    return tuple(dict.fromkeys(value))


def merged(base: dict[str, Role], over: dict[str, Role]) -> dict[str, Role]:
    """A table file's roles replace the bundled ones of the same name; the rest stay."""
    return {**base, **over}


def chain_for(role: Role, task: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The chain for ``task`` (the first task rule with a word in it, else the role's) and the
    words that matched."""
    words = set(re.findall(r"[\w-]+", task.lower()))
    for rule in role.tasks:
        hit = tuple(w for w in rule.words if w in words)
        if hit:
            return rule.chain, hit
    return role.chain, ()


def recommend(name: str, role: Role, task: str, available: Mapping[str, Availability]) -> Route:
    """The first usable CLI of the role's chain for ``task``, the other usable ones as its fallback."""
    chain, matched = chain_for(role, task)
    usable = [a for a in chain if a in available and available[a].usable]
    down = tuple(available[a] for a in chain if a in available and not available[a].usable)
    why = role.why + (f" (task mentions {', '.join(matched)})" if matched else "")
    first = usable[0] if usable else None
    return Route(name, first, tuple(usable[1:]), chain, why, matched, down)
