"""Test graph: hello_chat whose agent node is ``async def`` and calls the agent slot with ``acall_slot``
(the graph runs through LangGraph's async API; a graph agent in the slot runs with its ``ainvoke``)."""
from __future__ import annotations

from dataclasses import dataclass

from langgraph.graph import StateGraph

import convsim.graphs.hello_chat as base
from convsim import SessionContext
from convsim.slots.nodes import acall_slot, is_builtin

State = base.State
Params = base.Params
sessions = base.sessions
dataset_metrics = base.dataset_metrics
SLOTS = base.SLOTS
MODEL_ROLES = base.MODEL_ROLES


@dataclass
class Context(base.Context):
    pass


async def async_agent(state, runtime):
    spec = runtime.context.params.agents.get("agent")
    if not spec or is_builtin(spec, SLOTS["agent"]):
        return base.agent(state, runtime)
    turn, meta = await acall_slot(spec, SLOTS["agent"], state["transcript"], context={"turn": state["turn"]},
                                  session_id=runtime.context.session_id)
    return {"transcript": [{"turn": state["turn"], "speaker": "agent", "text": turn.text, "meta": meta}]}


def build(params: Params) -> StateGraph:
    return base.build(params, agent_node=async_agent)


graph = build(Params()).compile()
