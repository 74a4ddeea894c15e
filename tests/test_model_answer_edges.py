"""Model answers at the edges: lone surrogates, mistyped judge scores, refused requests, kept raw answers."""
import json

import pytest
from pydantic import ValidationError

import convsim
from convsim.providers import models
from convsim.providers.models import ChatModel, extract_json, parse_model_spec
from convsim.running.store import RunStore
from doubles import Backend

pytestmark = pytest.mark.filterwarnings("ignore")




def test_a_lone_surrogate_in_an_answer_becomes_a_replacement_character(monkeypatch):
    # "\ud800" is valid JSON from a server but no character: it reached the state, and writing the
    # record or the trace (UTF-8) crashed the whole run with a traceback, losing every session in flight
    monkeypatch.setattr(models, "_backend", lambda spec, *timeout: Backend("hi \ud800 there"))
    m = ChatModel(spec=parse_model_spec("ollama:fake"), role="agent")
    assert m.invoke([("user", "q")]) == "hi \ufffd there"
    # a model's own JSON escape of one parses into the state the same way
    assert extract_json('{"reason": "\\ud800 x", "emoji": "\\ud83d\\ude00"}') == {"reason": "\ufffd x", "emoji": "😀"}


def test_the_run_files_take_any_string_losslessly(tmp_path):
    store = RunStore(tmp_path).open()
    store.append({"variant": "v", "session_id": "s", "trial": 0, "status": "ok", "note": "a\udc80b"})
    store.close()
    line = (tmp_path / "results.jsonl").read_bytes().decode("utf-8")  # valid UTF-8, valid JSON
    assert json.loads(line)["note"] == "a\udc80b"


def test_a_run_survives_a_server_answering_lone_surrogates(tmp_path):
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from latency_server import LatencyServer
    with LatencyServer(0.0, answer="hi \ud800 there") as server:
        run_dir = convsim.run({"name": "s", "graph": "hello_chat", "sessions": 2, "out_dir": str(tmp_path),
                               "analysis": [], "params": {"n_turns": 2},
                               "models": {"agent": f"openai:fake@{server.base_url}"}}, run_id="s", analyze=False)
    recs = RunStore(run_dir).records()
    # the run survives; the answer, not decodable text, is the agent's failure with its raw text
    # (convsim.providers.answer_check), never a scored turn
    assert [r["status"] for r in recs] == ["agent_failure", "agent_failure"]
    # the turn is scored as failed and the session flagged (hello_chat's agent_checks), raw answer kept
    assert all(f["check"] == "agent_model_failed" and "hi \ufffd there" in f["detail"] and "undecodable" in f["detail"]
               for r in recs for f in r["agent_flags"])
    assert all(r["dialogue_metrics"]["accuracy"] == 0.0 for r in recs)


@pytest.mark.parametrize("score", [True, "3", 2.0])
def test_the_course_judge_takes_integer_scores_only(score):
    # pydantic's lax mode read true as 1, "3" as 3 and 2.0 as 2: scored, used in NDCG and P@K
    from convsim.agents.courses.relevance_judge import answer_schema
    schema = answer_schema(["CS1"])
    with pytest.raises(ValidationError):
        schema.model_validate({"evaluations": [{"code": "CS1", "score": score}]})
    assert schema.model_validate({"evaluations": [{"code": "CS1", "score": 2}]}).evaluations[0].score == 2


def test_customer_service_flags_carry_each_failed_agent_models_raw_answer():
    # the raw text was only in the node's state, overwritten every turn: a session with 9 failed
    # agent answers kept at most the last turn's
    from convsim import load_graph_module
    cs = load_graph_module("customer_service")
    state = {"turn_metrics": [
        {"llm_failed_nodes": ["triage", "policy"],
         "llm_failure_raw": {"triage": {"error": "no JSON", "raw": "first garbage"},
                             "policy": {"error": "bad shape", "raw": "{\"x\": 1}"}}},
        {"llm_failed_nodes": ["triage"], "llm_failure_raw": {"triage": {"error": "no JSON", "raw": "second"}}}]}
    details = [f["detail"] for f in cs.agent_checks(state) if f["check"] == "agent_model_failed"]
    assert len(details) == 3
    assert "turn 1: triage" in details[0] and "first garbage" in details[0]
    assert "turn 1: policy" in details[1] and "bad shape" in details[1]
    assert "turn 2: triage" in details[2] and "second" in details[2]


@pytest.mark.parametrize("role", ["triage", "user"])
def test_a_refused_request_in_customer_service_is_not_the_agents_or_the_simulators(tmp_path, monkeypatch, role):
    # an HTTP 400 (no model answer) became agent_failure (triage: scored) or simulator_failure (user),
    # and the run exited 0; every other graph makes it a code_error, re-run on resume
    monkeypatch.setattr(models, "_backend",
                        lambda spec, *timeout: Backend(ValueError("HTTP 400: the prompt is longer than the context")))
    run_dir = convsim.run({"name": "cs", "graph": "customer_service", "sessions": 1, "out_dir": str(tmp_path),
                           "analysis": [], "trace": False, "models": {role: "ollama:fake"}},
                          run_id="r", analyze=False)
    (rec,) = RunStore(run_dir).records()
    assert rec["status"] == "code_error" and "HTTP 400" in rec["error"]
    assert rec["llm_calls"][0]["ok"] is False and "HTTP 400" in rec["llm_calls"][0]["error"]


def test_echoed_prompt_finds_a_repeated_prompt_line():
    from convsim.providers.models import echoed_prompt
    scaffold = "Conversation so far:\n{history}\n\nAction to express (JSON): {action}"
    echo = "Conversation so far:\nuser: I need a hotel.\n\nAction to express (JSON): {'kind': 'search'}"
    assert echoed_prompt(echo, [scaffold.split("{")[0], "Action to express (JSON):"]) == "Conversation so far:"
    assert echoed_prompt("I found the Acorn Guest House, 3 stars. Shall I book it?", [scaffold]) is None
    assert echoed_prompt("so far:", ["so far:"]) is None  # short lines are not looked for
    assert echoed_prompt("", [scaffold]) is None
