"""convsim: simulate conversations as LangGraph state graphs and evaluate them while they run.

The public API is what this module exports; everything else is private.
"""
from .aggregate import bootstrap_ci
from .config import ExperimentConfig, Variant, load_config
from .context import SessionContext, emit_metrics
from .embedders import Embedder, embeddings_available, make_embedder
from .errors import ConvsimError
from .graphfile import list_graphs, load_graph_module
from .models import ChatModel, ModelSpec, ModelUnavailable, StructuredResult, extract_json, parse_model_spec
from .runner import run
from .seeding import np_rng_for, rng_for, session_seed, stable_seed
from .store import read_jsonl
from .tracing import read_trace, state_at

__all__ = [
    "ChatModel", "ConvsimError", "Embedder", "ExperimentConfig", "ModelSpec", "ModelUnavailable",
    "SessionContext", "StructuredResult", "Variant", "bootstrap_ci", "emit_metrics",
    "embeddings_available", "extract_json", "list_graphs", "load_config", "load_graph_module",
    "make_embedder", "np_rng_for", "parse_model_spec", "read_jsonl", "read_trace", "rng_for", "run",
    "session_seed", "stable_seed", "state_at",
]
