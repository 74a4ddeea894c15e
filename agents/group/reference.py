"""Reference planners of group travel planning: known-quality points the metrics must order.

``Params.reference`` replaces the mediator's decisions (and, for ``gaming``, the plan) of a
condition's dialogue; everything else (members, turns, metrics) is the condition's own.

- ``oracle`` (**labelled oracle: reads the members' true preferences**, the simulator's profiles,
  which no real system sees): each sub-slot holds every member's first choice (no option budget),
  conflicts are reported exactly where the members' profiles diverge, each room type asked for
  is booked (one stay per room type, as ``individual_choice``) and every stated house rule is kept.
  An upper reference for W1–W3, M10, M11 and M2.
- ``degraded``: the mediator hears only the first member's words (``read_wish`` on their turn),
  reports no conflict and plans for that member alone: a lower reference.
- ``gaming``: the condition's own decisions, then a plan that serves everyone the same
  restaurant at every meal and pastes every member's wishes (the ``user_provide_*`` texts) into
  ``raw_output``. Satisfaction reads only what a plan places, so the pasted text must not raise
  W1–W3 / M10 / M11 above the honest plan's; M16 falls (repeated restaurant).
- ``place_everything``: the condition's own decisions and plan, then every restaurant, attraction,
  event and stay of the city appended to day 1 (untimed, past every budget). A plan scored as a
  plan (evaluation/group/plan_feasibility.py) loses: its precision falls and the over-full day
  caps its satisfaction at 0.
- ``self_reporter``: the self-reporting talker: it hears only the first member (``degraded``'s
  decisions), reports a conflict on every slot, pastes every member's wish into its explanation,
  labels every slot ``include_both`` and adds one fake feedback exchange per slot. Its process
  reports are all "yes"; what it decides serves one member.
- ``alarmist``: the condition's own decisions, texts and plan, but its synthesis turns report a
  conflict on every slot (``has_conflict`` true where the members agree too). M2 is recall only,
  so it stays at the condition's value; ``M2_false_alarm`` must rise to 1 wherever it is defined.

Baselines are the conditions C1–C5 themselves (configs/group_reference.yaml runs all of them).
"""

from __future__ import annotations

from collections import Counter

from convsim.agents.group.members import member_option
from convsim.agents.group.synthesis import _base
from convsim.catalog.travel import option_label

REFERENCES = ("oracle", "degraded", "gaming", "alarmist", "place_everything", "self_reporter")
_MEALS = ("breakfast", "lunch", "dinner")


def _ranked(options: list[str]) -> list[str]:
    """Distinct options, most often stated first, then in the order stated."""
    counts = Counter(options)
    order = {o: i for i, o in reversed(list(enumerate(options)))}
    return sorted(counts, key=lambda o: (-counts[o], order[o]))


def oracle_decision(members: list[dict], slot: str) -> dict:
    """``{sub_slot: decision}`` from the members' true preferences (the oracle; see module doc)."""
    subs = ("room_type", "house_rule") if slot == "lodging" else (slot,)
    out = {}
    for sub in subs:
        rows = []
        for m in members:
            pref = m["preferences"][slot]
            option = pref["house_rule"] if sub == "house_rule" else member_option(pref, slot)
            rows.append({"member": m["name"], "role": m["role"], "text": pref["text"], "option": option,
                         "also_ok": None if sub == "house_rule" else pref.get("also_ok"),
                         "reject": None if sub == "house_rule" else pref.get("reject")})
        d = _base(sub, rows, "oracle_true_preferences")
        d["selected"] = _ranked([r["option"] for r in rows])
        if sub == "room_type":
            d.update(operator="individual_choice", member_options={r["member"]: r["option"] for r in rows})
        d["primary"] = d["selected"][0]
        out[sub] = d
    return out


def degraded_decision(stated: dict[str, list[dict]]) -> dict:
    """``{sub_slot: decision}`` that listens to the first member only (their words, read as the
    mediator reads them): no conflict reported, that member's option alone."""
    out = {}
    for sub, rows in stated.items():
        d = _base(sub, rows[:1], "degraded_first_member_only")
        d["selected"] = [rows[0]["option"]]
        d["primary"] = rows[0]["option"]
        out[sub] = d
    return out


def reference_text(kind: str, slot: str, decision: dict) -> tuple[str, str]:
    """``(utterance, resolution_explanation)`` of a reference mediator's synthesis turn."""
    chosen = "; ".join(", ".join(option_label(o) for o in d["selected"]) for d in decision.values())
    topic = slot.replace("_", " ")
    if kind == "oracle":
        reason = f"every member's first choice is in the plan: {chosen}."
    else:
        reason = f"going with {chosen}, as the first of you asked."
    return f"For {topic}, {reason}", reason


def gaming_plan(plan: dict, db, city: str, wishes: list[str]) -> dict:
    """The pasted-wishes plan: every meal at the city's first restaurant, every wish in the text."""
    first = db.in_city("restaurants", city)[0]
    days = [{**d, **{k: f"{first['name']}, {city}" for k in _MEALS}} for d in plan["days"]]
    return {**plan, "days": days, "reference": "gaming",
            "raw_output": "We heard every wish and planned for all of them: " + " ".join(wishes)}


def place_everything_plan(plan: dict, db, city: str) -> dict:
    """The plan that places everything: the condition's plan, then every restaurant of the city
    appended to each meal of day 1, every attraction, event and stay of the city appended to day 1
    (untimed), and every place named in the text. Before the plans were scored as plans it scored
    W1 = W2 = W3 = M10 = M11 = 1.0, above the oracle (evaluation/group/plan_feasibility.py)."""
    every = {k: [f"{r['name']}, {city}" for r in db.in_city(k, city)]
             for k in ("restaurants", "attractions", "events", "accommodations")}
    day1 = dict(plan["days"][0])
    for meal in _MEALS:
        day1[meal] = ";".join([day1[meal]] + every["restaurants"])
    day1["attraction"] = str(day1.get("attraction") or "").rstrip(";") + ";" + ";".join(every["attractions"]) + ";"
    day1["event"] = ";".join([str(day1.get("event") or "-")] + every["events"])
    day1["accommodation"] = ";".join([str(day1.get("accommodation") or "-")] + every["accommodations"])
    names = ", ".join(x.rsplit(",", 1)[0] for v in every.values() for x in v)
    return {**plan, "days": [day1] + plan["days"][1:], "reference": "place_everything",
            "raw_output": f"{plan.get('raw_output', '')}\nAlso on day 1, everything the city has: {names}."}


def self_report(slot: str, decision: dict, stated: dict[str, list[dict]]) -> tuple[str, str]:
    """``(utterance, resolution_explanation)`` of the self-reporting talker: every wish pasted in,
    a conflict and a strategy claimed, one member's option chosen."""
    wishes = " ".join(r["text"] for rows in stated.values() for r in rows)
    chosen = "; ".join(", ".join(option_label(o) for o in d["selected"]) for d in decision.values())
    topic = slot.replace("_", " ")
    explanation = f"There is a conflict, so we include both: {wishes} We go with {chosen}."
    return f"For {topic}: {explanation}", explanation


def fake_feedback(slot: str, member: str) -> list[dict]:
    """One feedback exchange per slot that changes nothing (the self-reporting talker's)."""
    return [{"speaker": member, "text": "Okay.", "meta": {"intent": f"user_feedback_{slot}", "slot": slot}},
            {"speaker": "system", "text": "Thanks for the feedback, noted.",
             "meta": {"intent": f"sys_feedback_{slot}", "slot": slot}}]


__all__ = ["REFERENCES", "oracle_decision", "degraded_decision", "reference_text", "gaming_plan",
           "place_everything_plan", "self_report", "fake_feedback"]
