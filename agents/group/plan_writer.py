"""With a chat model: the model writes the itinerary (JSON) and its text; the db checks it.

The model gets the rule plan, the decisions and the candidate places of the city, and returns a
plan in the same day schema (``PlanAnswer``). Every place it names is looked up in the database:
an unknown place is replaced by the rule plan's entry for that field and listed under
``plan["validation"]["unknown_places"]``; the model's days as it proposed them are kept in
``plan["as_proposed"]`` (M9 grounds that plan; the repairs are counted separately).

A failed answer is recorded as a failure with its raw text and the rule plan is kept whole,
labelled ``plan["validation"]["source"] == "rules (fallback)"``: an answer that does not parse, one
that gives fewer days than the rule plan has (``{"days": []}`` validated and left every rule day in
place, scored as the model's plan), and one whose summary is empty, the schema's field name or the
prompt echoed back (the template's ``"a short text for the group"``: ``convsim.agents.group.answers``).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from convsim.agents.group.answers import empty_or_echo
from convsim.evaluation.group.plan_parse import plan_places_by_field

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


def _spec_name(model) -> str:
    return str(getattr(model.spec, "spec", model.spec))


def _fallback(rule_plan: dict, model, error: str, raw: str) -> tuple[dict, list[dict]]:
    """The rule plan, labelled as the fallback it is, and the failed answer with its raw text."""
    plan = json.loads(json.dumps(rule_plan))
    plan["validation"] = {"source": "rules (fallback)", "model": _spec_name(model), "model_error": error,
                          "unknown_places": []}
    return plan, [{"slot": "plan", "error": error, "raw": raw}]


def write_plan_with_model(model, rule_plan: dict, db, decisions: dict) -> tuple[dict, list[dict]]:
    """``(plan, failures)``: the model's plan validated against ``db`` (see module docstring)."""
    city = rule_plan["city"]
    candidates = {k: [r["name"] for r in db.in_city(k, city)] for k in ("restaurants", "attractions",
                                                                          "events", "accommodations")}
    template = PROMPT.read_text(encoding="utf-8")
    prompt = template.format(
        decisions=json.dumps({s: {sub: d["selected"] for sub, d in v.items()} for s, v in decisions.items()}),
        candidates=json.dumps(candidates), draft=json.dumps(rule_plan["days"], default=str))
    res = model.structured([("system", "You write travel itineraries as JSON."), ("user", prompt)],
                           PlanAnswer, purpose="plan", retries=2)
    if not res.ok:
        return _fallback(rule_plan, model, res.error, res.raw)
    if len(res.value.days) < len(rule_plan["days"]):   # a missing day would silently stay the rules'
        return _fallback(rule_plan, model, f"the plan gives {len(res.value.days)} of "
                                           f"{len(rule_plan['days'])} days", res.raw)
    echo = empty_or_echo(res.value.summary, prompt, template, PlanAnswer)
    if echo:
        return _fallback(rule_plan, model, f"summary: {echo}", res.raw)
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
    plan["validation"] = {"unknown_places": unknown, "source": _spec_name(model)}
    failures = [{"slot": "plan", "error": f"unknown places replaced: {unknown}", "raw": res.raw}] if unknown else []
    return plan, failures
