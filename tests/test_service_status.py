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
    # the error counts measure exactly this defect: one agent error per dialogue, no simulator error
    assert [(r["dialogue_metrics"]["agent_errors"], r["dialogue_metrics"]["simulator_errors"]) for r in recs] == [(1, 0)] * 3


def test_a_user_node_that_raised_is_a_simulator_failure(tmp_path, monkeypatch):
    def broken_user_turn(*args, **kwargs):
        raise RuntimeError("simulator exploded")
    recs = _run(tmp_path, monkeypatch, "user_turn", broken_user_turn)
    assert [r["status"] for r in recs] == ["simulator_failure"] * 3
    assert recs[0]["simulator_flags"][0]["check"] == "user_error"
    assert recs[0]["agent_flags"] == []
    assert [(r["dialogue_metrics"]["agent_errors"], r["dialogue_metrics"]["simulator_errors"]) for r in recs] == [(0, 1)] * 3


def test_clean_sessions_carry_no_flags(tmp_path, monkeypatch):
    module = convsim.load_graph_module("customer_service")
    recs = _run(tmp_path, monkeypatch, "rule_triage", module.rule_triage)
    assert all(r["status"] == "ok" and r["agent_flags"] == [] for r in recs)
    assert all(r["dialogue_metrics"]["agent_errors"] == r["dialogue_metrics"]["simulator_errors"] == 0 for r in recs)


def _policy_accuracy(recs: list[dict]) -> tuple[float, int]:
    values = [t["policy_decision_accuracy"] for r in recs for t in r["turn_metrics"]
              if t.get("policy_decision_accuracy") is not None]
    return sum(values) / len(values), len(values)


def test_policy_decision_accuracy_falls_for_a_policy_that_allows_every_booking(tmp_path, monkeypatch):
    # a metrics audit found this figure with no test; the defect it measures: a policy agent that lets
    # a booking through while required slots are still missing (or blocks one that has them all)
    module = convsim.load_graph_module("customer_service")
    real = module.check_policy

    def lax(schema, **kw):
        out = real(schema, **kw)
        return {**out, "allowed": True, "missing": []} if out["booking_requested"] else out
    cfg = dict(sessions=12, seed=3, trace=False, analysis=[], params={"mode": "simulate", "max_turns": 10},
               out_dir=str(tmp_path))
    clean = convsim.run(ExperimentConfig(name="p", graph="customer_service", run_id="clean", **cfg), analyze=False)
    monkeypatch.setattr(module, "check_policy", lax)
    broken = convsim.run(ExperimentConfig(name="p", graph="customer_service", run_id="lax", **cfg), analyze=False)
    read = lambda d: [json.loads(x) for x in (d / "results.jsonl").read_text().splitlines()]  # noqa: E731
    (good, n_good), (bad, n_bad) = _policy_accuracy(read(clean)), _policy_accuracy(read(broken))
    assert n_good >= 5 and n_bad >= 5
    assert good == 1.0 and bad < good


def test_booking_unconfirmed_counts_a_booking_value_the_user_never_gave(tmp_path, monkeypatch):
    # a metrics audit found no fault that moves this figure; the defect: an action agent that books
    # with a party size of its own (one more than the user asked for)
    module = convsim.load_graph_module("customer_service")
    real = module.decide_action

    def padded(*args, **kwargs):
        act = real(*args, **kwargs)
        booking = dict(act.get("booking") or {})
        if act.get("kind") == "book" and str(booking.get("bookpeople", "")).isdigit():
            booking["bookpeople"] = str(int(booking["bookpeople"]) + 1)
            act = {**act, "booking": booking}
        return act
    cfg = dict(sessions=12, seed=3, trace=False, analysis=[], params={"mode": "simulate", "max_turns": 10},
               out_dir=str(tmp_path))
    read = lambda d: [json.loads(x) for x in (d / "results.jsonl").read_text().splitlines()]  # noqa: E731
    clean = read(convsim.run(ExperimentConfig(name="b", graph="customer_service", run_id="clean", **cfg), analyze=False))
    monkeypatch.setattr(module, "decide_action", padded)
    broken = read(convsim.run(ExperimentConfig(name="b", graph="customer_service", run_id="padded", **cfg),
                              analyze=False))
    count = lambda recs: sum(r["dialogue_metrics"]["booking_unconfirmed"] for r in recs)  # noqa: E731
    assert count(clean) == 0 and count(broken) > 0
