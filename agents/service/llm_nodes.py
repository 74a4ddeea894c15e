"""LLM paths for the policy and action agents (model roles ``policy`` and ``action``).

With model ``none`` the rules decide (``convsim.agents.service.policy`` / ``convsim.agents.service.action``).
With a model, the agent asks for a structured answer (``ChatModel.structured``), validates it
against the schema and the rules' vocabulary, and on an answer that still fails validation the
rules decide and the failure is kept with the raw text (``llm_failure``), never dropped.

* policy: ``PolicyVerdict`` — whether the user asks to book, which booking-required slots are
  missing, whether booking is allowed, and a one-sentence explanation for the user. Validation:
  ``missing`` must be a subset of the schema's required slots for the domain, and ``allowed``
  must equal "nothing missing".
* action: ``ActionChoice`` — the action kind, the entity (from the database candidates given in
  the prompt, or none), slots to request and facts to inform. Validation is of form only: the
  entity is *not* checked against the database here, because an invented entity is exactly what
  the supervisor and the grounding metrics must catch.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from convsim.agents.service.action import decide_action
from convsim.agents.service.policy import check_policy, required_slots
from convsim.catalog.service.db import REQUESTABLE_SLOTS, SEARCH_SLOTS, booking_available, booking_reference

PROMPTS = Path(__file__).parents[2] / "prompts"
KINDS = ("search", "nooffer", "book", "request", "inform")


class PolicyVerdict(BaseModel):
    booking_requested: bool
    missing: list[str] = Field(default_factory=list, description="booking-required slots not yet given")
    allowed: bool
    explanation: str = Field("", description="one sentence for the user when booking is not allowed")


class ActionChoice(BaseModel):
    kind: Literal["search", "nooffer", "book", "request", "inform"]
    entity: str | None = Field(None, description="the chosen venue name or train id, or null")
    requested: list[str] = Field(default_factory=list, description="slots to ask the user for")
    inform: list[str] = Field(default_factory=list, description="facts of the entity to tell the user")


def llm_policy(model, schema, *, domain: str | None, intent: str, belief: dict, offered: dict) -> dict:
    """The policy verdict from the model, validated; the rules' verdict on a failure."""
    rules = check_policy(schema, domain=domain, intent=intent, belief=belief, offered=offered)
    if not domain or not schema.bookable(domain):
        return dict(rules, source="rules")
    required = list(required_slots(schema, domain))
    messages = [("system", (PROMPTS / "service_policy.txt").read_text(encoding="utf-8")),
                ("user", json.dumps({"domain": domain, "intent": intent, "required_slots": required,
                                     "known": belief.get(domain, {}), "offered_entity": offered.get(domain)}))]
    answer = model.structured(messages, PolicyVerdict, purpose="policy", retries=2)
    problem = None if answer.ok else answer.error
    if answer.ok:
        v = answer.value
        if not set(v.missing) <= set(required):
            problem = f"missing {sorted(set(v.missing) - set(required))} are not required slots of {domain}"
        elif v.allowed == bool(v.missing) and v.booking_requested:
            problem = "allowed must be true exactly when nothing is missing"
    if problem:
        return dict(rules, source="rules", llm_failure={"raw": answer.raw, "error": problem})
    v = answer.value
    return {"booking_requested": v.booking_requested, "required": required if v.booking_requested else [],
            "missing": list(v.missing) if v.booking_requested else [], "allowed": v.allowed or not v.booking_requested,
            "explanation": v.explanation, "source": "llm"}


def _candidates(db, domain: str, frame: dict) -> list[dict]:
    constraints = {s: v for s, v in frame.items() if s in SEARCH_SLOTS.get(domain, ())}
    out = []
    for r in db.query(domain, constraints)[:5]:
        out.append({s: r.get(s) for s in ("name", "trainid", *REQUESTABLE_SLOTS[domain]) if r.get(s)})
    return out


def llm_action(model, triage: dict, *, belief: dict, policy: dict, offered: dict, asked: dict, db,
               schema) -> dict:
    """The action from the model's choice, filled from the database; the rules' action on a failure."""
    rules = decide_action(triage, belief=belief, policy=policy, offered=offered, asked=asked, db=db, schema=schema)
    domain = triage.get("domain")
    if domain not in db.records or triage.get("act") in ("bye", "thank"):
        return dict(rules, source="rules")
    frame = belief.get(domain, {})
    prompt = {"user_wants": triage, "known": frame, "policy": policy, "offered_entity": offered.get(domain),
              "candidates": _candidates(db, domain, frame)}
    messages = [("system", (PROMPTS / "service_action.txt").read_text(encoding="utf-8")),
                ("user", json.dumps(prompt, default=str))]
    answer = model.structured(messages, ActionChoice, purpose="action", retries=2)
    if not answer.ok:
        return dict(rules, source="rules", llm_failure={"raw": answer.raw, "error": answer.error})
    c = answer.value
    cap = domain.capitalize()
    record = db.find_entity(domain, c.entity) if c.entity else None
    informed = {s: str(record[s]) for s in c.inform if record and s in record and s in REQUESTABLE_SLOTS[domain]}
    action = {"kind": c.kind, "domain": domain, "entity": c.entity, "count": None,
              "requested": [s for s in c.requested if s in schema.slots.get(domain, ())], "informed": informed,
              "booking": {}, "reference": None, "source": "llm",
              "acts": {"search": [f"{cap}-Inform"], "nooffer": [f"{cap}-Nooffer"], "request": [f"{cap}-Request"],
                       "inform": [f"{cap}-Inform"], "book": [f"{cap}-Book", f"{cap}-Inform"]}[c.kind]}
    if c.kind == "book":
        action["booking"] = {s: frame[s] for s in schema.book_slots(domain) if frame.get(s)}
        entity = c.entity or ""
        if booking_available(domain, entity, action["booking"]):
            action["reference"] = booking_reference(domain, entity, action["booking"])
            action["informed"] = {"ref": action["reference"]}
        else:
            action.update(kind="nobook", acts=[f"{cap}-Nobook"])
    return action
