"""Task success of a simulated dialogue, judged against the goal and the database.

This is the external evaluator (ConvLab's "success", τ-bench's DB check), kept apart from the
simulator's own "complete" verdict. For every domain of the goal:
* the entity the system last offered or booked satisfies every goal constraint in the db;
* every requested slot was informed with the db's value for that entity;
* a booking goal has a successful booking of that entity with the goal's final booking
  values (the fallback after a deliberate first failure).
Success = every domain succeeds.

With ``said`` (what reached the customer in the reply *text*: ``said_from_log`` over the turn
log, each turn's ``said`` from evaluation/service/response_grounding.py) a domain also needs
``text_ok``: the entity was named in some reply, every requested fact was stated in a reply
about that entity, and a booking goal's booking had its reference number in the reply. The
simulated customer reads the structured action, so without this gate a system whose replies say
nothing useful ("Sorry, I cannot help with that.") scored as the templates did.
"""
from __future__ import annotations

from convsim.catalog.service.db import ServiceDB
from convsim.catalog.service.normalize import normalize_value


def said_from_log(log: list[dict]) -> dict[str, dict]:
    """Per domain: the entities named, the reference numbers and the ``(entity, slot)`` facts
    stated in the reply text over the dialogue (from each turn log's ``said``)."""
    out: dict[str, dict] = {}
    for entry in log:
        said = entry.get("said") or {}
        d = said.get("domain")
        if not d:
            continue
        o = out.setdefault(d, {"entities": set(), "references": set(), "facts": set()})
        if said.get("entity"):
            o["entities"].add(str(said["entity"]).lower())
        if said.get("reference"):
            o["references"].add(str(said["reference"]))
        entity = str(said.get("entity_of_facts") or said.get("entity") or "").lower()
        for slot in said.get("facts") or {}:
            o["facts"].add((entity, slot))
    return out


def domain_success(goal: dict, outcome: dict, db: ServiceDB, said: dict | None = None) -> dict:
    d = goal["domain"]
    entity = outcome.get("entity")
    record = db.find_entity(d, entity) if entity else None
    matched = record is not None and any(db.entity_id(d, r) == db.entity_id(d, record)
                                         for r in db.query(d, goal["constraints"]))
    informed = outcome.get("informed", {})
    info_ok = record is not None and all(
        r in informed and normalize_value(r, informed[r]) == normalize_value(r, record.get(r))
        for r in goal["requests"])
    book_ok = True
    if goal.get("book"):
        want = {k: str(v) for k, v in goal["book"].items()}
        book_ok = any(b["entity"] == entity and {k: str(v) for k, v in b["booking"].items()
                                                  if k in want} == want
                      for b in outcome.get("bookings", []))
    structured = bool(matched and info_ok and book_ok)
    text_ok = None
    if said is not None:
        heard = said.get(d) or {"entities": set(), "references": set(), "facts": set()}
        key = str(entity or "").lower()
        text_ok = (bool(entity) and key in heard["entities"]
                   and all((key, r) in heard["facts"] for r in goal["requests"]))
        if goal.get("book"):
            text_ok = text_ok and any(
                b["entity"] == entity and {k: str(v) for k, v in b["booking"].items() if k in want} == want
                and b.get("reference") in heard["references"] for b in outcome.get("bookings", []))
        text_ok = bool(text_ok)
    return {"entity_ok": matched, "info_ok": info_ok, "book_ok": book_ok, "text_ok": text_ok,
            "structured_success": structured, "success": structured and text_ok is not False}


def task_success(goal: dict, outcomes: dict, db: ServiceDB, said: dict | None = None) -> dict:
    """``{"success": 0/1, "structured_success": 0/1, "domains": {d: {...}}}`` for one simulated
    dialogue; ``success`` is gated on the reply text when ``said`` is given."""
    per = {g["domain"]: domain_success(g, outcomes.get(g["domain"], {}), db, said) for g in goal["domains"]}
    return {"success": int(all(p["success"] for p in per.values())),
            "structured_success": int(all(p["structured_success"] for p in per.values())), "domains": per}
