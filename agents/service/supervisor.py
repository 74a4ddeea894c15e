"""Supervisor agent: validates the action before anything is said.

Two hard checks (MAS4CS's "no hallucination" and "policy" gates):
* every entity the action names must exist in the database, and every fact it states about
  that entity must equal the database's value; otherwise the action becomes ``nooffer``;
* a booking needs every booking-required slot; otherwise it becomes a ``request`` for them.
It returns the (possibly corrected) action and the list of violations it caught.
"""
from __future__ import annotations

from convsim.agents.service.policy import missing_for_booking
from convsim.catalog.service.db import ServiceDB
from convsim.catalog.service.normalize import normalize_value


def ground_action(action: dict, db: ServiceDB) -> list[dict]:
    """The entity mentions of an action with a ``grounded`` flag (checked against the db)."""
    domain, entity = action.get("domain"), action.get("entity")
    if not entity or domain not in db.records:
        return []
    record = db.find_entity(domain, entity)
    facts = {s: v for s, v in action.get("informed", {}).items() if s != "ref"}
    wrong = [] if record is None else [s for s, v in facts.items()
                                       if normalize_value(s, record.get(s)) != normalize_value(s, v)]
    return [{"domain": domain, "name": entity, "facts": facts,
             "grounded": record is not None and not wrong, "wrong_facts": wrong}]


def supervise(action: dict, *, belief: dict, offered: dict[str, str], db: ServiceDB,
              schema) -> dict:
    """``{"action": approved action, "violations": [...], "approved": bool}``."""
    violations = []
    for mention in ground_action(action, db):
        if not mention["grounded"]:
            violations.append({"kind": "ungrounded_entity", "name": mention["name"],
                               "wrong_facts": mention["wrong_facts"]})
    if violations:
        fixed = dict(action, kind="nooffer", entity=None, informed={}, reference=None,
                     acts=[f"{action['domain'].capitalize()}-Nooffer"])
        return {"action": fixed, "violations": violations, "approved": False}
    if action.get("kind") == "book":
        domain = action["domain"]
        frame = dict(belief.get(domain, {}))
        missing = missing_for_booking(schema, domain, frame, action.get("entity") or offered.get(domain))
        missing = [s for s in missing if not action.get("booking", {}).get(s)]
        if missing:
            violations.append({"kind": "booking_without_required", "missing": missing})
            fixed = dict(action, kind="request", reference=None, informed={}, booking={},
                         requested=missing, acts=[f"{domain.capitalize()}-Request"])
            return {"action": fixed, "violations": violations, "approved": False}
    return {"action": action, "violations": [], "approved": True}
