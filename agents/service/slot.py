"""The customer-service agent slot: the researcher's own agent in place of the built-in pipeline.

``SLOT`` declares the role (``service``): each turn the agent is handed the conversation so far as
LangChain messages, the context ``{"turn", "domains"}`` and the tools of
``convsim.agents.service.tools`` (find, look up, book in the session's own copy of the booking
system); it returns the reply and may report ``belief_state`` (``{domain: {slot: value}}``),
``domain``, ``intent`` (``find_<domain>`` / ``book_<domain>``), ``acts`` (MultiWOZ act types) and
``bookings``. The simulated customer and the evaluator read a structured action each turn; for an
agent in the slot that action is *derived* here from what it did with the tools this turn (a
booking made or refused, a search, a look-up) and from what its reply text names
(``derive_action``), never from the simulated user's goal. The graph's ``service_agent`` node is
``agent_node``; ``route(ctx)`` sends a user turn there instead of ``triage`` when a non-builtin
spec fills the slot (``Params.agents["service"]`` or the context's ``agents``).
"""
from __future__ import annotations

import re

from langchain_core.messages import AIMessage, HumanMessage

from convsim.agents.language import node_vocabulary
from convsim.agents.service.tools import TOOL_NAMES, ServiceWorld, bound_world
from convsim.catalog.service.db import DOMAINS, REQUESTABLE_SLOTS, ServiceDB
from convsim.catalog.service.normalize import normalize_value
from convsim.slots import Slot
from convsim.slots.nodes import cached_agent, tool_errors, user_spec

ROLE = "service"
NODE = "service_agent"
SLOT = Slot(role=ROLE,
            handed="the conversation so far (HumanMessage / AIMessage), context {turn, domains} and the tools "
                   "find_entities, lookup_entity, book (the session's own booking system)",
            returns="reply",
            structured=("belief_state", "domain", "intent", "acts", "bookings"),
            builtins=("pipeline",), language="en", vocabulary=node_vocabulary, tools=TOOL_NAMES)
# words of a question in the reply -> the slot it asks for
ASKS = (("area", r"\barea\b|part of town|where in"), ("pricerange", r"\bprice|budget|expensive|cheap"),
        ("food", r"\bfood\b|cuisine"), ("type", r"\btype\b|kind of"), ("stars", r"\bstars?\b"),
        ("bookday", r"\bday\b|which day|what day|when"), ("booktime", r"\btime\b|what time"),
        ("bookpeople", r"how many|people|guests"), ("bookstay", r"nights?\b|how long"),
        ("departure", r"depart|leaving from|from where|travel(l)?ing from"),
        ("destination", r"destination|going to|where to|travel(l)?ing to"))



def spec_text(ctx) -> str | None:
    """The spec filling the slot when it is not a built-in (None: the built-in runs)."""
    return user_spec(ctx, SLOT)



def route(ctx, default: str) -> str:
    return NODE if spec_text(ctx) else default


def agent_for(text: str):
    return cached_agent(text, SLOT)  # made once per process and spec (convsim.slots.nodes)


def messages_of(transcript: list[dict]) -> list:
    return [HumanMessage(e["text"]) if e["speaker"] == "user" else AIMessage(e["text"])
            for e in transcript if e.get("text")]


def _named(record: dict, domain: str, lower: str) -> bool:
    key = str(record.get("trainid") if domain == "train" else record.get("name", "")).lower()
    return bool(key) and (key in lower or key.removeprefix("the ") in lower)


def _facts(domain: str, record: dict, lower: str) -> dict[str, str]:
    out = {}
    for slot in REQUESTABLE_SLOTS.get(domain, ()):
        value = record.get(slot)
        if value in (None, "", "?"):
            continue
        v = str(value).lower()
        if (len(v) > 2 and v in lower) or normalize_value(slot, v) in re.findall(r"[\w:£.]+", lower):
            out[slot] = str(value)
    return out


def _asked(text: str) -> list[str]:
    if "?" not in text:
        return []
    question = " ".join(s for s in re.split(r"(?<=[.!?])\s+", text.lower()) if s.endswith("?"))
    return [slot for slot, pattern in ASKS if re.search(pattern, question)]


def _act(domain: str | None, name: str) -> str:
    return f"{(domain or 'general').capitalize()}-{name}"


def derive_action(calls: list[dict], text: str, structured: dict, db: ServiceDB) -> dict:
    """The turn's action (the built-in action's shape) from the tool calls and the reply text."""
    lower = text.lower()
    action = {"kind": "inform", "domain": structured.get("domain") if structured.get("domain") in DOMAINS
              else None, "entity": None, "count": None, "requested": _asked(text), "informed": {},
              "booking": {}, "reference": None, "acts": []}
    books = [c for c in calls if c["name"] == "book"]
    finds = [c for c in calls if c["name"] in ("find_entities", "lookup_entity") and c["result"].get("ok")]
    done = next((c for c in reversed(books) if c["result"].get("ok")), None)
    refused = books[-1] if books and done is None else None
    if done is not None:
        r, d = done["result"], done["args"]["domain"]
        record = db.find_entity(d, r["entity"]) or {}
        informed = {"ref": r["reference"], **_facts(d, record, lower)}
        if d == "train" and record.get("price"):
            informed["price"] = record["price"]
        action.update(kind="book", domain=d, entity=r["entity"], booking=dict(r["booking"]),
                      reference=r["reference"], informed=informed, acts=[_act(d, "Book"), _act(d, "Inform")])
    elif refused is not None and refused["result"].get("reason") == "unavailable":
        d = refused["args"]["domain"]
        booking = {k: v for k, v in refused["args"].items() if k.startswith("book")}
        action.update(kind="nobook", domain=d, entity=refused["result"]["entity"], booking=booking,
                      acts=[_act(d, "Nobook")])
    elif refused is not None and refused["result"].get("reason") == "missing":
        d = refused["args"]["domain"]
        action.update(kind="request", domain=d, requested=list(refused["result"]["missing"]),
                      acts=[_act(d, "Request")])
    elif finds:
        c = finds[-1]
        d = c["args"]["domain"]
        found = [c["result"]["entity"]] if c["name"] == "lookup_entity" else c["result"]["results"]
        named = next((r for r in found if _named(r, d, lower)), None)
        if c["name"] == "find_entities" and c["result"]["count"] == 0:
            action.update(kind="nooffer", domain=d, count=0, acts=[_act(d, "Nooffer")])
        else:
            kind = "inform" if c["name"] == "lookup_entity" else "search"
            record = db.find_entity(d, named.get("trainid") or named["name"]) if named else None
            action.update(kind=kind, domain=d, count=len(found) if kind == "search" else None,
                          entity=db.entity_id(d, record) if record else None,
                          informed=_facts(d, record, lower) if record else {},
                          acts=[_act(d, "Inform")] + ([_act(d, "Request")] if action["requested"] else []))
    elif action["requested"]:
        action.update(kind="request", acts=[_act(action["domain"], "Request")])
    if isinstance(structured.get("acts"), list) and all(isinstance(a, str) for a in structured["acts"]):
        action["acts"] = list(structured["acts"])  # the agent's own acts, when it reports them
    return action


def apply_action(state: dict, act: dict) -> dict:
    """``offered``, ``asked`` and ``outcomes`` after the action (as the built-in supervisor node does)."""
    offered, asked = dict(state.get("offered", {})), {k: list(v) for k, v in state.get("asked", {}).items()}
    outcomes = {k: {**v, "informed": dict(v["informed"]), "bookings": list(v["bookings"])}
                for k, v in state.get("outcomes", {}).items()}
    d = act.get("domain")
    if act.get("entity") and d:
        offered[d] = act["entity"]
        o = outcomes.setdefault(d, {"entity": None, "informed": {}, "bookings": []})
        if o["entity"] != act["entity"]:
            o["informed"] = {}
        o["entity"] = act["entity"]
        o["informed"].update(act.get("informed", {}))
        if act["kind"] == "book":
            o["bookings"].append({"entity": act["entity"], "booking": act["booking"], "reference": act["reference"]})
    if act.get("requested") and d:
        asked.setdefault(d, []).extend(s for s in act["requested"] if s not in asked.get(d, []))
    return {"offered": offered, "asked": asked, "outcomes": outcomes}


def _belief(reported: object) -> dict:
    if not isinstance(reported, dict):
        return {}
    return {str(d): {str(s): str(v) for s, v in slots.items() if v not in (None, "")}
            for d, slots in reported.items() if isinstance(slots, dict)}


def agent_update(state: dict, *, text_spec: str, db: ServiceDB, schema) -> dict:
    """One turn of the agent in the slot: call it with the session's tools, derive the action, and
    return the graph-state update (the built-in pipeline's keys, so the evaluation node runs as is)."""
    turn = state["turn"]
    world = ServiceWorld(db, schema, bookings=state.get("agent_bookings") or [], turn=turn)
    agent = agent_for(text_spec)
    with bound_world(world):  # session_tools() (a graph agent's, built once) act on this session's world
        answer = agent.invoke(messages_of(state.get("transcript", [])), session_id=state["session_id"],
                              context={"turn": turn, "domains": list(DOMAINS)}, tools=world.tools())
    structured = dict(answer.structured or {})
    act = derive_action(world.calls, answer.text, structured, db)
    triage = {"domain": structured.get("domain") if isinstance(structured.get("domain"), str) else None,
              "intent": structured.get("intent") if isinstance(structured.get("intent"), str) else None,
              "act": None, "slots": {}, "requested": [], "refer": None}
    meta = {"action": act["kind"], "acts": act["acts"], "agent_spec": text_spec, "tool_calls": world.calls,
            "structured": structured, "reported": sorted(structured)}
    if answer.tool_calls and not world.calls:  # the agent's own tools (not the scenario's): kept as told
        meta["agent_tool_calls"] = answer.tool_calls
    if rejected := tool_errors(answer):  # calls the tools never ran (an unknown tool, bad arguments)
        meta["tool_errors"] = rejected
    entry = {"turn": turn, "speaker": "system", "text": answer.text, "meta": meta}
    return {"response": answer.text, "transcript": [entry], "triage": triage,
            "belief": _belief(structured.get("belief_state")), "transfers": [],
            "policy": {"booking_requested": False, "allowed": True, "missing": [], "required": []},
            "proposed": act, "supervision": {"action": act, "violations": [], "approved": True, "disabled": True},
            "action": act, "agent_bookings": world.bookings, "agent_reported": sorted(structured),
            **apply_action(state, act)}
