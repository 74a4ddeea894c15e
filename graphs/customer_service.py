"""Multi-agent customer service on MultiWOZ domains (spec 004), in replay and in simulation.

Flat topology (no subgraphs, so LangGraph time travel works at every node):

    user -> triage -> memory -> policy -> action -> supervisor -> response -> evaluate_turn -> user
    user --(dialogue over)--> finish -> END      any agent node --(exception)--> finish

``Params.mode = "replay"`` feeds real dialogues (ConvLab-3 unified or MultiWOZ 2.2) turn by
turn and scores predictions against the gold annotations; ``"simulate"`` runs the
agenda-based user simulator on goals sampled from the database. Relative paths in Params are
resolved against the project root (the folder that holds ``graphs/``), so
``../shared/data/multiwoz/...`` works from a config. See docs/customer_service.md.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import BaseModel, Field

from agents.service.action import ACTION_CLASS, decide_action
from agents.service.judge import judge_turn
from agents.service.memory import flat_belief, update_belief
from agents.service.policy import check_policy, missing_for_booking, required_slots
from agents.service.response import llm_response, template_response
from agents.service.supervisor import ground_action, supervise
from agents.service.triage import llm_triage, rule_triage
from agents.service.scripted import scripted_user_info as _scripted_user_info
from agents.service.user_simulator import (TerminationReason, new_user_state, sample_goal,
                                           simulator_complete, user_turn)
from catalog.service.multiwoz import load_dialogues
from catalog.service.db import load_service_db, load_service_schema
from convsim import ConvsimError, SessionContext, emit_metrics, stable_seed
from convsim.prefix import scripted_pair
from evaluation.service import metrics as metrics
from evaluation.service.scoring import score_dataset, score_dialogue, score_turn
from evaluation.service.success import task_success

PROJECT_ROOT = Path(__file__).resolve().parents[1]


class State(TypedDict, total=False):
    session_id: str
    transcript: Annotated[list[dict], operator.add]
    turn_metrics: Annotated[list[dict], operator.add]
    dialogue_metrics: dict
    mode: str
    turn: int
    replay: dict | None            # replay: the recorded dialogue
    goal: dict | None              # simulate: the task
    user_state: dict | None        # simulate: the simulator's agenda state
    user: dict                     # this turn's user utterance and its gold annotation
    triage: dict
    belief: dict
    domain_history: list[str]
    transfers: Annotated[list[dict], operator.add]
    policy: dict
    proposed: dict
    supervision: dict
    action: dict                   # the approved action
    response: str
    offered: dict
    asked: dict
    outcomes: dict
    turn_log: Annotated[list[dict], operator.add]
    termination: str | None
    errors: Annotated[list[dict], operator.add]
    prefix: dict | None            # scripted opening turns (convsim/prefix.py), then the simulator
    metric_conventions: dict


class Params(BaseModel):
    """Scenario parameters of the customer-service graph."""
    mode: Literal["replay", "simulate"] = Field("simulate", description="replay real dialogues or simulate users")
    dialogues_path: str | None = Field(None, description="replay: unified JSON, 2.2 dialogues_*.json, or a 2.2 folder")
    dialog_acts_path: str | None = Field(None, description="replay 2.2: dialog_acts.json (default: beside the dialogues)")
    db_path: str | None = Field(None, description="folder of <domain>_db.json; default catalog/data/service")
    schema_path: str | None = Field(None, description="MultiWOZ 2.2 schema.json; default the project's")
    n_sessions: int = Field(200, ge=1, description="simulate: number of goals (tasks)")
    max_turns: int = Field(20, ge=2, description="simulate: user turns before max_turns termination")
    judge: bool = Field(True, description="score each response with the judge (heuristic when model none)")


@dataclass
class Context(SessionContext):
    pass


def _path(p: str | None) -> str | None:
    if p is None:
        return None
    path = Path(p)
    return str(path if path.is_absolute() else (PROJECT_ROOT / path).resolve())


def _db(ctx: Context):
    return load_service_db(_path(ctx.params.db_path) if ctx.params else None)


def _schema(ctx: Context):
    return load_service_schema(_path(ctx.params.schema_path) if ctx.params else None)


def _fail(node: str, err: Exception, reason: TerminationReason) -> Command:
    if isinstance(err, ConvsimError):
        raise err
    return Command(goto="finish", update={"termination": reason.value,
                                          "errors": [{"node": node, "error": repr(err)}]})


def user(state: State, runtime: Runtime[Context]) -> Command[Literal["triage", "finish"]]:
    ctx, turn = runtime.context, state.get("turn", 0)
    try:
        if state.get("mode") == "replay":
            turns = state["replay"]["turns"]
            if turn >= len(turns):
                return Command(goto="finish", update={"termination": TerminationReason.REPLAY_END.value})
            t = turns[turn]
            info = {"text": t["user"], "gold_domain": t["gold_domain"], "gold_intent": t["gold_intent"],
                    "gold_state": t["gold_state"], "gold_act_types": t["gold_act_types"],
                    "user_acts": t["user_acts"], "gold_system": t["system"]}
            update: dict = {}
        elif scripted_pair(state, turn + 1):  # a scripted opening turn, then the simulator takes over
            info, update = _scripted_user_info(state, turn + 1), {}
        else:
            us, out = user_turn(state["user_state"], state.get("action") if turn else None, db=_db(ctx),
                                seed=ctx.seed, max_turns=ctx.params.max_turns)
            info = dict(out, gold_act_types=None)
            update = {"user_state": us}
            if out["termination"] == TerminationReason.MAX_TURNS.value:
                return Command(goto="finish", update={**update, "termination": out["termination"]})
            # user_stop / no_progress: the system still answers the last utterance, then finish
            update["termination"] = out["termination"]
    except ConvsimError:
        raise
    except Exception as err:  # noqa: BLE001 - a simulator crash is a simulator error, not the agent's
        return _fail("user", err, TerminationReason.USER_ERROR)
    entry = {"turn": turn + 1, "speaker": "user", "text": info["text"],
             "meta": {k: info.get(k) for k in ("gold_domain", "gold_intent")}}
    if info.get("scripted"):
        entry["meta"]["scripted"] = True
    update.update(turn=turn + 1, user=info, transcript=[entry])
    return Command(goto="triage", update=update)


def triage(state: State, runtime: Runtime[Context]) -> Command[Literal["memory", "finish"]]:
    ctx = runtime.context
    try:
        history = state.get("domain_history", [])
        prev = history[-1] if history else None
        model = ctx.model("triage")
        text = state["user"]["text"]
        if model.is_none:
            result = rule_triage(text, prev_domain=prev, db=_db(ctx))
        else:
            lines = [f"{e['speaker']}: {e['text']}" for e in state.get("transcript", [])]
            result = llm_triage(model, text, prev_domain=prev, history=lines, db=_db(ctx))
    except Exception as err:  # noqa: BLE001
        return _fail("triage", err, TerminationReason.AGENT_ERROR)
    return Command(goto="memory", update={"triage": result})


def memory(state: State, runtime: Runtime[Context]) -> Command[Literal["policy", "finish"]]:
    try:
        t = state["triage"]
        history = list(state.get("domain_history", []))
        belief, events = update_belief(state.get("belief", {}), domain=t["domain"], slots=t["slots"],
                                       refer=t["refer"], domain_history=history, turn=state["turn"])
        if t["domain"] not in (None, "general") and (not history or history[-1] != t["domain"]):
            history.append(t["domain"])
    except Exception as err:  # noqa: BLE001
        return _fail("memory", err, TerminationReason.AGENT_ERROR)
    return Command(goto="policy", update={"belief": belief, "domain_history": history, "transfers": events})


def policy(state: State, runtime: Runtime[Context]) -> Command[Literal["action", "finish"]]:
    try:
        t = state["triage"]
        result = check_policy(_schema(runtime.context), domain=t["domain"], intent=t["intent"],
                              belief=state["belief"], offered=state.get("offered", {}))
    except Exception as err:  # noqa: BLE001
        return _fail("policy", err, TerminationReason.AGENT_ERROR)
    return Command(goto="action", update={"policy": result})


def action(state: State, runtime: Runtime[Context]) -> Command[Literal["supervisor", "finish"]]:
    ctx = runtime.context
    try:
        proposed = decide_action(state["triage"], belief=state["belief"], policy=state["policy"],
                                 offered=state.get("offered", {}), asked=state.get("asked", {}),
                                 db=_db(ctx), schema=_schema(ctx))
    except Exception as err:  # noqa: BLE001
        return _fail("action", err, TerminationReason.AGENT_ERROR)
    return Command(goto="supervisor", update={"proposed": proposed})


def supervisor(state: State, runtime: Runtime[Context]) -> Command[Literal["response", "finish"]]:
    ctx = runtime.context
    try:
        verdict = supervise(state["proposed"], belief=state["belief"], offered=state.get("offered", {}),
                            db=_db(ctx), schema=_schema(ctx))
        act = verdict["action"]
        offered, asked = dict(state.get("offered", {})), {k: list(v) for k, v in state.get("asked", {}).items()}
        outcomes = {k: {**v, "informed": dict(v["informed"]), "bookings": list(v["bookings"])}
                    for k, v in state.get("outcomes", {}).items()}
        d = act.get("domain")
        if act.get("entity") and d:
            offered[d] = act["entity"]
            o = outcomes.setdefault(d, {"entity": None, "informed": {}, "bookings": []})
            if o["entity"] != act["entity"]:
                o["informed"] = {}
            o["entity"] = act["entity"]
            o["informed"].update(act.get("informed", {}))
            if act["kind"] == "book":
                o["bookings"].append({"entity": act["entity"], "booking": act["booking"],
                                      "reference": act["reference"]})
        if act.get("requested") and d:
            asked.setdefault(d, []).extend(s for s in act["requested"] if s not in asked.get(d, []))
    except Exception as err:  # noqa: BLE001
        return _fail("supervisor", err, TerminationReason.AGENT_ERROR)
    return Command(goto="response", update={"supervision": verdict, "action": act, "offered": offered,
                                            "asked": asked, "outcomes": outcomes})


def response(state: State, runtime: Runtime[Context]) -> Command[Literal["evaluate_turn", "finish"]]:
    ctx = runtime.context
    try:
        model = ctx.model("response")
        meta: dict = {"action": state["action"]["kind"], "acts": state["action"]["acts"]}
        if model.is_none:
            text = template_response(state["action"])
        else:
            lines = [f"{e['speaker']}: {e['text']}" for e in state.get("transcript", [])]
            out = llm_response(model, state["action"], lines)
            text, meta["failure"] = out["text"], out["failure"]
    except Exception as err:  # noqa: BLE001
        return _fail("response", err, TerminationReason.AGENT_ERROR)
    pair = scripted_pair(state, state["turn"]) if state["user"].get("scripted") else None
    if pair and pair.get("system") is not None:  # the scripted reply replaces the agent's text
        text, meta = pair["system"], dict(meta, scripted=True, agent_text=text)
    entry = {"turn": state["turn"], "speaker": "system", "text": text, "meta": meta}
    return Command(goto="evaluate_turn", update={"response": text, "transcript": [entry]})


def evaluate_turn(state: State, runtime: Runtime[Context]) -> dict:
    ctx, act, u, t = runtime.context, state["action"], state["user"], state["triage"]
    schema, db = _schema(ctx), _db(ctx)
    pred = flat_belief(state["belief"])
    d = act.get("domain")
    missing = []
    if act.get("kind") == "book":
        frame = {**state["belief"].get(d, {}), **act.get("booking", {})}
        missing = missing_for_booking(schema, d, frame, act.get("entity"))
    gd = u.get("gold_domain")
    acts = [a.get("intent") for a in u.get("user_acts", [])]
    user_act = ("bye" if "bye" in acts else "thank" if "thank" in acts and gd == "general"
                else "request" if "request" in acts else "inform")
    offered_before = [e for e in state.get("turn_log", []) if e.get("offered_domain") == gd]
    gold_missing = [s for s in required_slots(schema, gd or "") if f"{gd}-{s}" not in u.get("gold_state", {})
                    and not (s in ("name", "departure", "destination", "day") and offered_before)]
    expected = metrics.expected_action(user_act=user_act, intent=u.get("gold_intent"), domain=gd,
                                       missing_required=gold_missing)
    actual = ACTION_CLASS.get(act["kind"], act["kind"])
    mentions = ground_action(act, db)
    judge = None
    if ctx.params.judge:
        checks = {"requested": [r for r in t.get("requested", []) if act.get("kind") == "inform"],
                  "informed": act.get("informed", {}), "grounded": all(x["grounded"] for x in mentions),
                  "compliant": not missing, "action_ok": expected in (None, actual)}
        judge = judge_turn(ctx.model("judge"), user=u["text"], response=state["response"], checks=checks)
    scores = score_turn(user=u, triage=t, pred_state=pred, action=act, mentions=mentions,
                        missing_required=missing, expected=expected, actual=actual, judge=judge)
    if judge:
        scores.update(judge=judge["judge"], judge_model=judge["model"],
                      judge_prompt_version=judge["prompt_version"], judge_raw=judge["raw"])
    scores["supervisor_blocks"] = len(state["supervision"]["violations"])
    emit_metrics(runtime, turn=state["turn"], metrics={k: v for k, v in scores.items()
                                                       if isinstance(v, (int, float)) or v is None})
    log = {"turn": state["turn"], "gold_domain": gd, "gold_state": u.get("gold_state", {}), "pred_state": pred,
           "offered_domain": d if act.get("entity") else None, "gold_intent": u.get("gold_intent")}
    return {"turn_metrics": [{"turn": state["turn"], **scores}], "turn_log": [log]}


def finish(state: State, runtime: Runtime[Context]) -> dict:
    ctx = runtime.context
    turns, log = state.get("turn_metrics", []), state.get("turn_log", [])
    events = metrics.memory_transfer_events(log)
    final = log[-1]["pred_state"] if log else {}
    booking_goals, requested = _customer_goal(state, ctx)
    outcomes = state.get("outcomes", {})
    completion = metrics.task_completion_dialogue(
        booking_goals=booking_goals,
        booked_domains={d for d, o in outcomes.items() if o.get("bookings")}, final_state=final,
        requested=requested, informed={d: set(o.get("informed", {})) for d, o in outcomes.items()},
        offered={d for d, o in outcomes.items() if o.get("entity")})
    errors = state.get("errors", [])
    extra = {"termination": state.get("termination"),
             "agent_errors": sum(e["node"] != "user" for e in errors),
             "simulator_errors": sum(e["node"] == "user" for e in errors),
             "supervisor_blocks": sum(t.get("supervisor_blocks", 0) for t in turns)}
    if state.get("mode") == "simulate" and state.get("goal"):
        extra["task_success"] = task_success(state["goal"], outcomes, _db(ctx))["success"]
        extra["sim_complete"] = int(simulator_complete(state["user_state"]))
    dm = score_dialogue(turns, transfer_events=events, completion=completion, extra=extra)
    emit_metrics(runtime, turn=None, metrics={k: v for k, v in dm.items() if isinstance(v, (int, float))},
                 kind="dialogue")
    return {"dialogue_metrics": dm, "metric_conventions": metrics.AGGREGATION}


def _customer_goal(state: State, ctx: Context) -> tuple[dict, dict]:
    """Booking goals and requests: from the simulator's goal, or derived from the replay gold."""
    schema = _schema(ctx)
    if state.get("goal"):
        gs = state["goal"]["domains"]
        return ({g["domain"]: list(required_slots(schema, g["domain"])) for g in gs if g.get("book")},
                {g["domain"]: list(g["requests"]) for g in gs if g["requests"]})
    booking, requested = {}, {}
    for t in (state.get("replay") or {}).get("turns", []):
        d = t.get("gold_domain")
        if d and t.get("gold_intent") == f"book_{d}" and schema.bookable(d):
            booking[d] = list(required_slots(schema, d))
        for r in t.get("gold_requested", []):
            dom, slot = r.split("-", 1)
            if dom in ("restaurant", "hotel", "attraction", "train"):
                requested.setdefault(dom, [])
                if slot not in requested[dom]:
                    requested[dom].append(slot)
    return booking, requested


def _after_turn(state: State) -> str:
    return "finish" if state.get("termination") else "user"


def build(params: Params) -> StateGraph:
    g = StateGraph(State, context_schema=Context)
    for name, fn in (("user", user), ("triage", triage), ("memory", memory), ("policy", policy),
                     ("action", action), ("supervisor", supervisor), ("response", response),
                     ("evaluate_turn", evaluate_turn), ("finish", finish)):
        g.add_node(name, fn)
    g.add_edge(START, "user")
    g.add_conditional_edges("evaluate_turn", _after_turn, ["user", "finish"])
    g.add_edge("finish", END)
    return g


def sessions(params: Params, ctx: Context):
    """Replay: one session per recorded dialogue. Simulate: one per goal; a goal depends on the
    base seed and the session id only, so every trial and variant sees the same task."""
    base = {"belief": {}, "domain_history": [], "offered": {}, "asked": {}, "outcomes": {},
            "turn": 0, "termination": None, "mode": params.mode}
    if params.mode == "replay":
        if not params.dialogues_path:
            raise ConvsimError("replay mode needs dialogues_path", field="params.dialogues_path")
        for d in load_dialogues(_path(params.dialogues_path), dialog_acts=_path(params.dialog_acts_path)):
            yield {**base, "session_id": d["dialogue_id"], "replay": d, "goal": None, "user_state": None}
        return
    db = load_service_db(_path(params.db_path))
    for i in range(params.n_sessions):
        sid = f"task-{i:04d}"
        goal = sample_goal(db, stable_seed(ctx.seed, "goal", sid))
        yield {**base, "session_id": sid, "replay": None, "goal": goal, "user_state": new_user_state(goal)}


def simulator_checks(state: State) -> list[dict]:
    """Flags of a user that leaked its goal, answered as the agent, or a replay that ran out of turns
    (agents/service/fidelity.py); a flagged session is a simulator failure, not an agent score."""
    from agents.service.fidelity import service_simulator_checks
    return service_simulator_checks(state)


def dataset_metrics(records: list[dict]) -> dict:
    return score_dataset(records)


graph = build(Params()).compile()

# Headline metrics, shown first in the summary table (convsim.cli.print_summary).
SUMMARY_METRICS = ["task_success", "task_completion", "system_correctness", "joint_goal_accuracy",
                   "slot_accuracy", "slot_precision", "db_grounding", "domain_routing", "intent_accuracy",
                   "memory_transfer", "policy_violations", "response_quality"]

# Which state keys feed each turn metric, and when a value counts as low: `convsim trace` and the
# report link a low turn metric to the node steps of its turn that wrote these keys.
METRIC_INPUTS = {
    "domain_routing": ["triage"], "intent_accuracy": ["triage"], "act_type_accuracy": ["action", "response"],
    "slot_accuracy": ["triage", "belief"], "joint_goal_accuracy": ["belief", "transfers"],
    "slot_precision": ["triage", "belief"], "db_grounding": ["action", "supervision", "offered"],
    "policy_compliance": ["policy", "supervision"], "system_correct": ["policy", "action", "supervision"],
    "response_quality": ["response"],
}
METRIC_THRESHOLDS = {"domain_routing": 1, "intent_accuracy": 1, "slot_accuracy": 1.0, "joint_goal_accuracy": 1,
                     "slot_precision": 1.0, "db_grounding": 1.0, "policy_compliance": 1, "system_correct": 1,
                     "response_quality": 3}
