"""Action agent: search the database, book (with a reference number), request or inform.

``decide_action`` turns the triage result, the belief and the policy check into one action:

``{"kind", "domain", "entity", "count", "requested", "informed", "booking", "reference",
"acts"}`` where ``kind`` is search | nooffer | book | nobook | request | inform | bye |
welcome | unsupported, and ``acts`` are MultiWOZ-style act types (``Hotel-Inform``, ...).
``ACTION_CLASS`` maps kinds onto the five action classes of MAS4CS's system correctness.
"""
from __future__ import annotations

from convsim.catalog.service.db import (DOMAINS, REQUESTABLE_SLOTS, SEARCH_SLOTS, ServiceDB,
                             booking_available, booking_reference)

ACTION_CLASS = {"search": "search", "nooffer": "search", "book": "book", "nobook": "book",
                "request": "request", "inform": "inform", "bye": "close", "welcome": "close",
                "unsupported": "unsupported"}
# Search slots worth asking for when a search leaves many candidates (MultiWOZ system style).
ASK_ORDER = {"restaurant": ("area", "food", "pricerange"), "hotel": ("area", "pricerange"),
             "attraction": ("area", "type"), "train": ()}
TRAIN_NEEDED = ("departure", "destination", "day")


def _act(domain: str, name: str) -> str:
    return f"{domain.capitalize()}-{name}"


def _new(kind: str, domain: str | None, **kw) -> dict:
    action = {"kind": kind, "domain": domain, "entity": None, "count": None, "requested": [],
              "informed": {}, "booking": {}, "reference": None, "acts": []}
    action.update(kw)
    return action


def _constraints(domain: str, frame: dict[str, str]) -> dict[str, str]:
    return {s: v for s, v in frame.items() if s in SEARCH_SLOTS[domain]}


def _facts(db: ServiceDB, domain: str, record: dict, slots: list[str]) -> dict[str, str]:
    return {s: str(record[s]) for s in slots if s in record and s in REQUESTABLE_SLOTS[domain]}


def decide_action(triage: dict, *, belief: dict, policy: dict, offered: dict[str, str],
                  asked: dict[str, list[str]], db: ServiceDB, schema) -> dict:
    """One action for this turn (pure given the database)."""
    domain, act = triage.get("domain"), triage.get("act")
    if act == "bye":
        return _new("bye", "general", acts=["General-Bye"])
    if act == "thank":
        return _new("welcome", "general", acts=["General-Welcome", "General-Reqmore"])
    if domain not in DOMAINS:
        return _new("unsupported", domain, acts=[])
    frame = belief.get(domain, {})
    current = offered.get(domain)
    record = db.find_entity(domain, current) if current else None

    if policy.get("booking_requested"):
        if not policy.get("allowed"):
            missing = [s for s in policy["missing"] if s not in ("name",)] or policy["missing"]
            action = _new("request", domain, requested=missing, acts=[_act(domain, "Request")])
            if "name" in policy["missing"] or (domain == "train" and not record):
                found = _search_record(db, domain, frame)
                if found is not None and (domain != "train" or
                                          all(frame.get(s) for s in TRAIN_NEEDED)):
                    action["entity"] = db.entity_id(domain, found)
                    action["acts"].append(_act(domain, "Inform"))
                    action["requested"] = [s for s in missing if s != "name"] or missing
            return action
        if record is None:
            record = _search_record(db, domain, frame)
        if record is None:
            return _new("nooffer", domain, count=0, acts=[_act(domain, "Nooffer")])
        booking = {s: frame[s] for s in schema.book_slots(domain) if frame.get(s)}
        # When the chosen entity is full, book another match (MultiWOZ systems do) unless
        # the user named the venue.
        candidates = [record]
        if not frame.get("name"):
            candidates += [r for r in db.query(domain, _constraints(domain, frame)) if r is not record]
        record = next((r for r in candidates if booking_available(domain, db.entity_id(domain, r), booking)),
                      record)
        entity = db.entity_id(domain, record)
        if booking_available(domain, entity, booking):
            ref = booking_reference(domain, entity, booking)
            informed = {"ref": ref}
            if domain == "train":
                informed["price"] = record["price"]
            return _new("book", domain, entity=entity, booking=booking, reference=ref,
                        informed=informed,
                        acts=[_act(domain, "Book"), _act(domain, "Inform"), "General-Reqmore"])
        return _new("nobook", domain, entity=entity, booking=booking,
                    requested=[s for s in schema.book_slots(domain) if s != "bookpeople"][:1],
                    acts=[_act(domain, "Nobook"), _act(domain, "Request")])

    wanted = [s for s in triage.get("requested", []) if s in REQUESTABLE_SLOTS[domain]]
    if wanted and not triage.get("slots"):
        if record is None:
            record = _search_record(db, domain, frame)
        if record is None:
            return _new("nooffer", domain, count=0, acts=[_act(domain, "Nooffer")])
        return _new("inform", domain, entity=db.entity_id(domain, record),
                    informed=_facts(db, domain, record, wanted),
                    acts=[_act(domain, "Inform"), "General-Reqmore"])

    constraints = _constraints(domain, frame)
    if domain == "train":
        ask = [s for s in TRAIN_NEEDED if not frame.get(s) and s not in asked.get(domain, [])]
        if ask:
            return _new("request", domain, requested=ask[:2], acts=[_act(domain, "Request")])
    results = db.query(domain, constraints)
    if not results:
        return _new("nooffer", domain, count=0, acts=[_act(domain, "Nooffer")])
    chosen = results[0]
    if current and any(db.entity_id(domain, r) == current for r in results):
        chosen = next(r for r in results if db.entity_id(domain, r) == current)
    ask = [s for s in ASK_ORDER[domain] if s not in frame and s not in asked.get(domain, [])]
    if len(results) > 5 and ask and "name" not in frame:
        return _new("search", domain, count=len(results), requested=ask[:1],
                    acts=[_act(domain, "Inform"), _act(domain, "Request")])
    informed = _facts(db, domain, chosen, wanted)
    return _new("search", domain, entity=db.entity_id(domain, chosen), count=len(results),
                informed=informed, acts=[_act(domain, "Inform")])


def _search_record(db: ServiceDB, domain: str, frame: dict[str, str]) -> dict | None:
    if frame.get("name") and domain != "train":
        return db.find_entity(domain, frame["name"])
    results = db.query(domain, _constraints(domain, frame))
    return results[0] if results else None
