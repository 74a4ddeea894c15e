"""Exact small-sample p-values and the numbers around them (the statistics audit, F2-F8)."""
import math

import numpy as np
import pytest
from scipy import stats as sps

from evaluation import stats


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
