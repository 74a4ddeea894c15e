"""A judge that answers garbage failed, not the system under test: in every shipped graph the
session is a simulator_failure (kept with the judge's raw answer, out of the agent's scores).
Before, hello_chat alone flagged it; crs_shift, course_retrieval and customer_service kept the
session "ok" with the judge failure only counted in a metric."""
import json
import re

import pytest

from convsim.config import config_from_dict
from convsim.running.runner import run
from fault_server import GARBAGE, serve

def _course_verdict(request: dict) -> str:
    codes = re.findall(r'"code": "([^"]+)"', request["messages"][-2]["content"])
    return json.dumps({"evaluations": [{"code": c, "score": 2, "reason": "fair"} for c in codes]})


CASES = {  # graph: (params keeping the run small, the record's raw garbage, a valid verdict)
    "crs_shift": ({"n_turns": 2}, lambda r: r["judge_verdict"]["raw"],
                  lambda req: json.dumps({"proactiveness": 3, "coherence": 4, "personalization": 2})),
    "course_retrieval": ({}, lambda r: r["judge_failures"][0]["raw"], _course_verdict),
    "customer_service": ({"max_turns": 2}, lambda r: r["turn_metrics"][0]["judge_raw"],
                         lambda req: json.dumps({"score": 4, "rationale": "fine"})),
}


@pytest.mark.parametrize("graph", sorted(CASES))
@pytest.mark.parametrize("judge_ok", [False, True])
def test_a_judge_answering_garbage_makes_a_simulator_failure(tmp_path, graph, judge_ok):
    params, raw_of, verdict = CASES[graph]
    # judge_ok: the same run with a judge that answers valid JSON (the control: no flag)
    with serve(faults={} if judge_ok else {"garbage": 1.0}, answer=verdict) as server:
        cfg = config_from_dict({"graph": graph, "sessions": 2, "out_dir": str(tmp_path), "run_id": "j",
                                "models": {"judge": f"openai:fake@{server.url}"}, "params": params,
                                "trace": False, "analysis": [],
                                "retry": {"attempts": 2, "initial_wait": 0, "timeout": 30}})
        run_dir = run(cfg, analyze=False)
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    judge_flags = [[f for f in r["simulator_flags"] if f["check"] == "judge_invalid"] for r in records]
    if judge_ok:
        assert not any(judge_flags)
        return
    served = dict(server.served)
    seen = [(r["session_id"], r["status"], r["simulator_flags"], r.get("judgements"), r.get("llm_calls"))
            for r in records]
    assert all(judge_flags) and {r["status"] for r in records} == {"simulator_failure"}, (served, seen)
    assert all(GARBAGE in raw_of(r) for r in records)  # the raw answer is kept


ROLE_CASES = [  # graph, role at the server, its answer, params, the status and the flag expected
    ("crs_shift", "crs", "", {"n_turns": 2}, "agent_failure", "crs_model_failed"),
    ("crs_shift", "crs", "You might enjoy Inception.", {"n_turns": 2}, "ok", None),  # control: a valid answer
    ("crs_shift", "user", GARBAGE, {"n_turns": 2}, "simulator_failure", "user_model_failed"),
    ("group_planning", "synthesis", "", {}, "agent_failure", "agent_model_failed"),
    ("group_planning", "member", "", {}, "simulator_failure", "member_model_failed"),
    ("customer_service", "triage", GARBAGE, {"max_turns": 2}, "agent_failure", "agent_model_failed"),
    ("customer_service", "response", "", {"max_turns": 2}, "agent_failure", "agent_model_failed"),
]


@pytest.mark.parametrize("graph,role,answer,params,status,check", ROLE_CASES)
def test_a_model_answering_garbage_is_never_a_silent_ok(tmp_path, graph, role, answer, params, status, check):
    # the graphs fall back to their rules when a model's answer is invalid (recorded with the raw
    # answer); before, the session stayed "ok" and was scored with the fallback's (often perfect)
    # figures: group_planning's M1-M4 were 1.0 with every synthesis call failed
    with serve(answer=lambda request: answer) as server:
        cfg = config_from_dict({"graph": graph, "sessions": 2, "out_dir": str(tmp_path), "run_id": "m",
                                "models": {role: f"openai:fake@{server.url}"}, "params": params,
                                "trace": False, "analysis": [], "retry": {"attempts": 2, "initial_wait": 0, "timeout": 30}})
        run_dir = run(cfg, analyze=False)
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert {r["status"] for r in records} == {status}
    flags = [f["check"] for r in records for f in r["simulator_flags"] + r["agent_flags"]]
    if check is None:
        assert not [f for f in flags if f.endswith("model_failed")]
    else:
        assert check in flags


@pytest.mark.parametrize("valid", [False, True])
def test_llm_topics_failures_are_kept_counted_and_flag_the_session(tmp_path, valid):
    # before, the topics model's invalid answers were dropped: no raw answer anywhere, the mode still
    # read "llm" although every text used the keyword fallback
    answer = (lambda req: json.dumps({"topics": ["thriller", "heist"]})) if valid else (lambda req: GARBAGE)
    with serve(answer=answer) as server:
        cfg = config_from_dict({"graph": "crs_shift", "sessions": 1, "out_dir": str(tmp_path), "run_id": "t",
                                "models": {"topics": f"openai:fake@{server.url}"},
                                "params": {"n_turns": 2, "topic_mode": "llm"}, "trace": False, "analysis": [],
                                "retry": {"attempts": 2, "initial_wait": 0, "timeout": 30}})
        run_dir = run(cfg, analyze=False)
    (record,) = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    dm, failures = record["dialogue_metrics"], record["dialogue_details"].get("topic_failures") or []
    checks = [f["check"] for f in record["simulator_flags"]]
    if valid:
        assert dm["topic_model_failures"] == 0 and dm["tas_cas_topic_mode"] == "llm" and not failures
        assert "topics_model_invalid" not in checks
        return
    assert dm["topic_model_failures"] == len(failures) == 4  # 2 turns: 2 user and 2 system texts
    assert dm["tas_cas_topic_mode"] == "llm+keyword-fallback"
    assert all(f["raw"] == GARBAGE for f in failures)
    assert "topics_model_invalid" in checks and record["status"] == "simulator_failure"
