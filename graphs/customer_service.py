"""Multi-agent customer service on MultiWOZ domains (MAS4CS), in replay and in simulation.

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

import functools
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import BaseModel, Field

from convsim.agents.service import faults
from convsim.agents.service import slot as service_slot
from convsim.agents.service.action import ACTION_CLASS, decide_action
from convsim.agents.service.fidelity import misstated_values
from convsim.agents.service.judge import judge_turn
from convsim.agents.service.llm_nodes import llm_action, llm_policy
from convsim.agents.service.paraphrase import llm_realise, realise
from convsim.agents.service.memory import update_belief
from convsim.agents.service.policy import check_policy, required_slots
from convsim.agents.service.response import llm_response, template_response
from convsim.agents.service.supervisor import supervise
from convsim.agents.service.triage import llm_triage, rule_triage
from convsim.agents.service.scripted import scripted_user_info as _scripted_user_info
from convsim.agents.service.user_simulator import (TerminationReason, new_user_state, sample_goal,
                                           simulator_complete, user_turn)
from convsim.catalog.service.multiwoz import load_dialogues
from convsim.catalog.service.db import load_service_db, load_service_schema
from convsim import compile_with_default_context
from convsim import ConvsimError, SessionContext, emit_metrics, rng_for, stable_seed
from convsim.config import path_component
from convsim.errors import SimulatorError
from convsim.providers.models import ModelUnavailable, refused_request
from convsim.running.prefix import scripted_pair
from convsim.evaluation.service.failed_turns import failed_nodes, score_failed_dialogue, score_failed_turn
from convsim.evaluation.service import metrics as metrics
from convsim.evaluation.service.judge_flags import judge_invalid_flags
from convsim.evaluation.service.scoring import score_dataset, score_dialogue
from convsim.evaluation.service.success import said_from_log, task_success
from convsim.evaluation.service.sim_checks import simulator_checks as evaluator_simulator_checks
from convsim.evaluation.service.turn_eval import SUPPORTED, UNSUPPORTED, evaluate_turn_state
from convsim.evaluation.service.state_grading import bookings_from_outcomes, grade_bookings
from convsim.evaluation.service.unreported import mask_dialogue, mask_turn

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
    user_llm: dict | None          # simulate with a user model: its last call (raw answer kept)
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
    prefix: dict | None            # scripted opening turns (convsim/running/prefix.py), then the simulator
    metric_conventions: dict
    agent_bookings: list[dict]     # an agent in the service slot: its session's bookings (agents/service/tools.py)
    agent_reported: list[str]      # ... and the structured outputs it reported this turn


class Params(BaseModel):
    """Scenario parameters of the customer-service graph."""
    mode: Literal["replay", "simulate"] = Field("simulate", description="replay real dialogues or simulate users")
    dialogues_path: str | None = Field(None, description="replay: unified JSON, 2.2 dialogues_*.json, or a 2.2 folder")
    dialog_acts_path: str | None = Field(None, description="replay of MultiWOZ 2.2 dialogues only: dialog_acts.json "
                                         "(default: beside the dialogues); unused by unified dialogues and in "
                                         "simulate mode, but a path that names no file is refused in any mode")
    db_path: str | None = Field(None, description="folder of <domain>_db.json; default catalog/data/service")
    schema_path: str | None = Field(None, description="MultiWOZ 2.2 schema.json; default the project's")
    n_sessions: int = Field(200, ge=1, description="simulate: number of goals (tasks)")
    max_turns: int = Field(20, ge=2, description="simulate: user turns before max_turns termination")
    judge: bool = Field(True, description="score each response with the judge (heuristic when model none)")
    supervisor: bool = Field(True, description="run the supervisor's checks (off: the proposed action is executed)")
    fault: Literal[faults.FAULTS] = Field("none", description="inject one broken agent (agents/service/faults.py)")
    fault_rate: float = Field(1.0, ge=0, le=1, description="share of eligible turns the fault fires on")
    surface: Literal["templates", "heldout"] = Field(
        "templates", description="simulate: the simulator's own wording, or held-out paraphrases the triage never saw")
    policy_request_rate: float = Field(0.0, ge=0, le=1, description="simulate: share of goal domains with an "
                                       "impossible constraint first / a bare 'book it' without details")
    check_booking: bool = Field(False, description="simulate: the customer checks a booking's details against "
                                "its own and asks again when one is missing or different (off: any reference "
                                "is accepted)")
    agents: dict[str, str] = Field(default_factory=dict, description="agent slots: {'service': SPEC} puts your agent "
                                   "in place of the built-in pipeline (docs/agents.md)")
    goal_domains: list[Literal["restaurant", "hotel", "attraction", "train"]] | None = Field(
        None, min_length=1, description="simulate: the domains goals are drawn from (default all four)")
    human_corpus: str | None = Field(None, description="human dialogues of the same task (unified, 2.2 or convsim "
                                     "records): the fidelity hook compares the simulated user with them")


@dataclass
class Context(SessionContext):
    params: Params = field(default_factory=Params)  # defaults: runs with no context (langgraph dev)


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
    if isinstance(err, (ConvsimError, ModelUnavailable)) or refused_request(err):
        raise err  # bad input, the server's fault, or a request it refused (an HTTP 400): the engine's
    return Command(goto="finish", update={"termination": reason.value,
                                          "errors": [{"node": node, "error": repr(err)}]})


def user(state: State, runtime: Runtime[Context]) -> Command[Literal["triage", "service_agent", "finish"]]:
    ctx, turn = runtime.context, state.get("turn", 0)
    try:
        if state.get("mode") == "replay":
            turns = state["replay"]["turns"]
            if turn >= len(turns):
                return Command(goto="finish", update={"termination": TerminationReason.REPLAY_END.value})
            t = turns[turn]
            info = {"text": t["user"], "gold_domain": t["gold_domain"], "gold_intent": t["gold_intent"],
                    "gold_state": t["gold_state"], "gold_act_types": t["gold_act_types"],
                    "user_acts": t["user_acts"], "gold_system": t["system"],
                    "gold_intent_source": t.get("gold_intent_source", "annotation")}
            update: dict = {}
        elif scripted_pair(state, turn + 1):  # a scripted opening turn, then the simulator takes over
            info, update = _scripted_user_info(state, turn + 1), {}
        else:
            us, out = user_turn(state["user_state"], state.get("action") if turn else None, db=_db(ctx),
                                seed=ctx.seed, max_turns=ctx.params.max_turns,
                                check_booking=ctx.params.check_booking)
            info = dict(out, gold_act_types=None)
            update = {"user_state": us}
            if out["text"] and out.get("move") != "none":
                info["template_text"] = out["text"]
                info["text"], update["user_llm"] = _surface(state, ctx, out, us, turn + 1)
                # a value said other than the one the simulator meant is the simulator's failure
                info["misstated"] = misstated_values(info["text"], out, _db(ctx))
            if out["termination"] == TerminationReason.MAX_TURNS.value:
                return Command(goto="finish", update={**update, "termination": out["termination"]})
            # user_stop / no_progress: the system still answers the last utterance, then finish
            update["termination"] = out["termination"]
    except (ConvsimError, SimulatorError, ModelUnavailable):
        raise
    except Exception as err:  # noqa: BLE001 - a simulator crash is a simulator error, not the agent's
        return _fail("user", err, TerminationReason.USER_ERROR)  # (a refused request re-raises there)
    entry = {"turn": turn + 1, "speaker": "user", "text": info["text"],
             "meta": {k: info.get(k) for k in ("gold_domain", "gold_intent", "move", "template_text", "user_acts")}}
    if info.get("scripted"):
        entry["meta"]["scripted"] = True
    if info.get("misstated"):
        entry["meta"]["misstated"] = info["misstated"]
    if (update.get("user_llm") or {}).get("fallback"):  # the user model failed: the rule user spoke
        entry["meta"]["user_model_fallback"] = {k: update["user_llm"].get(k) for k in ("error", "raw")}
    update.update(turn=turn + 1, user=info, transcript=[entry])
    return Command(goto=service_slot.route(ctx, "triage"), update=update)  # an agent in the slot, or the pipeline


def _surface(state: State, ctx: Context, out: dict, user_state: dict, turn: int) -> tuple[str, dict | None]:
    """The wording of the simulator's move: template, held-out paraphrase, or the ``user`` model."""
    goals = [g for g in user_state["goal"]["domains"] if g["domain"] == out.get("gold_domain")]
    model = ctx.model("user")
    if not model.is_none:
        lines = [f"{e['speaker']}: {e['text']}" for e in state.get("transcript", [])]
        # an invalid answer: the rule user's own wording says the move (flagged on the turn, counted in
        # user_model_fallbacks) so that the agent is still evaluated
        return llm_realise(model, out["move"], out, lines, fallback=out["text"])
    if ctx.params.surface == "heldout":
        return realise(out["move"], out, goals[0] if goals else None, rng_for(ctx.seed, turn, "user", "surface")), None
    return out["text"], None


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
        if ctx.params.fault == "misroute":
            result = faults.misroute(result, seed=ctx.seed, turn=state["turn"], rate=ctx.params.fault_rate)
    except Exception as err:  # noqa: BLE001
        return _fail("triage", err, TerminationReason.AGENT_ERROR)
    return Command(goto="memory", update={"triage": result})


def memory(state: State, runtime: Runtime[Context]) -> Command[Literal["policy", "finish"]]:
    try:
        t = state["triage"]
        history = list(state.get("domain_history", []))
        belief, events = update_belief(state.get("belief", {}), domain=t["domain"], slots=t["slots"],
                                       refer=t["refer"], domain_history=history, turn=state["turn"])
        ctx = runtime.context
        if ctx.params.fault == "forget_area":
            belief = faults.forget_area(belief, domain=t["domain"], previous=history[-1] if history else None,
                                        seed=ctx.seed, turn=state["turn"], rate=ctx.params.fault_rate)
        if t["domain"] not in (None, "general") and (not history or history[-1] != t["domain"]):
            history.append(t["domain"])
    except Exception as err:  # noqa: BLE001
        return _fail("memory", err, TerminationReason.AGENT_ERROR)
    return Command(goto="policy", update={"belief": belief, "domain_history": history, "transfers": events})


def policy(state: State, runtime: Runtime[Context]) -> Command[Literal["action", "finish"]]:
    try:
        t = state["triage"]
        ctx = runtime.context
        model = ctx.model("policy")
        if model.is_none:
            result = check_policy(_schema(ctx), domain=t["domain"], intent=t["intent"],
                                  belief=state["belief"], offered=state.get("offered", {}))
        else:
            result = llm_policy(model, _schema(ctx), domain=t["domain"], intent=t["intent"],
                                belief=state["belief"], offered=state.get("offered", {}))
    except Exception as err:  # noqa: BLE001
        return _fail("policy", err, TerminationReason.AGENT_ERROR)
    return Command(goto="action", update={"policy": result})


def action(state: State, runtime: Runtime[Context]) -> Command[Literal["supervisor", "finish"]]:
    ctx = runtime.context
    try:
        model = ctx.model("action")
        decide = decide_action if model.is_none else functools.partial(llm_action, model)
        proposed = decide(state["triage"], belief=state["belief"], policy=state["policy"],
                          offered=state.get("offered", {}), asked=state.get("asked", {}),
                          db=_db(ctx), schema=_schema(ctx))
        p = ctx.params
        if p.fault == "book_missing_slots":
            proposed = faults.book_missing_slots(proposed, triage=state["triage"], policy=state["policy"],
                                                 belief=state["belief"], db=_db(ctx), seed=ctx.seed,
                                                 turn=state["turn"], rate=p.fault_rate)
        elif p.fault == "ungrounded_action":
            proposed = faults.ungrounded_action(proposed, seed=ctx.seed, turn=state["turn"], rate=p.fault_rate)
        elif p.fault == "never_book":
            proposed = faults.never_book(proposed, domain_schema=_schema(ctx), seed=ctx.seed, turn=state["turn"],
                                         rate=p.fault_rate)
    except Exception as err:  # noqa: BLE001
        return _fail("action", err, TerminationReason.AGENT_ERROR)
    return Command(goto="supervisor", update={"proposed": proposed})


def supervisor(state: State, runtime: Runtime[Context]) -> Command[Literal["response", "finish"]]:
    ctx = runtime.context
    try:
        if ctx.params.supervisor:
            verdict = supervise(state["proposed"], belief=state["belief"], offered=state.get("offered", {}),
                                db=_db(ctx), schema=_schema(ctx))
        else:  # ablation: whatever the action agent proposed is executed
            verdict = {"action": state["proposed"], "violations": [], "approved": True, "disabled": True}
        act = verdict["action"]
        applied = service_slot.apply_action(state, act)  # what was offered, asked and booked after it
        offered, asked, outcomes = applied["offered"], applied["asked"], applied["outcomes"]
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
        explanation = state.get("policy", {}).get("explanation")
        if explanation and state["action"]["kind"] == "request":
            text = f"{explanation} {text}"  # the policy agent's own words on why it cannot book yet
        if ctx.params.fault == "invent_entity":
            text = faults.invent_entity(text, state["action"], seed=ctx.seed, turn=state["turn"],
                                        rate=ctx.params.fault_rate)
        elif ctx.params.fault == "silent_actions":
            text = faults.silent_actions(text, state["action"], seed=ctx.seed, turn=state["turn"],
                                         rate=ctx.params.fault_rate)
    except Exception as err:  # noqa: BLE001
        return _fail("response", err, TerminationReason.AGENT_ERROR)
    pair = scripted_pair(state, state["turn"]) if state["user"].get("scripted") else None
    if pair and pair.get("system") is not None:  # the scripted reply replaces the agent's text
        text, meta = pair["system"], dict(meta, scripted=True, agent_text=text)
    entry = {"turn": state["turn"], "speaker": "system", "text": text, "meta": meta}
    return Command(goto="evaluate_turn", update={"response": text, "transcript": [entry]})




def service_agent(state: State, runtime: Runtime[Context]) -> Command[Literal["evaluate_turn"]]:
    """The agent filling the ``service`` slot answers the turn (agents/service/slot.py); its faults are
    the engine's to classify (AgentError: agent_failure with the raw answer; ModelUnavailable: infra)."""
    ctx = runtime.context
    return Command(goto="evaluate_turn", update=service_slot.agent_update(
        state, text_spec=service_slot.spec_text(ctx), db=_db(ctx), schema=_schema(ctx)))


def evaluate_turn(state: State, runtime: Runtime[Context]) -> dict:
    ctx = runtime.context
    judge_fn = functools.partial(judge_turn, ctx.model("judge")) if ctx.params.judge else None
    scores, log = evaluate_turn_state(state, schema=_schema(ctx), db=_db(ctx), action_class=ACTION_CLASS,
                                      judge_fn=judge_fn)
    # a turn whose agent model failed is scored as failed, not as its rule fallback's success
    scores = score_failed_turn(scores, failed_nodes(scores, (state.get("transcript") or [None])[-1]))
    if state.get("agent_reported") is not None:  # an agent in the slot: what it did not report is None
        scores, why = mask_turn(scores, state["agent_reported"])
        scores["unreported"] = why or None
    emit_metrics(runtime, turn=state["turn"], metrics={k: v for k, v in scores.items()
                                                       if isinstance(v, (int, float)) or v is None})
    return {"turn_metrics": [{"turn": state["turn"], **scores}], "turn_log": [log]}


def finish(state: State, runtime: Runtime[Context]) -> dict:
    ctx = runtime.context
    turns, log = state.get("turn_metrics", []), state.get("turn_log", [])
    if state.get("mode") == "simulate" and state.get("goal"):  # opportunities from the goal, not the agent
        transfer_all = metrics.memory_transfer_goal_events(state["goal"], log)
        events = [e for e in transfer_all if not e.get("restated")]
        restated = len(transfer_all) - len(events)
    else:  # replay: the recording's gold state (fixed, whatever the agent does)
        events, restated = metrics.memory_transfer_events(log), metrics.memory_transfer_restated(log)
    final = log[-1]["pred_state"] if log else {}
    booking_goals, requested = _customer_goal(state, ctx)
    outcomes = state.get("outcomes", {})
    # what reached the customer in the reply text: a booking counts once its reference was said,
    # a fact once its value was said about that entity (evaluation/service/response_grounding.py)
    said = said_from_log(log)
    heard = {d: said.get(d) or {"entities": set(), "references": set(), "facts": set()} for d in outcomes}
    completion = metrics.task_completion_dialogue(
        booking_goals=booking_goals,
        booked_domains={d for d, o in outcomes.items()
                        if any(b.get("reference") in heard[d]["references"] for b in o.get("bookings", []))},
        final_state=final, requested=requested,
        informed={d: {s for s in o.get("informed", {}) if (str(o.get("entity") or "").lower(), s)
                      in heard[d]["facts"]} for d, o in outcomes.items()},
        offered={d for d, o in outcomes.items() if o.get("entity")})
    errors = state.get("errors", [])
    extra = {"termination": state.get("termination"),
             "agent_errors": sum(e["node"] != "user" for e in errors),
             "simulator_errors": sum(e["node"] == "user" for e in errors),
             # user turns that stated a value other than the simulator's own (a simulator failure)
             "simulator_misstatements": sum(bool((e.get("meta") or {}).get("misstated"))
                                            for e in state.get("transcript", []) if e.get("speaker") == "user"),
             "supervisor_blocks": sum(t.get("supervisor_blocks", 0) for t in turns),
             "memory_transfer_restated": restated,
             "memory_transfer_unreached": sum(not e.get("reached", 1) for e in events),
             # user turns whose LLM wording was invalid, said by the rule user instead
             "user_model_fallbacks": sum(bool((e.get("meta") or {}).get("user_model_fallback"))
                                         for e in state.get("transcript", []) if e.get("speaker") == "user")}
    if state.get("mode") == "replay":  # what the recording was: kept as notes, never a simulator's failure
        from convsim.evaluation.service.replay_notes import replay_notes
        extra.update(replay_notes(state))

    unsupported = sorted({e["gold_domain"] for e in log if e.get("gold_domain") in UNSUPPORTED})
    extra["unsupported_domains"] = unsupported
    if completion is None:
        extra["task_completion_excluded"] = ("domain " + ", ".join(unsupported) if unsupported
                                             else "no booking or information goal in a supported domain")
    if state.get("mode") == "simulate" and state.get("goal"):
        verdict = task_success(state["goal"], outcomes, _db(ctx), said=said)
        extra["task_success"] = verdict["success"]  # gated on the reply text
        extra["task_success_structured"] = verdict["structured_success"]  # the actions alone, as before
        extra["sim_complete"] = int(simulator_complete(state["user_state"]))
    if state.get("mode") == "simulate" and state.get("goal"):  # graded from the bookings the agent left
        bookings = (state.get("agent_bookings") if state.get("agent_reported") is not None
                    else bookings_from_outcomes(outcomes))
        graded = grade_bookings(state["goal"], bookings or [], _db(ctx), _schema(ctx))
        extra.update({k: graded[k] for k in ("task_success_state", "policy_compliance_state", "bookings_made",
                                             "bookings_expected")},
                     state_grading={k: graded[k] for k in ("missing", "extra", "wrong", "violations")})
    dm = score_failed_dialogue(score_dialogue(turns, transfer_events=events, completion=completion, extra=extra),
                               turns)
    if state.get("agent_reported") is not None:
        dm, why = mask_dialogue(dm, sorted({k for e in state.get("transcript", []) if e.get("speaker") == "system"
                                            for k in (e.get("meta") or {}).get("reported", [])}))
        dm["unreported"] = why or None
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
        if d in SUPPORTED and t.get("gold_intent") == f"book_{d}" and schema.bookable(d):
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
                     ("service_agent", service_agent), ("evaluate_turn", evaluate_turn), ("finish", finish)):
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
        for d in _replay_dialogues(params):
            yield {**base, "session_id": d["dialogue_id"], "replay": d, "goal": None, "user_state": None}
        return
    db = load_service_db(_path(params.db_path))
    for i in range(params.n_sessions):
        sid = f"task-{i:04d}"
        goal = sample_goal(db, stable_seed(ctx.seed, "goal", sid), policy_rate=params.policy_request_rate,
                           domains=params.goal_domains)
        yield {**base, "session_id": sid, "replay": None, "goal": goal, "user_state": new_user_state(goal)}


def _failed_model_detail(turn: int, node: str, failure: dict) -> str:
    head = f"turn {turn}: {node} answered invalid output (rule fallback used)"
    if not failure:  # a record from before the raw answers were kept per turn
        return head
    # the raw answer first: a long validation error would push it past the cut
    return f"{head}; raw: {str(failure.get('raw'))[:200]!r}; error: {failure.get('error')}"[:400]


def agent_checks(state: State) -> list[dict]:
    """An agent node that raised ends the dialogue gracefully (termination ``agent_error``, the
    error in ``errors``) so its metrics are still computed; an agent model (triage, policy, action,
    response) that answered invalid output was replaced by its rule or template fallback. Either
    way the session is an agent failure (scored)."""
    flags = [{"check": "agent_error", "detail": f"{e['node']}: {e['error']}"[:300]}
             for e in state.get("errors") or [] if e.get("node") != "user"]
    # a model of the system under test answered garbage and its rule fallback took over: what was
    # scored is the fallback's, so the session is the agent's failure (scored, never a silent "ok")
    flags += [{"check": "agent_model_failed",
               "detail": _failed_model_detail(i, node, (m.get("llm_failure_raw") or {}).get(node) or {})}
              for i, m in enumerate(state.get("turn_metrics") or [], 1) for node in m.get("llm_failed_nodes") or []]
    flags += [{"check": "agent_model_failed", "detail": f"turn {e.get('turn')}: response: "
                                                        f"{e['meta']['failure'].get('error')} (template used)"[:300]}
              for e in state.get("transcript") or []
              if e.get("speaker") == "system" and (e.get("meta") or {}).get("failure")]
    return flags


def simulator_checks(state: State) -> list[dict]:
    """Flags of a simulated (or replayed) customer that failed as a simulator: the evaluator's
    checks (evaluation/service/sim_checks.py: replay ran out, spoke as the agent, leaked its goal,
    said goodbye early, never stated its goal), the fidelity checks of agents/service/fidelity.py, and
    a response judge whose answer was invalid after its retries on every judged turn (one failed turn
    drops that turn's judge score only: evaluation/service/judge_flags.py). A flagged session is a simulator failure, not a customer-service score."""
    from convsim.agents.service.fidelity import service_simulator_checks
    if state.get("mode") == "replay":  # a recording is no simulator: it cannot fail as one (replay_notes);
        # a judge can, and so can the node reading the recording (user_error: never a silent ok)
        return [f for f in evaluator_simulator_checks(state) if f["check"] == "user_error"] + _judge_flags(state)
    out = [dict(f) for f in evaluator_simulator_checks(state)]  # one flag per turn that tripped a check
    # both sets may flag the same thing (goal_leak, _check_goal_leak): the evaluator's flags, one per
    # turn, are kept; a fidelity check (first turn only) is added where the evaluator has no such flag
    named = {f.get("check") for f in out}
    out += [f for f in service_simulator_checks(state)
            if str(f.get("check", "")).removeprefix("_check_") not in named]
    return out + _judge_flags(state)


def _judge_flags(state: State) -> list[dict]:
    # a failed judge answer drops that turn's response_quality only; the session is flagged (one flag
    # per failed turn, with its raw answer) when the judge failed on every judged turn
    return judge_invalid_flags(state.get("turn_metrics") or [])


def dataset_metrics(records: list[dict]) -> dict:
    return score_dataset(records)


MODEL_ROLES = ("user", "triage", "policy", "action", "response", "judge")  # the roles the nodes ask ctx.model() for


def _replay_dialogues(params: Params) -> list[dict]:
    """The replayed dialogues, every dialogue id checked as a session id (it names the session's
    trace file): a bad one is an error naming the dialogue file, before any session runs."""
    if not params.dialogues_path:
        raise ConvsimError("replay mode needs dialogues_path", field="params.dialogues_path")
    dialogues = load_dialogues(_path(params.dialogues_path), dialog_acts=_path(params.dialog_acts_path))
    index: dict[str, int] = {}
    for d in dialogues:
        n = index[d["file"]] = index.get(d["file"], -1) + 1
        try:
            path_component(str(d["dialogue_id"]), "dialogue id")
        except ValueError as exc:
            raise ConvsimError(f"{exc}; it becomes the session id", file=d["file"],
                               record=f"{d['dialogue_id']!r} (index {n})", field="dialogue_id") from None
    return dialogues


def preflight(params: Params, ctx: Context) -> None:
    """Load the database and the schema before the first session; a ``dialog_acts_path`` that names
    no file is refused in every mode (it is read only in replay of MultiWOZ 2.2 dialogues). The
    engine's preflight then draws the first session, which reads the replay dialogue files and
    checks every dialogue id (``_replay_dialogues``)."""
    _db(ctx)
    _schema(ctx)
    acts = _path(params.dialog_acts_path)
    if acts is not None and not Path(acts).is_file():
        raise ConvsimError("no dialog acts file (dialog_acts.json) there", file=acts, field="params.dialog_acts_path")


graph = compile_with_default_context(build(Params()))

# The agent slot (convsim.slots): the customer-service system under test, the built-in pipeline by default.
SLOTS = {service_slot.ROLE: service_slot.SLOT}

# Headline metrics, shown first in the summary table (convsim.cli.print_summary).
SUMMARY_METRICS = ["task_success", "task_completion", "system_correctness", "joint_goal_accuracy",
                   "domain_routing", "intent_accuracy", "intent_accuracy_rule_gold", "memory_transfer",
                   "policy_violations", "text_hallucination", "response_grounding", "db_grounding_proposed",
                   "db_grounding",
                   "supervisor_corrections", "slot_accuracy", "act_type_accuracy", "response_quality",
                   "heuristic_response_quality"]  # the latter when the judge is the heuristic (model none)

# Which state keys feed each turn metric, and when a value counts as low: `convsim trace` and the
# report link a low turn metric to the node steps of its turn that wrote these keys.
# The range of each dialogue metric whose bounds follow from its definition (docs/customer_service.md,
# docs/metrics.md §3): accuracies, rates and 0/1 outcomes in [0, 1], judge scores 1-5, counts >= 0. A
# mean's 95% CI is clipped to it (ci_clipped) and a value outside it is a warning (docs/ENGINE_API.md).
METRIC_RANGES = {
    **{m: (0.0, 1.0) for m in ("domain_routing", "intent_accuracy", "intent_accuracy_rule_gold", "act_type_accuracy",
                               "slot_accuracy", "joint_goal_accuracy", "slot_precision", "slot_false_discovery",
                               "db_grounding", "db_grounding_proposed", "text_hallucination", "response_grounding",
                               "memory_transfer", "system_correctness", "policy_decision_accuracy",
                               "action_selection_accuracy", "task_completion", "task_completion_gated",
                               "task_success", "task_success_structured", "sim_complete", "task_success_state",
                               "policy_compliance_state")},
    **{m: (1.0, 5.0) for m in ("response_quality", "heuristic_response_quality")},
    **{m: (0.0, None) for m in ("db_mentions", "text_mentions", "response_acts_checked", "response_ungrounded_turns",
                                "supervisor_corrections", "booking_unconfirmed", "unsupported_turns",
                                "system_correct_unscored", "memory_transfer_opportunities", "memory_transfer_restated",
                                "memory_transfer_unreached", "policy_violations",
                                "n_turns", "judge_failures", "judge_calls", "llm_failures",
                                "refusals_unscored_by_judge", "agent_errors", "simulator_errors",
                                "simulator_misstatements", "supervisor_blocks", "bookings_made", "bookings_expected",
                                "user_model_fallbacks", "agent_model_failed_turns")},
}

# What each headline metric means, in one line, and which way is better (report.html's answer
# sentences and headline table, `convsim compare`). "*": any characters, as in METRIC_RANGES.
METRIC_DESCRIPTIONS = {
    "task_success": "share of dialogues whose offered or booked entities meet every goal constraint and request",
    "task_completion": "share of dialogues with required slots filled and a confirmed booking or every request informed",
    "system_correctness": "share of turns with the expected action, grounded in the database and within policy",
    "joint_goal_accuracy": "share of turns whose whole predicted dialogue state equals the gold state",
    "domain_routing": "share of turns routed to the gold domain",
    "intent_accuracy": "share of turns whose predicted intent equals the gold intent",
    "intent_accuracy_rule_gold": "intent accuracy against the rule-derived gold intent",
    "memory_transfer": "share of opportunities where a slot (area, price) is carried over to the next domain",
    "policy_violations": "policy breaches per dialogue (count)",
    "text_hallucination": "share of entity and fact mentions in replies not found in the database",
    "response_grounding": "share of the executed action's acts the reply actually states",
    "db_grounding_proposed": "share of mentions grounded in the database, before the supervisor's corrections",
    "db_grounding": "share of mentioned entities and facts that match the database",
    "supervisor_corrections": "actions the supervisor had to correct per dialogue (count)",
    "slot_accuracy": "share of gold slot values in the predicted state (recall)",
    "act_type_accuracy": "share of turns whose dialogue act types equal the gold ones",
    "response_quality": "judge score 1-5 of the replies",
    "heuristic_response_quality": "rule-based score 1-5 (model none): 5 minus points for ungrounded, off-policy, wrong or unanswered replies",
}
METRIC_DIRECTIONS = {
    **{m: "higher" for m in ("task_success", "task_completion", "system_correctness", "joint_goal_accuracy",
                             "domain_routing", "intent_accuracy", "intent_accuracy_rule_gold", "memory_transfer",
                             "response_grounding", "db_grounding_proposed", "db_grounding", "slot_accuracy",
                             "act_type_accuracy", "response_quality", "heuristic_response_quality")},
    **{m: "lower" for m in ("policy_violations", "text_hallucination", "supervisor_corrections")},
}

METRIC_INPUTS = {
    "domain_routing": ["triage"], "intent_accuracy": ["triage"], "act_type_accuracy": ["action", "response"],
    "slot_accuracy": ["triage", "belief"], "joint_goal_accuracy": ["belief", "transfers"],
    "slot_precision": ["triage", "belief"], "db_grounding": ["action", "supervision", "offered"],
    "policy_compliance": ["policy", "supervision"], "system_correct": ["policy", "action", "supervision"],
    "response_quality": ["response"], "heuristic_response_quality": ["response"],
    "db_grounding_proposed": ["proposed"], "response_grounding": ["response", "action"],
}
METRIC_THRESHOLDS = {"domain_routing": 1, "intent_accuracy": 1, "slot_accuracy": 1.0, "joint_goal_accuracy": 1,
                     "slot_precision": 1.0, "db_grounding": 1.0, "policy_compliance": 1, "system_correct": 1,
                     "response_quality": 3, "heuristic_response_quality": 3, "db_grounding_proposed": 1.0,
                     "response_grounding": 1.0}
