"""Fault injection: deliberately broken agents, to show each metric catches what it claims to.

``Params.fault`` selects one fault (``none`` by default); ``Params.fault_rate`` is the share of
eligible turns it fires on, drawn from the session's own RNG stream
``rng_for(session_seed, turn, "fault", <name>)`` so it is reproducible and independent of what
the other agents do. Each fault and the metric that must catch it:

==================  =====================================================  =======================
fault               what the broken agent does                             caught by
==================  =====================================================  =======================
book_missing_slots  the action agent books although the booking lacks      policy_violations > 0
                    required slots (it ignores the policy agent's block)   (supervisor on: it
                                                                           corrects the booking)
ungrounded_action   the action agent offers an entity that is not in the   db_grounding_proposed
                    database                                               < 1 (supervisor on:
                                                                           db_grounding = 1)
invent_entity       the response writer replaces the venue it should name  text_hallucination > 0
                    with an invented one ("The Golden Dragon", a phone)
forget_area         memory drops ``area`` when the domain switches (the    memory_transfer < 1
                    "same area as the restaurant" carry-over is lost)
misroute            triage routes the turn to a wrong domain               domain_routing < 1
silent_actions      the response writer says nothing useful ("Sorry, I     response_grounding < 1
                    cannot help with that. Goodbye.") while the action     (task_success falls:
                    is right: the gaming reference (the simulated          no reference number
                    customer reads the action, not the text)               reached the customer)
never_book          the action agent answers every booking it could make   system_correctness and
                    "no availability" (``nobook`` for an available venue) task_completion fall (the
                    and never books: the gaming reference of the action    refusal is not grounded
                    map (``nobook`` is MAS4CS's "book" class)              in the db: a wrong action)
==================  =====================================================  =======================
"""
from __future__ import annotations

from convsim import rng_for

FAULTS = ("none", "book_missing_slots", "ungrounded_action", "invent_entity", "forget_area", "misroute",
          "silent_actions", "never_book")
SILENT_REPLY = "Sorry, I cannot help with that. Goodbye."
INVENTED = [("The Golden Dragon", "01223 456789"), ("Riverside Palace", "01223 111222"),
            ("The Blue Lantern Inn", "01223 987654")]
ROUTABLE = ("restaurant", "hotel", "attraction", "train")


def fires(seed: int, turn: int, name: str, rate: float) -> bool:
    """Whether the fault fires on this turn (its own RNG stream, so other agents are unaffected)."""
    return rng_for(seed, turn, "fault", name).random() < rate


def misroute(triage: dict, *, seed: int, turn: int, rate: float) -> dict:
    """Triage routed to another searchable domain (its slots go with it, as a real misroute's)."""
    if triage.get("domain") not in ROUTABLE or not fires(seed, turn, "misroute", rate):
        return triage
    rng = rng_for(seed, turn, "fault", "misroute", "domain")
    wrong = rng.choice([d for d in ROUTABLE if d != triage["domain"]])
    intent = triage["intent"].split("_", 1)[0] + "_" + wrong if "_" in triage["intent"] else triage["intent"]
    return dict(triage, domain=wrong, intent=intent, fault="misroute")


def forget_area(belief: dict, *, domain: str | None, previous: str | None, seed: int, turn: int,
                rate: float) -> dict:
    """Memory that loses ``area`` of the new domain on a domain switch."""
    if not domain or previous in (None, domain) or domain not in belief or "area" not in belief[domain]:
        return belief
    if not fires(seed, turn, "forget_area", rate):
        return belief
    out = {d: dict(f) for d, f in belief.items()}
    out[domain].pop("area", None)
    return out


def book_missing_slots(action: dict, *, triage: dict, policy: dict, belief: dict, db, seed: int,
                       turn: int, rate: float) -> dict:
    """An action agent that books whatever it has when a booking is asked but blocked."""
    domain = triage.get("domain")
    if not policy.get("booking_requested") or policy.get("allowed") or domain not in db.records:
        return action
    if not fires(seed, turn, "book_missing_slots", rate):
        return action
    frame = belief.get(domain, {})
    entity = action.get("entity")
    if not entity:
        found = db.find_entity(domain, frame["name"]) if frame.get("name") and domain != "train" else None
        results = [found] if found else db.query(domain, {k: v for k, v in frame.items()
                                                          if not k.startswith("book") and k != "name"})
        if not results:
            return action
        entity = db.entity_id(domain, results[0])
    booking = {s: v for s, v in frame.items() if s.startswith("book") and v}
    cap = domain.capitalize()
    return dict(action, kind="book", entity=entity, booking=booking, reference="FAULT000",
                informed={"ref": "FAULT000"}, requested=[], acts=[f"{cap}-Book", f"{cap}-Inform"],
                fault="book_missing_slots")


def ungrounded_action(action: dict, *, seed: int, turn: int, rate: float) -> dict:
    """An action agent that offers an entity the database does not have."""
    if not action.get("entity") or action.get("domain") == "train" or action.get("kind") == "book":
        return action
    if not fires(seed, turn, "ungrounded_action", rate):
        return action
    name = rng_for(seed, turn, "fault", "ungrounded_action", "name").choice(INVENTED)[0].lower()
    return dict(action, entity=name, fault="ungrounded_action")


def invent_entity(text: str, action: dict, *, seed: int, turn: int, rate: float) -> str:
    """A response writer that names an invented venue (with a phone number) instead of the real one."""
    entity = action.get("entity")
    if not entity or action.get("domain") == "train" or not fires(seed, turn, "invent_entity", rate):
        return text
    name, phone = rng_for(seed, turn, "fault", "invent_entity", "name").choice(INVENTED)
    swapped = text.replace(entity, name)
    if swapped == text:
        swapped = f"{text} You could also try {name}."
    return f"{swapped} Their phone is {phone}."


def silent_actions(text: str, action: dict, *, seed: int, turn: int, rate: float) -> str:
    """A response writer whose reply states none of the action's acts (the action stays right)."""
    if action.get("kind") in ("bye", "welcome", "unsupported") or not fires(seed, turn, "silent_actions", rate):
        return text
    return SILENT_REPLY


def never_book(action: dict, *, domain_schema, seed: int, turn: int, rate: float) -> dict:
    """An action agent that refuses every booking it could make ("no availability"), never booking."""
    if action.get("kind") != "book" or not fires(seed, turn, "never_book", rate):
        return action
    d = action.get("domain") or ""
    cap = d.capitalize()
    return dict(action, kind="nobook", reference=None, informed={},
                requested=[s for s in domain_schema.book_slots(d) if s != "bookpeople"][:1],
                acts=[f"{cap}-Nobook", f"{cap}-Request"], fault="never_book")
