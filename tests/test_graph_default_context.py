"""Every shipped graph runs with no context, as `graph.invoke(state)` and `langgraph dev` call it.

The graph files export ``graph = compile_with_default_context(build(Params()))`` and give their
``Context`` usable defaults (``params`` defaults to ``Params()``), so a missing context becomes
``Context()``, and a context dict (what the LangGraph server passes) becomes ``Context(**d)``.
"""
from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from convsim import compile_with_default_context, load_graph_module
from convsim.contract.graphfile import list_graphs  # names only: no import at collection

GRAPHS = sorted(list_graphs())


def _first_session(module):
    return next(iter(module.sessions(module.Params(), module.Context())))


@pytest.mark.parametrize("name", GRAPHS)
def test_graph_runs_without_a_context(name):
    module = load_graph_module(name)
    ctx = module.Context()  # what LangGraph builds from an empty context dict
    assert ctx.params == module.Params()
    final = module.graph.invoke(_first_session(module))  # no context= at all
    assert final["dialogue_metrics"], name
    server = module.graph.invoke(_first_session(module), context={})  # as the LangGraph server passes it
    assert set(server["dialogue_metrics"]) == set(final["dialogue_metrics"])


def test_a_plain_compile_fails_without_a_context():
    """What the default guards against: the same graph compiled plainly gets runtime.context None."""
    module = load_graph_module("hello_chat")
    with pytest.raises(AttributeError, match="NoneType"):
        module.build(module.Params()).compile().invoke(_first_session(module))


def test_a_given_context_wins_and_passes_into_a_subgraph():
    module = load_graph_module("hello_chat")
    short = module.Context(params=module.Params(n_turns=1))
    assert module.graph.invoke(_first_session(module), context=short)["dialogue_metrics"]["turns"] == 1

    class Outer(TypedDict, total=False):
        session_id: str
        turn: int
        questions: list[str]
        transcript: Annotated[list[dict], operator.add]
        turn_metrics: Annotated[list[dict], operator.add]
        dialogue_metrics: dict

    outer = StateGraph(Outer, context_schema=module.Context)
    outer.add_node("chat", module.graph)  # the default-context graph as a subgraph
    outer.add_edge(START, "chat")
    outer.add_edge("chat", END)
    final = compile_with_default_context(outer).invoke(_first_session(module), context=short)
    assert final["dialogue_metrics"]["turns"] == 1  # the parent's context, not a fresh default
