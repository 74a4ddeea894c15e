"""convsim: simulate conversations as LangGraph state graphs and evaluate them while they run.

The public API is what ``__all__`` lists; everything else is private. Names are imported on
first use, so ``from convsim import ConvsimError`` does not pay for LangGraph or numpy.
"""
from __future__ import annotations

import os as _os
from typing import TYPE_CHECKING

from convsim.lazy import lazy_exports

# The systems install as subpackages of convsim (convsim.agents, convsim.evaluation, convsim.catalog,
# convsim.graphs, with configs/ and prompts/ as package data). In a source checkout they are the
# folders beside this one, so the checkout's root is searched for convsim's subpackages too.
_checkout = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_checkout, "pyproject.toml")) and _os.path.isdir(_os.path.join(_checkout, "agents")):
    __path__.append(_checkout)  # type: ignore[name-defined]  # noqa: F821

_EXPORTS = {
    "bootstrap_ci": "results.aggregate", "mean_ci": "results.aggregate", "mean_diff_ci": "results.aggregate",
    "ExperimentConfig": "config", "Variant": "config", "load_config": "config",
    "SessionContext": "contract.context", "emit_metrics": "contract.context",
    "compile_with_default_context": "contract.default_context",
    "Embedder": "providers.embedders", "embeddings_available": "providers.embedders", "make_embedder": "providers.embedders",
    "ConvsimError": "errors",
    "load_graph_module": "contract.graphfile",
    "ChatModel": "providers.models", "ModelSpec": "providers.models", "ModelUnavailable": "providers.models",
    "StructuredResult": "providers.models", "extract_json": "providers.models", "parse_model_spec": "providers.models",
    # every command of the command line, as a function returning data (convsim/api.py)
    "run": "api", "report": "api", "compare": "api", "evaluate": "api", "trace": "api",
    "fork": "api", "draw": "api", "list_graphs": "api", "list_configs": "api",
    "np_rng_for": "contract.seeding", "rng_for": "contract.seeding", "session_seed": "contract.seeding", "stable_seed": "contract.seeding",
    "read_jsonl": "running.store",
    "summarise_run": "results.summary", "flatten_metrics": "results.summary",
    "explain_turn_metrics": "traces.tracing", "fork_run": "traces.time_travel",
    "read_trace": "traces.tracing", "state_at": "traces.tracing",
}
__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # for type checkers and editors
    from convsim.results.aggregate import bootstrap_ci, mean_ci, mean_diff_ci  # noqa: F401
    from convsim.config import ExperimentConfig, Variant, load_config  # noqa: F401
    from convsim.contract.context import SessionContext, emit_metrics  # noqa: F401
    from convsim.contract.default_context import compile_with_default_context  # noqa: F401
    from convsim.providers.embedders import Embedder, embeddings_available, make_embedder  # noqa: F401
    from convsim.errors import ConvsimError  # noqa: F401
    from .api import (compare, draw, evaluate, fork, list_configs, list_graphs, report,  # noqa: F401
                      run, trace)
    from convsim.contract.graphfile import load_graph_module  # noqa: F401
    from .models import (ChatModel, ModelSpec, ModelUnavailable, StructuredResult,  # noqa: F401
                         extract_json, parse_model_spec)
    from convsim.contract.seeding import np_rng_for, rng_for, session_seed, stable_seed  # noqa: F401
    from convsim.traces.time_travel import fork_run  # noqa: F401
    from convsim.running.store import read_jsonl  # noqa: F401
    from convsim.results.summary import flatten_metrics, summarise_run  # noqa: F401
    from convsim.traces.tracing import explain_turn_metrics, read_trace, state_at  # noqa: F401
