"""A simulated member's own view of the plan: does it accept? (M6 with model ``none``.)

Before, a member accepted exactly when its W-metric rate s_i >= ``acceptance_threshold`` (564 of
564 verdicts), so anything that gamed W gamed M6. Now each member reads the plan it would live
through (``convsim.evaluation.group.plan_feasibility.lived_plan``: within each day's budget, timed,
grounded, feasible) against its **own profile**, not the metric:

* **served**: for each actionable slot, the member's own option (or its ``also_ok``) is among the
  categories of the lived places of that slot (cuisine: the restaurants' cuisines; attraction:
  subcategories; event: the segment; lodging: a lived stay of its room type that keeps its house
  rule, the planner's ``HOUSE_RULE_CHECKS``);
* **disliked**: each slot whose ``reject`` option is among the lived places counts against it;
* view = (served slots - disliked slots) / actionable slots, floored at 0;
* **tolerance** drawn per member: ``acceptance_threshold`` x U(0.6, 1.4) (clipped to [0, 1]) from the
  session's own RNG stream ``rng_for(seed, "member_tolerance", name)``, so members differ and a
  threshold of 0 accepts every plan a member can live through;
* an **over-full** plan (a day past twice its item budget) is rejected by every member: nobody lives
  through 60 places on day 1.

The member accepts iff the plan is not over-full and view >= tolerance.
"""
from __future__ import annotations

from convsim import rng_for
from convsim.agents.group.planner import HOUSE_RULE_CHECKS
from convsim.catalog.travel import TravelDB
from convsim.evaluation.group.plan_parse import plan_slot_places

KIND = {"cuisine": "restaurants", "attraction": "attractions", "event": "events"}
SLOTS = ("cuisine", "attraction", "event", "lodging")


def tolerance(seed: int, name: str, threshold: float) -> float:
    return min(1.0, max(0.0, threshold * rng_for(seed, "member_tolerance", name).uniform(0.6, 1.4)))


def member_view(member: dict, lived: dict, db: TravelDB) -> dict:
    """``{"served": [...], "missing": [...], "disliked": [...], "view": float}`` of one member."""
    served, missing, disliked = [], [], []
    for slot in SLOTS:
        pref = member["preferences"].get(slot)
        if not pref:
            continue
        places = plan_slot_places(lived, db, slot)
        if slot == "lodging":
            rule = pref.get("house_rule")
            ok = any(rec.get("roomType") == pref["room_type"] and
                     (not rule or HOUSE_RULE_CHECKS[rule](str(rec.get("house_rules") or "")))
                     for _, rec in places)
            (served if ok else missing).append(pref["room_type"])
            continue
        cats = {c for kind, rec in places for c in TravelDB.categories(kind, rec)}
        wanted = {pref.get("option"), pref.get("also_ok")} - {None}
        (served if cats & wanted else missing).append(pref.get("option"))
        if pref.get("reject") and pref["reject"] in cats:
            disliked.append(pref["reject"])
    n = len(served) + len(missing)
    view = max(0.0, (len(served) - len(disliked)) / n) if n else None
    return {"served": served, "missing": missing, "disliked": disliked, "view": view}


def view_verdict(member: dict, lived: dict, counts: dict, db: TravelDB, *, seed: int,
                 threshold: float) -> tuple[bool, str, dict]:
    """``(accept, utterance, detail)`` of one member (rules in the module docstring)."""
    v = member_view(member, lived, db)
    tol = tolerance(seed, member["name"], threshold)
    detail = {**v, "tolerance": tol}
    if counts.get("plan_overfull_days"):
        return False, "This plan crams far more into a day than anyone could do. No.", detail
    if v["view"] is None or v["view"] >= tol:
        return True, "That works for me, thanks!", detail
    parts = []
    if v["missing"]:
        parts.append(f"{', '.join(map(str, v['missing']))} is missing from the plan")
    if v["disliked"]:
        parts.append(f"I said no {', '.join(v['disliked'])}")
    return False, f"This does not work for me: {'; '.join(parts) or 'too little of what I asked for'}.", detail
