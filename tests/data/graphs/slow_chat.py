"""Test graph: hello_chat's nodes with a pause in the agent, so a run can be killed midway."""
from __future__ import annotations

import time
from dataclasses import dataclass

from langgraph.graph import END, START, StateGraph

import graphs.hello_chat as base
from convsim import SessionContext

State = base.State
sessions = base.sessions
dataset_metrics = base.dataset_metrics


class Params(base.Params):
    pause_s: float = 0.0


@dataclass
class Context(SessionContext):
    pass


def slow_agent(state, runtime):
    time.sleep(runtime.context.params.pause_s)
    return base.agent(state, runtime)


def build(params: Params) -> StateGraph:
    g = StateGraph(State, context_schema=Context)
    g.add_node("user", base.user)
    g.add_node("agent", slow_agent)
    g.add_node("evaluate_turn", base.evaluate_turn)
    g.add_node("evaluate_dialogue", base.evaluate_dialogue)
    g.add_edge(START, "user")
    g.add_edge("user", "agent")
    g.add_edge("agent", "evaluate_turn")
    g.add_conditional_edges("evaluate_turn", base.route, ["user", "evaluate_dialogue"])
    g.add_edge("evaluate_dialogue", END)
    return g


graph = build(Params()).compile()
