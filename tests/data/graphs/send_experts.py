"""Test graph: the user's question goes to three experts at once (LangGraph ``Send`` tasks of one
node, run in parallel threads), each asking the agent model its own question; a node joins them."""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from pydantic import BaseModel, Field

from convsim import SessionContext, compile_with_default_context

EXPERTS = ("geography", "chemistry", "literature")


class State(TypedDict, total=False):
    session_id: str
    transcript: Annotated[list[dict], operator.add]
    turn_metrics: Annotated[list[dict], operator.add]
    dialogue_metrics: dict
    answers: Annotated[list[dict], operator.add]


class Params(BaseModel):
    n_sessions: int = Field(2, ge=1)


@dataclass
class Context(SessionContext):
    params: Params = field(default_factory=Params)


MODEL_ROLES = ("agent",)


def fan_out(state: State) -> list[Send]:
    return [Send("expert", {"expert": e}) for e in EXPERTS]


def expert(task: dict, runtime) -> dict:
    model, name = runtime.context.model("agent"), task["expert"]
    text = (f"({name}: no model)" if model.is_none else
            model.invoke([("user", f"Ask the {name} expert")], purpose=f"ask_{name}"))
    return {"answers": [{"expert": name, "text": text}]}


def join(state: State) -> dict:
    text = " ".join(a["text"] for a in sorted(state["answers"], key=lambda a: a["expert"]))
    return {"transcript": [{"turn": 1, "speaker": "agent", "text": text, "meta": {}}],
            "dialogue_metrics": {"answers": len(state["answers"])}}


def build(params: Params) -> StateGraph:
    g = StateGraph(State, context_schema=Context)
    g.add_node("expert", expert)
    g.add_node("join", join)
    g.add_conditional_edges(START, fan_out, ["expert"])
    g.add_edge("expert", "join")
    g.add_edge("join", END)
    return g


def sessions(params: Params, ctx: Context):
    for i in range(params.n_sessions):
        yield {"session_id": f"s{i:03d}"}


def dataset_metrics(records) -> dict:
    return {}


graph = compile_with_default_context(build(Params()))
