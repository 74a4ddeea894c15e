"""The group-planning agent slot: the researcher's own planner in place of the built-in plan writer.

``SLOT`` (role ``planner``): after the group has stated its preferences and the mediator has
synthesised its decisions, the agent is handed the conversation so far (members' turns as
``HumanMessage`` named ``"<member>: <text>"``, the system's as ``AIMessage``), the context
``{"city", "start_date", "n_days", "members", "decisions"}`` (``decisions``: the options the
mediator settled per slot, as said in the dialogue) and the tools of
``convsim.agents.group.tools`` (``find_places``, ``lookup_place``); it returns the plan: its reply
text is the plan presented to the group (``raw_output``), and it may report
``structured["plan"]``: the days of the itinerary (TripCraft's keys — meals, accommodations,
attractions, events, poi_list — or the project's; ``normalize_plan`` reads both). Places a
structured plan names that the travel database lacks are listed in
``plan["validation"]["unknown_places"]`` (not repaired). The members' hidden preferences are never
handed to the agent.
"""
from __future__ import annotations


from langchain_core.messages import AIMessage, HumanMessage

from convsim.agents.group.tools import TOOL_NAMES, TravelTools
from convsim.agents.language import node_vocabulary
from convsim.catalog.travel import TravelDB, normalize_place_name
from convsim.evaluation.group.plan_parse import normalize_plan, plan_places_by_field
from convsim.slots import Slot
from convsim.slots.nodes import cached_agent, tool_errors, user_spec

ROLE = "planner"
SLOT = Slot(role=ROLE, handed="the conversation so far (members as HumanMessage '<name>: ...', the system as "
                              "AIMessage), context {city, start_date, n_days, members, decisions} and the tools "
                              "find_places, lookup_place",
            returns="plan", structured=("plan",), builtins=("rules",), language="en", vocabulary=node_vocabulary,
            tools=TOOL_NAMES)
# the plan metrics read the structured days; without them they have no input
DAY_METRICS = ("M8_placed", "M9", "M10", "M10b", "M10_satisfied_pairs", "M10_pairs", "M11", "M12", "M13", "M15", "M16", "W1",
               "W1_all_members", "W2", "W2_all_members", "W3", "W3_all_members", "W3_zero_members",
               "W3_zero_members_all_members")
NEEDS_DAYS = "the agent reports no structured plan (days)"


def spec_text(ctx) -> str | None:
    """The spec filling the slot when it is not a built-in (None: the built-in runs)."""
    return user_spec(ctx, SLOT)



def agent_for(text: str):
    return cached_agent(text, SLOT)  # made once per process and spec (convsim.slots.nodes)


def messages_of(transcript: list[dict]) -> list:
    return [AIMessage(t["text"]) if t.get("speaker") == "system" else HumanMessage(f"{t['speaker']}: {t['text']}")
            for t in transcript if t.get("text")]


def agent_plan(state: dict, *, text_spec: str, db: TravelDB, n_days: int) -> tuple[dict, dict]:
    """``(plan, meta)``: the agent's plan in the built-in plan's shape, and what it did."""
    tools = TravelTools(db)
    decisions = {s: {sub: d.get("selected") for sub, d in v.items()} for s, v in (state.get("decisions") or {}).items()}
    context = {"city": state["city"], "start_date": state["start_date"], "n_days": n_days,
               "members": [m["name"] for m in state["members"]], "decisions": decisions}
    answer = agent_for(text_spec).invoke(messages_of(state.get("transcript", [])), session_id=state["session_id"],
                                         context=context, tools=tools.tools())
    structured = dict(answer.structured or {})
    plan = {"city": state["city"], "start_date": state["start_date"], "people": len(state["members"]),
            "days": [], "accommodation_branches": [], "raw_output": answer.text}
    notes: list[str] = []
    if structured.get("plan") is not None:
        parsed, notes = normalize_plan(structured["plan"])
        if isinstance(parsed, dict) and isinstance(parsed.get("days"), list):
            plan["days"] = parsed["days"]
            plan["as_proposed"] = {"days": parsed["days"]}
    named = [p for names in plan_places_by_field(plan).values() for p in names]
    unknown = sorted({p for p in named if db.lookup(p) is None and normalize_place_name(p) not in ("", "-")})
    plan["validation"] = {"unknown_places": unknown, "source": f"agent({text_spec})", "notes": notes}
    meta = {"agent_spec": text_spec, "tool_calls": tools.calls, "structured": structured,
            "reported": sorted(structured), "plan_days": bool(plan["days"])}
    if rejected := tool_errors(answer):  # calls the tools never ran (an unknown tool, bad arguments)
        meta["tool_errors"] = rejected
    return plan, meta


def mask_plan_metrics(state: dict, metrics: dict) -> dict:
    """For an agent's plan without structured days: the plan metrics that read the days, ``None``
    with the reason (``unreported``); nothing for the built-in planner or a plan with days."""
    plan = state.get("plan") or {}
    if not str((plan.get("validation") or {}).get("source", "")).startswith("agent(") or plan.get("days"):
        return {}
    out = {name: None for name in DAY_METRICS if name in metrics}
    out["unreported"] = {name: NEEDS_DAYS for name in out}
    return out
