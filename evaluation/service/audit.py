"""Checks of what the system *did*, owned by the evaluator and independent of the supervisor.

The supervisor agent validates actions with its own code; a metric that reused that code
could never disagree with it (policy violations were 0 and grounding 1.0 by construction).
These functions re-derive the rules from the schema and the database:

* ``action_grounding(action, db)``: the entity the action names exists in the database and
  every fact it states equals the database value. Applied to the action the action agent
  *proposed* (before the supervisor) and to the one that was *executed* (after it), so the
  supervisor's effect is visible; ``supervisor_correction`` says whether it changed the action.
* ``booking_audit(action, schema, db, gold_state)``: for a booking that was made, the schema's
  booking-required slots of the domain (``schema.booking_required``) must each have a value in
  the booking itself; the venue name is the booked entity, and for trains (no name slot) the
  departure, destination and day are the booked train's own fields. With a gold state (replay
  or simulation), a booked value the user never gave (``bookday`` friday when the user said
  saturday) is counted as ``unconfirmed``. Nothing of the belief or the policy agent is read.
"""
from __future__ import annotations

from convsim.catalog.service.db import ServiceDB, ServiceSchema
from convsim.catalog.service.normalize import normalize_value


def action_grounding(action: dict | None, db: ServiceDB) -> dict:
    """``{"mentions": 0|1, "grounded": 0|1, "wrong_facts": [...]}`` for one action."""
    action = action or {}
    domain, entity = action.get("domain"), action.get("entity")
    if not entity or domain not in db.records:
        return {"mentions": 0, "grounded": 0, "wrong_facts": []}
    record = db.find_entity(domain, entity)
    facts = {s: v for s, v in (action.get("informed") or {}).items() if s != "ref"}
    wrong = sorted(facts) if record is None else sorted(
        s for s, v in facts.items() if normalize_value(s, record.get(s)) != normalize_value(s, v))
    return {"mentions": 1, "grounded": int(record is not None and not wrong), "wrong_facts": wrong}


def supervisor_correction(proposed: dict | None, executed: dict | None) -> int:
    """1 when the executed action differs from the proposed one in kind, entity or booking."""
    keys = ("kind", "entity", "booking", "informed")
    return int(any((proposed or {}).get(k) != (executed or {}).get(k) for k in keys))


def booking_audit(action: dict | None, schema: ServiceSchema, db: ServiceDB,
                  gold_state: dict | None = None) -> dict:
    """``{"booked": 0|1, "missing": [...], "unconfirmed": [...], "compliant": 0|1}``."""
    action = action or {}
    if action.get("kind") != "book":
        return {"booked": 0, "missing": [], "unconfirmed": [], "compliant": 1}
    domain = action.get("domain") or ""
    booking = {k: v for k, v in (action.get("booking") or {}).items() if v not in (None, "", "dontcare")}
    record = db.find_entity(domain, action.get("entity") or "") if action.get("entity") else None
    missing = []
    for slot in schema.booking_required.get(domain, ()):
        if slot in booking:
            continue
        if slot == "name" and record is not None:
            continue
        if domain == "train" and record is not None and record.get(slot):
            continue
        missing.append(slot)
    unconfirmed = []
    for slot, value in booking.items():
        gold = (gold_state or {}).get(f"{domain}-{slot}")
        if gold_state is not None and gold is not None:
            allowed = gold if isinstance(gold, list) else [gold]
            if normalize_value(slot, value) not in [normalize_value(slot, g) for g in allowed]:
                unconfirmed.append(slot)
        elif gold_state is not None:
            unconfirmed.append(slot)
    return {"booked": 1, "missing": missing, "unconfirmed": unconfirmed, "compliant": int(not missing)}
