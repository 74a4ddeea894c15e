"""A failure the customer-service graph catches and records in its state still sets the session's
status: an agent node that raised -> agent_failure (scored), the user node -> simulator_failure."""
from __future__ import annotations

import json

import convsim
from convsim.config import ExperimentConfig


def _run(tmp_path, monkeypatch, name: str, boom) -> list[dict]:
    module = convsim.load_graph_module("customer_service")
    monkeypatch.setattr(module, name, boom)
    cfg = ExperimentConfig(name="st", graph="customer_service", sessions=3, seed=7, trace=False, analysis=[],
                           params={"mode": "simulate", "max_turns": 8}, out_dir=str(tmp_path), run_id=name)
    run_dir = convsim.run(cfg, analyze=False)
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def test_an_agent_node_that_raised_is_an_agent_failure_not_ok(tmp_path, monkeypatch):
    def broken_triage(*args, **kwargs):
        raise RuntimeError("triage exploded")
    recs = _run(tmp_path, monkeypatch, "rule_triage", broken_triage)
    assert [r["status"] for r in recs] == ["agent_failure"] * 3
    assert all(r["termination"] == "agent_error" for r in recs)
    assert recs[0]["agent_flags"][0]["check"] == "agent_error" and "triage exploded" in recs[0]["agent_flags"][0]["detail"]
    assert "task_success" in recs[0]["dialogue_metrics"]  # still scored, as the metric defines


def test_a_user_node_that_raised_is_a_simulator_failure(tmp_path, monkeypatch):
    def broken_user_turn(*args, **kwargs):
        raise RuntimeError("simulator exploded")
    recs = _run(tmp_path, monkeypatch, "user_turn", broken_user_turn)
    assert [r["status"] for r in recs] == ["simulator_failure"] * 3
    assert recs[0]["simulator_flags"][0]["check"] == "user_error"
    assert recs[0]["agent_flags"] == []


def test_clean_sessions_carry_no_flags(tmp_path, monkeypatch):
    module = convsim.load_graph_module("customer_service")
    recs = _run(tmp_path, monkeypatch, "rule_triage", module.rule_triage)
    assert all(r["status"] == "ok" and r["agent_flags"] == [] for r in recs)
