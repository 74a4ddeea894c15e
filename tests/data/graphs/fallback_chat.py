"""Test graph: hello_chat whose agent catches every exception and answers "I do not know." (a graph
that swallows a refused or failed model call and goes on, as a rule-based fallback would)."""
from __future__ import annotations

from langgraph.graph import END, START, StateGraph

import graphs.hello_chat as base

State, Params, Context = base.State, base.Params, base.Context
sessions = base.sessions
dataset_metrics = base.dataset_metrics


def fallback_agent(state, runtime):
    try:
        return base.agent(state, runtime)
    except Exception:  # noqa: BLE001 — the point of this graph
        return {"transcript": [{"turn": state["turn"], "speaker": "agent", "text": "I do not know.", "meta": {}}]}


def build(params: Params) -> StateGraph:
    g = StateGraph(State, context_schema=Context)
    g.add_node("user", base.user)
    g.add_node("agent", fallback_agent)
    g.add_node("evaluate_turn", base.evaluate_turn)
    g.add_node("evaluate_dialogue", base.evaluate_dialogue)
    g.add_edge(START, "user")
    g.add_edge("user", "agent")
    g.add_edge("agent", "evaluate_turn")
    g.add_conditional_edges("evaluate_turn", base.route, ["user", "evaluate_dialogue"])
    g.add_edge("evaluate_dialogue", END)
    return g


graph = build(Params()).compile()
