"""Is a refusal grounded in the database? The evaluator's own check of "no availability".

A system that answers every booking request "there is no availability" and never books did the
"book" class's work in MAS4CS's action map (``nobook`` -> book) and scored system correctness
0.967 and heuristic quality 4.967, above the clean agent (0.961 / 4.961), while the customers'
task completion fell from 0.922 to 0.373. The customer was served only if the refusal was true:

* ``nobook`` is grounded when the booking system really refuses that booking
  (``convsim.catalog.service.db.booking_available`` is False for its entity and booking values);
  the venue was available -> the refusal is **ungrounded**;
* ``nooffer`` is grounded when the database has no record for what the system was searching: the
  named venue (``find_entity``) when its belief frame has a name (trains excepted), else the
  frame's search slots (``SEARCH_SLOTS``, ``dontcare`` ignored, as ``ServiceDB.query``); a record
  exists -> ungrounded.

An ungrounded refusal is a wrong action: its action class is ``refusal_ungrounded`` (never an
expected class), so system correctness and the judge's ``action_ok`` count the turn as incorrect.
Any other kind returns None (not a refusal).
"""
from __future__ import annotations

from convsim.catalog.service.db import SEARCH_SLOTS, ServiceDB, booking_available

UNGROUNDED_REFUSAL = "refusal_ungrounded"


def refusal_grounded(action: dict, belief: dict, db: ServiceDB) -> bool | None:
    """True / False for a ``nobook`` or ``nooffer`` action (see the module docstring), else None."""
    kind, domain = action.get("kind"), action.get("domain")
    if kind == "nobook":
        entity = action.get("entity")
        if not entity or domain not in db.records:
            return True  # nothing named to book: no availability claim to check
        return not booking_available(domain, str(entity), dict(action.get("booking") or {}))
    if kind == "nooffer":
        if domain not in db.records:
            return True
        frame = belief.get(domain) or {}
        if frame.get("name") and domain != "train":
            return db.find_entity(domain, frame["name"]) is None
        return not db.query(domain, {s: v for s, v in frame.items() if s in SEARCH_SLOTS.get(domain, ())})
    return None


def action_class_of(action: dict, belief: dict, db: ServiceDB, action_class: dict[str, str]) -> str:
    """The action class the turn is judged by: the agent's map, except an ungrounded refusal."""
    if refusal_grounded(action, belief, db) is False:
        return UNGROUNDED_REFUSAL
    return action_class.get(action["kind"], action["kind"])
