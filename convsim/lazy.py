"""Lazy public APIs: a package lists its exports and imports each on first use.

Importing ``convsim`` (or ``catalog``, ``evaluation``, ``agents``) then costs nothing until a
name is used, so ``from convsim import ConvsimError`` does not pay for LangGraph or numpy.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(package: str, exports: dict[str, str], namespace: dict) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for ``package``; ``exports`` maps a name to its submodule."""
    def __getattr__(name: str):
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(exports)
    return __getattr__, __dir__
