"""Goal-driven, agenda-based user simulator (semantic level, like ConvLab's ABUS).

``sample_goal`` draws a task from the database: 1-2 domains, each with inform constraints
taken from a real record, requests, an optional booking, sometimes a booking that must fail
first plus its fallback (decided by ``convsim.catalog.service.db.booking_available``, so the goal is
feasible by construction), and sometimes "in the same area as the <previous domain>".

``user_turn`` reads the system's approved action (its semantic acts) and the simulator's own
JSON state, and returns the next utterance, its gold annotation (domain, intent, accumulated
state) and, when the dialogue ends, a ``TerminationReason``. Information is disclosed
progressively: two constraints first, the rest when asked or when an offer misses them.
Random choices come from ``rng_for(seed, turn, "user", purpose)`` so they do not depend on
what the agent said.
"""
from __future__ import annotations

import copy
from enum import Enum

from convsim.catalog.service.db import ServiceDB, booking_available
from convsim.catalog.service.normalize import DONTCARE
from convsim import rng_for


class TerminationReason(str, Enum):
    USER_STOP = "user_stop"          # the user said goodbye (agenda empty)
    MAX_TURNS = "max_turns"          # the turn budget ran out
    NO_PROGRESS = "no_progress"      # the user gave up after repeated unhelpful answers
    AGENT_ERROR = "agent_error"      # an agent node raised
    USER_ERROR = "user_error"        # the simulator raised or contradicted its goal
    REPLAY_END = "replay_end"        # replay: the recorded dialogue has no more turns


SEARCH_CHOICES = {"restaurant": ["area", "food", "pricerange"],
                  "hotel": ["area", "pricerange", "type", "stars", "parking", "internet"],
                  "attraction": ["area", "type"]}
ASKABLE = {"restaurant": ["address", "phone", "postcode"], "hotel": ["address", "phone", "postcode"],
           "attraction": ["address", "phone", "postcode", "entrancefee"],
           "train": ["price", "duration", "trainid"]}
OPENING = {"restaurant": "I'm looking for a restaurant", "hotel": "I need a place to stay",
           "attraction": "I'd like to visit an attraction", "train": "I need a train"}
ALSO = {"restaurant": "I am also looking for a restaurant", "hotel": "I also need a place to stay",
        "attraction": "I would also like to visit an attraction", "train": "I also need a train"}
# The simulator's own fixed wording of each move ({slots}: its constraint or booking phrases). Kept in
# one place so that agents/service/wording.py can list every template the held-out pool must avoid.
PHRASES = {"bye": "No, that's all. Thank you, goodbye.", "give_up": "This isn't working. Goodbye.",
           "also": "Thanks. {also}", "relax": "Then I'd rather have it {slots}.", "fallback": "How about {slots}",
           "dontcare_area": "Any area is fine.", "dontcare_pricerange": "Any price is fine.",
           "answer": "I'd like it {slots}.", "correction": "Actually, I want it {slots}.",
           "request": "Could you give me the {slots}?", "bare_book": "Please book it.",
           "recommend": "Can you recommend one {slots}?"}
REQUEST_SAID = {"entrancefee": "entrance fee", "trainid": "train id", "duration": "travel time",
                "postcode": "postcode", "phone": "phone number"}
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
SPOKEN_TYPE = {"swimmingpool": "swimming pool", "concerthall": "concert hall",
               "multiple sports": "multiple sports centre", "nightclub": "nightclub",
               "entertainment": "entertainment venue", "boat": "boat trip",
               "architecture": "piece of architecture"}


def _minutes(t: str) -> int:
    h, m = t.split(":")
    return int(h) * 60 + int(m)


def _clock(m: int) -> str:
    m = max(0, min(m, 23 * 60 + 55))
    return f"{m // 60:02d}:{m % 60:02d}"


def _book_values(domain: str, rng) -> dict[str, str]:
    people = str(rng.randint(1, 8))
    if domain == "restaurant":
        return {"bookday": rng.choice(DAYS), "bookpeople": people,
                "booktime": _clock(rng.randint(44, 83) * 15)}
    if domain == "hotel":
        return {"bookday": rng.choice(DAYS), "bookpeople": people, "bookstay": str(rng.randint(1, 5))}
    return {"bookpeople": people}


def _domain_goal(domain: str, record: dict, db: ServiceDB, rng, *, fail_first: bool) -> dict:
    if domain == "train":
        constraints = {s: record[s] for s in ("departure", "destination", "day")}
        if rng.random() < 0.5:
            constraints["leaveat"] = _clock((_minutes(record["leaveat"]) - rng.randint(0, 50)) // 5 * 5)
        else:
            constraints["arriveby"] = _clock((_minutes(record["arriveby"]) + rng.randint(0, 40) + 4) // 5 * 5)
    else:
        slots = SEARCH_CHOICES[domain]
        k = rng.randint(1, min(3, len(slots)))
        constraints = {s: str(record[s]) for s in rng.sample(slots, k)}
        if domain == "attraction" and rng.random() < 0.2:
            constraints = {"name": record["name"]}
    order = list(constraints)
    rng.shuffle(order)
    goal = {"domain": domain, "constraints": constraints, "order": order,
            "requests": rng.sample(ASKABLE[domain], rng.randint(0, 2)),
            "book": None, "fail_book": None, "reuse": None}
    if domain != "attraction" and rng.random() < 0.6:
        matches = [db.entity_id(domain, r) for r in db.query(domain, constraints)]
        for _ in range(20):  # feasible by construction: some matching entity can take the booking
            goal["book"] = _book_values(domain, rng)
            if any(booking_available(domain, m, goal["book"]) for m in matches):
                break
        if fail_first and domain != "train":
            _add_failure(goal, record, db, rng)
    if goal["book"] and domain == "train":
        goal["requests"] = [r for r in goal["requests"] if r != "trainid"]
    return goal


def _add_failure(goal: dict, record: dict, db: ServiceDB, rng) -> None:
    """Name the venue (one match) and find booking details that fail, with a fallback that works."""
    domain = goal["domain"]
    goal["constraints"]["name"] = record["name"]
    goal["order"] = ["name"] + [s for s in goal["order"] if s != "name"]
    changed = "bookstay" if domain == "hotel" else "booktime"
    for _ in range(40):
        first = _book_values(domain, rng)
        fallback = dict(first)
        fallback[changed] = (str(int(first[changed]) + rng.choice([-1, 1, 2])) if changed == "bookstay"
                             else _clock(_minutes(first[changed]) + rng.choice([-60, -30, 30, 60])))
        if fallback[changed] in ("0", first[changed]):
            continue
        if not booking_available(domain, record["name"], first) and \
                booking_available(domain, record["name"], fallback):
            goal["fail_book"], goal["book"] = first, fallback
            return


def _add_policy_requests(goal: dict, db: ServiceDB, prng, rate: float) -> None:
    """Policy-relevant requests, each with probability ``rate`` (own RNG stream, so rate 0 leaves
    the goal unchanged): an impossible constraint first (a value of one search slot that no record
    with the other constraints has; the real value follows the system's no-offer), and a bare
    "book it" that gives none of the booking details."""
    d = goal["domain"]
    if d != "train" and prng.random() < rate:
        reused = (goal.get("reuse") or {}).get("slot")
        for slot in [s for s in ("food", "area", "pricerange") if s in goal["constraints"] and s != reused]:
            others = {k: v for k, v in goal["constraints"].items() if k != slot and k != "name"}
            alts = [v for v in db.values(d, slot) if v != goal["constraints"][slot]
                    and not db.query(d, {**others, slot: v})]
            if alts and "name" not in goal["constraints"]:
                goal["impossible"] = {"slot": slot, "value": prng.choice(alts)}
                goal["order"] = [slot] + [x for x in goal["order"] if x != slot]
                break
    if goal.get("book") and d != "train" and prng.random() < rate:
        goal["bare_book"] = True


def sample_goal(db: ServiceDB, seed: int, policy_rate: float = 0.0,
                domains: list[str] | None = None) -> dict:
    """A feasible goal for one task, drawn from ``rng_for(seed, "goal")``; policy-relevant
    requests at ``policy_rate`` from ``rng_for(seed, "goal", "policy", i)``. ``domains``: the
    domains to draw from (default all four; the draws are then those of the default)."""
    rng = rng_for(seed, "goal")
    n = 1 if rng.random() < 0.4 else 2
    pool = list(domains) if domains else ["restaurant", "hotel", "attraction", "train"]
    domains = rng.sample(pool, min(n, len(pool)))
    goals, previous_area = [], None
    for i, domain in enumerate(domains):
        records = db.records[domain]
        reuse = (i == 1 and domain != "train" and previous_area and rng.random() < 0.5)
        if reuse:
            records = [r for r in records if r.get("area") == previous_area[1]] or records
        record = rng.choice(records)
        goal = _domain_goal(domain, record, db, rng, fail_first=rng.random() < 0.3)
        if reuse and record.get("area") == previous_area[1]:
            goal["constraints"]["area"] = record["area"]
            goal["order"] = ["area"] + [s for s in goal["order"] if s != "area"]
            goal["reuse"] = {"slot": "area", "from": previous_area[0]}
            # the value to carry is said in the earlier domain's opening, whatever the agent asks: a
            # memory-transfer opportunity is then fixed by the goal (evaluation/service/metrics.py)
            source = next(x for x in goals if x["domain"] == previous_area[0])
            source["order"] = ["area"] + [x for x in source["order"] if x != "area"]
        if "area" in goal["constraints"]:
            previous_area = (domain, goal["constraints"]["area"])
        if policy_rate > 0:
            _add_policy_requests(goal, db, rng_for(seed, "goal", "policy", i), policy_rate)
        goals.append(goal)
    return {"domains": goals}


def new_user_state(goal: dict) -> dict:
    return {"goal": goal, "idx": 0, "opened": False, "disclosed": {}, "booking": {},
            "fallback_used": False, "received": {}, "stuck": 0, "done": [], "turn": 0}


def _say_constraint(domain: str, slot: str, value: str, goal: dict) -> str:
    if goal.get("reuse") and goal["reuse"]["slot"] == slot:
        return f"in the same area as the {goal['reuse']['from']}"
    return {"area": f"in the {value}", "pricerange": f"in the {value} price range",
            "food": f"serving {value} food",
            "type": ("it should be a guesthouse" if value == "guesthouse" else "it should be a hotel")
            if domain == "hotel" else f"a {SPOKEN_TYPE.get(value, value)}",
            "stars": f"with {value} stars",
            "parking": "with free parking" if value == "yes" else "I don't need parking",
            "internet": "with free wifi" if value == "yes" else "I don't need wifi",
            "name": f"called {value}", "departure": f"from {value}", "destination": f"to {value}",
            "day": f"on {value}", "leaveat": f"leaving after {value}",
            "arriveby": f"arriving by {value}"}.get(slot, f"{slot} {value}")


def _say_booking(domain: str, values: dict[str, str]) -> str:
    parts = []
    if "bookpeople" in values:
        parts.append(f"{values['bookpeople']} tickets" if domain == "train"
                     else f"for {values['bookpeople']} people")
    if "bookstay" in values:
        parts.append(f"for {values['bookstay']} nights")
    if "bookday" in values:
        parts.append(f"on {values['bookday']}")
    if "booktime" in values:
        parts.append(f"at {values['booktime']}")
    return "Please book " + ("it " if domain != "train" else "") + " ".join(parts) + "."


def _gold_state(state: dict) -> dict[str, list[str]]:
    return {f"{d}-{s}": [v] for d, slots in state["disclosed"].items() for s, v in slots.items()}


def _disclose(state: dict, domain: str, slots: dict[str, str]) -> None:
    state["disclosed"].setdefault(domain, {}).update(slots)


def _satisfies(db: ServiceDB, domain: str, entity: str, constraints: dict) -> bool:
    matches = db.query(domain, constraints)
    return any(db.entity_id(domain, r) == entity for r in matches)


def _booking_differs(action: dict, want: dict[str, str]) -> bool:
    """The booking made is not the one asked for: a detail of ``want`` missing or different."""
    made = {k: str(v).lower() for k, v in (action.get("booking") or {}).items() if v not in (None, "")}
    return any(made.get(k) != str(v).lower() for k, v in want.items())


def user_turn(state: dict, action: dict | None, *, db: ServiceDB, seed: int,
              max_turns: int, check_booking: bool = False) -> tuple[dict, dict]:
    """The simulator's next move: ``(new_state, {text, gold_domain, gold_intent, gold_state,
    user_acts, termination})``; ``action`` is the system's last approved action.

    ``check_booking``: the customer reads the booking's details and does not accept one that
    lacks or changes a detail of its own (it says its full booking again, and its patience runs
    down as on any unhelpful answer). Off by default (the customer accepts any reference); on, a
    booking made before the details were given (a policy violation) costs a turn instead of
    ending the task, so the policy gate can change a completed task's result
    (tests/test_service_policy_gate.py)."""
    s = copy.deepcopy(state)
    s["turn"] += 1
    rng = rng_for(seed, s["turn"], "user")
    goals = s["goal"]["domains"]
    if s["turn"] > max_turns:
        return s, _out("", None, None, s, [], TerminationReason.MAX_TURNS, move="none")
    if s["idx"] >= len(goals):
        return s, _out(PHRASES["bye"], "general", "general", s,
                       [{"intent": "bye", "domain": "general"}], TerminationReason.USER_STOP, move="bye")
    g = goals[s["idx"]]
    d = g["domain"]
    got = s["received"].setdefault(d, {"entity": None, "info": {}, "ref": None})
    disclosed = s["disclosed"].get(d, {})
    pending = [x for x in g["order"] if x not in disclosed]

    if not s["opened"]:
        s["opened"] = True
        first = pending[:2] if d != "train" else pending[:3]
        said = {x: g["constraints"][x] for x in first}
        if g.get("impossible") and g["impossible"]["slot"] in said:
            said[g["impossible"]["slot"]] = g["impossible"]["value"]
        _disclose(s, d, said)
        lead = OPENING[d] if s["idx"] == 0 else PHRASES["also"].format(also=ALSO[d])
        text = lead + " " + " ".join(_say_constraint(d, x, said[x], g) for x in first) + "."
        return s, _out(text, d, f"find_{d}", s, _acts("inform", d, first), None,
                       move="opening" if s["idx"] == 0 else "also")

    kind = (action or {}).get("kind")
    if kind == "nooffer" and g.get("impossible") and not s.get("relaxed"):
        s["relaxed"] = True  # the impossible value is dropped for the real one
        slot = g["impossible"]["slot"]
        _disclose(s, d, {slot: g["constraints"][slot]})
        text = PHRASES["relax"].format(slots=_say_constraint(d, slot, g["constraints"][slot], g))
        return s, _out(text, d, f"find_{d}", s, _acts("inform", d, [slot]), None, move="relax")
    if kind == "request" or (kind == "search" and not action.get("entity")) or kind == "nobook":
        if kind == "nobook" and g["fail_book"] and not s["fallback_used"]:
            s["fallback_used"] = True
            changed = {k: v for k, v in g["book"].items() if g["fail_book"].get(k) != v}
            _disclose(s, d, changed)
            s["booking"] = dict(g["book"])
            return s, _out(PHRASES["fallback"].format(slots=_say_booking(d, changed)[len("Please book "):]),
                           d, f"book_{d}", s, _acts("inform", d, list(changed)), None, move="fallback")
        informs, book_informs = {}, {}
        for slot in action.get("requested", []):
            if slot in g["constraints"]:
                informs[slot] = g["constraints"][slot]
            elif slot.startswith("book") and g["book"]:
                book_informs[slot] = (g["fail_book"] or g["book"]).get(slot) \
                    if not s["fallback_used"] else g["book"].get(slot)
            elif slot in ("area", "pricerange"):
                informs[slot] = DONTCARE
        if not informs and not book_informs and pending:
            informs = {pending[0]: g["constraints"][pending[0]]}
        if informs or book_informs:
            s["stuck"] = s["stuck"] + 1 if not (set(informs) - set(disclosed)) and not book_informs else 0
            _disclose(s, d, informs)
            _disclose(s, d, {k: v for k, v in book_informs.items() if v})
            fine = [PHRASES["dontcare_area" if x == "area" else "dontcare_pricerange"]
                    for x, v in informs.items() if v == DONTCARE]
            parts = [_say_constraint(d, x, v, g) for x, v in informs.items() if v != DONTCARE]
            text = " ".join(fine) + ((" " + PHRASES["answer"].format(slots=", ".join(parts))) if parts else "")
            if book_informs:
                text += " " + _say_booking(d, {k: v for k, v in book_informs.items() if v})
            intent = f"book_{d}" if book_informs else f"find_{d}"
            return _finish_stuck(s, _out(text.strip(), d, intent, s,
                                         _acts("inform", d, list(informs) + list(book_informs)), None,
                                         move="answer"))

    if kind in ("search", "inform", "book") and action.get("entity"):
        if not _satisfies(db, d, action["entity"], g["constraints"]):
            if pending:
                _disclose(s, d, {x: g["constraints"][x] for x in pending})
                text = PHRASES["correction"].format(slots=" ".join(
                    _say_constraint(d, x, g["constraints"][x], g) for x in pending))
                return s, _out(text, d, f"find_{d}", s, _acts("inform", d, pending), None, move="correction")
            s["stuck"] += 1
        else:
            want = g["fail_book"] if (g["fail_book"] and not s["fallback_used"]) else g["book"]
            if check_booking and kind == "book" and action.get("reference") and want \
                    and _booking_differs(action, want):
                s["stuck"] += 1  # not the booking asked for: the customer says its details again
                s["booking"] = dict(want)
                _disclose(s, d, want)
                return _finish_stuck(s, _out(_say_booking(d, want), d, f"book_{d}", s,
                                             _acts("inform", d, list(want)), None, move="book"))
            got["entity"] = action["entity"]
            got["info"].update(action.get("informed", {}))
            if kind == "book" and action.get("reference"):
                got["ref"] = action["reference"]
    elif kind not in ("bye", "welcome"):
        s["stuck"] += 1

    if got["entity"]:
        missing = [r for r in g["requests"] if r not in got["info"]]
        if missing:
            s["stuck"] += 1 if s.get("last_request") == missing else 0
            s["last_request"] = missing
            text = PHRASES["request"].format(slots=" and ".join(REQUEST_SAID.get(m, m) for m in missing))
            return _finish_stuck(s, _out(text, d, f"find_{d}", s, _acts("request", d, missing), None,
                                         move="request"))
        if g["book"] and not got["ref"]:
            values = g["fail_book"] if (g["fail_book"] and not s["fallback_used"]) else g["book"]
            if g.get("bare_book") and not s.get("bare_done"):
                s["bare_done"] = True  # "book it" without any detail: the system must ask
                return s, _out(PHRASES["bare_book"], d, f"book_{d}", s, [], None, move="book")
            if not s["booking"] and d != "train" and rng.random() < 0.4:
                values = {"bookpeople": values["bookpeople"]}  # progressive disclosure
            s["booking"] = dict(values) if not s["booking"] else s["booking"]
            _disclose(s, d, values)
            return _finish_stuck(s, _out(_say_booking(d, values), d, f"book_{d}", s,
                                         _acts("inform", d, list(values)), None, move="book"))
        s["done"].append(d)
        s["idx"] += 1
        s["opened"] = False
        s["stuck"] = 0
        s["booking"] = {}
        return user_turn(dict(s, turn=s["turn"] - 1), None, db=db, seed=seed, max_turns=max_turns,
                         check_booking=check_booking)
    if pending:
        _disclose(s, d, {pending[0]: g["constraints"][pending[0]]})
        return _finish_stuck(s, _out(PHRASES["answer"].format(slots=_say_constraint(d, pending[0], g["constraints"][pending[0]], g)),
                                     d, f"find_{d}", s, _acts("inform", d, pending[:1]), None, move="more"))
    s["stuck"] += 1
    text = PHRASES["recommend"].format(slots=" ".join(_say_constraint(d, x, v, g) for x, v in g["constraints"].items()))
    return _finish_stuck(s, _out(text, d, f"find_{d}", s, _acts("inform", d, list(g["constraints"])), None,
                                 move="recommend"))


def _finish_stuck(s: dict, out: dict) -> tuple[dict, dict]:
    if s["stuck"] >= 3:
        # giving up is a goodbye, and is labelled as one (not as the domain move it replaced)
        out = dict(out, termination=TerminationReason.NO_PROGRESS.value, text=PHRASES["give_up"],
                   move="give_up", gold_domain="general", gold_intent="general",
                   user_acts=[{"intent": "bye", "domain": "general"}])
    return s, out


def _acts(intent: str, domain: str, slots: list[str]) -> list[dict]:
    return [{"intent": intent, "domain": domain, "slot": x} for x in slots]


def _out(text, domain, intent, state, acts, termination, *, move: str) -> dict:
    return {"text": text, "move": move, "gold_domain": domain, "gold_intent": intent,
            "gold_state": _gold_state(state), "user_acts": acts,
            "termination": termination.value if termination else None}


def simulator_complete(state: dict) -> bool:
    """The simulator's own verdict: every domain of its agenda was worked off."""
    return state["idx"] >= len(state["goal"]["domains"])
