"""convsim: simulate conversations as LangGraph state graphs and evaluate them while they run.

The public API is what ``__all__`` lists; everything else is private. Names are imported on
first use, so ``from convsim import ConvsimError`` does not pay for LangGraph or numpy.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_exports

_EXPORTS = {
    "bootstrap_ci": "aggregate", "mean_ci": "aggregate", "mean_diff_ci": "aggregate",
    "ExperimentConfig": "config", "Variant": "config", "load_config": "config",
    "SessionContext": "context", "emit_metrics": "context",
    "compile_with_default_context": "default_context",
    "Embedder": "embedders", "embeddings_available": "embedders", "make_embedder": "embedders",
    "ConvsimError": "errors",
    "load_graph_module": "graphfile",
    "ChatModel": "models", "ModelSpec": "models", "ModelUnavailable": "models",
    "StructuredResult": "models", "extract_json": "models", "parse_model_spec": "models",
    # every command of the command line, as a function returning data (convsim/api.py)
    "run": "api", "report": "api", "compare": "api", "evaluate": "api", "trace": "api",
    "fork": "api", "draw": "api", "list_graphs": "api", "list_configs": "api",
    "np_rng_for": "seeding", "rng_for": "seeding", "session_seed": "seeding", "stable_seed": "seeding",
    "read_jsonl": "store",
    "summarise_run": "summary", "flatten_metrics": "summary",
    "explain_turn_metrics": "tracing", "fork_run": "time_travel",
    "read_trace": "tracing", "state_at": "tracing",
}
__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # for type checkers and editors
    from .aggregate import bootstrap_ci, mean_ci, mean_diff_ci  # noqa: F401
    from .config import ExperimentConfig, Variant, load_config  # noqa: F401
    from .context import SessionContext, emit_metrics  # noqa: F401
    from .default_context import compile_with_default_context  # noqa: F401
    from .embedders import Embedder, embeddings_available, make_embedder  # noqa: F401
    from .errors import ConvsimError  # noqa: F401
    from .api import (compare, draw, evaluate, fork, list_configs, list_graphs, report,  # noqa: F401
                      run, trace)
    from .graphfile import load_graph_module  # noqa: F401
    from .models import (ChatModel, ModelSpec, ModelUnavailable, StructuredResult,  # noqa: F401
                         extract_json, parse_model_spec)
    from .seeding import np_rng_for, rng_for, session_seed, stable_seed  # noqa: F401
    from .time_travel import fork_run  # noqa: F401
    from .store import read_jsonl  # noqa: F401
    from .summary import flatten_metrics, summarise_run  # noqa: F401
    from .tracing import explain_turn_metrics, read_trace, state_at  # noqa: F401
