"""Statistics over any metric and any set of variants (the multi-model CRS experiment: "ANOVA with Tukey HSD"; crs.md §1.8, §4.6).

Generic: the input is a mapping ``variant -> values`` (independent design) or
``variant -> {session: value}`` (paired design: the same session seeds across variants), one
value per independent unit: a session, its trials averaged first (trials replay one customer).
Every test reports n, an effect size and, when n is too small for the test to reach
significance at all, a warning saying so (the original ran Wilcoxon on 5 sessions, whose
smallest attainable two-sided p is 2/2**5 = 0.0625).

Fixes relative to the original `context-aware/statistical_analysis.py`: all Tukey pairs are
reported (not only the significant ones), with effect sizes, and paired designs get paired tests.

Bounds at scale: every p-value comes from scipy or an exact enumeration (Wilcoxon: the exact
conditional signed-rank distribution, ties included, up to ``EXACT_WILCOXON_MAX`` differences, the
normal approximation above; Mann-Whitney U: the exact conditional rank-sum distribution, ties
included, up to ``EXACT_MWU_MAX`` values), the smallest attainable p is computed in log space
(no factorial or power that overflows a float), the CI of a mean is Wilson's (0/1 metrics) or
Student's t (convsim.results.aggregate.mean_ci), and Spearman's bootstrap resamples in chunks
(convsim.results.aggregate) from data sorted first, so the numbers do not depend on record order.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np
from scipy import stats as sps

from convsim.results.aggregate import bootstrap_statistic, mean_ci
from convsim.results.metric_ranges import Range, clip_to, difference_range, outside

ALPHA = 0.05
# the exact signed-rank distribution (ties included) is enumerated up to this many non-zero
# differences; above it the normal approximation is within 1e-3 of it.
EXACT_WILCOXON_MAX = 50
# Mann-Whitney U's exact null distribution (ties included) is computed up to this many values in
# both samples together: the distribution of the rank sum over all C(n_a + n_b, n_a) splits, by
# dynamic programming (~6 ms at 25 vs 25; C(50, 25) ~ 1.3e14 splits, exact in int64). scipy's default
# with ties is the normal approximation at every n (a = [0]*3, b = [1]*3: p = 0.047, below the
# smallest attainable 2 / C(6, 3) = 0.1), and its exhaustive permutation_test takes seconds at
# C(n_a + n_b, n_a) ~ 1e5.
EXACT_MWU_MAX = 50
# A bootstrap of Spearman's rho re-ranks every resample (O(n_boot * n log n)): 11 s per pair at
# n = 50,000. Above this many pairs the CI is the Fisher z interval with the Bonett-Wright (2000)
# variance (1 + rho^2 / 2) / (n - 3), which at such n agrees with the bootstrap to about 1e-3.
SPEARMAN_BOOTSTRAP_MAX = 500
# Up to this many pairs Spearman's p is exact (all n! pairings enumerated: 9! = 362,880, ~30 ms);
# above, scipy's t approximation, which at n <= 9 can fall below the smallest attainable p (n = 4,
# rho = 1 gave p ~ 0 where the exact p is 2/4! = 0.083).
SPEARMAN_EXACT_MAX = 9


# Differences and values closer than this, relative to max(1, the largest magnitude), are equal:
# b - a of floats carries rounding noise (0.1*i + 0.5 - 0.1*i is not exactly 0.5), and without a
# tolerance a constant difference became sd ~ 1e-17, d_z ~ 2e16 and a t-test p of 6.5e-83.
REL_TOL = 1e-12


def _scale(x: np.ndarray) -> float:
    return max(1.0, float(np.max(np.abs(x)))) if len(x) else 1.0


def is_constant(values: Sequence[float]) -> bool:
    """True when every value equals the first up to rounding noise: ptp <= REL_TOL * max(1, max|x|)."""
    x = np.asarray(values, dtype=float)
    return len(x) > 0 and float(np.ptp(x)) <= REL_TOL * _scale(x)


def snap(values: Sequence[float]) -> np.ndarray:
    """Values on a grid of REL_TOL * max(1, max|x|): rounding noise gone, so that differences equal
    up to noise are exactly equal (ties) and noise-sized ones exactly 0. For zero and tie detection
    (ranks, counts of non-zero differences); means and sds use the values themselves."""
    x = np.asarray(values, dtype=float)
    if not len(x):
        return x
    step = REL_TOL * _scale(x)
    return np.round(x / step) * step


def nonzero_count(diffs: Sequence[float]) -> int:
    """Differences that are not 0 up to rounding noise (:func:`snap`)."""
    return int(np.count_nonzero(snap(diffs)))


def _clean(values: Sequence[float]) -> np.ndarray:
    arr = np.asarray([v for v in values if v is not None], dtype=float)
    return arr[np.isfinite(arr)]


def _f(x) -> float | None:
    """JSON-safe float: None for NaN/inf (never a silent NaN in stats.json)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


# ---------------------------------------------------------------- effect sizes

def cohens_d(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Cohen's d = (mean(b) - mean(a)) / s_pooled, s_pooled = sqrt(((na-1)sa² + (nb-1)sb²)/(na+nb-2)).

    Sign follows Tukey's meandiff (group2 - group1). None when a group has < 2 values or s_pooled = 0.
    """
    x, y = _clean(a), _clean(b)
    if len(x) < 2 or len(y) < 2:
        return None
    pooled = ((len(x) - 1) * x.var(ddof=1) + (len(y) - 1) * y.var(ddof=1)) / (len(x) + len(y) - 2)
    if pooled <= 0:
        return None
    return float((y.mean() - x.mean()) / math.sqrt(pooled))


def cohens_dz(diffs: Sequence[float]) -> float | None:
    """Paired effect size d_z = mean(d) / sd(d) over paired differences d. None when n < 2 or the
    differences are constant (up to rounding noise: :func:`is_constant`)."""
    d = _clean(diffs)
    if len(d) < 2 or is_constant(d):
        return None
    return float(d.mean() / d.std(ddof=1))


def rank_biserial_paired(diffs: Sequence[float]) -> float | None:
    """Matched-pairs rank-biserial r = (R+ - R-) / (R+ + R-), ranks of |d| over non-zero d (Kerby 2014).

    None when every difference is zero. Zeros and ties up to rounding noise (:func:`snap`).
    """
    d = snap(_clean(diffs))
    d = d[d != 0]
    if len(d) == 0:
        return None
    ranks = sps.rankdata(np.abs(d))
    pos, neg = ranks[d > 0].sum(), ranks[d < 0].sum()
    return float((pos - neg) / (pos + neg))


def eta_squared(groups: Mapping[str, Sequence[float]]) -> float | None:
    """η² = SS_between / SS_total over all groups. None when SS_total = 0 or no data."""
    arrays = [_clean(v) for v in groups.values()]
    arrays = [a for a in arrays if len(a)]
    if not arrays:
        return None
    allv = np.concatenate(arrays)
    ss_total = ((allv - allv.mean()) ** 2).sum()
    if ss_total == 0:
        return None
    ss_between = sum(len(a) * (a.mean() - allv.mean()) ** 2 for a in arrays)
    return float(ss_between / ss_total)


# ---------------------------------------------------------------- attainable significance

def min_p_wilcoxon(n: int) -> float:
    """Smallest two-sided exact p of the Wilcoxon signed-rank test with n non-zero differences: 2 / 2**n
    (computed as 2**(1-n), which underflows to 0.0 beyond n = 1075 instead of overflowing)."""
    return min(1.0, math.ldexp(1.0, 1 - n)) if n > 0 else 1.0


def min_p_spearman(n: int) -> float:
    """Smallest two-sided exact permutation p of Spearman's rho with n pairs: 2 / n!, computed as
    exp(ln 2 - lgamma(n + 1)) so that it underflows to 0.0 (n >= 171) instead of overflowing."""
    if 0 < n <= 20:  # exactly 2/n! (a float from exp/lgamma is a few ulp off: 2/4! came out above 1/12)
        return min(1.0, 2.0 / math.factorial(n))
    return min(1.0, math.exp(math.log(2.0) - math.lgamma(n + 1))) if n > 0 else 1.0


def min_p_mannwhitney(n_a: int, n_b: int) -> float:
    """Smallest two-sided exact p of the Mann-Whitney U test with n_a and n_b values and no ties:
    2 / C(n_a + n_b, n_a) (complete separation), computed in log space."""
    if n_a < 1 or n_b < 1:
        return 1.0
    log_c = math.lgamma(n_a + n_b + 1) - math.lgamma(n_a + 1) - math.lgamma(n_b + 1)
    if n_a + n_b <= 60:
        return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))
    return min(1.0, math.exp(math.log(2.0) - log_c))


def min_p_mannwhitney_observed(a: Sequence[float], b: Sequence[float]) -> float:
    """Smallest two-sided p the Mann-Whitney U test of :func:`mannwhitney_p` can give for these values'
    ties: with the pooled (mid)ranks held fixed, the most extreme rank sum of ``a`` has
    p = 2 * (its number of splits) / C(n, n_a). Without ties that is :func:`min_p_mannwhitney`; ties
    make it larger (5 zeros and a one vs 3 ones: 8/84 = 0.095, not 2/C(9, 3) = 0.024). Above ``EXACT_MWU_MAX``
    values (where the p is not the exact permutation one) the no-ties bound."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n_a, n = len(x), len(x) + len(y)
    if n_a < 1 or len(y) < 1:
        return 1.0
    if n > EXACT_MWU_MAX:
        return min_p_mannwhitney(n_a, len(y))
    doubled = np.rint(2 * sps.rankdata(snap(np.concatenate([x, y])))).astype(int)
    counts = _rank_sum_null_counts(doubled, n_a)
    reachable = np.flatnonzero(counts)
    extreme = min(int(counts[reachable[0]]), int(counts[reachable[-1]]))
    return min(1.0, 2 * extreme / float(math.comb(n, n_a)))


def min_p_friedman(n: int, k: int) -> float:
    """p of the largest Friedman statistic, chi² = n(k-1) (all blocks rank identically), df = k-1."""
    if n < 1 or k < 2:
        return 1.0
    return float(sps.chi2.sf(n * (k - 1), k - 1))


def _signed_rank_null_counts(doubled_ranks: np.ndarray) -> np.ndarray:
    """counts[t] = the number of the 2**n sign assignments whose sum of positive doubled ranks is t
    (ranks doubled so that midranks are integers): the exact null distribution of W+, conditional on
    the ranks as observed, ties included. Dynamic programming, O(n * sum): n = 50 takes ~1 ms."""
    total = int(doubled_ranks.sum())
    counts = np.zeros(total + 1, dtype=np.int64)  # at most 2**50 per cell: exact in int64
    counts[0] = 1
    for r in doubled_ranks.astype(int):
        shifted = np.zeros_like(counts)
        shifted[r:] = counts[:total + 1 - r]
        counts = counts + shifted
    return counts


def wilcoxon_p(diffs: np.ndarray) -> tuple[float, float]:
    """(statistic, two-sided p) of the Wilcoxon signed-rank test on non-zero paired differences.

    Up to ``EXACT_WILCOXON_MAX`` differences the p is exact: the permutation distribution of W+ over
    the 2**n sign flips, conditional on the (mid)ranks observed, so ties are handled exactly too
    (without ties it is scipy's ``method='exact'``; with ties scipy 1.17's default enumerates only up
    to n = 13 and falls back to the normal approximation above, whose p can fall below the smallest
    attainable 2/2**n: d = [1]*5 gave 0.0253 where the exact p is 0.0625). p = min(1, 2 * min(P(W+ <=
    w), P(W+ >= w))), the convention of scipy's permutation_test. Above the limit: the normal
    approximation with tie correction (scipy ``method='asymptotic'``). The statistic is scipy's,
    min(W+, W-). Differences equal up to rounding noise are ties, noise-sized ones zeros (:func:`snap`)."""
    d = snap(np.asarray(diffs, dtype=float))  # zeros and ties up to rounding noise are exact
    d = d[d != 0]
    n = len(d)
    if n > EXACT_WILCOXON_MAX:
        res = sps.wilcoxon(d, zero_method="wilcox", method="asymptotic")
        return float(res.statistic), float(res.pvalue)
    ranks = sps.rankdata(np.abs(d))
    doubled = np.rint(2 * ranks).astype(int)
    w_plus2 = int(doubled[d > 0].sum())
    counts = _signed_rank_null_counts(doubled)
    below, above = int(counts[:w_plus2 + 1].sum()), int(counts[w_plus2:].sum())
    p = min(1.0, 2 * min(below, above) / float(2 ** n))
    w_plus = w_plus2 / 2
    return float(min(w_plus, ranks.sum() - w_plus)), float(p)


def wilcoxon_method(n_nonzero: int) -> str:
    """How :func:`wilcoxon_p` computes p with this many non-zero differences (``p_method``)."""
    return "exact permutation" if n_nonzero <= EXACT_WILCOXON_MAX else "normal approximation"


def _rank_sum_null_counts(doubled_ranks: np.ndarray, k: int) -> np.ndarray:
    """counts[t] = the number of the C(n, k) ways to pick k of the values whose doubled ranks sum to
    t: the exact null distribution of a sample's rank sum, conditional on the (mid)ranks observed.
    Dynamic programming over (values picked, sum), O(n * k * sum)."""
    total = int(doubled_ranks.sum())
    counts = np.zeros((k + 1, total + 1), dtype=np.int64)  # at most C(50, 25) ~ 1.3e14 per cell
    counts[0, 0] = 1
    for r in doubled_ranks.astype(int):
        counts[1:, r:] = counts[1:, r:] + counts[:-1, :total + 1 - r]  # right side read before written
    return counts[k]


def mannwhitney_p(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, str]:
    """(U of ``a``, two-sided p, ``p_method``) of the Mann-Whitney U test.

    Up to ``EXACT_MWU_MAX`` values in all the p is exact: the permutation distribution of a's rank sum
    over every split of the pooled values into samples of n_a and n_b, conditional on the (mid)ranks
    observed, so ties are handled exactly (equal to scipy's ``mannwhitneyu`` with an exhaustive
    ``PermutationMethod``, and without ties to its ``method='exact'``); p = min(1, 2 * min(P(R <= r),
    P(R >= r))), permutation_test's convention. Above the limit: scipy's exact distribution when there
    are no ties and a sample has at most 8 values (its ``'auto'`` rule), else the normal
    approximation with tie and continuity correction. Values equal up to rounding noise tie (:func:`snap`)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    pooled = snap(np.concatenate([x, y]))
    n_a, n = len(x), len(pooled)
    ranks = sps.rankdata(pooled)
    u = float(ranks[:n_a].sum() - n_a * (n_a + 1) / 2)
    if n > EXACT_MWU_MAX:
        ties = len(np.unique(pooled)) < n
        method = "exact" if not ties and min(n_a, n - n_a) <= 8 else "asymptotic"
        res = sps.mannwhitneyu(pooled[:n_a], pooled[n_a:], method=method)
        return float(res.statistic), float(res.pvalue), \
            "exact (scipy, no ties)" if method == "exact" else "normal approximation"
    doubled = np.rint(2 * ranks).astype(int)
    observed = int(doubled[:n_a].sum())
    counts = _rank_sum_null_counts(doubled, n_a)
    below, above = int(counts[:observed + 1].sum()), int(counts[observed:].sum())
    return u, min(1.0, 2 * min(below, above) / float(math.comb(n, n_a))), "exact permutation"


def _power_warning(test: str, n: int, min_p: float, alpha: float) -> str | None:
    if min_p >= alpha:
        return (f"{test} with n={n} cannot reach p<{alpha:g}: its smallest attainable p is "
                f"{min_p:.4g}; a non-significant result here says nothing")
    return None


# ---------------------------------------------------------------- independent designs

def anova_oneway(groups: Mapping[str, Sequence[float]]) -> dict:
    """One-way ANOVA (scipy.stats.f_oneway) with η². Needs >= 2 groups with >= 2 values each."""
    arrays = {g: _clean(v) for g, v in groups.items()}
    ns = {g: len(a) for g, a in arrays.items()}
    out = {"test": "one-way ANOVA", "n": ns, "F": None, "p": None, "df_between": None,
           "df_within": None, "eta_squared": None, "warning": None}
    usable = [a for a in arrays.values() if len(a) >= 2]
    if len(usable) < 2 or len(usable) < len(arrays):
        out["warning"] = "ANOVA needs at least 2 variants with at least 2 values each"
        return out
    allv = np.concatenate(usable)
    if is_constant(allv):
        out["warning"] = "all values are identical; ANOVA is undefined"
        return out
    out.update(df_between=len(usable) - 1, df_within=int(len(allv) - len(usable)), eta_squared=eta_squared(arrays))
    if all(is_constant(a) for a in usable):
        # scipy: F = inf, p = 0 (with a warning); F was reported None beside p = 0.0
        out["warning"] = ("every variant is constant within itself while their means differ (zero "
                          "within-group variance): F is infinite and the p-value undefined; none is reported")
        return out
    res = sps.f_oneway(*usable)
    out.update(F=_f(res.statistic), p=_f(res.pvalue))
    return out


@functools.lru_cache(maxsize=256)
def _q_crit(alpha: float, k: int, df: int) -> float:
    """Studentized-range quantile (numerical integration, ~0.15 s): one per (alpha, k, df), not per metric."""
    return float(sps.studentized_range.ppf(1 - alpha, k, df))


def tukey_hsd(groups: Mapping[str, Sequence[float]], *, alpha: float = ALPHA) -> dict:
    """Tukey HSD over ALL pairs, the same numbers as statsmodels' ``pairwise_tukeyhsd``.

    Groups are taken in sorted order; for each pair (g1, g2), g1 < g2:
    meandiff = mean(g2) - mean(g1); MSE = Σ_g Σ_i (x_gi - mean_g)² / (N - k);
    se = sqrt(MSE/2 · (1/n1 + 1/n2)); p_adj = studentized_range.sf(|meandiff|/se, k, N - k);
    CI = meandiff ± q_{1-alpha}(k, N - k) · se. Cohen's d is added per pair.
    """
    arrays = {g: _clean(groups[g]) for g in sorted(groups)}
    k = len(arrays)
    n_total = sum(len(a) for a in arrays.values())
    df = n_total - k
    out = {"test": "Tukey HSD", "alpha": alpha, "df": df, "pairs": [], "warning": None}
    if k < 2 or any(len(a) < 1 for a in arrays.values()) or df < 1:
        out["warning"] = "Tukey HSD needs at least 2 variants with data and N - k >= 1"
        return out
    mse = sum(((a - a.mean()) ** 2).sum() for a in arrays.values()) / df
    q_crit = _q_crit(alpha, k, df)
    for g1, g2 in combinations(arrays, 2):
        a, b = arrays[g1], arrays[g2]
        diff = float(b.mean() - a.mean())
        se = math.sqrt(mse / 2 * (1 / len(a) + 1 / len(b)))
        if se <= REL_TOL * _scale(np.concatenate([a, b])):
            # zero within-group variance: q is infinite or undefined, as in ANOVA; no p, no interval
            out["warning"] = "zero within-group variance: Tukey HSD's p and intervals are undefined"
            out["pairs"].append({"group1": g1, "group2": g2, "meandiff": diff, "p_adj": None, "ci_low": None,
                                 "ci_high": None, "reject": None, "cohens_d": cohens_d(a, b)})
            continue
        p = float(sps.studentized_range.sf(abs(diff) / se, k, df))
        out["pairs"].append({
            "group1": g1, "group2": g2, "meandiff": diff, "p_adj": min(1.0, p),
            "ci_low": diff - q_crit * se, "ci_high": diff + q_crit * se,
            "reject": bool(abs(diff) > q_crit * se), "cohens_d": cohens_d(a, b)})
    return out


# ---------------------------------------------------------------- paired designs

def paired_matrix(paired: Mapping[str, Mapping[str, float]]) -> tuple[list[str], list[str], np.ndarray]:
    """Keys present (with a finite value) in every variant -> (variants, keys, matrix[keys × variants])."""
    variants = sorted(paired)
    common = None
    for v in variants:
        keys = {k for k, x in paired[v].items() if x is not None and math.isfinite(float(x))}
        common = keys if common is None else common & keys
    keys = sorted(common or [])
    mat = np.array([[float(paired[v][k]) for v in variants] for k in keys], dtype=float)
    return variants, keys, mat.reshape(len(keys), len(variants))


def friedman(paired: Mapping[str, Mapping[str, float]], *, alpha: float = ALPHA) -> dict:
    """Friedman test over sessions present in every variant (>= 3 variants), with Kendall's W = chi²/(n(k-1))."""
    variants, keys, mat = paired_matrix(paired)
    n, k = mat.shape
    out = {"test": "Friedman", "variants": variants, "n_paired": n, "statistic": None, "p": None,
           "kendalls_w": None, "min_attainable_p": min_p_friedman(n, k), "warning": None}
    if k < 3:
        out["warning"] = "Friedman needs at least 3 variants"
        return out
    if n < 2:
        out["warning"] = f"Friedman needs at least 2 paired sessions, got {n}"
        return out
    out["warning"] = _power_warning("Friedman", n, out["min_attainable_p"], alpha)
    if np.all(np.ptp(mat, axis=1) <= REL_TOL * _scale(mat.ravel())):
        out["warning"] = "every session has identical values across variants; Friedman is undefined"
        return out
    res = sps.friedmanchisquare(*mat.T)
    out.update(statistic=_f(res.statistic), p=_f(res.pvalue),
               kendalls_w=_f(res.statistic / (n * (k - 1))))
    return out


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm step-down adjusted p-values; None stays None. Equal to statsmodels'
    multipletests(method='holm') (tests/test_stats.py checks it), written out because that function
    runs a full gc.collect() per call (0.27 s here; a run tests hundreds of families)."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    m = len(idx)
    order = sorted(idx, key=lambda i: (pvalues[i], i))
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(pvalues[i])))
        adjusted[i] = running
    return adjusted


def paired_t(diffs: np.ndarray) -> tuple[float | None, float | None]:
    """(t, two-sided p) of the paired t-test (scipy.stats.ttest_rel on d against 0); None when n < 2
    or every difference is equal up to rounding noise (:func:`is_constant`: t is undefined)."""
    d = np.asarray(diffs, dtype=float)
    if len(d) < 2 or is_constant(d):
        return None, None
    res = sps.ttest_rel(d, np.zeros_like(d))
    return _f(res.statistic), _f(res.pvalue)


def paired_wilcoxon_holm(paired: Mapping[str, Mapping[str, float]], *, alpha: float = ALPHA) -> dict:
    """Paired Wilcoxon signed-rank test for every pair of variants over their common sessions, Holm-adjusted
    over the pairs, with the paired t-test beside it (``t``, ``p_t``, ``p_t_holm``).

    Per pair: n (non-zero differences), statistic, p, p_holm, mean difference (g2 - g1), d_z,
    matched-pairs rank-biserial r, the smallest attainable p and a warning when it exceeds alpha.
    """
    variants = sorted(paired)
    pairs = []
    for g1, g2 in combinations(variants, 2):
        _, keys, mat = paired_matrix({g1: paired[g1], g2: paired[g2]})
        diffs = mat[:, 1] - mat[:, 0] if len(keys) else np.array([])
        nz = nonzero_count(diffs)
        row = {"group1": g1, "group2": g2, "n_paired": len(keys), "n_nonzero": nz,
               "mean_diff": _f(diffs.mean()) if len(diffs) else None, "statistic": None, "p": None, "p_method": None,
               "cohens_dz": cohens_dz(diffs), "rank_biserial": rank_biserial_paired(diffs),
               "min_attainable_p": min_p_wilcoxon(nz), "warning": None}
        if nz == 0:
            row["warning"] = "no non-zero paired differences; Wilcoxon is undefined"
        else:
            stat, p = wilcoxon_p(diffs)
            row.update(statistic=_f(stat), p=_f(p), p_method=wilcoxon_method(nz))
            row["warning"] = _power_warning("Wilcoxon", nz, row["min_attainable_p"], alpha)
        row["t"], row["p_t"] = paired_t(diffs)
        pairs.append(row)
    for row, adj, adj_t in zip(pairs, holm([r["p"] for r in pairs]), holm([r["p_t"] for r in pairs])):
        row["p_holm"] = adj
        row["reject"] = None if adj is None else bool(adj < alpha)
        row["p_t_holm"] = adj_t
    return {"test": "paired Wilcoxon signed-rank, Holm-adjusted", "also": "paired t-test (p_t, p_t_holm)",
            "alpha": alpha, "pairs": pairs}


# ---------------------------------------------------------------- correlation

def spearman_fisher_ci(rho: float, n: int, *, alpha: float = ALPHA) -> tuple[float | None, float | None]:
    """tanh(atanh(rho) -/+ z_{1-alpha/2} * sqrt((1 + rho^2/2) / (n - 3))) (Bonett & Wright 2000)."""
    if n <= 3 or not math.isfinite(rho):
        return None, None
    rho = max(-0.999999, min(0.999999, rho))
    half = float(sps.norm.ppf(1 - alpha / 2)) * math.sqrt((1 + rho * rho / 2) / (n - 3))
    return _f(math.tanh(math.atanh(rho) - half)), _f(math.tanh(math.atanh(rho) + half))


@functools.lru_cache(maxsize=SPEARMAN_EXACT_MAX + 1)
def _permutations(n: int) -> np.ndarray:
    """Every permutation of range(n) as rows (n! x n, int8): 3.3 MB at n = 9."""
    from itertools import permutations
    return np.array(list(permutations(range(n))), dtype=np.int8).reshape(-1, n)


def spearman_exact_p(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided exact permutation p of Spearman's rho: the share of the n! pairings of y's (mid)ranks
    with x's whose |rho| is at least the observed |rho| (ties up to 1e-12). n <= SPEARMAN_EXACT_MAX."""
    rx, ry = sps.rankdata(x), sps.rankdata(y)
    n = len(rx)
    if n > SPEARMAN_EXACT_MAX:
        raise ValueError(f"exact Spearman p enumerates n! pairings: n = {n} > {SPEARMAN_EXACT_MAX}")
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = math.sqrt(float((rx ** 2).sum() * (ry ** 2).sum()))
    observed = abs(float(rx @ ry)) / denom
    perm = ry[_permutations(n)] @ rx / denom
    return float(np.count_nonzero(np.abs(perm) >= observed - 1e-12)) / len(perm)


def _centered_ranks(values: np.ndarray) -> np.ndarray:
    r = sps.rankdata(values, axis=1)
    return r - r.mean(axis=1, keepdims=True)


def spearman_bootstrap(x: Sequence[float], y: Sequence[float], *, n_boot: int = 1000,
                       seed: int = 0, alpha: float = ALPHA) -> dict:
    """Spearman's rho (scipy.stats.spearmanr) with a percentile bootstrap CI over resampled pairs.

    p: exact (every pairing enumerated, :func:`spearman_exact_p`) up to SPEARMAN_EXACT_MAX pairs,
    scipy's t approximation above; ``p_method`` says which.

    Pairs with a missing value in either list are dropped. rho, p and the CI are None (with a
    warning saying why) when n < 3 or a side is constant. The CI is also None, with ``ci_undefined``
    giving the reason, when any resample has a constant side: rho is undefined on that resample,
    and dropping those resamples would report an interval for a different statistic.
    """
    if len(x) != len(y):
        raise ValueError(f"spearman_bootstrap: x has {len(x)} values, y has {len(y)}")
    keep = sorted((float(a), float(b)) for a, b in zip(x, y) if a is not None and b is not None
                  and math.isfinite(float(a)) and math.isfinite(float(b)))
    n = len(keep)
    out = {"n": n, "rho": None, "p": None, "p_method": None, "ci_low": None, "ci_high": None, "ci_method": None, "ci_undefined": None,
           "min_attainable_p": min_p_spearman(n), "warning": None}
    if n < 3:
        out["warning"] = f"Spearman needs at least 3 pairs, got {n}"
        out["ci_undefined"] = out["warning"]
        return out
    xa, ya = np.array([a for a, _ in keep], float), np.array([b for _, b in keep], float)
    xa, ya = snap(xa), snap(ya)  # values equal up to rounding noise tie
    if is_constant(xa) or is_constant(ya):
        out["warning"] = "a variable is constant; Spearman's rho is undefined"
        out["ci_undefined"] = out["warning"]
        return out
    res = sps.spearmanr(xa, ya)
    exact = n <= SPEARMAN_EXACT_MAX
    out.update(rho=_f(res.statistic), p=spearman_exact_p(xa, ya) if exact else _f(res.pvalue),
               p_method="exact permutation" if exact else "t approximation (scipy)",
               ci_method="percentile bootstrap",
               warning=_power_warning("Spearman", n, out["min_attainable_p"], alpha))
    if n > SPEARMAN_BOOTSTRAP_MAX:
        out["ci_low"], out["ci_high"] = spearman_fisher_ci(float(res.statistic), n, alpha=alpha)
        out["ci_method"] = "Fisher z, Bonett-Wright variance"
        return out

    def rho_of(idx: np.ndarray) -> np.ndarray:
        # Spearman = Pearson of ranks, vectorised over one chunk of resamples; NaN where constant
        rx, ry = _centered_ranks(xa[idx]), _centered_ranks(ya[idx])
        denom = np.sqrt((rx ** 2).sum(axis=1) * (ry ** 2).sum(axis=1))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(denom > 0, (rx * ry).sum(axis=1) / np.where(denom > 0, denom, 1.0), np.nan)

    boots = bootstrap_statistic(n, rho_of, n_boot=n_boot, seed=seed)
    constant = int(np.isnan(boots).sum())
    if constant:
        out["ci_undefined"] = (f"{constant} of {n_boot} bootstrap resamples have a constant variable "
                               "(rho undefined there); no interval is reported")
    else:
        out["ci_low"] = _f(np.quantile(boots, alpha / 2))
        out["ci_high"] = _f(np.quantile(boots, 1 - alpha / 2))
    return out


# ---------------------------------------------------------------- one metric, all tests

SMALL_N = 5  # below this many sessions an interval is flagged (wide, and only as good as its assumptions)


def small_n_warning(n: int) -> str | None:
    """The flag printed beside an interval over fewer than SMALL_N units (None otherwise)."""
    if 2 <= n < SMALL_N:
        return f"n={n} < {SMALL_N}: the interval is unreliable (it rests on {n} sessions)"
    return None


def describe(values: Sequence[float], *, alpha: float = ALPHA, bounds: Range | None = None) -> dict:
    """n, mean, sd, median and a (1-alpha) CI of the mean (convsim.results.aggregate.mean_ci: Wilson's score
    interval when every value is 0 or 1, else Student's t; ``ci_method`` says which); mean None when
    n = 0, the CI None when n < 2, and ``warning`` set when n < SMALL_N. ``bounds``: the metric's
    declared range (convsim.results.metric_ranges): the CI is clipped to it, ``ci_clipped`` says whether it
    was (not when a value lies outside the range).

    Values are sorted first, so the mean's last bits do not depend on their order."""
    arr = np.sort(_clean(values))
    n = len(arr)
    out = {"n": n, "mean": None, "sd": None, "median": None, "ci_low": None, "ci_high": None,
           "ci_method": None, "warning": None}
    if bounds is not None:
        out["ci_clipped"] = False
    if n == 0:
        return out
    out.update(mean=_f(arr.mean()), sd=_f(arr.std(ddof=1)) if n > 1 else None, median=_f(np.median(arr)))
    if n < 2:
        out["warning"] = "n=1: no interval"
        return out
    ci = mean_ci(arr, alpha=alpha, bounds=bounds)
    out.update(ci_low=_f(ci["ci_low"]), ci_high=_f(ci["ci_high"]), ci_method=ci["ci_method"],
               warning=small_n_warning(n))
    if bounds is not None:
        out["ci_clipped"] = ci["ci_clipped"]
    return out


def compare_variants(values: Mapping[str, Mapping[str, float]], *, paired: bool,
                     alpha: float = ALPHA, bounds: Range | None = None) -> dict:
    """Every test for one metric: descriptives per variant, ANOVA + Tukey HSD (all pairs), and, for
    paired designs (keys = session id, the same seeds in every variant), Friedman and
    Holm-adjusted paired Wilcoxon over the sessions every variant has. Each value must be one
    independent unit: a session, its trials averaged (``MetricTable.by_session``), never a trial.
    ``bounds``: the metric's declared range: the descriptives' CIs are clipped to it (:func:`describe`)
    and, when both ends are bounded, Tukey's intervals to [low - high, high - low] (``ci_clipped``).
    """
    # sorted by variant and pair key: every sum below runs in the same order whatever the record order
    groups = {v: [values[v][k] for k in sorted(values[v])] for v in sorted(values)}
    out = {"variants": {v: describe(g, bounds=bounds) for v, g in sorted(groups.items())},
           "anova": anova_oneway(groups), "tukey": tukey_hsd(groups, alpha=alpha)}
    within = difference_range(bounds)
    if within is not None and not any(outside(_clean(g), bounds).any() for g in groups.values()):
        for pair in out["tukey"]["pairs"]:  # a difference of two means in [lo, hi] is in [lo - hi, hi - lo]
            clip_to(pair, within)
    if paired and len(values) >= 2:
        out["wilcoxon"] = paired_wilcoxon_holm(values, alpha=alpha)
        if len(values) >= 3:
            out["friedman"] = friedman(values, alpha=alpha)
    return out
