"""The 95 % CIs cover about 95 % at small n, and each interval type equals its library reference.

The percentile bootstrap over sessions that summary.json, stats.json, the report and compare used
covered 0.83-0.84 at n = 5 and 0.90 at n = 10 for normal data, 0.66 at n = 5 and 0.88 at n = 10 for a
0/1 metric with p = 0.2, and gave [1, 1] for a metric that is 1 in every session
(bench/ci_coverage.py, docs/analysis.md). A miniature of that simulation, seeded: 1,000 simulated
experiments per cell (simulation standard error about 0.007 near 0.95); for 0/1 data the coverage
is computed exactly.
"""
import math

import numpy as np
import pytest
from scipy import stats as sps

from convsim.results.aggregate import bootstrap_ci, mean_ci, mean_diff_ci
from convsim.results.summary import variant_summary
from convsim.evaluation.reporting import stats
from convsim.evaluation.reporting.compare import compare_metric

REPS = 1000


def _coverage(draw, mu, *, reps=REPS, seed=0, interval=stats.describe):
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        ci = interval(draw(rng))
        hits += ci["ci_low"] <= mu <= ci["ci_high"]
    return hits / reps


@pytest.mark.parametrize("n", [5, 10])
def test_normal_means_cover_95_percent(n):
    # stats.describe is the interval of stats.json and the report's headline cells
    # 0.942 at n = 5 and 0.932 at n = 10 with this seed (the old bootstrap: 0.835 and 0.892)
    assert _coverage(lambda rng: rng.normal(3.0, 2.0, n), 3.0) == pytest.approx(0.95, abs=0.03)


@pytest.mark.parametrize("n", [5, 10])
def test_a_zero_one_metric_covers_its_proportion(n):
    # a 0/1 sample's interval depends on its count k only, so the coverage is a sum over k: the
    # binomial weight of the counts whose interval holds p (exact; no simulation error)
    p = 0.2

    def coverage(interval):
        cis = [interval([1.0] * k + [0.0] * (n - k)) for k in range(n + 1)]
        return sum(sps.binom.pmf(k, n, p) for k, ci in enumerate(cis) if ci["ci_low"] <= p <= ci["ci_high"])
    assert coverage(stats.describe) >= 0.93  # Wilson: 0.942 at n = 5, 0.967 at n = 10
    assert coverage(bootstrap_ci) <= 0.89  # the old percentile bootstrap: 0.666 and 0.886
    assert stats.describe([1.0, 0.0])["ci_method"] == "Wilson score"


def test_the_percentile_bootstrap_was_the_problem():
    # the same draws through the old interval (still available as bootstrap_ci): about 0.84 at n = 5
    old = _coverage(lambda rng: rng.normal(3.0, 2.0, 5), 3.0, reps=400, interval=bootstrap_ci)
    assert old < 0.90


def test_a_metric_that_is_one_everywhere_is_not_certain():
    d = stats.describe([1.0] * 24)
    assert d["ci_method"] == "Wilson score" and d["ci_high"] == 1.0
    # Wilson's lower bound for k = n is n / (n + z^2)
    assert d["ci_low"] == pytest.approx(24 / (24 + sps.norm.ppf(0.975) ** 2), rel=1e-12)
    assert d["ci_low"] == pytest.approx(0.862, abs=5e-4) and d["ci_low"] < 1


@pytest.mark.parametrize("paired, method", [(True, "paired t"), (False, "Welch t")])
def test_differences_cover_95_percent(paired, method):
    # paired: 5 pairs; independent: 5 vs 8 with sd 1 vs 3: 0.967 and 0.956 with this seed (the old
    # bootstrap: 0.84 and 0.88, bench/ci_coverage.py)
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(REPS):
        a = rng.normal(0, 1, 5)
        b = a + rng.normal(0.5, 1, 5) if paired else rng.normal(0.5, 3, 8)
        ci = mean_diff_ci(a, b, paired=paired)
        hits += ci["ci_low"] <= 0.5 <= ci["ci_high"]
    assert ci["ci_method"] == method
    assert hits / REPS == pytest.approx(0.95, abs=0.03)


def test_compare_and_the_headline_use_the_difference_interval():
    a, b = [0.1, 0.5, 0.3, 0.2, 0.4], [0.35, 0.6, 0.55, 0.3, 0.7]
    paired = compare_metric({f"s{i}": (x, None) for i, x in enumerate(a)}, {f"s{i}": (y, None) for i, y in enumerate(b)})
    ref = mean_diff_ci(a, b, paired=True)
    assert (paired["ci_low"], paired["ci_high"], paired["ci_method"]) == \
        pytest.approx((ref["ci_low"], ref["ci_high"], "paired t"))
    alone = compare_metric({f"a{i}": (x, None) for i, x in enumerate(a)}, {f"b{i}": (y, None) for i, y in enumerate(b)})
    ref = mean_diff_ci(a, b, paired=False)
    assert alone["test"] == "Mann-Whitney U" and (alone["ci_low"], alone["ci_high"], alone["ci_method"]) == \
        pytest.approx((ref["ci_low"], ref["ci_high"], "Welch t"))


# ---------------------------------------------------------------- each interval against its reference

def test_student_t_by_hand_and_scipy():
    ci = mean_ci([1.0, 2.0, 3.0])
    # mean 2, sd 1: 2 -/+ t_{0.975, 2} / sqrt(3); with 2 df, t_q = (2q - 1) sqrt(2 / (4 q (1 - q)))
    half = 0.95 * math.sqrt(2 / (4 * 0.975 * 0.025)) / math.sqrt(3)
    assert (ci["ci_low"], ci["ci_high"]) == pytest.approx((2 - half, 2 + half), rel=1e-12)
    ref = sps.ttest_1samp([1.0, 2.0, 3.0], 0).confidence_interval(0.95)
    assert (ci["ci_low"], ci["ci_high"]) == pytest.approx((ref.low, ref.high), rel=1e-12)
    assert ci["ci_method"] == "Student t" and ci["n"] == 3
    assert mean_ci([5.0, 5.0, 5.0])["ci_low"] == 5.0 and mean_ci([5.0, 5.0])["ci_high"] == 5.0


def test_wilson_by_hand_and_statsmodels():
    from statsmodels.stats.proportion import proportion_confint
    ci = mean_ci([1, 0, 0, 1, 0, 0, 0, 0, 0, 0])  # 2 of 10
    z = sps.norm.ppf(0.975)
    centre, half = (2 + z * z / 2) / (10 + z * z), z / (10 + z * z) * math.sqrt(2 * 8 / 10 + z * z / 4)
    assert (ci["ci_low"], ci["ci_high"]) == pytest.approx((centre - half, centre + half), rel=1e-12)
    assert (ci["ci_low"], ci["ci_high"]) == pytest.approx(proportion_confint(2, 10, method="wilson"), rel=1e-12)
    assert ci["ci_method"] == "Wilson score"
    assert mean_ci([0.0] * 5)["ci_high"] == pytest.approx(proportion_confint(0, 5, method="wilson")[1], rel=1e-12)
    # a difference of 0/1 values is not a proportion: t, never Wilson
    assert mean_ci([0.0, 1.0, 1.0], binary=False)["ci_method"] == "Student t"


def test_wilson_is_scipys_binomtest_interval_float_for_float():
    # computed without importing scipy.stats (a run's summary needs only this from it): the same floats
    from convsim.results.aggregate import wilson_ci
    for alpha in (0.05, 0.1, 0.01):
        for n in range(1, 61):
            for k in range(n + 1):
                ci = sps.binomtest(k, n).proportion_ci(confidence_level=1 - alpha, method="wilson")
                assert wilson_ci(k, n, alpha=alpha) == (max(0.0, float(ci.low)), min(1.0, float(ci.high))), (k, n)


def test_difference_intervals_by_scipy_and_statsmodels():
    from statsmodels.stats.proportion import confint_proportions_2indep
    a, b = [1.0, 2.0, 4.0, 3.0], [2.0, 2.5, 6.0, 3.5]
    paired = mean_diff_ci(a, b, paired=True)
    ref = sps.ttest_rel(b, a).confidence_interval(0.95)
    assert (paired["diff"], paired["ci_low"], paired["ci_high"], paired["ci_method"]) == \
        pytest.approx((1.0, ref.low, ref.high, "paired t"))
    x, y = [1.0, 2.0, 4.0], [0.0, 5.0, 9.0, 7.0, 6.5]
    welch = mean_diff_ci(x, y, paired=False)
    ref = sps.ttest_ind(y, x, equal_var=False).confidence_interval(0.95)
    assert (welch["ci_low"], welch["ci_high"], welch["ci_method"]) == pytest.approx((ref.low, ref.high, "Welch t"))
    p, q = [1, 0, 0, 0, 1, 0, 0, 0], [1, 1, 0, 1, 1, 0, 1, 1, 1, 0]  # 2/8 and 7/10
    newcombe = mean_diff_ci(p, q, paired=False)
    ref = confint_proportions_2indep(7, 10, 2, 8, method="newcomb", compare="diff")
    assert (newcombe["diff"], newcombe["ci_low"], newcombe["ci_high"]) == pytest.approx((0.45, *ref), rel=1e-12)
    assert newcombe["ci_method"] == "Newcombe hybrid score"
    assert mean_diff_ci([1.0], [2.0, 3.0], paired=False)["ci_low"] is None


def test_every_output_names_its_interval():
    recs = [{"variant": "A", "session_id": f"s{i}", "status": "ok",
             "dialogue_metrics": {"score": float(i % 4), "solved": i % 3 == 0}} for i in range(9)]
    summary = variant_summary(recs)
    assert summary["score"]["ci_method"] == "Student t" and summary["solved"]["ci_method"] == "Wilson score"
    assert (summary["score"]["ci_low"], summary["score"]["ci_high"]) == \
        pytest.approx((mean_ci([i % 4 for i in range(9)])["ci_low"], mean_ci([i % 4 for i in range(9)])["ci_high"]))
    assert stats.describe([0.2, 0.4])["ci_method"] == "Student t" and stats.describe([0.2])["ci_method"] is None


def test_paired_zero_one_differences_use_newcombe():
    # R contingencytables' Newcombe_square_and_add_CI_paired_2x2 on its Chapter 8 table
    # [[59, 6], [16, 80]] (Cavo et al. 2012): -0.0621 (95% CI -0.1186 to -0.0046). Row 1 is b's
    # successes, column 1 a's.
    a = [1] * 59 + [1] * 16 + [0] * 6 + [0] * 80
    b = [1] * 59 + [0] * 16 + [1] * 6 + [0] * 80
    ci = mean_diff_ci(a, b, paired=True)
    assert ci["ci_method"] == "Newcombe paired score"
    assert (round(ci["diff"], 4), round(ci["ci_low"], 4), round(ci["ci_high"], 4)) == (-0.0621, -0.1186, -0.0046)
    # every pair agreeing is not certainty (the paired t interval said [0, 0])
    agree = mean_diff_ci([1.0] * 10, [1.0] * 10, paired=True)
    assert agree["ci_low"] < -0.2 and agree["ci_high"] > 0.2
    assert mean_ci(np.zeros(10), binary=False)["ci_high"] == 0.0  # what paired t gave
    # a pair with a missing side is left out; anything but 0/1 keeps the paired t interval
    assert mean_diff_ci([1, 0, None, 1], [1, 1, 1, 0], paired=True)["diff"] == pytest.approx(0.0)
    assert mean_diff_ci([1, 0, 0.5], [1, 1, 0], paired=True)["ci_method"] == "paired t"


def test_paired_zero_one_coverage():
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location(
        "ci_coverage", Path(__file__).resolve().parents[1] / "bench" / "ci_coverage.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    paired_binary = bench._paired_binary  # 10 correlated pairs, P(A) = 0.3, P(B) = 0.5
    newcombe = _coverage(paired_binary, 0.2, interval=lambda ab: mean_diff_ci(*ab, paired=True))
    paired_t = _coverage(paired_binary, 0.2, interval=lambda ab: mean_ci(ab[1] - ab[0], binary=False))
    assert newcombe >= 0.93 and paired_t < 0.91  # 0.942 and 0.887 in bench/ci_coverage.py (2,000 reps)
