"""Policy agent: the booking rules, read from the schema (hard blocks before any booking).

A booking of ``domain`` needs every slot of ``schema.booking_required[domain]`` (see
``convsim.catalog.service.db``: the ``book*`` slots plus the entity's name, or for trains departure,
destination and day). The entity identifier also counts as filled when the system has already
offered one entity of that domain (the user says "book it").
"""
from __future__ import annotations

from convsim.catalog.service.db import ServiceSchema


def required_slots(schema: ServiceSchema, domain: str) -> tuple[str, ...]:
    return schema.booking_required.get(domain, ())


def missing_for_booking(schema: ServiceSchema, domain: str, frame: dict[str, str],
                        offered: str | None) -> list[str]:
    """Required slots still missing; ``name`` is satisfied by an offered entity."""
    missing = []
    for slot in required_slots(schema, domain):
        if frame.get(slot) and frame.get(slot) != "dontcare":
            continue
        if slot == "name" and offered:
            continue
        if domain == "train" and slot in ("departure", "destination", "day") and offered:
            continue
        missing.append(slot)
    return missing


def check_policy(schema: ServiceSchema, *, domain: str | None, intent: str, belief: dict,
                 offered: dict[str, str]) -> dict:
    """``{booking_requested, required, missing, allowed}`` for this turn."""
    wants = bool(domain) and intent == f"book_{domain}" and schema.bookable(domain or "")
    if not wants:
        return {"booking_requested": False, "required": [], "missing": [], "allowed": True}
    frame = belief.get(domain, {})
    missing = missing_for_booking(schema, domain, frame, offered.get(domain))
    return {"booking_requested": True, "required": list(required_slots(schema, domain)),
            "missing": missing, "allowed": not missing}
