"""The bootstrap distribution of a ranking (evaluation/reporting/ranking_stability.py): the figure
moves the right way when the defect it measures (variants the sessions cannot order) is injected."""
import numpy as np
import pytest

from convsim.evaluation.reporting.ranking_stability import ranking_stability


def _variants(gap: float, n: int, k: int = 6, sd: float = 1.0, seed: int = 1, paired: bool = True):
    rng = np.random.default_rng(seed)
    users = rng.normal(0, sd, n)  # a user effect shared by every variant (paired sessions)
    return {f"m{j}": {f"s{i}": float(j * gap + (users[i] if paired else 0) + rng.normal(0, sd))
                      for i in range(n)} for j in range(k)}


def test_well_separated_variants_rank_the_same_on_every_resample():
    res = ranking_stability(_variants(gap=2.0, n=100), n_boot=300, seed=0)
    assert res["paired"] and res["variants"][0] == "m5"  # best first
    assert res["p_first"]["m5"] == 1.0 and res["tau_mean"] > 0.95 and res["tau_observed"] > 0.95
    assert res["rank_interval"]["m5"] == [1.0, 1.0]


def test_indistinguishable_variants_show_an_unstable_ranking():
    stable = ranking_stability(_variants(gap=0.5, n=100, paired=False), n_boot=300, seed=0)
    noisy = ranking_stability(_variants(gap=0.0, n=100, paired=False), n_boot=300, seed=0)
    assert noisy["tau_mean"] < stable["tau_mean"]  # the defect (no real gap) lowers tau
    assert max(noisy["p_first"].values()) < 0.9 and noisy["tau_low"] < 0.5
    assert sum(noisy["p_first"].values()) == pytest.approx(1.0, abs=0.05)  # shared firsts only add


def test_more_sessions_steady_the_same_gap():
    few = ranking_stability(_variants(gap=0.2, n=20), n_boot=300, seed=0)
    many = ranking_stability(_variants(gap=0.2, n=2000), n_boot=300, seed=0)
    assert many["tau_mean"] > few["tau_mean"]


def test_direction_missing_values_and_too_few_sessions():
    vals = {"a": {"s1": 1.0, "s2": 1.1, "s3": None}, "b": {"s1": 5.0, "s2": 5.2}, "c": {"s1": 3.0}}
    res = ranking_stability(vals, n_boot=50, higher_is_better=False)
    assert res["variants"] == ["a", "b"] and res["skipped"] == ["c"] and res["p_first"]["a"] == 1.0
    assert ranking_stability({"a": {"s1": 1.0, "s2": 2.0}}, n_boot=10) is None


def test_the_report_has_the_section(tmp_path):
    from analysis_runs import make_run
    from convsim.evaluation.reporting.report import build_report
    run_dir = make_run(tmp_path / "r", variants=("x", "y", "z"), sessions=12, seed=3)
    html = build_report(run_dir).read_text(encoding="utf-8")
    assert 'id="ranking-stability"' in html and "ranks first in" in html


def test_tied_leaders_are_named_together():
    from convsim.evaluation.reporting.ranking_stability import sentence
    same = {f"s{i}": float(i % 3) for i in range(20)}
    res = ranking_stability({"a": same, "b": dict(same), "c": {k: v - 1 for k, v in same.items()}}, n_boot=50)
    assert res["p_first"]["a"] == res["p_first"]["b"] == 1.0
    assert sentence(res).startswith("a, b (tied) rank first in 100%")
