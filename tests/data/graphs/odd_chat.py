"""Test graph: hello_chat with one oddity chosen by ``odd`` (for the executor tests).

* ``raise``: the agent raises AgentError in s001 and a RuntimeError in s002 (final and re-run failures);
* ``bad_event``: s001's agent emits an event holding a lock (it pickles to no worker's driver);
* ``bad_init``: sessions() puts a lambda in s001's initial state (it pickles to no worker);
* ``async``: the agent is an ``async def`` node.
"""
from __future__ import annotations

import threading

from langgraph.graph import StateGraph

import convsim.graphs.hello_chat as base
from convsim import emit_metrics
from convsim.errors import AgentError

State, Context = base.State, base.Context
dataset_metrics = base.dataset_metrics


class Params(base.Params):
    odd: str = "raise"


def sessions(params: Params, ctx: Context):
    for init in base.sessions(params, ctx):
        if params.odd == "bad_init" and init["session_id"] == "s001":
            init = {**init, "questions": [*init["questions"], lambda: None]}  # a State key: it must pickle
        yield init


def odd_agent(state, runtime):
    sid, odd = state["session_id"], runtime.context.params.odd
    if odd == "raise" and sid == "s001":
        raise AgentError("the agent gave up")
    if odd == "raise" and sid == "s002":
        raise RuntimeError("a bug in the agent")
    if odd == "bad_event" and sid == "s001":
        emit_metrics(runtime, turn=state["turn"], metrics={"lock_held": 1.0, "lock": threading.Lock()})
    return base.agent(state, runtime)


async def async_agent(state, runtime):
    return base.agent(state, runtime)


def build(params: Params) -> StateGraph:
    return base.build(params, agent_node=async_agent if params.odd == "async" else odd_agent)


graph = build(Params()).compile()
