"""Group travel planning: members state preferences slot by slot, the system
synthesises them (or not, by condition), a planner writes a multi-day itinerary grounded in the
travel database, and M1–M16 / W1–W3 are computed before END.

Conditions C1–C5 are presets of four flags (reference group_and_retrieval.md §1b):
C1 one spokesperson, no synthesis; C2 all members speak, silent merge; C3 raw synthesis
(a plain merge without a social-choice rule, or a model's own merge); C4 guided synthesis (canonical strategy, vote
round, subgroups, coverage); C5 = C4 + feedback loop. C3–C5 choose at most ``option_budget``
options per slot, so they differ only in how they choose. Model roles: ``synthesis``,
``planner``, ``member`` (all ``none`` by default: rules).
Members speak in parallel: ``ask_slot`` fans out one ``member_speak`` task per member with
``Send``; their turns meet in the ``member_turns`` channel (``operator.add``) before ``synthesize``.
The mediator reads the members' words, not the simulator's labels in the turn meta (M2's ground
truth). ``Params.reference`` swaps in a reference planner (oracle / degraded / gaming /
alarmist, agents/group/reference.py; configs/group_reference.yaml). See docs/group_planning.md.
"""

from __future__ import annotations

import datetime as dt
import operator
from dataclasses import dataclass, field
from typing import Annotated, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from pydantic import BaseModel, Field, model_validator

from convsim.agents.group.feedback import feedback_round, feedback_targets
from convsim.agents.group.member_voice import speak_with_model, verdict_with_model
from convsim.agents.group import slot as planner_slot
from convsim.agents.group.members import GROUP_TYPES, make_group, speak_preference
from convsim.agents.group.members import SLOTS as PLAN_SLOTS  # the itinerary's slots (SLOTS: the agent slots)
from convsim.agents.group.planner import build_plan
from convsim.agents.group.reference import (degraded_decision, fake_feedback, gaming_plan, oracle_decision,
                                           place_everything_plan, reference_text, self_report)
from convsim.agents.group.plan_writer import write_plan_with_model
from convsim.agents.group.synthesis import (decide, llm_guided_text, llm_raw_synthesis, reason_of,
                                    stated_preferences as stated_rows, synthesis_text)
from convsim.agents.group.vote import option_label
from convsim.catalog.travel import TravelDB, load_travel_db
from convsim import compile_with_default_context
from convsim import SessionContext, emit_metrics, rng_for, stable_seed
from convsim.evaluation.group.evaluate import dialogue_embedder, evaluate_group_dialogue, transcript_to_turns
from convsim.evaluation.group.dataset import OPTION_SLOTS, group_dataset_metrics
from convsim.evaluation.group.figures import group_figures
from convsim.lazy import cached_once

CONDITIONS = {   # condition -> (multi_user, enable_synthesis, use_social_theory, enable_feedback)
    "C1": (False, False, False, False), "C2": (True, False, False, False),
    "C3": (True, True, False, False), "C4": (True, True, True, False), "C5": (True, True, True, True)}
FLAG_NAMES = ("multi_user", "enable_synthesis", "use_social_theory", "enable_feedback")


def _merge(a: dict, b: dict) -> dict:
    return {**a, **b}


class State(TypedDict, total=False):
    session_id: str
    group_type: str
    city: str
    start_date: str
    members: list[dict]
    slot_index: int
    turn: int
    member_turns: Annotated[list[dict], operator.add]   # fan-in of the parallel member nodes
    transcript: Annotated[list[dict], operator.add]
    decisions: Annotated[dict, _merge]                   # slot -> sub_slot -> planner payload
    feedback: dict                                       # the C5 loop's working state for one slot
    plan: dict
    llm_failures: Annotated[list[dict], operator.add]
    turn_metrics: Annotated[list[dict], operator.add]
    dialogue_metrics: dict
    metric_settings: dict


class Params(BaseModel):
    """Scenario parameters; ``condition`` sets the four flags, explicit flags override it."""

    condition: Literal["C1", "C2", "C3", "C4", "C5"] = Field("C4", description="condition preset")
    multi_user: bool | None = Field(None, description="all members speak (else one spokesperson)")
    enable_synthesis: bool | None = Field(None, description="system synthesis turns per slot")
    use_social_theory: bool | None = Field(None, description="canonical strategy, vote, subgroups")
    enable_feedback: bool | None = Field(None, description="C5 feedback loop")
    group_types: list[str] = Field(list(GROUP_TYPES), description="group types sessions() cycles through")
    n_sessions: int = Field(25, ge=1, description="sessions that sessions() yields")
    n_days: int = Field(3, ge=1, le=7, description="days of the itinerary")
    max_feedback_rounds: int = Field(2, ge=1, le=5)
    option_budget: int = Field(2, ge=1, le=4, description="options per (sub)slot every synthesising condition may choose")
    acceptance_threshold: float = Field(0.5, ge=0.0, le=1.0,
                                        description="model none: the members' mean tolerance; each accepts a plan it can live "
                                                    "through whose share of its own wishes (less dislikes) reaches "
                                                    "its tolerance, this x U(0.6, 1.4) (agents/group/member_view.py)")
    agents: dict[str, str] = Field(default_factory=dict, description="agent slots: {'planner': SPEC} writes the "
                                   "plan with your agent (docs/agents.md)")
    agreement: float = Field(0.0, ge=0.0, le=1.0,
                             description="probability that a slot outside the group type's designed conflicts "
                                         "is shared by every member (convsim.agents.group.members.shared_by_design); "
                                         "0 = the groups as always. For M2_false_alarm "
                                         "(configs/group_false_alarm.yaml), not for the condition runs")
    db_path: str | None = Field(None, description="folder of a TripCraft-schema db; None = shipped db")
    reference: Literal["oracle", "degraded", "gaming", "alarmist", "place_everything", "self_reporter"] | None = Field(
        None, description="a reference planner in place of the condition's mediator/planner "
                          "(convsim.agents.group.reference; oracle reads the true preferences)")

    @model_validator(mode="after")
    def _check(self):
        bad = [g for g in self.group_types if g not in GROUP_TYPES]
        if bad:
            raise ValueError(f"unknown group types {bad}; expected {GROUP_TYPES}")
        return self

    def flags(self) -> dict[str, bool]:
        preset = dict(zip(FLAG_NAMES, CONDITIONS[self.condition]))
        return {k: (preset[k] if getattr(self, k) is None else bool(getattr(self, k))) for k in FLAG_NAMES}


@dataclass
class Context(SessionContext):
    params: Params = field(default_factory=Params)  # defaults: runs with no context (langgraph dev)


def _db(params: Params):
    return load_travel_db(params.db_path)


MODEL_ROLES = ("synthesis", "planner", "member")  # the roles the nodes ask ctx.model() for


def preflight(params: Params, ctx: Context) -> None:
    """Load the travel database before the first session (convsim preflight)."""
    _db(params).cities()


@cached_once(maxsize=32)
def _city_db_cached(db_path: str | None, city: str) -> TravelDB:
    return TravelDB(**load_travel_db(db_path).ref_info(city), source=f"{db_path or 'project db'}:{city}")


def _city_db(params: Params, city: str) -> TravelDB:
    return _city_db_cached(params.db_path, city)


def _turn(state: State, n: int = 0) -> int:
    return state.get("turn", 0) + n


def _mode(flags: dict) -> str:
    if not flags["enable_synthesis"]:
        return "passive"
    return "guided" if flags["use_social_theory"] else "raw"


def open_session(state: State, runtime: Runtime[Context]) -> dict:
    p = runtime.context.params
    flags = p.flags()
    meta = {"intent": "sys_greet", "condition": p.condition, **flags, "member_count": len(state["members"]),
            "group_type": state["group_type"], "city": state["city"]}
    text = (f"Hello! Let's plan {p.n_days} days in {state['city']} from {state['start_date']}. "
            f"I'll ask about each topic in turn.")
    return {"turn": 1, "slot_index": 0,
            "transcript": [{"turn": 1, "speaker": "system", "text": text, "meta": meta}]}


def ask_slot(state: State) -> dict:
    slot = PLAN_SLOTS[state["slot_index"]]
    t = _turn(state, 1)
    return {"turn": t, "transcript": [{"turn": t, "speaker": "system",
                                       "text": f"What would you like for {slot.replace('_', ' ')}?",
                                       "meta": {"intent": f"sys_request_{slot}", "slot": slot}}]}


def fan_out(state: State, runtime: Runtime[Context]) -> list[Send]:
    slot = PLAN_SLOTS[state["slot_index"]]
    members = state["members"]
    if runtime.context.params.flags()["multi_user"]:
        return [Send("member_speak", {"member": m, "slot": slot, "index": i, "group_type": state["group_type"]})
                for i, m in enumerate(members)]
    return [Send("member_speak", {"member": members[0], "slot": slot, "index": 0,
                                  "spokesperson_for": len(members)})]


def member_speak(payload: dict, runtime: Runtime[Context]) -> dict:
    turn = speak_preference(payload["member"], payload["slot"], spokesperson_for=payload.get("spokesperson_for"))
    failures = []
    model = runtime.context.model("member")
    if not model.is_none and not payload.get("spokesperson_for"):
        turn, failure = speak_with_model(model, payload["member"], payload["slot"], turn,
                                         group_type=payload.get("group_type", "group"))
        failures += [{**failure, "role": "member"}] if failure else []
    return {"member_turns": [{**turn, "index": payload["index"]}], "llm_failures": failures}


def _vote_turns(decision: dict, stated: dict, slot: str, turns: list[dict], t: int) -> int:
    """The vote round's request and ballots (C4/C5, eligible slots); returns the last turn number."""
    for sub, d in decision.items():
        vote = d.get("vote_summary")
        if not vote:
            continue
        t += 1
        turns.append({"turn": t, "speaker": "system", "meta": {"intent": f"sys_request_vote_{slot}", "slot": slot},
                      "text": f"Let's vote on {sub.replace('_', ' ')}: "
                              f"{', '.join(option_label(o['option']) for o in vote['option_details'])}."})
        for r in stated[sub]:
            if r["member"] in vote["voters"]:
                t += 1
                top = vote["member_primary_option"][r["member"]]
                turns.append({"turn": t, "speaker": r["member"], "text": f"My vote: {option_label(top)}.",
                              "meta": {"intent": f"user_vote_{slot}", "slot": slot, "top_choice": top}})
    return t


def synthesize(state: State, runtime: Runtime[Context]) -> dict:
    ctx, slot = runtime.context, PLAN_SLOTS[state["slot_index"]]
    flags, mode = ctx.params.flags(), _mode(ctx.params.flags())
    spoken = sorted((t for t in state["member_turns"] if t["meta"]["slot"] == slot), key=lambda t: t["index"])
    t = _turn(state)
    turns = []
    for s in spoken:
        t += 1
        turns.append({"turn": t, "speaker": s["speaker"], "text": s["text"], "meta": s["meta"]})
    stated = stated_rows(spoken, state["members"], slot)
    budget = ctx.params.option_budget
    decision = decide(slot, state["group_type"], stated, mode, budget)
    ref = ctx.params.reference if ctx.params.reference in ("oracle", "degraded", "self_reporter") else None
    if ref == "self_reporter":   # hears the first member, claims every process step (agents/group/reference.py)
        decision = {sub: {**d, "has_conflict": True, "resolution_strategy": "include_both", "strategy_id": "include_both"}
                    for sub, d in degraded_decision(stated).items()}
    elif ref == "oracle":      # labelled oracle: the members' true preferences (convsim.agents.group.reference)
        decision = oracle_decision(state["members"], slot)
    elif ref == "degraded":  # hears the first member only
        decision = degraded_decision(stated)
    failures = []
    if mode != "passive":
        t = _vote_turns(decision, stated, slot, turns, t)
        text, explanation = (self_report(slot, decision, stated) if ref == "self_reporter"
                             else reference_text(ref, slot, decision) if ref
                             else synthesis_text(slot, decision, stated, mode))
        reported_conflict = any(d["has_conflict"] for d in decision.values())
        model = ctx.model("synthesis")
        if ref:
            pass             # a reference mediator never asks a model
        elif not model.is_none and mode == "raw":
            merged, failure = llm_raw_synthesis(model, slot, stated, budget)
            failures += [{**failure, "role": "synthesis"}] if failure else []
            if merged:   # the model's own decision, conflict report and words
                first = next(iter(decision))
                decision[first] = {**decision[first], "selected": merged["selected"],
                                   "primary": merged["selected"][0], "has_conflict": merged["has_conflict"],
                                   "source": "model_synthesis"}
                text, explanation, reported_conflict = merged["message"], merged["explanation"], merged["has_conflict"]
        elif not model.is_none:
            worded, failure = llm_guided_text(model, slot, stated, text)
            failures += [{**failure, "role": "synthesis"}] if failure else []
            if worded:
                text, explanation = worded, reason_of(worded)
        if ctx.params.reference == "alarmist":   # cries conflict on every slot (M2's false-alarm side)
            reported_conflict = True
        first = next(iter(decision.values()))
        t += 1
        turns.append({"turn": t, "speaker": "system", "text": text, "meta": {
            "intent": f"sys_synthesize_{slot}", "slot": slot, "has_conflict": reported_conflict,
            "resolution_explanation": explanation, "resolution_strategy": first["resolution_strategy"],
            "strategy_ids": {s: d["strategy_id"] for s, d in decision.items()},
            "selected_options": {s: d["selected"] for s, d in decision.items()},
            "subgrouping_required": any(d["subgrouping_required"] for d in decision.values()),
            "subgrouping_optional": any(d["subgrouping_optional"] for d in decision.values())}})
    if ref == "self_reporter" and mode != "passive":   # one fake feedback exchange per slot
        for fake in fake_feedback(slot, spoken[0]["speaker"]):
            t += 1
            turns.append({"turn": t, **fake})
    out = {"turn": t, "transcript": turns, "decisions": {slot: decision}, "llm_failures": failures}
    if flags["enable_feedback"] and mode != "passive" and not ref:
        rows = stated[next(iter(stated))]
        # the resolution is the decision and its reason, not the "Conflict: ..." recap that
        # names every member's wish (which would leave nobody to target)
        resolution = turns[-1]["meta"]["resolution_explanation"]
        targets = feedback_targets(rows, resolution)
        out["feedback"] = {"slot": slot, "targets": targets, "round": 0, "resolved": not targets,
                           "resolution_text": resolution}
    else:
        out["feedback"] = {"slot": slot, "targets": [], "round": 0, "resolved": True}
    return out


def feedback(state: State, runtime: Runtime[Context]) -> dict:
    fb, slot = state["feedback"], state["feedback"]["slot"]
    members = state["members"]
    spoken = sorted((t for t in state["member_turns"] if t["meta"]["slot"] == slot), key=lambda t: t["index"])
    stated = stated_rows(spoken, members, slot)
    rows = stated[next(iter(stated))]
    turns, revised, resolution = feedback_round(slot, state["decisions"][slot], rows, fb["targets"],
                                                fb["resolution_text"], fb["round"] + 1,
                                                runtime.context.params.option_budget)
    t = _turn(state)
    for turn in turns:
        t += 1
        turn["turn"] = t
    for d in revised.values():
        d["feedback_rounds"] = fb["round"] + 1
    remaining = feedback_targets(rows, resolution)
    return {"turn": t, "transcript": turns, "decisions": {slot: revised},
            "feedback": {**fb, "round": fb["round"] + 1, "targets": remaining, "resolved": not remaining,
                         "resolution_text": resolution}}


def after_synthesis(state: State, runtime: Runtime[Context]) -> str:
    fb = state["feedback"]
    if not fb["resolved"] and fb["round"] < runtime.context.params.max_feedback_rounds:
        return "feedback"
    return "evaluate_slot"


def evaluate_slot(state: State, runtime: Runtime[Context]) -> dict:
    slot = PLAN_SLOTS[state["slot_index"]]
    decision = state["decisions"][slot]
    metrics = {"slot_index": state["slot_index"],
               "has_conflict": float(any(d["has_conflict"] for d in decision.values())),
               "vote_round": float(any(d.get("vote_summary") for d in decision.values())),
               "options_in_decision": float(sum(len(d["selected"]) for s, d in decision.items() if s != "house_rule")),
               "feedback_rounds": float(state["feedback"].get("round", 0))}
    emit_metrics(runtime, turn=state["turn"], metrics=metrics)
    return {"slot_index": state["slot_index"] + 1, "turn_metrics": [{"turn": state["turn"], "slot": slot, **metrics}]}


def next_step(state: State) -> str:
    return "ask_slot" if state["slot_index"] < len(PLAN_SLOTS) else "planner"


def planner(state: State, runtime: Runtime[Context]) -> dict:
    ctx = runtime.context
    if planner_slot.spec_text(ctx):  # an agent fills the planner slot (agents/group/slot.py)
        return _agent_planner(state, ctx)
    db = _db(ctx.params)
    plan = build_plan(db, city=state["city"], start_date=state["start_date"], n_days=ctx.params.n_days,
                      members=[m["name"] for m in state["members"]], decisions=state["decisions"])
    failures = []
    model = ctx.model("planner")
    if not model.is_none:
        plan, failures = write_plan_with_model(model, plan, db, state["decisions"])
        failures = [{**f, "role": "planner"} for f in failures]
    if ctx.params.reference == "gaming":   # every meal in one place, every wish pasted into the text
        wishes = [t["text"] for t in state["transcript"] if t["meta"].get("intent", "").startswith("user_provide_")]
        plan = gaming_plan(plan, _city_db(ctx.params, state["city"]), state["city"], wishes)
    elif ctx.params.reference == "place_everything":   # every place of the city on day 1, untimed
        plan = place_everything_plan(plan, _city_db(ctx.params, state["city"]), state["city"])
    t = _turn(state, 1)
    present = f"Here is your plan. {plan['raw_output']}"
    turn = {"turn": t, "speaker": "system", "text": present, "meta": {"intent": "sys_present_plan", "plan": plan}}
    return {"turn": t, "plan": plan, "transcript": [turn], "llm_failures": failures}


def _agent_planner(state: State, ctx: Context) -> dict:
    plan, meta = planner_slot.agent_plan(state, text_spec=planner_slot.spec_text(ctx),
                                         db=_city_db(ctx.params, state["city"]), n_days=ctx.params.n_days)
    t = _turn(state, 1)
    turn = {"turn": t, "speaker": "system", "text": f"Here is your plan. {plan['raw_output']}",
            "meta": {"intent": "sys_present_plan", "plan": plan, **meta}}
    return {"turn": t, "plan": plan, "transcript": [turn]}


def members_respond(state: State, runtime: Runtime[Context]) -> dict:
    """Each member who spoke accepts or rejects the plan (convsim.agents.group.member_voice)."""
    from convsim.evaluation.group.plan_metrics import member_rates, satisfaction_table
    ctx = runtime.context
    speakers = state["members"] if ctx.params.flags()["multi_user"] else state["members"][:1]
    prefs = {(m["name"], s): m["preferences"][s]["text"] for m in speakers for s in PLAN_SLOTS}
    db = _city_db(ctx.params, state["city"])
    embedder = dialogue_embedder(ctx.embedder_spec, db, transcript_to_turns(state["transcript"]))
    table = satisfaction_table(prefs, plan=state["plan"], db=db, embedder=embedder)
    rates = member_rates(table)
    from convsim.agents.group.member_view import view_verdict
    from convsim.evaluation.group.plan_feasibility import lived_plan
    lived, counts = lived_plan(state["plan"], db, group_size=len(state["members"]))
    model = ctx.model("member")
    t, turns, failures = _turn(state), [], []
    for m in speakers:
        # the member's own view of the plan it would live through (agents/group/member_view.py)
        ok, text, _ = view_verdict(m, lived, counts, db, seed=ctx.seed, threshold=ctx.params.acceptance_threshold)
        source = "rule"
        if not model.is_none:
            llm_ok, llm_text, failure = verdict_with_model(model, m, state["plan"]["raw_output"])
            failures += [{**failure, "role": "member"}] if failure else []
            if llm_ok is not None:
                ok, text, source = llm_ok, llm_text, model.spec.spec
        t += 1
        turns.append({"turn": t, "speaker": m["name"], "text": text,
                      "meta": {"intent": "user_accept_plan" if ok else "user_reject_plan",
                               "satisfaction": rates.get(m["name"]), "verdict_source": source}})
    return {"turn": t, "transcript": turns, "llm_failures": failures}


def evaluate_dialogue(state: State, runtime: Runtime[Context]) -> dict:
    ctx = runtime.context
    flags = {**ctx.params.flags(), "member_count": len(state["members"])}
    turns = transcript_to_turns(state["transcript"])
    db = _city_db(ctx.params, state["city"])   # the session's reference info, as a CSV carries it
    metrics, settings = evaluate_group_dialogue(turns, state["plan"], db, flags=flags,
                                                embedder=dialogue_embedder(ctx.embedder_spec, db, turns),
                                                members=state["members"])
    metrics["llm_failures"] = len(state.get("llm_failures", []))
    metrics.update(planner_slot.mask_plan_metrics(state, metrics))  # an agent's plan without days: None, why
    counts = [len(d["selected"]) for subs in state["decisions"].values() for sub, d in subs.items()
              if sub in OPTION_SLOTS]
    metrics["options_in_plan"] = sum(counts) / len(counts) if counts else None
    emit_metrics(runtime, turn=state["turn"], metrics=metrics, kind="dialogue")
    return {"dialogue_metrics": metrics, "metric_settings": settings}


def build(params: Params) -> StateGraph:
    g = StateGraph(State, context_schema=Context)
    for name, fn in (("open_session", open_session), ("ask_slot", ask_slot), ("member_speak", member_speak),
                     ("synthesize", synthesize), ("feedback", feedback), ("evaluate_slot", evaluate_slot),
                     ("planner", planner), ("members_respond", members_respond),
                     ("evaluate_dialogue", evaluate_dialogue)):
        g.add_node(name, fn)
    g.add_edge(START, "open_session")
    g.add_edge("open_session", "ask_slot")
    g.add_conditional_edges("ask_slot", fan_out, ["member_speak"])
    g.add_edge("member_speak", "synthesize")
    g.add_conditional_edges("synthesize", after_synthesis, ["feedback", "evaluate_slot"])
    g.add_conditional_edges("feedback", after_synthesis, ["feedback", "evaluate_slot"])
    g.add_conditional_edges("evaluate_slot", next_step, ["ask_slot", "planner"])
    g.add_edge("planner", "members_respond")
    g.add_edge("members_respond", "evaluate_dialogue")
    g.add_edge("evaluate_dialogue", END)
    return g


def sessions(params: Params, ctx: Context):
    """Sessions cycle through the group types, so truncating to N keeps them balanced."""
    db = _db(params)
    cities = db.cities()
    for i in range(params.n_sessions):
        group_type = params.group_types[i % len(params.group_types)]
        sid = f"{group_type}-{i:03d}"
        seed = stable_seed(ctx.seed, sid)
        rng = rng_for(seed, "trip")
        start = dt.date(2026, 6, 1) + dt.timedelta(days=rng.randint(0, 10 - params.n_days))
        yield {"session_id": sid, "group_type": group_type, "city": rng.choice(cities),
               "start_date": start.strftime("%d-%m-%Y"),
               "members": make_group(group_type, seed, params.agreement)}


def _budget_of(records: list[dict]):
    """The option budget of a condition's sessions; None where nothing is synthesised (C1/C2)."""
    if not records or not records[0].get("params"):
        return None
    p = Params(**{k: v for k, v in (records[0].get("params") or {}).items() if k in Params.model_fields})
    return p.option_budget if p.flags()["enable_synthesis"] else None


def _model_failure_flags(state: State, roles: tuple[str, ...], check: str) -> list[dict]:
    return [{"check": check, "detail": f"{f['role']}{' ' + str(f['slot']) if f.get('slot') else ''}: "
                                       f"{f.get('error')}; raw: {str(f.get('raw'))[:200]}"}
            for f in state.get("llm_failures") or [] if f.get("role") in roles]


def agent_checks(state: State) -> list[dict]:
    """A synthesis or planner model that answered invalid output was replaced by the rule-based
    decision or plan: what was scored is the rules', so the session is an agent failure (scored),
    never a silent "ok" with the rules' scores."""
    return _model_failure_flags(state, ("synthesis", "planner"), "agent_model_failed")


def simulator_checks(state: State) -> list[dict]:
    """Flags of a simulated member that did not state (or contradicted) its own profile
    (agents/group/fidelity.py), or whose model answered invalid output (the rule-based member spoke
    instead); a flagged session is a simulator failure, not a planner score."""
    from convsim.agents.group.fidelity import group_simulator_checks
    return list(group_simulator_checks(state)) + _model_failure_flags(state, ("member",), "member_model_failed")


def dataset_metrics(records: list[dict]) -> dict:
    """Pooled M10 and M2 false alarms, sessions whose worst-off member got 0, the options the
    decisions hold per slot beside the option budget, and how the semantic metrics were computed
    (convsim.evaluation.group.dataset)."""
    return {**group_dataset_metrics(records), "option_budget": _budget_of(records)}


def figures(records: list[dict], out_dir) -> list[str]:
    return group_figures(records, out_dir)


graph = compile_with_default_context(build(Params()))

# The agent slot (convsim.slots): the planner under test, the built-in rule planner by default.
SLOTS = {planner_slot.ROLE: planner_slot.SLOT}

# Headline metrics, shown first in the summary table (convsim.cli.print_summary).
SUMMARY_METRICS = ["W1", "W2", "W3", "W3_zero_members", "options_in_plan", "M1", "M2", "M2_false_alarm", "M3",
                   "M4", "M4b", "M5", "M6", "M9", "M9_repairs", "M10", "M11", "M16"]

# Counts behind the pooled figures: set by what the simulated members stated (the same members and
# words in each paired session), not by the planner; descriptives only, no between-variant test
# (evaluation/reporting/run_stats.py), and the reason shown under the name in report.html.
_COUNT = ("a count set by the simulated members' stated preferences (the denominator of a pooled figure), "
          "not by the planner; not tested between variants")
UNCOMPARED_METRICS = {m: _COUNT for m in ("M10_pairs", "M2_agreeing_slots")}
METRIC_NOTES = dict(UNCOMPARED_METRICS)

# The range of each dialogue metric whose bounds follow from its definition (docs/metrics.md §4,
# docs/group_planning.md): shares and W1-W3 (means, minimum and geometric mean of per-member shares) in
# [0, 1], M12/M14 embedding cosines in [-1, 1], counts >= 0. Not M13 (a Gini of per-member M12 means,
# which can be negative with a sentence embedder). A mean's 95% CI is clipped to it (ci_clipped) and a
# value outside it is a warning (docs/ENGINE_API.md).
METRIC_RANGES = {
    **{m: (0.0, 1.0) for m in ("M1", "M2", "M2_precision", "M2_recall", "M2_false_alarm", "M3", "M3_reported",
                               "M4", "M4_reported", "M4b", "M5", "M5_reported", "M6",
                               "M7_feedback_turn_overhead", "M8", "M8a", "M8b", "M8_placed", "M9", "M10", "M10b",
                               "M11", "M15", "M16", "W1", "W2", "W3", "W1_all_members", "W2_all_members",
                               "W3_all_members", "M11_all_members")},
    **{m: (-1.0, 1.0) for m in ("M12", "M14")},
    **{m: (0.0, None) for m in ("M7_total_turns", "M7_turns_per_slot", "M10_pairs", "M10_satisfied_pairs",
                                "M2_agreeing_slots", "M2_false_alarms", "W3_zero_members",
                                "W3_zero_members_all_members", "M9_repairs", "llm_failures", "options_in_plan")},
}

# What each headline metric means, in one line, and which way is better (report.html's answer
# sentences and headline table, `convsim compare`). "*": any characters, as in METRIC_RANGES.
METRIC_DESCRIPTIONS = {
    "W1": "mean member satisfaction: share of each member's stated preferences the plan meets, averaged",
    "W2": "satisfaction of the worst-off member (minimum share of preferences met)",
    "W3": "geometric mean of member satisfaction (0 when any member gets nothing)",
    "W3_zero_members": "members whose preferences the plan meets not at all (count)",
    "options_in_plan": "options the plan's decisions hold per slot (diagnostic beside W1-W3)",
    "M1": "share of members who stated a preference (voice coverage)",
    "M2": "conflict detection: F1 of the slots the planner flags against the slots where the members' wishes differ",
    "M2_false_alarm": "share of agreeing slots the planner wrongly reports as conflicts",
    "M3": "share of synthesised slots whose explanation names the members' wishes and the decision, in its own words",
    "M4": "share of synthesised slots whose named strategy shows in the plan (include_both: two wishes met)",
    "M4b": "share of synthesis and plan turns leaking the theory's vocabulary",
    "M5": "share of slots where wishes differ on which a member gave feedback about its own wish",
    "M6": "share of members who accept the plan",
    "M9": "share of the plan's places found in the catalog (grounding)",
    "M9_repairs": "places a validator had to replace after the plan was proposed (count)",
    "M10": "share of all members' stated preferences the plan meets (pooled satisfaction)",
    "M11": "share of members with every stated preference met",
    "M16": "share of plan coherence checks passed (meals filled, no repeats)",
}
METRIC_DIRECTIONS = {
    **{m: "higher" for m in ("W1", "W2", "W3", "M1", "M2", "M3", "M5", "M6", "M9", "M10", "M11", "M16")},
    **{m: "lower" for m in ("W3_zero_members", "M2_false_alarm", "M4b", "M9_repairs")},
    **{m: None for m in ("options_in_plan", "M4")},  # a diagnostic; M4 is 0 by design when theory is off
}
