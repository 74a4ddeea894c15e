"""A failed LLM agent is not scored as the template (issue 39, item 1): when an agent model answers
garbage and a rule or template fallback keeps the dialogue going, the turn is scored as failed and
the session is an agent failure; the variant's scores never equal the rule baseline's. Each shipped
graph declares ``agent_checks``."""
from __future__ import annotations

import json

import pytest

from convsim import stable_seed
from convsim.evaluation.service.failed_turns import score_failed_dialogue, score_failed_turn


class Invoke:
    """A model double answering ``answer(messages)``."""
    is_none = False
    spec = "double"

    def __init__(self, answer):
        self.answer = answer

    def invoke(self, messages, purpose=""):
        return self.answer(messages)


def _service(models, n=3):
    import convsim.graphs.customer_service as cs
    p = cs.Params(n_sessions=n, judge=False, max_turns=12)
    out = []
    for init in cs.sessions(p, cs.Context(params=p, seed=7)):
        c = cs.Context(params=p, seed=stable_seed(7, init["session_id"]), session_id=init["session_id"],
                       models=dict(models))
        out.append(cs.graph.invoke({**init, "transcript": [], "turn_metrics": [], "dialogue_metrics": {}},
                                   context=c, config={"recursion_limit": 10_000}))
    return cs, out


def test_a_response_model_answering_its_prompt_scores_failed_turns_not_the_templates():
    cs, failed = _service({"response": Invoke(lambda m: m[-1][1])})  # echoes its user message
    _, base = _service({})
    assert len(failed) == len(base)
    for f, b in zip(failed, base):
        # the template spoke (the dialogue is the baseline's), but every turn is scored as failed
        assert [e["text"] for e in f["transcript"]] == [e["text"] for e in b["transcript"]]
        assert cs.agent_checks(f) and not cs.agent_checks(b)
        assert all(t["system_correct"] == 0 and t["agent_model_failed"] == ["response"] for t in f["turn_metrics"])
        dm, bm = f["dialogue_metrics"], b["dialogue_metrics"]
        assert dm["agent_model_failed_turns"] == len(f["turn_metrics"]) and bm["agent_model_failed_turns"] == 0
        assert dm["system_correctness"] == 0
        for key in ("task_success", "task_completion"):
            assert dm.get(key) in (0, None) and (dm.get(key) is None) == (bm.get(key) is None)
    assert sum(b["dialogue_metrics"]["system_correctness"] or 0 for b in base) > 0
    assert sum(b["dialogue_metrics"].get("task_success") or 0 for b in base) > 0


def test_a_failed_nodes_scores_go_to_zero_where_they_apply():
    scores = {"domain_routing": 1, "intent_accuracy": None, "policy_decision_accuracy": 1, "system_correct": 1,
              "system_correct_unscored": 0, "llm_failed_nodes": ["triage"]}
    out = score_failed_turn(scores, ["triage"])
    assert out["domain_routing"] == 0 and out["intent_accuracy"] is None  # not applicable stays so
    assert out["policy_decision_accuracy"] == 1 and out["system_correct"] == 0
    assert score_failed_turn(scores, []) is scores
    dm = score_failed_dialogue({"task_success": 1, "task_completion": None}, [out, {"system_correct": 1}])
    assert dm == {"task_success": 0, "task_completion": None, "agent_model_failed_turns": 1}


def test_hello_chat_agent_answering_nothing_is_an_agent_failure(tmp_path, monkeypatch):
    """Before: an agent answering empty strings every turn was ``ok`` with accuracy 0."""
    import convsim.providers.models as models
    from doubles import Backend
    from convsim import run
    from convsim.config import config_from_dict
    real = models._make_backend
    monkeypatch.setattr(models, "_make_backend",
                        lambda spec, *a: Backend("  ") if spec.model == "mute" else real(spec, *a))
    monkeypatch.setattr(models, "_BACKENDS", {})
    cfg = config_from_dict({"graph": "hello_chat", "sessions": 2, "seed": 1, "out_dir": str(tmp_path),
                            "run_id": "mute", "trace": False, "analysis": [], "models": {"agent": "ollama:mute"}})
    records = [json.loads(x) for x in (run(cfg, analyze=False) / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2
    for r in records:
        assert r["status"] == "agent_failure" and r["dialogue_metrics"]["accuracy"] == 0
        assert [f["check"] for f in r["agent_flags"]] == ["agent_model_failed"] * 3
        assert "empty answer" in r["agent_flags"][0]["detail"] and "'  '" in r["agent_flags"][0]["detail"]


@pytest.mark.parametrize("graph", ["hello_chat", "crs_shift", "customer_service", "group_planning",
                                   "course_retrieval"])
def test_every_shipped_graph_declares_agent_checks(graph):
    import importlib
    module = importlib.import_module(f"convsim.graphs.{graph}")
    assert callable(getattr(module, "agent_checks", None)), graph


def test_a_course_ranking_listing_a_course_twice_is_flagged():
    from convsim.graphs.course_retrieval import agent_checks
    assert agent_checks({"retrieved": [{"subjectCode": "A"}, {"subjectCode": "B"}]}) == []
    flags = agent_checks({"retrieved": [{"subjectCode": "A"}, {"subjectCode": "B"}, {"subjectCode": "A"}]})
    assert flags == [{"check": "ranking_repeats_course", "detail": "A listed 2 times"}]
