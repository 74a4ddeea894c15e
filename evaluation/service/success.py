"""Task success of a simulated dialogue, judged against the goal and the database.

This is the external evaluator (ConvLab's "success", τ-bench's DB check), kept apart from the
simulator's own "complete" verdict. For every domain of the goal:
* the entity the system last offered or booked satisfies every goal constraint in the db;
* every requested slot was informed with the db's value for that entity;
* a booking goal has a successful booking of that entity with the goal's final booking
  values (the fallback after a deliberate first failure).
Success = every domain succeeds.
"""
from __future__ import annotations

from catalog.service.db import ServiceDB
from catalog.service.normalize import normalize_value


def domain_success(goal: dict, outcome: dict, db: ServiceDB) -> dict:
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
    return {"entity_ok": matched, "info_ok": info_ok, "book_ok": book_ok,
            "success": bool(matched and info_ok and book_ok)}


def task_success(goal: dict, outcomes: dict, db: ServiceDB) -> dict:
    """``{"success": 0/1, "domains": {d: {...}}}`` for one simulated dialogue."""
    per = {g["domain"]: domain_success(g, outcomes.get(g["domain"], {}), db) for g in goal["domains"]}
    return {"success": int(all(p["success"] for p in per.values())), "domains": per}
