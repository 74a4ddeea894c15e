"""Test graph: hello_chat whose agent catches every exception and answers "I do not know." (a graph
that swallows a refused or failed model call and goes on, as a rule-based fallback would)."""
from __future__ import annotations

from langgraph.graph import StateGraph

import convsim.graphs.hello_chat as base

State, Params, Context = base.State, base.Params, base.Context
sessions = base.sessions
dataset_metrics = base.dataset_metrics


def fallback_agent(state, runtime):
    try:
        return base.agent(state, runtime)
    except Exception:  # noqa: BLE001 — the point of this graph
        return {"transcript": [{"turn": state["turn"], "speaker": "agent", "text": "I do not know.", "meta": {}}]}


def build(params: Params) -> StateGraph:
    return base.build(params, agent_node=fallback_agent)


graph = build(Params()).compile()
