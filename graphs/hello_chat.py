"""A minimal topology to copy: a scripted user asks for facts, an agent answers, a node scores each turn.

It shows the whole graph-file contract in one page (State, Context, Params, build, sessions,
dataset_metrics, graph) and runs with model ``none`` or with any chat model for the agent.
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from convsim import SessionContext, compile_with_default_context, emit_metrics, rng_for
from convsim.agents.language import node_vocabulary
from convsim.slots import Slot
from convsim.slots.nodes import call_slot, is_builtin

FACTS = {
    "capital of france": "Paris", "boiling point of water": "100 degrees Celsius",
    "author of hamlet": "William Shakespeare", "largest planet": "Jupiter",
    "speed of light": "299,792 kilometres per second", "chemical symbol for gold": "Au",
}


class State(TypedDict, total=False):
    session_id: str
    turn: int
    questions: list[str]
    transcript: Annotated[list[dict], operator.add]
    turn_metrics: Annotated[list[dict], operator.add]
    dialogue_metrics: dict
    judgements: Annotated[list[dict], operator.add]  # the judge's structured verdicts, raw text kept


class Params(BaseModel):
    """Scenario parameters."""

    n_turns: int = Field(3, ge=1, le=len(FACTS), description="questions per session")
    n_sessions: int = Field(10, ge=1, description="sessions that sessions() yields")
    judge_retries: int = Field(1, ge=0, le=5, description="retries of an invalid judge answer")
    agents: dict[str, str] = Field(default_factory=dict, description="role -> agent spec (--agent agent=SPEC)")


# the system under test: the researcher's own agent fills it with --agent agent=SPEC (docs/agents.md)
SLOTS = {"agent": Slot(role="agent", handed="the conversation so far: the user's fact questions, its own answers",
                       returns="reply", builtins=("facts",), language="en", vocabulary=node_vocabulary)}

MODEL_ROLES = ("agent", "judge")  # judge: optional, a model that checks each answer (structured output)


class Verdict(BaseModel):
    """The judge's structured answer."""

    correct: bool
    reason: str = ""


@dataclass
class Context(SessionContext):
    params: Params = field(default_factory=Params)  # defaults: runs with no context (langgraph dev)


def user(state: State, runtime: Runtime[Context]) -> dict:
    turn = state.get("turn", 0) + 1
    q = state["questions"][turn - 1]
    return {"turn": turn, "transcript": [{"turn": turn, "speaker": "user", "text": f"What is the {q}?",
                                          "meta": {"topic": q}}]}


def agent(state: State, runtime: Runtime[Context]) -> dict:
    question = state["transcript"][-1]["text"]
    spec = runtime.context.params.agents.get("agent")
    if spec and not is_builtin(spec, SLOTS["agent"]):  # the researcher's agent: convsim.slots
        turn, meta = call_slot(spec, SLOTS["agent"], state["transcript"], context={"turn": state["turn"]},
                               session_id=runtime.context.session_id)
        return {"transcript": [{"turn": state["turn"], "speaker": "agent", "text": turn.text, "meta": meta}]}
    model = runtime.context.model("agent")
    if model.is_none:
        # the scripted user tags its topic; a user from elsewhere (openevals) only sends text
        topic = state["transcript"][-1].get("meta", {}).get("topic") or next(
            (t for t in FACTS if t in question.lower()), None)
        text = f"The {topic} is {FACTS[topic]}." if topic else "I do not know."
    else:
        from convsim.agents.language import node_vocabulary
        from convsim.providers.answer_check import checked_invoke
        # English, with the words a shipped node knows (convsim.agents.language)
        answer = checked_invoke(model, [("system", "Answer in one short sentence."), ("user", question)],
                                purpose="answer", language="en", vocabulary=node_vocabulary())
        if not answer.ok:  # garbage or nothing: the agent failed this turn (scored incorrect, raw kept,
            # flagged by agent_checks: the session is an agent_failure, never a silent ok)
            return {"transcript": [{"turn": state["turn"], "speaker": "agent", "text": "",
                                    "meta": {"model_failed": f"invalid answer ({answer.reason})",
                                             "raw": answer.raw}}]}
        text = answer.text
    return {"transcript": [{"turn": state["turn"], "speaker": "agent", "text": text, "meta": {}}]}


def answer_correct(answer: str, expected: str) -> bool:
    """Whether the expected fact appears in the answer (case-insensitive, word boundaries)."""
    return re.search(rf"\b{re.escape(expected.lower())}\b", answer.lower()) is not None


def evaluate_turn(state: State, runtime: Runtime[Context]) -> dict:
    turn = state["turn"]
    topic = state["questions"][turn - 1]
    correct = answer_correct(state["transcript"][-1]["text"], FACTS[topic])
    metrics = {"correct": float(correct), "answer_words": len(state["transcript"][-1]["text"].split())}
    update: dict = {}
    judge = runtime.context.model("judge")
    if not judge.is_none:
        # a garbage verdict is kept with its raw text and flags the session (simulator_checks)
        verdict = judge.structured([("system", "Is the answer correct? Reply as JSON."), (
            "user", f"Question: {state['transcript'][-2]['text']}\nAnswer: {state['transcript'][-1]['text']}")],
            Verdict, purpose="judge", retries=runtime.context.params.judge_retries)
        metrics["judge_correct"] = float(verdict.value.correct) if verdict.ok else None
        update["judgements"] = [{"turn": turn, **verdict.as_record()}]
    emit_metrics(runtime, turn=turn, metrics=metrics)
    return {"turn_metrics": [{"turn": turn, **metrics}], **update}


def evaluate_dialogue(state: State) -> dict:
    correct = [m["correct"] for m in state["turn_metrics"]]
    return {"dialogue_metrics": {"accuracy": sum(correct) / len(correct), "turns": len(correct)}}


def route(state: State, runtime: Runtime[Context]) -> str:
    return "evaluate_dialogue" if state["turn"] >= runtime.context.params.n_turns else "user"


def build(params: Params, agent_node=None) -> StateGraph:
    """The topology; ``agent_node`` swaps in another agent (a graph file wrapping this one)."""
    g = StateGraph(State, context_schema=Context)
    g.add_node("user", user)
    g.add_node("agent", agent_node or agent)
    g.add_node("evaluate_turn", evaluate_turn)
    g.add_node("evaluate_dialogue", evaluate_dialogue)
    g.add_edge(START, "user")
    g.add_edge("user", "agent")
    g.add_edge("agent", "evaluate_turn")
    g.add_conditional_edges("evaluate_turn", route, ["user", "evaluate_dialogue"])
    g.add_edge("evaluate_dialogue", END)
    return g


def sessions(params: Params, ctx: Context):
    for i in range(params.n_sessions):
        sid = f"s{i:03d}"
        topics = sorted(FACTS)
        rng_for(ctx.seed, sid, "topics").shuffle(topics)
        yield {"session_id": sid, "turn": 0, "questions": topics[:params.n_turns]}


# Optional, read by the trace viewer (docs/tracing.md): the state keys each turn metric is
# computed from, and the value under which a turn metric is linked to the steps that made it.
METRIC_INPUTS = {"correct": ["transcript", "questions"], "answer_words": ["transcript"]}
METRIC_THRESHOLDS = {"correct": 1.0}

# Optional: the range of each dialogue metric, from its definition ((low, high), None for an unbounded
# side; a "*" in a name matches any characters). A mean's 95% CI is clipped to it (ci_clipped in
# summary.json), and a value outside it is warned of as a bug (docs/ENGINE_API.md).
METRIC_RANGES = {"accuracy": (0.0, 1.0), "turns": (0.0, None)}

METRIC_DESCRIPTIONS = {"accuracy": "share of questions the agent answered correctly", "turns": "turns in the dialogue"}
METRIC_DIRECTIONS = {"accuracy": "higher", "turns": None}


def simulator_checks(state: State) -> list[dict]:
    """A judge that answered garbage failed (not the agent): the session is kept, not scored."""
    return [{"check": "judge_invalid", "detail": f"turn {j['turn']}: {j['error']}; raw: {j['raw'][:200]}"}
            for j in state.get("judgements") or [] if not j["ok"]]


def agent_checks(state: State) -> list[dict]:
    """The agent failed when its model answered garbage or nothing (scored incorrect, raw answer kept)
    or when it said nothing at all (an agent in the slot): the session is an agent failure (scored),
    never a silent ``ok``. Copy this into a graph of your own."""
    failed = [{"check": "agent_model_failed", "detail": f"turn {e['turn']}: {e['meta']['model_failed']}; "
                                                        f"raw: {str(e['meta'].get('raw'))[:200]!r}"}
              for e in state.get("transcript") or []
              if e.get("speaker") == "agent" and (e.get("meta") or {}).get("model_failed")]
    return failed or [{"check": "empty_answer", "detail": f"turn {t.get('turn')}: the agent's answer is empty"}
                      for t in state.get("transcript") or []
                      if t.get("speaker") == "agent" and not str(t.get("text") or "").strip()]


def dataset_metrics(records: list[dict]) -> dict:
    correct = turns = 0
    for r in records:  # counted as they stream by: a run's records are read from disk (a RecordSet)
        for m in r.get("turn_metrics", []):
            correct, turns = correct + m["correct"], turns + 1
    return {"pooled_turn_accuracy": correct / turns if turns else None}


graph = compile_with_default_context(build(Params()))
