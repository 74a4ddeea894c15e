"""Scripted tool-calling chat models: deterministic stand-ins for an LLM, so the examples run offline.

Each is a LangChain ``BaseChatModel`` whose answer is a rule of the conversation so far (no
randomness, no network): on a user turn it emits a tool call, on a tool result it writes the
reply. They follow the tool-calling protocol exactly as a real model does (``bind_tools``,
``AIMessage.tool_calls``, ``ToolMessage`` results), so an agent built on them
(``langchain.agents.create_agent``, a ``StateGraph`` with a ``ToolNode``) runs unchanged with any
real chat model in their place. They are what the examples use when ``CONVSIM_EXAMPLE_MODEL`` is
unset, and what the tests drive the examples with.

* ``ScriptedServiceModel``: a MultiWOZ clerk. It reads the user's constraints with the built-in
  rule triage (``convsim.agents.service.triage.rule_triage``), searches (``find_entities``),
  looks up a requested fact (``lookup_entity``) and books (``book``) once the user gives booking
  details for the venue it offered.
* ``ScriptedFilmModel``: a recommender. It reads the genres, actors, years ... the seeker's latest
  turn names (``ConceptExtractor`` over the catalog), searches one of them (``search_films``; the
  most specific field first) and recommends the first film it has not recommended yet.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Sequence

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult


class ScriptedToolModel(BaseChatModel):
    """A chat model whose answer is ``policy(messages)`` (an ``AIMessage``, with or without tool calls)."""

    policy: Callable[[list[BaseMessage]], AIMessage]
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-model"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any):
        return self  # the policy names its tools itself; a real model is told them here

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        self.calls += 1
        message = self.policy(list(messages))
        return ChatResult(generations=[ChatGeneration(message=message)])


def _call(name: str, args: dict, n: int) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{name}_{n}", "type": "tool_call"}])


def _last_tool(messages: list[BaseMessage]) -> tuple[str, dict] | None:
    if messages and isinstance(messages[-1], ToolMessage):
        try:
            return messages[-1].name or "", json.loads(messages[-1].content)
        except (TypeError, ValueError):
            return messages[-1].name or "", {}
    return None


# ------------------------------------------------------------------------------ customer service

_WORDS = {"bookpeople": "number of people", "bookday": "day", "booktime": "time", "bookstay": "number of nights"}


def service_policy(messages: list[BaseMessage]) -> AIMessage:
    from convsim.agents.service.triage import rule_triage
    from convsim.catalog.service.db import load_service_db
    db = load_service_db()
    humans = [m for m in messages if isinstance(m, HumanMessage)]
    n = sum(isinstance(m, ToolMessage) for m in messages)
    # what the user said so far, per domain (later turns override), and the domain of the last turn
    frames: dict[str, dict] = {}
    domain, last = None, {}
    for m in humans:
        last = rule_triage(str(m.content), prev_domain=domain, db=db)
        domain = last.get("domain") if last.get("domain") in ("restaurant", "hotel", "attraction", "train") else domain
        if domain:
            frames.setdefault(domain, {}).update(last.get("slots") or {})
    offered = _offered(messages, domain)
    tool = _last_tool(messages)
    if tool is not None:
        return AIMessage(content=_service_reply(tool[0], tool[1], last, domain))
    if last.get("act") == "bye" or (last.get("act") == "thank" and not last.get("slots")):
        return AIMessage(content="You're welcome. Goodbye!")
    if domain is None:
        return AIMessage(content="I can help with restaurants, hotels, attractions and trains. What do you need?")
    frame = frames.get(domain, {})
    book = {k: v for k, v in frame.items() if k.startswith("book")}
    if offered and (book or last.get("intent") == f"book_{domain}") and domain != "attraction":
        args = {"domain": domain, "name": offered}
        args.update({k.removeprefix("book"): v for k, v in book.items()})
        return _call("book", args, n)
    if offered and last.get("requested"):
        return _call("lookup_entity", {"domain": domain, "name": offered}, n)
    search = {k: v for k, v in frame.items() if not k.startswith("book") and v != "dontcare"}
    return _call("find_entities", {"domain": domain, "constraints": search}, n)


def _offered(messages: list[BaseMessage], domain: str | None) -> str | None:
    """The venue (or train) the clerk last offered in this domain: the first result of its last search."""
    domains = {c["id"]: c["args"].get("domain") for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    for m in reversed(messages):
        if isinstance(m, ToolMessage) and m.name in ("find_entities", "lookup_entity") \
                and domains.get(m.tool_call_id) in (domain, None):
            try:
                out = json.loads(m.content)
            except (TypeError, ValueError):
                continue
            rows = out.get("results") or ([out["entity"]] if out.get("entity") else [])
            if rows and out.get("ok"):
                return rows[0].get("trainid") or rows[0].get("name")
    return None


def _service_reply(name: str, out: dict, last: dict, domain: str | None) -> str:
    if name == "book":
        if out.get("ok"):
            return f"Booked at {out['entity']}. Your reference number is {out['reference']}."
        if out.get("reason") == "missing":
            return "To book it I need the " + " and ".join(_WORDS.get(s, s) for s in out["missing"]) + ". Could you tell me?"
        if out.get("reason") == "unavailable":
            return f"Sorry, {out.get('entity')} is not available then. Would another day or time work?"
        return "Sorry, I could not book that."
    if name == "lookup_entity":
        if not out.get("ok"):
            return "Sorry, I could not find that place."
        e = out["entity"]
        facts = [f"the {s} is {e[s]}" for s in (last.get("requested") or []) if e.get(s)]
        return f"For {e.get('name') or e.get('trainid')}, " + (", ".join(facts) or "what else would you like to know?") + "."
    if not out.get("ok"):
        return "Sorry, I did not understand that search. Could you rephrase?"
    if out.get("count", 0) == 0:
        return "Sorry, nothing matches that. Would you like to change something?"
    r = out["results"][0]
    if "trainid" in r:
        return (f"Train {r['trainid']} leaves {r['departure']} at {r['leaveat']} and arrives in {r['destination']} "
                f"by {r['arriveby']}. Shall I book it?")
    where = f" in the {r['area']}" if r.get("area") else ""
    return f"I found {out['count']}. How about {r['name']}{where}? It is at {r.get('address', 'the centre')}."


class ScriptedServiceModel(ScriptedToolModel):
    policy: Callable[[list[BaseMessage]], AIMessage] = service_policy


# ------------------------------------------------------------------------------ films

def film_policy(messages: list[BaseMessage]) -> AIMessage:
    from convsim.catalog.movies.catalog import load_movie_catalog
    n = sum(isinstance(m, ToolMessage) for m in messages)
    said = " ".join(str(m.content) for m in messages if isinstance(m, AIMessage))
    tool = _last_tool(messages)
    if tool is not None:
        films = [f for f in tool[1].get("results") or [] if f["title"] not in said]
        if not films:
            return AIMessage(content="I could not find a film like that. Could you tell me another genre or actor you like?")
        f = films[0]
        extra = f" It stars {f['actors'][0]}." if f.get("actors") else ""
        return AIMessage(content=f"How about {f['title']} ({f['year']})?{extra}")
    catalog = load_movie_catalog()
    extractor = _extractor(catalog)
    wanted: dict[str, str] = {}
    for m in reversed(messages):  # the seeker's latest turn that names anything the catalog knows
        if isinstance(m, HumanMessage):
            wanted = {f: v for f, v in sorted(extractor.extract(str(m.content)))}
            if wanted:
                break
    if not wanted:
        return AIMessage(content="What kind of films do you like? A genre, an actor or a director?")
    # one field keeps the search wide; the most specific first (a turn that drops a genre still names it)
    field = next(f for f in ("year", "actor", "director", "writer", "language", "genre") if f in wanted)
    return _call("search_films", {"constraints": {field: wanted[field]}, "limit": 20}, n)


_EXTRACTORS: dict[int, Any] = {}


def _extractor(catalog):
    from convsim.catalog.movies.concepts import ConceptExtractor
    if id(catalog) not in _EXTRACTORS:
        _EXTRACTORS[id(catalog)] = ConceptExtractor(catalog)
    return _EXTRACTORS[id(catalog)]


class ScriptedFilmModel(ScriptedToolModel):
    policy: Callable[[list[BaseMessage]], AIMessage] = film_policy
