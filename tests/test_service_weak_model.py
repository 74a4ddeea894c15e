"""What a weak response model (gemma3-270m) did to customer_service, each defect injected with a
model double: the reply that echoes its prompt (D4a), the heuristic judge that scored that echo
5/5 (D4b), the heuristic judge's score reported as a plain ``response_quality`` and correlated
(D4c), the judge failures of later turns dropped from the flags (D7), and a refused request
(HTTP 400) turned into a template answer (D3b)."""
from __future__ import annotations

import json

import pytest

import convsim
from convsim.agents.service.judge import heuristic_judge, judge_turn
from convsim.agents.service.response import llm_response, template_response
from convsim import StructuredResult, stable_seed
from convsim.config import ExperimentConfig
from convsim.providers.models import none_model

ACTION = {"kind": "search", "domain": "hotel", "entity": None, "count": 12, "requested": ["area"],
          "informed": {}, "acts": ["request"]}
HISTORY = ["user: I need a place to stay with 3 stars."]
# what the audit saw: the model's whole user message, repeated as the system turn
ECHO = f"Conversation so far:\n{HISTORY[0]}\n\nAction to express (JSON): {ACTION}"


class Invoke:
    """A response-model double: ``answer(messages)`` gives the text, or raises."""
    is_none = False
    spec = "double"

    def __init__(self, answer):
        self.answer, self.calls = answer, 0

    def invoke(self, messages, purpose=""):
        self.calls += 1
        return self.answer(messages)


def echo_user_message(messages):  # the weak model: answers with the user message it was sent
    return messages[-1][1]


class Judge:
    """A judge-model double: every answer is ``raw`` (valid when it is a verdict dict)."""
    is_none = False
    spec = "judge-double"

    def __init__(self, raw):
        self.raw = raw

    def structured(self, messages, schema, purpose="", retries=2):
        if isinstance(self.raw, dict):
            return StructuredResult(ok=True, value=schema.model_validate(self.raw), raw=json.dumps(self.raw),
                                    attempts=1)
        return StructuredResult(ok=False, raw=self.raw, error="ValueError: no JSON", attempts=retries + 1)


def _sessions(models, n=2, judge=True, max_turns=20):
    import convsim.graphs.customer_service as cs
    p = cs.Params(n_sessions=n, judge=judge, max_turns=max_turns)
    out = []
    for init in cs.sessions(p, cs.Context(params=p, seed=7)):
        c = cs.Context(params=p, seed=stable_seed(7, init["session_id"]), session_id=init["session_id"],
                       models=dict(models))
        out.append(cs.graph.invoke({**init, "transcript": [], "turn_metrics": [], "dialogue_metrics": {}},
                                   context=c, config={"recursion_limit": 10_000}))
    return cs, out


# ---------------------------------------------------------------- D4a: an echoed prompt is a failed answer

def test_a_reply_that_echoes_its_prompt_is_a_failed_answer_with_its_raw_text():
    out = llm_response(Invoke(echo_user_message), ACTION, HISTORY)
    assert out["source"] == "template" and out["text"] == template_response(ACTION)
    assert out["failure"]["raw"] == ECHO and "echoed the prompt" in out["failure"]["error"]
    # a line of the system prompt, repeated, is an echo too
    system_line = Invoke(lambda m: m[0][1].splitlines()[1])
    assert llm_response(system_line, ACTION, HISTORY)["failure"]["error"].startswith("echoed the prompt")
    # the action's dict alone, without the scaffolding, is an input repeated verbatim
    assert llm_response(Invoke(lambda m: str(ACTION)), ACTION, HISTORY)["source"] == "template"


def test_a_reply_may_quote_the_user_and_is_kept():
    quote = "You need a place to stay with 3 stars: which area would you like?"
    out = llm_response(Invoke(lambda m: quote), ACTION, HISTORY)
    assert out == {"text": quote, "source": "llm", "failure": None}


def test_an_echoing_response_model_flags_the_session_and_the_template_answers():
    cs, records = _sessions({"response": Invoke(echo_user_message)}, judge=False)
    system = [e for r in records for e in r["transcript"] if e["speaker"] == "system"]
    assert system and all(e["meta"]["failure"]["raw"].startswith("Conversation so far:") for e in system)
    assert not any("Conversation so far:" in e["text"] for e in system)  # the customer saw the template
    flags = [f for r in records for f in cs.agent_checks(r) if f["check"] == "agent_model_failed"]
    assert len(flags) == len(system) and all("echoed the prompt" in f["detail"] for f in flags)


# ---------------------------------------------------------------- D4b: the heuristic deducts for them

CLEAN = dict(requested=[], informed={}, grounded=True, compliant=True, action_ok=True)


@pytest.mark.parametrize("response,score", [
    ("I found 12 hotels with 3 stars. Which area would you like?", 5),        # clean: 5
    ("Here you go: {'kind': 'search', 'domain': 'hotel'}", 3),                # dict dump: 5 - 2
    ('{"reply": "Which area would you like?"}', 3),                           # JSON dump: 5 - 2
    ("Conversation so far:\nuser: I need a place to stay with 3 stars.", 3),  # echo: 5 - 2
    (ECHO, 1),                                                                # echo + dict: 5 - 2 - 2
])
def test_heuristic_judge_deducts_for_a_data_dump_and_an_echoed_prompt(response, score):
    assert heuristic_judge(response=response, **CLEAN)["score"] == score


def test_heuristic_judge_scores_the_audit_echo_at_the_floor_not_five():
    verdict = judge_turn(none_model("judge"), user=HISTORY[0], response=ECHO, checks=dict(CLEAN, refusal=False))
    assert verdict["judge"] == "heuristic" and verdict["score"] == 1
    # deductions add up with the others: an ungrounded dict dump is 5 - 2 - 2
    assert heuristic_judge(response="{'kind': 'search'}", **dict(CLEAN, grounded=False))["score"] == 1


# ---------------------------------------------------------------- D4c: the heuristic judge is labelled

def test_heuristic_judge_score_is_named_as_such_and_an_llm_judges_is_not():
    cs, heuristic = _sessions({}, max_turns=6)
    turns = [t for r in heuristic for t in r["turn_metrics"]]
    assert all("heuristic_response_quality" in t and "response_quality" not in t for t in turns)
    dm = heuristic[0]["dialogue_metrics"]
    assert dm["heuristic_response_quality"] is not None and "response_quality" not in dm
    assert not [k for k in dm if k.startswith("judge_") and k not in ("judge_failures", "judge_calls")]
    _, llm = _sessions({"judge": Judge({"score": 4, "rationale": "fine"})}, max_turns=6)
    assert llm[0]["dialogue_metrics"]["response_quality"] == 4
    assert "heuristic_response_quality" not in llm[0]["dialogue_metrics"]
    assert "heuristic_response_quality" in cs.SUMMARY_METRICS and "heuristic_response_quality" in cs.METRIC_INPUTS


def test_a_run_with_the_heuristic_judge_labels_it_and_correlates_nothing_with_it(tmp_path):
    cfg = ExperimentConfig(name="h", graph="customer_service", sessions=3, seed=7, trace=False,
                           analysis=["convsim.evaluation.reporting.analysis:analyze_run"], params={"max_turns": 6},
                           out_dir=str(tmp_path), run_id="h")
    run_dir = convsim.run(cfg)
    header = (run_dir / "metrics.csv").read_text().splitlines()[0].split(",")
    assert "heuristic_response_quality_mean" in header and "response_quality_mean" not in header
    summary = json.loads((run_dir / "summary.json").read_text())
    assert "heuristic_response_quality" in json.dumps(summary)
    stats = json.loads((run_dir / "stats.json").read_text())
    # before: "response_quality ~ judge_refusals_unscored" (a count read as a judge's score)
    assert stats["correlations"] == []
    assert "heuristic_response_quality" in (run_dir / "report.html").read_text()


# ---------------------------------------------------------------- D7: one judge_invalid flag per failed turn

def test_every_turn_whose_judge_failed_is_flagged_with_its_raw_answer():
    cs, records = _sessions({"judge": Judge("not a verdict, turn after turn")}, n=1, max_turns=6)
    (r,) = records
    failed = [t["turn"] for t in r["turn_metrics"] if t["judge_failed"] == 1]
    assert len(failed) >= 2
    flags = [f for f in cs.simulator_checks(r) if f["check"] == "judge_invalid"]
    assert [f["detail"].split(":")[0] for f in flags] == [f"turn {t}" for t in failed]
    assert all("not a verdict, turn after turn" in f["detail"] for f in flags)


# ---------------------------------------------------------------- D3b: a refused request is re-raised

class Refused(Exception):
    pass


def _refuse(messages):
    err = Refused("HTTP 400: the prompt is longer than the context")
    err.convsim_refused_request = True  # what convsim.providers.models marks on a request the server refused
    raise err


def test_a_refused_response_request_is_re_raised_not_a_template_answer():
    with pytest.raises(Refused):
        llm_response(Invoke(_refuse), ACTION, HISTORY)
    # control: any other exception of the call is the model's failure, the template answers
    other = llm_response(Invoke(lambda m: (_ for _ in ()).throw(RuntimeError("bad"))), ACTION, HISTORY)
    assert other["source"] == "template" and "RuntimeError" in other["failure"]["error"]


def test_a_refused_response_request_ends_the_session_as_an_error_not_an_agent_failure():
    with pytest.raises(Refused):
        _sessions({"response": Invoke(_refuse)}, n=1, judge=False, max_turns=2)
