"""Statistics at paper scale: no overflow, bounded memory, paired t-test, corrections across metrics,
per-variant correlations and undefined (not fake) intervals. Hand-computed values where possible."""

import math
import tracemalloc

import numpy as np
import pytest
from scipy import stats as sps

from convsim.results import aggregate
from convsim.evaluation.reporting import stats
from convsim.evaluation.reporting.run_stats import across_metrics, correlations, run_statistics


def test_min_attainable_p_never_overflows():
    assert stats.min_p_spearman(5) == pytest.approx(2 / 120)
    assert stats.min_p_spearman(170) == pytest.approx(2 / math.factorial(170), rel=1e-9)
    for n in (171, 500, 50_000):  # 2/n! used to raise OverflowError from n = 171 on
        assert 0.0 <= stats.min_p_spearman(n) < 1e-300
    assert stats.min_p_wilcoxon(5) == pytest.approx(0.0625)
    assert stats.min_p_wilcoxon(1100) == 0.0  # 2/2**1100 overflowed the same way


def test_spearman_at_171_and_beyond_gives_numbers():
    rng = np.random.default_rng(0)
    for n in (171, 400, 3000):
        x = rng.normal(size=n)
        y = 0.5 * x + rng.normal(size=n)
        res = stats.spearman_bootstrap(list(x), list(y))
        assert res["rho"] == pytest.approx(sps.spearmanr(x, y).statistic)
        assert res["ci_low"] < res["rho"] < res["ci_high"]
    assert res["ci_method"].startswith("Fisher z")  # n > SPEARMAN_BOOTSTRAP_MAX: analytic interval


def test_fisher_interval_by_hand():
    # rho 0.5, n 103: half = 1.959964 * sqrt(1.125 / 100) = 0.207879; atanh(0.5) = 0.549306
    lo, hi = stats.spearman_fisher_ci(0.5, 103)
    assert lo == pytest.approx(math.tanh(0.549306 - 0.207879), abs=1e-5)
    assert hi == pytest.approx(math.tanh(0.549306 + 0.207879), abs=1e-5)


def test_wilcoxon_large_n_uses_the_normal_approximation():
    d = np.arange(1, 2001, dtype=float) * np.where(np.arange(2000) % 3 == 0, -1, 1)
    stat, p = stats.wilcoxon_p(d)
    ref = sps.wilcoxon(d, method="approx")
    assert (stat, p) == pytest.approx((ref.statistic, ref.pvalue))


def test_chunked_bootstrap_draws_exactly_the_unchunked_resamples(monkeypatch):
    xs = np.sort(np.random.default_rng(5).normal(size=37))
    full = xs[np.random.default_rng(9).integers(0, 37, (1000, 37))].mean(axis=1)
    monkeypatch.setattr(aggregate, "CHUNK_INDICES", 100)  # 2 rows per chunk
    assert np.array_equal(aggregate.bootstrap_means(xs, n_boot=1000, seed=9), full)


def test_bootstrap_ignores_order_and_stays_small():
    rng = np.random.default_rng(1)
    xs = list(rng.normal(size=50_000))
    tracemalloc.start()
    a = aggregate.bootstrap_ci(xs, seed=3)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # one 1000 x 50,000 index matrix alone would be 400 MB
    assert peak < 60e6
    assert aggregate.bootstrap_ci(list(reversed(xs)), seed=3) == a
    tracemalloc.start()
    t = aggregate.mean_ci(xs)  # the interval every output uses: one pass, no resampling
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 5e6 and t["ci_method"] == "Student t"
    assert aggregate.mean_ci(list(reversed(xs))) == t
    assert stats.describe(xs[::-1]) == stats.describe(xs)


def test_paired_t_by_hand_and_it_moves_with_the_shift():
    t, p = stats.paired_t(np.array([1.0, 2.0, 3.0]))
    # mean 2, sd 1, se 1/sqrt(3): t = 2 sqrt(3); p = 2 * t.sf(3.4641, df=2)
    assert t == pytest.approx(2 * math.sqrt(3))
    assert p == pytest.approx(2 * sps.t.sf(2 * math.sqrt(3), 2))
    assert stats.paired_t(np.array([1.0, 1.0, 1.0])) == (None, None)
    rng = np.random.default_rng(2)
    base = {f"s{i}": float(v) for i, v in enumerate(rng.normal(size=40))}
    noise = rng.normal(0, 0.5, 40)
    null = {k: v + e for (k, v), e in zip(base.items(), noise)}
    shifted = {k: v + 1.0 for k, v in null.items()}  # the injected defect: B is better by 1
    p_null = stats.paired_wilcoxon_holm({"A": base, "B": null})["pairs"][0]["p_t"]
    p_shift = stats.paired_wilcoxon_holm({"A": base, "B": shifted})["pairs"][0]
    assert p_shift["p_t"] < 1e-6 < p_null
    assert p_shift["t"] > 0 and p_shift["p_t_holm"] == p_shift["p_t"]  # one pair: Holm is the identity


def test_holm_across_metrics_by_hand():
    per_metric = {m: {"variants": {"A": {}, "B": {}},
                      "wilcoxon": {"pairs": [{"group1": "A", "group2": "B", "p": p}]}}
                  for m, p in (("m1", 0.01), ("m2", 0.04), ("m3", 0.03))}
    rows = {r["metric"]: r for r in across_metrics(per_metric, alpha=0.05)["rows"]}
    # sorted p: 0.01*3 = 0.03, 0.03*2 = 0.06, max(0.06, 0.04*1) = 0.06
    assert rows["m1"]["p_holm_metrics"] == pytest.approx(0.03)
    assert rows["m3"]["p_holm_metrics"] == pytest.approx(0.06)
    assert rows["m2"]["p_holm_metrics"] == pytest.approx(0.06)
    assert [rows[m]["reject"] for m in ("m1", "m2", "m3")] == [True, False, False]


def _rec(variant, i, auto, judge):
    return {"variant": variant, "session_id": f"s{i:03d}", "trial": 0, "seed": i, "status": "ok",
            "dialogue_metrics": {"tas": auto, "judge_quality": judge}}


def test_correlations_per_variant_show_what_pooling_hides():
    # Simpson: inside each variant the judge falls as TAS rises; variant B is higher on both
    recs = [_rec("A", i, i / 10, 5 - i / 10) for i in range(30)] + \
           [_rec("B", i, 10 + i / 10, 20 - i / 10) for i in range(30)]
    pooled = correlations(recs, ["tas", "judge_quality"])[0]
    per = {r["variant"]: r for r in correlations(recs, ["tas", "judge_quality"], variant="A")
           + correlations(recs, ["tas", "judge_quality"], variant="B")}
    assert pooled["rho"] > 0.4
    assert per["A"]["rho"] == pytest.approx(-1.0) and per["B"]["rho"] == pytest.approx(-1.0)
    out = run_statistics(recs)
    assert {r["variant"] for r in out["correlations_by_variant"]} == {"A", "B"}


def test_constant_judge_gives_no_interval_and_no_p():
    recs = [_rec("A", i, i / 10, 5.0) for i in range(50)]
    row = correlations(recs, ["tas", "judge_quality"])[0]
    assert row["rho"] is None and row["p"] is None and row["ci_low"] is None and row["ci_high"] is None
    assert "constant" in row["ci_undefined"]


def test_nearly_constant_judge_reports_the_interval_undefined():
    # 49 of 50 sessions score 5: many resamples miss the one 4, so rho is undefined there
    recs = [_rec("A", i, i / 10, 4.0 if i == 7 else 5.0) for i in range(50)]
    row = correlations(recs, ["tas", "judge_quality"])[0]
    assert row["rho"] is not None
    assert row["ci_low"] is None and row["ci_high"] is None
    assert "resamples have a constant variable" in row["ci_undefined"]


def test_heuristic_judge_scores_are_kept_out_of_correlations():
    # README: heuristic judges are "kept out of correlations"; before, judge_heuristic_* scores were
    # correlated as judge scores and heuristic_<metric> ones as automatic metrics
    recs = [{"variant": "A", "session_id": f"s{i:03d}", "trial": 0, "seed": i, "status": "ok",
             "dialogue_metrics": {"tas": i / 10, "judge_quality": 5 - i / 10, "judge_heuristic_fluency": i % 3,
                                  "heuristic_response_quality": i % 5}} for i in range(20)]
    names = ["tas", "judge_quality", "judge_heuristic_fluency", "heuristic_response_quality"]
    rows = correlations(recs, names)
    assert [(r["automatic"], r["judge"]) for r in rows] == [("tas", "judge_quality")]
