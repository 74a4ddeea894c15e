"""A weak model's answers in group planning (an audit with gemma3-270m): JSON that validates but says
nothing is a failed answer, and a request the server refused is nobody's behaviour.

- D1: the planner's ``{"days": [], "summary": "a short text for the group"}`` (the prompt's
  placeholder) passed as ``ok``; the rule plan's days stayed in place and were scored as the model's.
- D2: a member verdict whose utterance was ``"Utterance"`` (the schema field's title) was read as
  the member accepting the plan (M6), status ``ok``.
- D3: an HTTP 400 (context length exceeded) in the C4/C5 synthesis wording became an agent
  failure and the run exited 0; it is a ``code_error`` (re-run on resume, exit 3).
"""
import json
import re

import pytest
from langchain_core.messages import AIMessage

import convsim
from convsim import StructuredResult, models, stable_seed
from convsim.store import RunStore
from graphs.group_planning import Context, Params, agent_checks, graph, sessions, simulator_checks

pytestmark = pytest.mark.filterwarnings("ignore")

PLACEHOLDER_SUMMARY = "a short text for the group"   # prompts/group_planner.txt, the answer template


class FakeModel:
    """A ChatModel double: ``answer(purpose, messages)`` is the JSON a structured call gets back;
    ``invoke`` returns ``text`` or raises it."""

    is_none = False

    def __init__(self, answer=None, text="", spec="fake:model"):
        self.answer, self.text, self.spec = answer, text, type("S", (), {"spec": spec})()

    def structured(self, messages, schema, *, purpose="", retries=2):
        raw = self.answer(purpose, messages)
        try:
            return StructuredResult(ok=True, value=schema.model_validate(raw), raw=json.dumps(raw), attempts=1)
        except Exception as exc:   # noqa: BLE001
            return StructuredResult(ok=False, raw=json.dumps(raw), error=str(exc), attempts=1)

    def invoke(self, messages, purpose=""):
        if isinstance(self.text, Exception):
            raise self.text
        return self.text


def _run(condition, role=None, model=None, **params):
    p = Params(condition=condition, n_sessions=1, **params)
    s = next(iter(sessions(p, Context(params=p, seed=11))))
    return graph.invoke(s, context=Context(params=p, seed=stable_seed(11, s["session_id"]), session_id=s["session_id"],
                                           models={role: model} if role else {}))


class Backend:
    """The provider behind a real ChatModel: an HTTP 400 (no answer), or a fixed answer."""

    def __init__(self, answer):
        self.answer = answer

    def invoke(self, messages, **kwargs):
        if isinstance(self.answer, Exception):
            raise self.answer
        return AIMessage(self.answer, usage_metadata={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2})


def _day(n, **places):
    return {"days": n, "breakfast": "-", "lunch": "-", "dinner": "-", "attraction": "-", "event": "-",
            "accommodation": "-", "point_of_interest_list": "", **places}


# ------------------------------------------------------------------------------- D1: the planner

PLAN_ANSWERS = {   # name: (the planner model's answer for a 3-day plan, failed?)
    "no days, the placeholder summary (the audit's answer)": ({"days": [], "summary": PLACEHOLDER_SUMMARY}, True),
    "no days": ({"days": [], "summary": "Three relaxed days for the whole family."}, True),
    "one day of three": ({"days": [_day(1)], "summary": "Three relaxed days for the whole family."}, True),
    "every day, the placeholder summary": ({"days": [_day(i) for i in (1, 2, 3)],
                                            "summary": PLACEHOLDER_SUMMARY}, True),
    "every day, the placeholder in a sentence": ({"days": [_day(i) for i in (1, 2, 3)],
                                                  "summary": f"Here it is: {PLACEHOLDER_SUMMARY}."}, True),
    "every day, the field's title as summary": ({"days": [_day(i) for i in (1, 2, 3)], "summary": "Summary"}, True),
    "every day, an empty summary": ({"days": [_day(i) for i in (1, 2, 3)], "summary": "  "}, True),
    "every day, a summary (control)": ({"days": [_day(i) for i in (1, 2, 3)],
                                        "summary": "Three relaxed days for the whole family."}, False),
}


@pytest.mark.parametrize("name", sorted(PLAN_ANSWERS))
def test_a_plan_without_every_day_or_with_the_prompts_summary_is_a_failed_answer(name):
    answer, failed = PLAN_ANSWERS[name]
    state = _run("C4", "planner", FakeModel(lambda purpose, messages: answer, spec="fake:planner"))
    plan, flags = state["plan"], [f for f in agent_checks(state) if f["check"] == "agent_model_failed"]
    present = next(t for t in state["transcript"] if t["meta"].get("intent") == "sys_present_plan")
    if not failed:
        assert not flags and not state["llm_failures"]
        assert plan["validation"]["source"] == "fake:planner" and plan["raw_output"] == answer["summary"]
        assert plan["as_proposed"]["days"] == answer["days"]
        return
    # before: no failure, no flag (status ok), plan.as_proposed = the model's days, the placeholder
    # presented as the plan's text, and the rule plan's days scored as the model's
    (failure,) = state["llm_failures"]
    assert failure["role"] == "planner" and failure["raw"] == json.dumps(answer)   # the raw answer kept
    assert len(flags) == 1 and "planner plan" in flags[0]["detail"]               # -> agent_failure
    assert plan["validation"]["source"] == "rules (fallback)"                     # labelled as such
    assert plan["validation"]["model"] == "fake:planner" and plan["validation"]["model_error"]
    assert "as_proposed" not in plan                                              # no model plan to ground
    assert PLACEHOLDER_SUMMARY not in present["text"] and plan["raw_output"] != answer["summary"]


def test_the_audits_empty_plan_makes_an_agent_failure_in_a_run(tmp_path, monkeypatch):
    # the audit's record: status ok, no agent flag; the session now says the planner failed
    answer = json.dumps({"days": [], "summary": PLACEHOLDER_SUMMARY})
    monkeypatch.setattr(models, "_backend", lambda spec, *timeout: Backend(answer))
    run_dir = convsim.run({"name": "g", "graph": "group_planning", "sessions": 1, "out_dir": str(tmp_path),
                           "analysis": [], "trace": False, "params": {"condition": "C4"},
                           "models": {"planner": "ollama:fake"}}, run_id="r", analyze=False)
    (rec,) = RunStore(run_dir).records()
    assert rec["status"] == "agent_failure"
    assert [f["check"] for f in rec["agent_flags"]] == ["agent_model_failed"]
    assert PLACEHOLDER_SUMMARY in rec["agent_flags"][0]["detail"]            # with the raw answer
    assert rec["plan"]["validation"]["source"] == "rules (fallback)"
