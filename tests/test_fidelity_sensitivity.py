"""Sensitivity of agent scores to the simulator (evaluation/fidelity/sensitivity.py): spreads and
Kendall tau from a run's summary, and the shipped config's variant grid."""
from pathlib import Path

import pytest

from convsim.config import load_config
from convsim.evaluation.fidelity.sensitivity import markdown, sensitivity, split_variant

ROOT = Path(__file__).parents[1]


def _summary(grid: dict[str, dict[str, float]], metric: str = "task_success") -> dict:
    return {"variants": {f"{sim}__{agent}": {"metrics": {metric: {"mean": v}}}
                         for sim, row in grid.items() for agent, v in row.items()}}


def test_same_ranking_gives_tau_one_and_spread_the_range():
    rows = sensitivity(_summary({"template": {"a": 0.9, "b": 0.6, "c": 0.3},
                                 "heldout": {"a": 0.5, "b": 0.4, "c": 0.1}}))
    (row,) = rows
    assert row["kendall"] == [{"a": "heldout", "b": "template", "agents": 3, "kendall_tau": pytest.approx(1.0)}]
    assert row["agents"]["a"]["spread"] == pytest.approx(0.4)
    assert "| a | 0.500 | 0.900 | 0.400 |" in markdown(rows)


def test_a_simulator_that_reorders_the_agents_lowers_tau():
    """The defect the figure measures: a simulator under which the worst agent looks best."""
    base = {"template": {"a": 0.9, "b": 0.6, "c": 0.3}}
    same = sensitivity(_summary({**base, "other": {"a": 0.8, "b": 0.5, "c": 0.2}}))[0]["kendall"][0]["kendall_tau"]
    swapped = sensitivity(_summary({**base, "other": {"a": 0.2, "b": 0.5, "c": 0.8}}))[0]["kendall"][0]["kendall_tau"]
    assert same == pytest.approx(1.0) and swapped == pytest.approx(-1.0)


def test_too_few_agents_or_all_ties_give_no_tau_and_other_variants_are_skipped():
    rows = sensitivity(_summary({"t": {"a": 1.0, "b": 1.0, "c": 1.0}, "h": {"a": 0.2, "b": 0.5, "c": 0.8}}))
    assert rows[0]["kendall"][0]["kendall_tau"] is None
    assert sensitivity(_summary({"t": {"a": 1.0, "b": 0.5}, "h": {"a": 0.2, "b": 0.5}}))[0]["kendall"][0]["kendall_tau"] is None
    assert split_variant("default") is None and sensitivity({"variants": {"default": {"metrics": {}}}}) == []


def test_shipped_config_runs_every_agent_against_every_simulator_offline():
    cfg = load_config(ROOT / "configs" / "service_sensitivity.yaml")
    pairs = [split_variant(v.name) for v in cfg.variants]
    sims, agents = {p[0] for p in pairs}, {p[1] for p in pairs}
    assert len(pairs) == len(sims) * len(agents) and {"template", "heldout", "replay"} <= sims and len(agents) >= 3
    assert all(str(m) == "none" for m in cfg.models.values())
    assert any(a.endswith("write_sensitivity") for a in cfg.analysis)
