"""With a chat model: the model writes the itinerary (JSON) and its text; the db checks it.

The model gets the rule plan, the decisions and the candidate places of the city, and returns a
plan in the same day schema (``PlanAnswer``). Every place it names is looked up in the database:
an unknown place is replaced by the rule plan's entry for that field and listed under
``plan["validation"]["unknown_places"]``; the model's days as it proposed them are kept in
``plan["as_proposed"]`` (M9 grounds that plan; the repairs are counted separately); an answer that does not parse is recorded as a failure
with its raw text and the rule plan is kept.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from evaluation.group.plan_parse import plan_places_by_field

PROMPT = Path(__file__).resolve().parents[2] / "prompts" / "group_planner.txt"
_FIELDS = ("breakfast", "lunch", "dinner", "attraction", "event", "accommodation", "point_of_interest_list")


class PlanDay(BaseModel):
    days: int
    breakfast: str = "-"
    lunch: str = "-"
    dinner: str = "-"
    attraction: str = "-"
    event: str = "-"
    accommodation: str = "-"
    point_of_interest_list: str = ""


class PlanAnswer(BaseModel):
    days: list[PlanDay]
    summary: str


def _unknown(value: str, key: str, db) -> list[str]:
    names = plan_places_by_field({"days": [{key: value}]})
    return [n for names_ in names.values() for n in names_ if db.lookup(n) is None]


def write_plan_with_model(model, rule_plan: dict, db, decisions: dict) -> tuple[dict, list[dict]]:
    """``(plan, failures)``: the model's plan validated against ``db`` (see module docstring)."""
    city = rule_plan["city"]
    candidates = {k: [r["name"] for r in db.in_city(k, city)] for k in ("restaurants", "attractions",
                                                                          "events", "accommodations")}
    prompt = PROMPT.read_text(encoding="utf-8").format(
        decisions=json.dumps({s: {sub: d["selected"] for sub, d in v.items()} for s, v in decisions.items()}),
        candidates=json.dumps(candidates), draft=json.dumps(rule_plan["days"], default=str))
    res = model.structured([("system", "You write travel itineraries as JSON."), ("user", prompt)],
                           PlanAnswer, purpose="plan", retries=2)
    if not res.ok:
        return rule_plan, [{"slot": "plan", "error": res.error, "raw": res.raw}]
    plan = json.loads(json.dumps(rule_plan))
    plan["as_proposed"] = {"days": [d.model_dump() for d in res.value.days]}
    unknown: list[str] = []
    for i, day in enumerate(res.value.days[: len(plan["days"])]):
        for key in _FIELDS:
            value = getattr(day, key)
            bad = _unknown(value, key, db)
            if bad:
                unknown += bad   # keep the rule plan's grounded entry for this field
            else:
                plan["days"][i][key] = value
    plan["raw_output"] = res.value.summary
    plan["validation"] = {"unknown_places": unknown, "source": model.spec}
    failures = [{"slot": "plan", "error": f"unknown places replaced: {unknown}", "raw": res.raw}] if unknown else []
    return plan, failures
