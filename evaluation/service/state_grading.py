"""Customer-service outcomes graded from the state the agent left, as τ²-bench grades its domains.

τ²-bench replays the gold actions on a fresh database and compares the final database with the
one the agent left. Here the only state an agent changes is the session's bookings table (the
records are read-only), so the expected final state follows from the simulated user's goal: one
booking per goal domain that asks for one, of an entity satisfying the goal's constraints, with
the goal's final booking values (after a planned first failure, the fallback values). The agent's
bookings come from its session's tool world (``convsim.agents.service.tools.ServiceWorld``) or,
for the built-in pipeline, from the bookings its executed actions made; both are lists of
``{"domain", "entity", "booking": {book* slot: value}, "reference"}``.

* ``grade_bookings(goal, bookings, db, schema)`` → per-booking checks and the diff against the
  expected state: ``missing`` (a goal booking not made), ``extra`` (a booking no goal asked for,
  or a second one in a domain), ``wrong`` (the domain's booking exists but an entity outside the
  constraints or a slot value other than the goal's), ``violations`` (a booking lacking a
  booking-required slot of the schema, naming an entity not in the database, or at a venue the
  booking system reports unavailable for those details).
* ``task_success_state`` = 1 when the final bookings equal the expected ones (no missing, extra,
  wrong or violating booking), else 0. A goal with no booking is ``None`` when nothing was booked
  (no state to grade; τ² scores an unchanged database 1, which gave an agent that never acts 0.75
  here) and 0 when something was. As the MAS4CS evaluation design defines task success;
  reference: τ²-bench's DB-state reward.
* ``policy_compliance_state`` = the share of bookings made that break no rule (required slots
  present, entity exists, venue available); ``None`` when nothing was booked (no booking to
  judge, not a perfect score).

Pure functions: no I/O, no models. Nothing here is handed to an agent.
"""
from __future__ import annotations

from convsim.catalog.service.db import ServiceDB, ServiceSchema, booking_available
from convsim.catalog.service.normalize import normalize_value


def _norm(booking: dict) -> dict[str, str]:
    return {k: normalize_value(k, str(v)) for k, v in (booking or {}).items() if v not in (None, "")}


def booking_violations(b: dict, db: ServiceDB, schema: ServiceSchema) -> list[str]:
    """The rules one booking breaks: ``not_bookable``, ``unknown_entity``, ``missing:<slot>``,
    ``unavailable``."""
    domain = b.get("domain") or ""
    if not schema.bookable(domain):
        return ["not_bookable"]
    record = db.find_entity(domain, b.get("entity") or "")
    out = [] if record is not None else ["unknown_entity"]
    booking = {k: v for k, v in (b.get("booking") or {}).items() if v not in (None, "", "dontcare")}
    for slot in schema.booking_required.get(domain, ()):
        if slot in booking or (slot == "name" and record is not None):
            continue
        if domain == "train" and record is not None and record.get(slot):
            continue  # departure/destination/day are the booked train's own fields
        out.append(f"missing:{slot}")
    if record is not None and not booking_available(domain, db.entity_id(domain, record),
                                                    {k: str(v) for k, v in booking.items()}):
        out.append("unavailable")
    return out


def _entity_ok(goal_domain: dict, b: dict, db: ServiceDB) -> bool:
    d = goal_domain["domain"]
    record = db.find_entity(d, b.get("entity") or "")
    if record is None:
        return False
    ident = db.entity_id(d, record)
    return any(db.entity_id(d, r) == ident for r in db.query(d, goal_domain["constraints"]))


def grade_bookings(goal: dict, bookings: list[dict], db: ServiceDB, schema: ServiceSchema) -> dict:
    """The final bookings against the ones the goal implies (see the module docstring)."""
    expected = {g["domain"]: g for g in goal.get("domains", []) if g.get("book")}
    by_domain: dict[str, list[dict]] = {}
    for b in bookings:
        by_domain.setdefault(b.get("domain") or "", []).append(b)
    missing = sorted(d for d in expected if d not in by_domain)
    extra, wrong = [], []
    for d, made in by_domain.items():
        if d not in expected:
            extra += [f"{d}:{b.get('entity')}" for b in made]
            continue
        g = expected[d]
        want = _norm(g["book"])
        # the matching booking if any, else the last: a failed fallback dance leaves one per domain
        match = next((b for b in made if _entity_ok(g, b, db) and _norm(b.get("booking")) == want), None)
        keep = match or made[-1]
        extra += [f"{d}:{b.get('entity')}" for b in made if b is not keep]
        if match is None:
            got = _norm(keep.get("booking"))
            why = [] if _entity_ok(g, keep, db) else ["entity"]
            why += sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
            wrong.append({"domain": d, "entity": keep.get("entity"), "differs": why})
    checks = [{"domain": b.get("domain"), "entity": b.get("entity"),
               "violations": booking_violations(b, db, schema)} for b in bookings]
    violations = [c for c in checks if c["violations"]]
    # a goal that asks for no booking leaves no state to grade: None (its success is the informational
    # task_success), unless the agent booked what nobody asked for (0). Scored 1, a state-graded success
    # came free to an agent that never acts (an unshipped "claims it booked, never books" agent: 0.75)
    success = (None if not expected and not bookings
               else int(not (missing or extra or wrong or violations)))
    compliance = None if not bookings else 1 - len(violations) / len(bookings)
    return {"task_success_state": success, "policy_compliance_state": compliance,
            "bookings_expected": len(expected), "bookings_made": len(bookings),
            "missing": missing, "extra": sorted(extra), "wrong": wrong, "violations": violations}


def task_success_state(goal: dict, bookings: list[dict], db: ServiceDB, schema: ServiceSchema) -> int:
    return grade_bookings(goal, bookings, db, schema)["task_success_state"]


def policy_compliance_state(bookings: list[dict], db: ServiceDB, schema: ServiceSchema) -> float | None:
    if not bookings:
        return None
    return 1 - sum(bool(booking_violations(b, db, schema)) for b in bookings) / len(bookings)


def bookings_from_outcomes(outcomes: dict) -> list[dict]:
    """The built-in pipeline's bookings (``state["outcomes"][d]["bookings"]``) in the same form."""
    return [{"domain": d, "entity": b.get("entity"), "booking": dict(b.get("booking") or {}),
             "reference": b.get("reference")} for d, o in (outcomes or {}).items()
            for b in o.get("bookings", [])]
