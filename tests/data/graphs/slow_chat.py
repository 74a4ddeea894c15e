"""Test graph: hello_chat's nodes with a pause in the agent, so a run can be killed midway."""
from __future__ import annotations

import time
from dataclasses import dataclass

from langgraph.graph import StateGraph

import convsim.graphs.hello_chat as base
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
    return base.build(params, agent_node=slow_agent)


graph = build(Params()).compile()
