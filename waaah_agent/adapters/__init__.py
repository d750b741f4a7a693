"""The adapter registry: every module in this package that defines ``ADAPTER`` joins it."""

from __future__ import annotations

import importlib
import pkgutil

from waaah_agent.adapters.base import Adapter


def registry() -> dict[str, Adapter]:
    found: dict[str, Adapter] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        adapter = getattr(module, "ADAPTER", None)
        if isinstance(adapter, Adapter):
            found[adapter.name] = adapter
    return found


def names() -> list[str]:
    """The CLIs `waaah agent` can supervise: real ones first, the simulated demo agent last."""
    known = registry()
    return sorted((n for n, a in known.items() if a.interactive), key=lambda n: (known[n].simulated, n))


def all_names() -> list[str]:
    """Every CLI, also those only `waaah run` drives (headless): real ones first."""
    known = registry()
    return sorted(known, key=lambda n: (known[n].simulated, n))
