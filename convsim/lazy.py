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


def cached_once(maxsize: int | None = 128) -> Callable:
    """``functools.lru_cache(maxsize)`` whose value for a key is computed once, however many threads
    ask for it at the same time.

    lru_cache lets every thread that misses compute the value: the first wave of a run's sessions
    (one thread each; 64 per process worker at 128 in flight) each built the same vocabulary or
    loaded the same catalog, ~13 s of CPU under one GIL before the first session could land. Here
    the callers wait for the first one instead. One lock per function: values for different keys
    are computed one at a time too (under the GIL they could not run side by side anyway).
    ``cache_clear`` and ``cache_info`` are lru_cache's.
    """
    import functools
    import threading

    def decorate(fn: Callable) -> Callable:
        cached = functools.lru_cache(maxsize=maxsize)(fn)
        lock = threading.RLock()  # re-entrant: a cached function that calls itself with another key

        @functools.wraps(fn)
        def once(*args, **kwargs):
            with lock:
                return cached(*args, **kwargs)
        once.cache_clear = cached.cache_clear
        once.cache_info = cached.cache_info
        return once
    return decorate
