"""The package's C pieces (setup.py builds them at install where a C compiler is)."""

from __future__ import annotations

import importlib
import shutil
from types import ModuleType

import pytest


def native_module(name: str, without: str) -> ModuleType:
    """The built module ``name``; the test module is skipped (``without``: what runs instead)
    only where no C compiler is. Where one is, a missing module fails: it must have been built."""
    try:
        return importlib.import_module(name)
    except ImportError:
        if shutil.which("cc") or shutil.which("gcc"):
            raise
        pytest.skip(f"installed without a C compiler: {without}", allow_module_level=True)
