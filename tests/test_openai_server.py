"""Every shipped graph through a real OpenAI-compatible server (llama-cpp-python's, gemma3-270m).

A 270M model answers badly: off-topic text, broken JSON. The pipeline must keep going: every
session lands with a final status, every call is recorded, and a structured answer that failed to
parse keeps the raw text it was given. (Ollama's client is tested against a stdlib server speaking
Ollama's wire protocol, tests/ollama_server.py and test_ollama_wire.py, and against an in-process
fake backend in test_engine_models.py: no real Ollama server is available to the tests.)
"""
import json

import pytest

import convsim
from convsim.config import config_from_dict
from convsim.running.status import Status
from convsim.running.store import RunStore

pytestmark = [pytest.mark.local, pytest.mark.slow]

# graph -> (small params, the model roles it calls)
GRAPHS = {
    "hello_chat": ({"n_turns": 2}, ["agent"]),
    "crs_shift": ({"n_turns": 2, "first_shift_turn": 2}, ["user", "crs", "topics", "judge"]),
    "customer_service": ({"max_turns": 2}, ["triage", "response", "judge"]),
    "group_planning": ({"n_days": 1, "condition": "C4"}, ["synthesis", "planner"]),
    "course_retrieval": ({"k": 1, "cutoffs": [1], "judge_cache": "off"}, ["judge"]),
}


def structured_failures(obj):
    """Every recorded structured result (ok/raw/error/attempts) that failed, anywhere in a record."""
    if isinstance(obj, dict):
        if {"ok", "raw", "error", "attempts"} <= set(obj) and obj["ok"] is False:
            yield obj
        for v in obj.values():
            yield from structured_failures(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from structured_failures(v)


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_graph_runs_against_a_real_openai_compatible_server(graph, llamacpp_server, tmp_path):
    base_url, model = llamacpp_server
    params, roles = GRAPHS[graph]
    # Short answers: llama-cpp-python's JSON mode (a grammar over Gemma's 262k-token vocabulary) takes
    # seconds per token on a busy CPU, and a cut-off JSON answer is exactly the garbage to survive.
    spec = {"spec": f"openai:{model}@{base_url}", "temperature": 0.0, "seed": 1, "max_tokens": 8}
    cfg = config_from_dict({"name": graph, "graph": graph, "sessions": 1, "seed": 2, "analysis": [],
                            "out_dir": str(tmp_path), "params": params, "concurrency": 1,
                            "models": {role: spec for role in roles}})
    run_dir = convsim.run(cfg, run_id=graph)
    recs = RunStore(run_dir).records()
    errors = (run_dir / "errors.jsonl").read_text() if (run_dir / "errors.jsonl").exists() else ""
    assert len(recs) == 1, f"no record; infrastructure errors: {errors[-1000:]}"
    rec = recs[0]
    assert rec["status"] in {s.value for s in Status}
    assert rec["status"] != Status.CODE_ERROR.value, rec["error"]  # a weak model must not crash graph code
    calls = rec["llm_calls"]
    assert calls and all(c["model"] == spec["spec"] for c in calls)
    assert any(c["completion_tokens"] for c in calls), calls  # the server really answered (maybe cut)
    model_s = sum(c["latency_s"] for c in calls)
    print(f"{graph}: {rec['status']}, {len(calls)} calls, session {rec['elapsed_s']:.1f} s, in the model "
          f"{model_s:.1f} s, platform share {(rec['elapsed_s'] - model_s) / rec['elapsed_s']:.1%}")
    assert {c["role"] for c in calls} <= set(roles)
    for failed in structured_failures(rec):
        assert isinstance(failed["raw"], str) and failed["error"], failed
    assert json.loads((run_dir / "summary.json").read_text())["variants"]
