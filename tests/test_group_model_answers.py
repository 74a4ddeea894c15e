"""A weak model's answers in group planning (an audit with gemma3-270m): JSON that validates but says
nothing is a failed answer, and a request the server refused is nobody's behaviour.

- D1: the planner's ``{"days": [], "summary": "a short text for the group"}`` (the prompt's
  placeholder) passed as ``ok``; the rule plan's days stayed in place and were scored as the model's.
- D2: a member verdict whose utterance was ``"Utterance"`` (the schema field's title) was read as
  the member accepting the plan (M6), status ``ok``.
- D3: an HTTP 400 (context length exceeded) in the C4/C5 synthesis wording became an agent
  failure and the run exited 0; it is a ``code_error`` (re-run on resume, exit 3).
- The synthesis model (C3 merge, C4/C5 wording) got no such check: its placeholder, field title or
  instructions echoed back were the agent's turn.
"""
import json
import re

import pytest

import convsim
from convsim import StructuredResult, stable_seed
from convsim.providers import models
from convsim.running.store import RunStore
from doubles import Backend
from convsim.graphs.group_planning import Context, Params, agent_checks, graph, sessions, simulator_checks

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


# ------------------------------------------------------------------------------- D2: member verdicts

def _member_answer(verdict_utterance, accept=True):
    def answer(purpose, messages):
        if purpose == "member_verdict":
            return {"accept": accept, "utterance": verdict_utterance}
        option = messages[-1][1].split("what you want most: ")[1].split("\n")[0].split(" (")[0]
        return {"utterance": f"Honestly, {option} is what I'd pick."}
    return answer


VERDICT_UTTERANCES = {   # the member model's verdict utterance, failed?
    "Utterance": True,                 # the schema field's title (the audit's answer)
    "utterance": True,                 # its name
    '"Utterance."': True,
    "accept": True,                    # the other field's name
    "": True,
    "   ": True,
    "<one or two sentences you say to the group>": True,       # the prompt's placeholder
    "one or two sentences you say to the group": True,
    "Does this plan work for you? Decide as you would.": False,  # words of the prompt, not a whole line
    'Answer as JSON: {"accept": true or false, "utterance": "<one or two sentences you say to the group>"}':
        True,                                                   # a whole line of the prompt
    "That works for me, the museum day looks great.": False,   # control: a verdict
}


@pytest.mark.parametrize("utterance", list(VERDICT_UTTERANCES))
def test_a_member_verdict_that_is_a_field_name_or_the_prompt_is_a_failed_answer(utterance):
    failed = VERDICT_UTTERANCES[utterance]
    # the garbage answers say accept=false while the rule accepts for some members (their own view of the
    # plan reaches their tolerance in this session): M6 shows whose verdict was read
    state = _run("C2", "member", FakeModel(_member_answer(utterance, accept=not failed), spec="fake:member"))
    verdicts = [t for t in state["transcript"] if t["meta"].get("intent") in ("user_accept_plan", "user_reject_plan")]
    flags = [f for f in simulator_checks(state) if f["check"] == "member_model_failed"]
    if not failed:
        assert all(t["meta"]["verdict_source"] == "fake:member" and t["text"] == utterance.strip() for t in verdicts)
        assert not flags and state["dialogue_metrics"]["M6"] == 1.0
        return
    # before: verdict_source the model, the text "Utterance", intent user_accept_plan, no flag
    verdict_failures = [f for f in state["llm_failures"] if f.get("slot") == "verdict"]
    assert len(verdict_failures) == len(verdicts) == len(state["members"])
    assert all(f["role"] == "member" and f["raw"] == json.dumps({"accept": False, "utterance": utterance})
               for f in verdict_failures)
    assert len(flags) == len(verdicts) and all("member verdict" in f["detail"] for f in flags)   # -> simulator_failure
    assert all(t["meta"]["verdict_source"] == "rule" for t in verdicts)      # the rule decided
    assert not any(t["text"] == utterance.strip() for t in verdicts)
    # M6 is the rule's (the same verdicts as a run without a member model), not the answer's accept
    rules = _run("C2")
    assert [t["meta"]["intent"] for t in verdicts] == [
        t["meta"]["intent"] for t in rules["transcript"] if t["meta"].get("intent") in ("user_accept_plan", "user_reject_plan")]
    # (the garbage answers said accept=false: read, they would make M6 0.0; each member's own view of
    # the plan accepts it for some members in this session)
    assert state["dialogue_metrics"]["M6"] == rules["dialogue_metrics"]["M6"] > 0.0   # before: 0.0


def test_a_member_wish_that_echoes_the_prompt_is_a_failed_answer():
    # the speak prompt's line "- what you want most: <option>" names the option, so an echo of it
    # passed the "names the member's wish" check
    def answer(purpose, messages):
        if purpose == "member_verdict":
            return {"accept": True, "utterance": "Fine by me, thanks."}
        return {"utterance": re.search(r"- what you want most: [^\n]*", messages[-1][1]).group(0)}
    state = _run("C2", "member", FakeModel(answer, spec="fake:member"))
    speak = [f for f in state["llm_failures"] if f.get("slot") != "verdict"]
    assert speak and all("repeats the prompt" in f["error"] for f in speak)
    provide = [t for t in state["transcript"] if t["meta"].get("intent", "").startswith("user_provide_")]
    assert not any("what you want most" in t["text"] for t in provide)
    assert any(f["check"] == "member_model_failed" for f in simulator_checks(state))


# ------------------------------------------------------------------------------- D3: refused requests

def _refused():
    exc = ValueError("HTTP 400: the request exceeds the context length")
    exc.convsim_refused_request = True   # what ChatModel marks on a request the server refused
    return exc


def test_a_refused_request_in_the_guided_synthesis_is_raised_not_an_agent_failure():
    # before: caught, recorded as the synthesis model's failed answer (agent_model_failed)
    with pytest.raises(ValueError, match="HTTP 400"):
        _run("C4", "synthesis", FakeModel(text=_refused()))


def test_a_guided_synthesis_answer_that_fails_is_still_the_agents_failure():
    # control: an exception that is the model's own (not refused) stays a recorded agent failure
    state = _run("C4", "synthesis", FakeModel(text=RuntimeError("the model returned nothing usable")))
    assert state["llm_failures"] and {f["role"] for f in state["llm_failures"]} == {"synthesis"}
    assert agent_checks(state)


@pytest.mark.parametrize("condition,role", [("C4", "synthesis"), ("C5", "synthesis"), ("C3", "synthesis"),
                                            ("C4", "planner"), ("C2", "member")])
def test_a_refused_request_anywhere_in_group_planning_is_a_code_error(tmp_path, monkeypatch, condition, role):
    # every model call of the graph: the C4/C5 wording caught it (agent_failure, exit 0); the
    # structured calls (C3 merge, planner, members) already let it through
    monkeypatch.setattr(models, "_backend", lambda spec, *timeout: Backend(
        ValueError("HTTP 400: the prompt is longer than the context")))
    run_dir = convsim.run({"name": "g", "graph": "group_planning", "sessions": 1, "out_dir": str(tmp_path),
                           "analysis": [], "trace": False, "params": {"condition": condition},
                           "models": {role: "ollama:fake"}}, run_id="r", analyze=False)
    (rec,) = RunStore(run_dir).records()
    assert rec["status"] == "code_error" and "HTTP 400" in rec["error"]   # re-run on resume; exit 3
    assert not rec.get("agent_flags") and not rec.get("simulator_flags")
    assert rec["llm_calls"][0]["ok"] is False


# ------------------------------------------------------------------------------- the synthesis model (C3, C4/C5)

def _c3_answer(**fields):
    def answer(purpose, messages):
        options = messages[-1][1].split("only from: ")[1].split(".\n")[0].split(", ")
        return {"chosen_options": [options[0]], "has_conflict": True,
                "explanation": "The first option suits most of you.", "message": "Let's go with the first one.",
                **fields}
    return answer


@pytest.mark.parametrize("fields,failed", [
    ({"message": "<your message to the group>"}, "message"),             # the template's placeholder
    ({"message": "your message to the group"}, "message"),
    ({"explanation": "Explanation"}, "explanation"),                      # the schema field's title
    ({"explanation": " "}, "explanation"),
    ({"message": "Merge these wishes into a decision for the group. Use your best judgment. Do not mention named"
                 " social-choice theories."}, "message"),
    ({}, None),                                                           # control: a real answer
])
def test_a_c3_synthesis_that_echoes_its_prompt_is_a_failed_answer(fields, failed):
    state = _run("C3", "synthesis", FakeModel(_c3_answer(**fields), spec="fake:synthesis"))
    synth = [t for t in state["transcript"] if t["meta"].get("intent", "").startswith("sys_synthesize_")]
    if failed is None:
        assert not state["llm_failures"] and all(t["text"] == "Let's go with the first one." for t in synth)
        return
    assert state["llm_failures"] and all(f["error"].startswith(f"{failed}: ") for f in state["llm_failures"])
    assert all(json.loads(f["raw"])[failed] == fields[failed] for f in state["llm_failures"])
    bad = fields[failed].strip()
    assert not any(bad and bad in (t["text"] + t["meta"]["resolution_explanation"]) for t in synth)
    assert agent_checks(state)                       # the agent's model failed: flagged, scored as such


def test_a_guided_synthesis_that_echoes_its_instructions_is_a_failed_answer():
    echo = ("A group is planning a trip together. These are the members' wishes for the destination:\n"
            "Rewrite it as one short message to the group with the lines")
    state = _run("C4", "synthesis", FakeModel(text=echo, spec="fake:synthesis"))
    assert state["llm_failures"] and all("repeats the prompt" in f["error"] and f["raw"] == echo
                                         for f in state["llm_failures"])
    synth = [t for t in state["transcript"] if t["meta"].get("intent", "").startswith("sys_synthesize_")]
    assert not any("Rewrite it" in t["text"] for t in synth)
    assert agent_checks(state)


def test_a_guided_synthesis_may_keep_the_decision_word_for_word():
    # the prompt asks to keep the strategy wording and every option exactly: the decision's own text
    # (and a member's wish) in the answer is no echo
    def keep_decision(messages, purpose=""):
        prompt = messages[-1][1]
        decision = prompt.split("(do not change it):\n")[1].split("\n\nRewrite it")[0]
        wish = prompt.split("wishes for ")[1].split("\n")[1]
        return f"Here is what we settled. {decision} As one of you said: {wish}"
    model = FakeModel(spec="fake:synthesis")
    model.invoke = keep_decision
    state = _run("C4", "synthesis", model)
    assert not state["llm_failures"]
    synth = [t for t in state["transcript"] if t["meta"].get("intent", "").startswith("sys_synthesize_")]
    assert synth and all(t["text"].startswith("Here is what we settled.") for t in synth)
