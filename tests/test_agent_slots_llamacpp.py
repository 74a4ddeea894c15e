"""Issue 33's test (2) against a real server: llama-cpp-python's OpenAI-compatible server with the
shipped gemma3-270m (``python -m llama_cpp.server ... --chat_format gemma``, the ``llamacpp_server``
fixture of tests/conftest.py) is the agent of a scenario, named on the command line with
``--agent ROLE=openai:gemma3-270m@<url>#...``. Skipped, with the reason, where the local extra is
not installed.

A 270M model answers badly, so nothing here is about quality: every session is written with a final
status; the agent's turns are the server's answers (its token counts in the calls, one call per
agent turn, the first answer replayed against the server word for word); an answer that is garbage
is an ``agent_failure`` with the raw text kept; with the customer-service tools offered (llama.cpp's
``gemma`` chat format ignores them, so the model answers in text) the run's bookkeeping holds.
"""
from __future__ import annotations

import json
import urllib.request

import pytest

from tests.cli_helpers import cli

pytestmark = [pytest.mark.local, pytest.mark.slow]

SETTINGS = "max_tokens=16&temperature=0&seed=1"


def _run(tmp_path, run_id, config):
    code, out, exc = cli("run", config, "--out", tmp_path, "--run-id", run_id, "--no-analysis", "-q")
    records = [json.loads(x) for x in (tmp_path / run_id / "results.jsonl").read_text().splitlines()]
    return code, out, records


def _config(tmp_path, graph, role, spec, sessions, params):
    path = tmp_path / f"{graph}.yaml"
    path.write_text(json.dumps({"name": graph, "graph": graph, "sessions": sessions, "seed": 2, "concurrency": 1,
                                "params": params, "agents": {role: spec},
                                # a busy 2-core machine: one 16-token answer can take a while
                                "retry": {"attempts": 2, "timeout": 300.0}}))
    return path


def _check_mechanics(records, spec, role, code, out):
    assert records and {r["status"] for r in records} <= {"ok", "agent_failure"}, (out, records)
    print(f"{role}: statuses {[r['status'] for r in records]}, agent texts "
          f"{[e['text'][:60] for r in records for e in r['transcript'] if e['speaker'] in ('agent', 'system')]}")
    assert code == 0, out  # ok and agent_failure sessions: no infrastructure error against a healthy server
    for r in records:
        assert r["agents"] == {role: spec}
        calls = r["llm_calls"]
        assert calls and all(c["role"] == f"agent:{role}" and c["model"] in spec for c in calls)
        assert all(c["ok"] and c["prompt_tokens"] and c["completion_tokens"] for c in calls), calls
        if r["status"] == "agent_failure":  # a garbage answer: the raw text is kept in the record
            assert "answered garbage" in r["error"] and "raw:" in r["error"], r["error"]


def test_llamacpp_server_is_the_agent_of_hello_chat(llamacpp_server, tmp_path):
    base_url, model = llamacpp_server
    spec = f"openai:{model}@{base_url}#{SETTINGS}"
    code, out, records = _run(tmp_path, "hello", _config(tmp_path, "hello_chat", "agent", spec, 2, {"n_turns": 2}))
    assert len(records) == 2
    _check_mechanics(records, spec, "agent", code, out)
    for r in records:
        agent_turns = [e for e in r["transcript"] if e["speaker"] == "agent"]
        if r["status"] == "ok":  # one server answer per agent turn
            assert len(agent_turns) == len(r["llm_calls"]) == 2
    ok = next((r for r in records if r["status"] == "ok"), None)
    if ok is not None:  # the agent's first turn is what the server answers to the same request
        question = ok["transcript"][0]["text"]
        first = next(e for e in ok["transcript"] if e["speaker"] == "agent")
        body = {"model": model, "stream": False, "temperature": 0.0, "seed": 1, "max_completion_tokens": 16,
                "max_tokens": 16, "messages": [{"content": f'Context: {{"turn": {first["turn"]}}}', "role": "system"},
                                               {"content": question, "role": "user"}]}
        request = urllib.request.Request(f"{base_url}/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=300) as resp:
            again = json.loads(resp.read())["choices"][0]["message"]["content"]
        assert first["text"] == again


def test_llamacpp_server_offered_the_customer_service_tools(llamacpp_server, tmp_path):
    base_url, model = llamacpp_server
    spec = f"openai:{model}@{base_url}#tool_rounds=2&{SETTINGS}"
    code, out, records = _run(tmp_path, "svc", _config(tmp_path, "customer_service", "service", spec, 1,
                                                       {"max_turns": 2}))
    assert len(records) == 1
    _check_mechanics(records, spec, "service", code, out)
    r = records[0]
    system = [e for e in r["transcript"] if e["speaker"] == "system"]
    if r["status"] == "ok":
        assert system and all(e["meta"]["agent_spec"] == spec for e in system)
        # whatever the model did with the tools is recorded, and state grading read the same bookings
        booked = [c for e in system for c in e["meta"]["tool_calls"] if c["name"] == "book" and c["result"].get("ok")]
        assert len(r["agent_bookings"]) == len(booked) == r["dialogue_metrics"]["bookings_made"]
