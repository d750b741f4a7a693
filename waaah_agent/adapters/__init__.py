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
    """Real CLIs first, the simulated demo agent last."""
    return sorted(registry(), key=lambda n: (registry()[n].simulated, n))
