"""Exact small-sample p-values and the numbers around them (the statistics audit, F2-F8)."""
import math

import numpy as np
import pytest
from scipy import stats as sps

from convsim.evaluation.reporting import stats


# ---------------------------------------------------------------- F2: Wilcoxon with ties

@pytest.mark.parametrize("d, p", [([1, 1, 1, 1], 0.125), ([1, 1, 1, 1, 1], 0.0625),
                                  ([1, 2, 1, 1, 1, 1], 0.03125), ([-1, -1, -1, -1, -1], 0.0625)])
def test_wilcoxon_with_ties_takes_the_exact_table_value(d, p):
    _, got = stats.wilcoxon_p(np.array(d, float))
    assert got == pytest.approx(p, abs=1e-15)
    assert got >= stats.min_p_wilcoxon(len(d))  # never below the smallest attainable p


def test_wilcoxon_with_ties_equals_scipys_exhaustive_permutation_test():
    rng = np.random.default_rng(7)
    for n in (3, 6, 9, 13):
        for _ in range(4):
            d = np.round(rng.normal(0.4, 1, n), 1)
            d = d[d != 0]
            ref = sps.wilcoxon(d, method=sps.PermutationMethod(n_resamples=2 ** 14))  # exhaustive: 2**n <= 2**13
            stat, p = stats.wilcoxon_p(d)
            assert (stat, p) == pytest.approx((ref.statistic, ref.pvalue), rel=1e-12)


def test_wilcoxon_without_ties_equals_scipys_exact_test():
    rng = np.random.default_rng(8)
    for n in (4, 10, 25, 50):
        d = rng.normal(0.3, 1, n)
        ref = sps.wilcoxon(d, method="exact")
        assert stats.wilcoxon_p(d) == pytest.approx((ref.statistic, ref.pvalue), rel=1e-12)


@pytest.mark.parametrize("d, p", [
    ([1] * 14 + [-1] * 2, 0.004180908203125),          # normal approximation: 0.00270
    ([1] * 12 + [-1] * 6, 0.237884521484375)])         # normal approximation: 0.157
def test_wilcoxon_with_ties_above_n_13_is_exact_not_the_normal_approximation(d, p):
    # the references are scipy.stats.wilcoxon(d, method=PermutationMethod(n_resamples=2**n)), an
    # exhaustive enumeration (20-90 s each, so stored here); scipy's default above n = 13 with ties
    # is the normal approximation
    assert stats.wilcoxon_p(np.array(d, float))[1] == pytest.approx(p, rel=1e-12)


# ---------------------------------------------------------------- F3: rounding noise

def _noisy_constant():
    a = [0.1 * i for i in range(6)]
    b = [x + 0.5 for x in a]
    return a, b, np.array(b) - np.array(a)  # 0.5 up to rounding noise: the differences are not all equal


def test_a_constant_difference_up_to_rounding_noise_is_constant():
    a, b, d = _noisy_constant()
    assert len(set(d.tolist())) > 1  # the noise the old code took for variance
    assert stats.cohens_dz(d) is None
    assert stats.paired_t(d) == (None, None)
    assert stats.wilcoxon_p(d) == (0.0, 0.03125)
    row = stats.paired_wilcoxon_holm({"A": dict(enumerate(a)), "B": dict(enumerate(b))})["pairs"][0]
    assert (row["p"], row["p_t"], row["cohens_dz"], row["n_nonzero"]) == (0.03125, None, None, 6)


def test_noise_sized_differences_are_zeros_and_noisy_ties_are_ties():
    assert stats.nonzero_count([0.3 - 0.1 - 0.2, 0.0, 1.0]) == 1
    d = np.array([0.1 + 0.2, 0.3, 0.3, -0.3, 0.6])  # 0.1 + 0.2 != 0.3: a tie up to noise
    assert stats.wilcoxon_p(d) == pytest.approx(stats.wilcoxon_p(np.array([0.3, 0.3, 0.3, -0.3, 0.6])))
    assert stats.rank_biserial_paired(d) == pytest.approx(stats.rank_biserial_paired([0.3, 0.3, 0.3, -0.3, 0.6]))


def test_retrieval_paired_tests_and_compare_use_the_tolerance():
    from convsim.evaluation.reporting.compare import compare_metric
    from convsim.evaluation.retrieval.compare import paired_tests
    a, b, _ = _noisy_constant()
    out = paired_tests(a, b)
    assert (out["tP"], out["tStatistic"], out["wilcoxonP"]) == (None, None, 0.03125)
    row = compare_metric({i: (x, None) for i, x in enumerate(a)}, {i: (x, None) for i, x in enumerate(b)})
    assert (row["p"], row["p_t"], row["effect_size"]) == (0.03125, None, None)


def test_constant_groups_up_to_noise_are_constant_for_anova_friedman_spearman():
    x = [0.1 * 3, 0.3, 0.1 + 0.2, 0.3]
    assert stats.anova_oneway({"a": x[:2], "b": x[2:]})["p"] is None
    base = {i: 0.1 * i for i in range(4)}
    fr = stats.friedman({"a": base, "b": {i: v + 0.2 for i, v in base.items()},
                         "c": {i: v + 0.1 + 0.1 for i, v in base.items()}})
    assert fr["p"] is not None  # b and c differ from a: defined
    same = stats.friedman({"a": {i: 0.3 for i in range(4)}, "b": {i: 0.1 + 0.2 for i in range(4)},
                           "c": {i: 0.3 for i in range(4)}})
    assert same["p"] is None and "identical" in same["warning"]
    sp = stats.spearman_bootstrap([0.3, 0.1 + 0.2, 0.3, 0.3], [1, 2, 3, 4])
    assert sp["rho"] is None and "constant" in sp["warning"]


# ---------------------------------------------------------------- F4: exact Spearman p at small n

@pytest.mark.parametrize("x, y, p", [
    ([1, 2, 3, 4], [1, 2, 3, 4], 2 / 24),               # the smallest attainable p at n = 4
    ([1, 2, 3, 4, 5], [1, 3, 2, 4, 5], 10 / 120),
    ([1, 2, 3, 4, 5, 6], [2, 1, 3, 4, 6, 5], 24 / 720)])
def test_spearman_small_n_p_is_the_exact_permutation_p(x, y, p):
    res = stats.spearman_bootstrap(x, y)
    assert res["p"] == pytest.approx(p, rel=1e-12) and res["p_method"] == "exact permutation"
    assert res["p"] >= res["min_attainable_p"]


def test_spearman_exact_p_equals_scipys_permutation_test():
    rng = np.random.default_rng(4)
    for n in (5, 7):
        x, y = rng.normal(size=n), rng.normal(size=n)
        y = x + rng.normal(0, 0.5, n)
        # scipy's recipe for a correlation: permute one sample's pairings (exhaustive: n! <= 5040)
        ref = sps.permutation_test((x,), lambda a: sps.spearmanr(a, y).statistic, permutation_type="pairings",
                                   n_resamples=math.factorial(n), vectorized=False)
        assert stats.spearman_bootstrap(x, y)["p"] == pytest.approx(ref.pvalue, rel=1e-9)


def test_spearman_above_nine_pairs_keeps_scipys_p():
    x = np.arange(12.0)
    y = x + np.random.default_rng(0).normal(0, 3, 12)
    res = stats.spearman_bootstrap(x, y)
    assert res["p"] == pytest.approx(sps.spearmanr(x, y).pvalue) and res["p_method"].startswith("t approximation")


# ---------------------------------------------------------------- F6, F7: small n

def test_describe_gives_no_interval_at_n_1_and_flags_small_n():
    one = stats.describe([0.4])
    assert one["mean"] == 0.4 and (one["ci_low"], one["ci_high"]) == (None, None)
    two = stats.describe([0.7, 0.9])
    assert two["ci_low"] is not None and "n=2 < 5" in two["warning"]
    assert stats.describe([1, 2, 3, 4, 5])["warning"] is None


def test_one_against_two_sessions_gives_no_interval_and_says_mwu_cannot_reach_alpha():
    from convsim.evaluation.reporting.compare import compare_metric
    row = compare_metric({"x": (0.4, 1)}, {"y": (0.9, 2), "z": (0.7, 3)})
    assert row["test"] == "Mann-Whitney U" and (row["ci_low"], row["ci_high"]) == (None, None)
    assert "no interval" in row["warning"] and "0.6667" in row["warning"]


def test_mann_whitney_warning_quotes_the_smallest_attainable_p():
    from convsim.evaluation.reporting.compare import compare_metric
    assert stats.min_p_mannwhitney(3, 3) == pytest.approx(0.1)
    assert stats.min_p_mannwhitney(4, 4) == pytest.approx(2 / 70)
    # complete separation at 3 vs 3: scipy's exact p is the minimum
    assert sps.mannwhitneyu([0.1, 0.2, 0.3], [0.7, 0.8, 0.9]).pvalue == pytest.approx(stats.min_p_mannwhitney(3, 3))
    row = compare_metric({f"x{i}": (v, 1) for i, v in enumerate([0.1, 0.2, 0.3])},
                         {f"y{i}": (v, 2) for i, v in enumerate([0.7, 0.8, 0.9])})
    assert "Mann-Whitney U (3 vs 3) with n=6 cannot reach p<0.05" in row["warning"] and "0.1" in row["warning"]
    big = compare_metric({f"x{i}": (float(i), 1) for i in range(6)}, {f"y{i}": (float(i) + 3, 2) for i in range(6)})
    assert "cannot reach" not in (big["warning"] or "")



def _mwu_by_enumeration(a, b):
    """Two-sided p of the rank sum of a over every split of the pooled values (midranks for ties)."""
    from itertools import combinations
    ranks = sps.rankdata(np.array(a + b, float))
    observed = ranks[:len(a)].sum()
    sums = [ranks[list(c)].sum() for c in combinations(range(len(ranks)), len(a))]
    below = sum(s <= observed + 1e-9 for s in sums)
    above = sum(s >= observed - 1e-9 for s in sums)
    return min(1.0, 2 * min(below, above) / len(sums))


def test_mann_whitney_with_ties_at_small_n_is_exact():
    from convsim.evaluation.reporting.compare import compare_metric
    # 3 zeros vs 3 ones: of the C(6, 3) = 20 splits one puts every zero in a (rank sum 6) and one
    # every one (15): p = 2/20 = 0.1, the smallest attainable. scipy's default (the normal
    # approximation, since there are ties) gave 0.0469 < 0.05 under a warning that p < 0.05 is out of reach.
    a, b = [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]
    assert _mwu_by_enumeration(a, b) == pytest.approx(0.1)
    assert sps.mannwhitneyu(a, b).pvalue == pytest.approx(0.046854, abs=1e-6)
    assert stats.mannwhitney_p(a, b) == (0.0, pytest.approx(0.1, abs=1e-15), "exact permutation")
    row = compare_metric({f"x{i}": (v, 1) for i, v in enumerate(a)}, {f"y{i}": (v, 2) for i, v in enumerate(b)})
    assert row["p"] == pytest.approx(0.1) and row["p_method"] == "exact permutation"
    assert row["p"] >= stats.min_p_mannwhitney(3, 3) and "cannot reach p<0.05" in row["warning"]
    # a less extreme tied example: 126 splits, 10 with a rank sum <= 13: p = 20/126 = 0.1587; normal 0.0978
    a, b = [1.0, 2.0, 2.0, 3.0], [2.0, 3.0, 3.0, 4.0, 4.0]
    assert _mwu_by_enumeration(a, b) == pytest.approx(20 / 126)
    assert stats.mannwhitney_p(a, b)[1] == pytest.approx(20 / 126, abs=1e-15)
    assert sps.mannwhitneyu(a, b).pvalue == pytest.approx(0.0978, abs=1e-4)


def test_mann_whitney_exact_equals_scipys_exhaustive_permutation_test():
    rng = np.random.default_rng(3)
    for n_a, n_b in ((2, 5), (4, 4), (5, 7), (3, 9)):
        for _ in range(3):
            a, b = rng.integers(0, 4, n_a).astype(float), rng.integers(1, 5, n_b).astype(float)
            ref = sps.mannwhitneyu(a, b, method=sps.PermutationMethod(n_resamples=math.comb(n_a + n_b, n_a)))
            u, p, method = stats.mannwhitney_p(a, b)
            assert (u, p) == pytest.approx((ref.statistic, ref.pvalue), rel=1e-12) and method == "exact permutation"
            assert p >= stats.min_p_mannwhitney(n_a, n_b) - 1e-15
    x, y = rng.normal(size=7), rng.normal(size=9)  # no ties: scipy's exact distribution
    assert stats.mannwhitney_p(x, y)[1] == pytest.approx(sps.mannwhitneyu(x, y, method="exact").pvalue, rel=1e-12)


def test_mann_whitney_above_the_exact_limit_says_which_method():
    rng = np.random.default_rng(4)
    tied = rng.integers(0, 5, 30).astype(float), rng.integers(0, 5, 30).astype(float)
    u, p, method = stats.mannwhitney_p(*tied)
    assert method == "normal approximation" and p == pytest.approx(sps.mannwhitneyu(*tied).pvalue)
    small = rng.normal(size=5), rng.normal(size=60)
    assert stats.mannwhitney_p(*small)[2] == "exact (scipy, no ties)"
    assert stats.mannwhitney_p(*small)[1] == pytest.approx(sps.mannwhitneyu(*small, method="exact").pvalue)

# ---------------------------------------------------------------- F8, F10: what the text says

def test_compare_text_names_the_family_holm_corrected_over():
    from convsim.evaluation.reporting.compare_text import format_comparison
    base = {"variant_a": "v", "variant_b": "v", "mean_a_shown": 0.1, "mean_b_shown": 0.2, "diff": 0.1,
            "ci_low": 0.0, "ci_high": 0.2, "basis": "paired", "n_shown": 8, "test": "paired Wilcoxon"}
    rows = [{**base, "metric": f"m{i}", "p": 0.01 if i < 3 else None, "p_holm": 0.03 if i < 3 else None,
             "significant": True if i < 3 else None} for i in range(10)]
    text = format_comparison({"run_a": "A", "run_b": "B", "alpha": 0.05, "rows": rows})
    assert "Holm-adjusted over the 3 row(s) with a p (of 10" in text


def test_a_starred_p_is_never_printed_as_alpha():
    from convsim.evaluation.reporting.compare_text import _p
    from convsim.evaluation.reporting.headline import fmt_p
    assert fmt_p(0.04996) == "0.04996" and fmt_p(0.05004) == "0.05" and fmt_p(0.0312) == "0.0312"
    assert _p({"p_holm": 0.04996, "significant": True}) == "0.04996*"
    for p in np.linspace(0.0495, 0.0505, 41):
        assert (float(fmt_p(p)) < 0.05) == (p < 0.05)


def test_anova_and_tukey_with_zero_within_group_variance_report_no_p():
    res = stats.anova_oneway({"a": [1.0, 1.0, 1.0], "b": [2.0, 2.0, 2.0]})
    assert (res["F"], res["p"]) == (None, None) and "within-group variance" in res["warning"]
    tk = stats.tukey_hsd({"a": [1.0, 1.0, 1.0], "b": [2.0, 2.0, 2.0]})
    assert tk["pairs"][0]["p_adj"] is None and tk["pairs"][0]["meandiff"] == 1.0


def test_mann_whitney_smallest_attainable_p_with_ties():
    from itertools import combinations
    from convsim.evaluation.reporting.compare import compare_metric
    a, b = [0.0] * 5 + [1.0], [1.0] * 3
    pooled = a + b
    # every split of the pooled values taken as the observed one: the smallest p the test can give
    smallest = min(_mwu_by_enumeration([pooled[i] for i in c], [pooled[i] for i in range(9) if i not in c])
                   for c in combinations(range(9), 6))
    assert stats.min_p_mannwhitney_observed(a, b) == pytest.approx(smallest) == pytest.approx(8 / 84)
    assert stats.min_p_mannwhitney(6, 3) == pytest.approx(2 / 84)  # the no-ties bound: too optimistic
    row = compare_metric({f"x{i}": (v, 1) for i, v in enumerate(a)}, {f"y{i}": (v, 2) for i, v in enumerate(b)})
    assert "cannot reach p<0.05" in row["warning"] and "0.09524" in row["warning"]
    # without ties it is the no-ties bound
    assert stats.min_p_mannwhitney_observed([0.1, 0.2, 0.3], [0.7, 0.8, 0.9]) == pytest.approx(0.1)
    assert stats.min_p_mannwhitney_observed([2.0] * 4, [2.0] * 3) == 1.0
