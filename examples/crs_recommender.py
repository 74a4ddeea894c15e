"""A tool-calling film recommender as a LangGraph ``StateGraph`` (model -> tools -> model -> report).

Evaluate it in convsim's CRS scenario (simulated seekers whose tastes shift)::

    convsim run crs_shift --agent crs=examples/crs_recommender.py:graph --sessions 20

Each turn the graph gets the conversation as messages and keeps its own state across the
session's turns (convsim runs it as a subgraph: its steps are in ``convsim trace``). The model
calls ``search_films`` / ``lookup_film`` (``convsim.agents.crs.tools``, over the shipped film
catalog); the ``report`` node puts the catalog ids of the films the reply names in the state key
``recommended_ids``, which convsim's recommendation metrics read (without it they read the titles
from the reply text).

The chat model: ``CONVSIM_EXAMPLE_MODEL`` (anything ``init_chat_model`` knows), else the scripted
tool-calling model of ``examples/scripted_models.py`` (deterministic, offline).
"""
from __future__ import annotations

import json
import os

from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from convsim.agents.crs.tools import FilmTools
from convsim.catalog.movies.catalog import load_movie_catalog

PROMPT = ("You recommend films. Ask what the seeker likes, search the catalog with search_films, and "
          "recommend one film at a time by its exact title. Never recommend a film twice.")


class State(MessagesState):
    recommended_ids: list[str]


def chat_model():
    spec = os.environ.get("CONVSIM_EXAMPLE_MODEL")
    if spec:
        from langchain.chat_models import init_chat_model
        return init_chat_model(spec)
    from scripted_models import ScriptedFilmModel
    return ScriptedFilmModel()


TOOLS = FilmTools(load_movie_catalog()).tools()
MODEL = chat_model().bind_tools(TOOLS)


def call_model(state: State) -> dict:
    return {"messages": [MODEL.invoke([SystemMessage(PROMPT)] + state["messages"])]}


def report(state: State) -> dict:
    """The ids of this turn's searched films that the reply names, in the order it names them."""
    msgs = state["messages"]
    reply = str(msgs[-1].content) if msgs and isinstance(msgs[-1], AIMessage) else ""
    found: list[dict] = []
    for m in reversed(msgs[:-1]):
        if not isinstance(m, ToolMessage):
            break  # this turn's tool results only
        try:
            out = json.loads(m.content)
        except (TypeError, ValueError):
            continue
        found += out.get("results") or ([out["film"]] if out.get("film") else [])
    named = sorted((reply.find(f["title"]), f["id"]) for f in found if f["title"] in reply)
    return {"recommended_ids": list(dict.fromkeys(i for _, i in named))}


builder = StateGraph(State)
builder.add_node("model", call_model)
builder.add_node("tools", ToolNode(TOOLS))
builder.add_node("report", report)
builder.add_edge(START, "model")
builder.add_conditional_edges("model", tools_condition, {"tools": "tools", END: "report"})
builder.add_edge("tools", "model")
builder.add_edge("report", END)
graph = builder.compile()
