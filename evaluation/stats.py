"""Statistics over any metric and any set of variants (the multi-model CRS experiment: "ANOVA with Tukey HSD"; crs.md §1.8, §4.6).

Generic: the input is a mapping ``variant -> values`` (independent design) or
``variant -> {pair_key: value}`` (paired design: the same session seeds across variants).
Every test reports n, an effect size and, when n is too small for the test to reach
significance at all, a warning saying so (the original ran Wilcoxon on 5 sessions, whose
smallest attainable two-sided p is 2/2**5 = 0.0625).

Fixes relative to the original `context-aware/statistical_analysis.py`: all Tukey pairs are
reported (not only the significant ones), with effect sizes, and paired designs get paired tests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np
from scipy import stats as sps

ALPHA = 0.05


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
    """Paired effect size d_z = mean(d) / sd(d) over paired differences d. None when n < 2 or sd = 0."""
    d = _clean(diffs)
    if len(d) < 2 or d.std(ddof=1) == 0:
        return None
    return float(d.mean() / d.std(ddof=1))


def rank_biserial_paired(diffs: Sequence[float]) -> float | None:
    """Matched-pairs rank-biserial r = (R+ - R-) / (R+ + R-), ranks of |d| over non-zero d (Kerby 2014).

    None when every difference is zero.
    """
    d = _clean(diffs)
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
    """Smallest two-sided exact p of the Wilcoxon signed-rank test with n non-zero differences: 2 / 2**n."""
    return min(1.0, 2.0 / 2**n) if n > 0 else 1.0


def min_p_spearman(n: int) -> float:
    """Smallest two-sided exact permutation p of Spearman's rho with n pairs: 2 / n!."""
    # via lgamma: 2 / n! overflows a float from n = 171 on (it underflows to 0.0 here instead)
    return min(1.0, math.exp(math.log(2.0) - math.lgamma(n + 1))) if n > 0 else 1.0


def min_p_friedman(n: int, k: int) -> float:
    """p of the largest Friedman statistic, chi² = n(k-1) (all blocks rank identically), df = k-1."""
    if n < 1 or k < 2:
        return 1.0
    return float(sps.chi2.sf(n * (k - 1), k - 1))


def wilcoxon_p(diffs: np.ndarray) -> tuple[float, float]:
    """(statistic, two-sided p) of the Wilcoxon signed-rank test on non-zero paired differences:
    the exact distribution when the |d| have no ties, else the normal approximation with tie
    correction (scipy's permutation fallback for tied small samples costs seconds per call)."""
    d = np.asarray(diffs, dtype=float)
    d = d[d != 0]
    tied = len(np.unique(np.abs(d))) < len(d)
    res = sps.wilcoxon(d, zero_method="wilcox", method="approx" if tied else "exact")
    return float(res.statistic), float(res.pvalue)


def _power_warning(test: str, n: int, min_p: float, alpha: float) -> str | None:
    if min_p > alpha:
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
    if np.all(allv == allv[0]):
        out["warning"] = "all values are identical; ANOVA is undefined"
        return out
    res = sps.f_oneway(*usable)
    out.update(F=_f(res.statistic), p=_f(res.pvalue), df_between=len(usable) - 1,
               df_within=int(len(allv) - len(usable)), eta_squared=eta_squared(arrays))
    return out


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
    q_crit = float(sps.studentized_range.ppf(1 - alpha, k, df))
    for g1, g2 in combinations(arrays, 2):
        a, b = arrays[g1], arrays[g2]
        diff = float(b.mean() - a.mean())
        se = math.sqrt(mse / 2 * (1 / len(a) + 1 / len(b)))
        if se == 0:
            p = 1.0 if diff == 0 else 0.0
        else:
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
    if np.all(mat == mat[:, :1]):
        out["warning"] = "every session has identical values across variants; Friedman is undefined"
        return out
    res = sps.friedmanchisquare(*mat.T)
    out.update(statistic=_f(res.statistic), p=_f(res.pvalue),
               kendalls_w=_f(res.statistic / (n * (k - 1))))
    return out


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm step-down adjusted p-values (= statsmodels multipletests(method='holm')); None stays None."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    m = len(idx)
    order = sorted(idx, key=lambda i: pvalues[i])
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def paired_wilcoxon_holm(paired: Mapping[str, Mapping[str, float]], *, alpha: float = ALPHA) -> dict:
    """Paired Wilcoxon signed-rank test for every pair of variants over their common sessions, Holm-adjusted.

    Per pair: n (non-zero differences), statistic, p, p_holm, mean difference (g2 - g1), d_z,
    matched-pairs rank-biserial r, the smallest attainable p and a warning when it exceeds alpha.
    """
    variants = sorted(paired)
    pairs = []
    for g1, g2 in combinations(variants, 2):
        _, keys, mat = paired_matrix({g1: paired[g1], g2: paired[g2]})
        diffs = mat[:, 1] - mat[:, 0] if len(keys) else np.array([])
        nz = int(np.count_nonzero(diffs))
        row = {"group1": g1, "group2": g2, "n_paired": len(keys), "n_nonzero": nz,
               "mean_diff": _f(diffs.mean()) if len(diffs) else None, "statistic": None, "p": None,
               "cohens_dz": cohens_dz(diffs), "rank_biserial": rank_biserial_paired(diffs),
               "min_attainable_p": min_p_wilcoxon(nz), "warning": None}
        if nz == 0:
            row["warning"] = "no non-zero paired differences; Wilcoxon is undefined"
        else:
            stat, p = wilcoxon_p(diffs)
            row.update(statistic=_f(stat), p=_f(p))
            row["warning"] = _power_warning("Wilcoxon", nz, row["min_attainable_p"], alpha)
        pairs.append(row)
    for row, adj in zip(pairs, holm([r["p"] for r in pairs])):
        row["p_holm"] = adj
        row["reject"] = None if adj is None else bool(adj < alpha)
    return {"test": "paired Wilcoxon signed-rank, Holm-adjusted", "alpha": alpha, "pairs": pairs}


# ---------------------------------------------------------------- correlation

def spearman_bootstrap(x: Sequence[float], y: Sequence[float], *, n_boot: int = 1000,
                       seed: int = 0, alpha: float = ALPHA) -> dict:
    """Spearman's rho (scipy.stats.spearmanr) with a percentile bootstrap CI over resampled pairs.

    Pairs with a missing value in either list are dropped. rho is None when n < 3 or a side is constant.
    """
    if len(x) != len(y):
        raise ValueError(f"spearman_bootstrap: x has {len(x)} values, y has {len(y)}")
    keep = [(a, b) for a, b in zip(x, y) if a is not None and b is not None
            and math.isfinite(float(a)) and math.isfinite(float(b))]
    n = len(keep)
    out = {"n": n, "rho": None, "p": None, "ci_low": None, "ci_high": None,
           "min_attainable_p": min_p_spearman(n), "warning": None}
    if n < 3:
        out["warning"] = f"Spearman needs at least 3 pairs, got {n}"
        return out
    xa, ya = np.array([a for a, _ in keep], float), np.array([b for _, b in keep], float)
    if np.all(xa == xa[0]) or np.all(ya == ya[0]):
        out["warning"] = "a variable is constant; Spearman's rho is undefined"
        return out
    res = sps.spearmanr(xa, ya)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, (n_boot, n))
    # Spearman = Pearson of ranks, vectorised over the resamples; constant resamples are dropped.
    rx = sps.rankdata(xa[idx], axis=1)
    ry = sps.rankdata(ya[idx], axis=1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    denom = np.sqrt((rx ** 2).sum(axis=1) * (ry ** 2).sum(axis=1))
    ok = denom > 0
    boots = (rx * ry).sum(axis=1)[ok] / denom[ok]
    out.update(rho=_f(res.statistic), p=_f(res.pvalue),
               warning=_power_warning("Spearman", n, out["min_attainable_p"], alpha))
    if len(boots):
        out["ci_low"] = _f(np.quantile(boots, alpha / 2))
        out["ci_high"] = _f(np.quantile(boots, 1 - alpha / 2))
    return out


# ---------------------------------------------------------------- one metric, all tests

def describe(values: Sequence[float], *, seed: int = 0, n_boot: int = 1000, alpha: float = ALPHA) -> dict:
    """n, mean, sd, median and a percentile-bootstrap (1-alpha) CI of the mean; mean None when n = 0."""
    arr = _clean(values)
    n = len(arr)
    out = {"n": n, "mean": None, "sd": None, "median": None, "ci_low": None, "ci_high": None}
    if n == 0:
        return out
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, n, (n_boot, n))].mean(axis=1)
    out.update(mean=_f(arr.mean()), sd=_f(arr.std(ddof=1)) if n > 1 else None, median=_f(np.median(arr)),
               ci_low=_f(np.quantile(means, alpha / 2)), ci_high=_f(np.quantile(means, 1 - alpha / 2)))
    return out


def compare_variants(values: Mapping[str, Mapping[str, float]], *, paired: bool,
                     alpha: float = ALPHA, seed: int = 0) -> dict:
    """Every test for one metric: descriptives per variant, ANOVA + Tukey HSD (all pairs), and, for
    paired designs (keys = session id + trial, the same seeds in every variant), Friedman and
    Holm-adjusted paired Wilcoxon over the sessions every variant has.
    """
    groups = {v: list(vals.values()) for v, vals in values.items()}
    out = {"variants": {v: describe(g, seed=seed) for v, g in sorted(groups.items())},
           "anova": anova_oneway(groups), "tukey": tukey_hsd(groups, alpha=alpha)}
    if paired and len(values) >= 2:
        out["wilcoxon"] = paired_wilcoxon_holm(values, alpha=alpha)
        if len(values) >= 3:
            out["friedman"] = friedman(values, alpha=alpha)
    return out
