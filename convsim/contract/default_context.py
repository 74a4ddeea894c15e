"""A compiled graph that runs without a context: ``graph.invoke(state)`` and ``langgraph dev``.

LangGraph hands ``runtime.context = None`` to every node when the caller passes no
``context=`` (and builds ``Context(**d)`` when it passes a dict ``d``, as the LangGraph server
does with an assistant's empty context). convsim's runner always passes a full context; a
user invoking a graph file's ``graph`` by hand, or ``langgraph dev``, does not. A graph file
therefore exports ``graph = compile_with_default_context(build(Params()))``: when no context is
given, the graph's ``Context()`` is used, so a ``Context`` whose fields all have usable defaults
(``params`` defaulting to ``Params()``) makes the graph runnable with no context at all. A context
given as plain JSON (``{"params": {...}, "models": {"agent": "..."}}``, what the LangGraph server
sends) is validated into the graph's ``Context`` (convsim.contract.plain_context).
"""
from __future__ import annotations

from typing import Any

from langchain_core.runnables.config import ensure_config
from langgraph.graph.state import CompiledStateGraph, StateGraph
from langgraph.runtime import Runtime


def _inside_a_run(config: Any) -> bool:
    """Whether this call is nested in a running graph (a subgraph), whose context must pass through."""
    return any(isinstance(v, Runtime) for v in ensure_config(config).get("configurable", {}).values())


class GraphWithDefaultContext(CompiledStateGraph):
    """A compiled state graph whose missing context is ``context_schema()`` (top-level calls only)."""

    def _context(self, context: Any, config: Any) -> Any:
        if self.context_schema is None or _inside_a_run(config):
            return context
        if context is None:
            return self.context_schema()
        from convsim.contract.plain_context import context_from_json, needs_coercion
        if needs_coercion(context):  # plain JSON (LangGraph Platform): params and models validated
            return context_from_json(self.context_schema, context)
        return context

    def stream(self, input, config=None, *, context=None, **kwargs):  # noqa: A002 (LangGraph's name)
        return super().stream(input, config, context=self._context(context, config), **kwargs)

    def astream(self, input, config=None, *, context=None, **kwargs):  # noqa: A002
        return super().astream(input, config, context=self._context(context, config), **kwargs)


def compile_with_default_context(builder: StateGraph, **compile_kwargs: Any) -> CompiledStateGraph:
    """``builder.compile(**compile_kwargs)``, defaulting a missing context to ``Context()``."""
    compiled = builder.compile(**compile_kwargs)
    attrs = {k: v for k, v in compiled.__dict__.items() if k != "__orig_class__"}
    return GraphWithDefaultContext(**attrs)  # as Pregel.copy() rebuilds a compiled graph
