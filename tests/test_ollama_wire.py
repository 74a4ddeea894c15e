"""The ``ollama:`` provider against Ollama's wire protocol (a stdlib ``/api/chat`` server,
tests/ollama_server.py) through the real client: answers and token counts, a missing model (HTTP
404) refused by preflight and an infra_error (never code_error) during a run, and an invalid LLM
user answer in customer service falling back to the rule user's turn (issue 39, items 3 and 6)."""
from __future__ import annotations

import json

import pytest

from cli_helpers import cli, one_line
from ollama_server import serve_ollama
from convsim.providers.models import ChatModel, ModelUnavailable, parse_model_spec


def _model(url, name="m"):
    return ChatModel(spec=parse_model_spec(f"ollama:{name}@{url}"), role="agent")


def test_an_answer_and_its_tokens_over_the_wire():
    with serve_ollama(answer=lambda r: "Paris is the capital.") as server:
        m = _model(server.url)
        assert m.invoke([("user", "Capital of France?")]) == "Paris is the capital."
    sent = server.requests[-1]
    assert sent["model"] == "m" and sent["messages"][-1] == {"role": "user", "content": "Capital of France?"}
    call = m.calls[-1]
    assert call["ok"] and (call["prompt_tokens"], call["completion_tokens"]) == (7, 3)


def test_a_missing_model_is_model_unavailable_not_a_bug():
    with serve_ollama(models={"other"}) as server:
        m = _model(server.url)
        with pytest.raises(ModelUnavailable, match="model not found"):
            m.invoke([("user", "hi")])
    assert len(server.requests) == 1  # not retried: it will not appear


def test_preflight_refuses_a_missing_ollama_model(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVSIM_PREFLIGHT_MODELS", "1")
    with serve_ollama(models={"other"}) as server:
        one_line(["run", "hello_chat", "--sessions", "1", "--model", f"agent=ollama:gone@{server.url}",
                  "--out", tmp_path, "--run-id", "r", "--no-analysis", "-q"], "model not found", "ollama:gone")
    assert not (tmp_path / "r").exists()


def test_an_invalid_user_model_answer_falls_back_to_the_rule_user(tmp_path):
    with serve_ollama(answer=lambda r: "I am a language model and this is not JSON") as server:
        code, out, exc = cli("run", "customer_service", "--sessions", "2", "--model", f"user=ollama:m@{server.url}",
                             "--set", "max_turns=4", "--set", "judge=false", "--out", tmp_path, "--run-id", "r",
                             "--no-analysis", "-q")
        assert code == 0, (out, exc)
    records = [json.loads(x) for x in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2
    for r in records:
        assert r["status"] == "ok", (r["status"], r.get("simulator_flags"), r.get("error"))
        users = [e for e in r["transcript"] if e["speaker"] == "user"]
        assert len(users) > 1 and len(r["turn_metrics"]) == len(users)  # the agent evaluated on every turn
        assert r["dialogue_metrics"]["user_model_fallbacks"] == len(users)
        assert all("not JSON" in e["meta"]["user_model_fallback"]["raw"] for e in users)
