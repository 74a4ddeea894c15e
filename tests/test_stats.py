"""convsim.evaluation.reporting.stats against statsmodels/scipy and hand-computed values."""

import math

import numpy as np
import pytest
from statsmodels.stats.multicomp import pairwise_tukeyhsd
from statsmodels.stats.multitest import multipletests

from convsim.evaluation.reporting import stats


def _groups(seed=3):
    rng = np.random.default_rng(seed)
    return {"qwen:7b": list(rng.normal(0.20, 0.05, 12)), "gemma:2b": list(rng.normal(0.25, 0.05, 9)),
            "llama3": list(rng.normal(0.30, 0.05, 15)), "mistral": list(rng.normal(0.21, 0.08, 11))}


def test_tukey_equals_statsmodels_all_pairs():
    groups = _groups()
    ours = stats.tukey_hsd(groups)
    endog = np.concatenate([groups[g] for g in groups])
    labels = np.concatenate([[g] * len(groups[g]) for g in groups])
    ref = pairwise_tukeyhsd(endog, labels, alpha=0.05)
    assert len(ours["pairs"]) == 6 == len(ref.meandiffs)  # all pairs, not only significant ones
    uniq = list(ref.groupsunique)
    ref_pairs = [(uniq[i], uniq[j]) for i in range(len(uniq)) for j in range(i + 1, len(uniq))]
    for row, (g1, g2), md, ci, p, rej in zip(ours["pairs"], ref_pairs, ref.meandiffs, ref.confint,
                                             ref.pvalues, ref.reject):
        assert (row["group1"], row["group2"]) == (g1, g2)
        assert row["meandiff"] == pytest.approx(md, abs=1e-12)
        assert row["ci_low"] == pytest.approx(ci[0], abs=1e-9)
        assert row["ci_high"] == pytest.approx(ci[1], abs=1e-9)
        assert row["p_adj"] == pytest.approx(p, abs=1e-6)
        assert row["reject"] == bool(rej)


def test_anova_matches_scipy_and_eta_squared_by_hand():
    g = {"a": [1.0, 2.0, 3.0], "b": [4.0, 5.0, 6.0]}
    res = stats.anova_oneway(g)
    # SS_between = 3*(2-3.5)^2 + 3*(5-3.5)^2 = 13.5; SS_within = 2 + 2 = 4; F = 13.5 / (4/4) = 13.5
    assert res["F"] == pytest.approx(13.5)
    assert res["eta_squared"] == pytest.approx(13.5 / 17.5)
    assert (res["df_between"], res["df_within"]) == (1, 4)


def test_anova_refuses_tiny_groups():
    res = stats.anova_oneway({"a": [1.0], "b": [2.0, 3.0]})
    assert res["F"] is None and "at least 2" in res["warning"]


def test_cohens_d_and_dz_by_hand():
    # pooled var = ((2*1) + (2*1)) / 4 = 1 -> d = (5 - 2) / 1
    assert stats.cohens_d([1, 2, 3], [4, 5, 6]) == pytest.approx(3.0)
    # diffs 1,2,3: mean 2, sd 1
    assert stats.cohens_dz([1, 2, 3]) == pytest.approx(2.0)
    assert stats.cohens_dz([1, 1, 1]) is None
    # |d| ranks: 1->1, -2->2, 3->3 ; (4 - 2) / 6
    assert stats.rank_biserial_paired([1, -2, 3, 0]) == pytest.approx(1 / 3)


def test_wilcoxon_with_five_sessions_warns_it_cannot_be_significant():
    a = {f"s{i}": float(i) for i in range(5)}
    b = {f"s{i}": float(i) + 1 + i for i in range(5)}  # every difference positive
    res = stats.paired_wilcoxon_holm({"A": a, "B": b})
    row = res["pairs"][0]
    assert row["n_paired"] == 5
    assert row["min_attainable_p"] == pytest.approx(0.0625)
    assert row["p"] == pytest.approx(0.0625)
    assert "cannot reach p<0.05" in row["warning"]
    assert row["rank_biserial"] == pytest.approx(1.0)


def test_wilcoxon_pairs_only_matching_sessions_and_holm_equals_statsmodels():
    rng = np.random.default_rng(0)
    base = {f"s{i}": float(x) for i, x in enumerate(rng.normal(0, 1, 30))}
    data = {"A": base,
            "B": {k: v + 0.8 + rng.normal(0, 0.3) for k, v in base.items()},
            "C": {k: v + 0.1 + rng.normal(0, 0.3) for k, v in base.items() if k != "s0"}}
    res = stats.paired_wilcoxon_holm(data)
    by = {(r["group1"], r["group2"]): r for r in res["pairs"]}
    assert by[("A", "C")]["n_paired"] == 29 and by[("A", "B")]["n_paired"] == 30
    ps = [r["p"] for r in res["pairs"]]
    ref = multipletests(ps, method="holm")[1]
    assert [r["p_holm"] for r in res["pairs"]] == pytest.approx(list(ref))
    assert by[("A", "B")]["reject"] is True and by[("A", "B")]["warning"] is None


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04 -> 0.03, 0.06, max(0.06, 0.04) = 0.06
    assert stats.holm([0.04, 0.01, None, 0.03]) == pytest.approx([0.06, 0.03, None, 0.06])


def test_friedman_and_min_p():
    from scipy.stats import friedmanchisquare
    rng = np.random.default_rng(1)
    data = {v: {f"s{i}": float(rng.normal(j * 0.3, 1)) for i in range(20)} for j, v in enumerate("ABC")}
    res = stats.friedman(data)
    ref = friedmanchisquare(*[list(data[v].values()) for v in "ABC"])
    assert res["statistic"] == pytest.approx(ref.statistic) and res["p"] == pytest.approx(ref.pvalue)
    assert res["kendalls_w"] == pytest.approx(ref.statistic / (20 * 2))
    # n=2 blocks, k=3: largest chi2 = 4, p = exp(-2) > 0.05
    assert stats.min_p_friedman(2, 3) == pytest.approx(math.exp(-2))
    small = {v: {"s1": float(j), "s2": float(j)} for j, v in enumerate("ABC")}
    assert "cannot reach" in stats.friedman(small)["warning"]


def test_spearman_bootstrap():
    x = [1, 2, 3, 4, 5, 6, 7, 8]
    y = [2, 1, 4, 3, 6, 5, 8, None]
    res = stats.spearman_bootstrap(x, y, seed=1)
    assert res["n"] == 7
    # ranks differ by the swaps (1,2),(3,4),(5,6): d² = 6*1 -> rho = 1 - 6*6/(7*48)
    assert res["rho"] == pytest.approx(1 - 36 / 336)
    assert res["ci_low"] <= res["rho"] <= res["ci_high"]
    assert stats.spearman_bootstrap([1, 2, 3], [3, 2, 1])["warning"].startswith("Spearman with n=3")
    assert stats.spearman_bootstrap([1, 1, 1], [1, 2, 3])["rho"] is None


def test_compare_variants_paired_bundle():
    rng = np.random.default_rng(2)
    values = {v: {f"s{i}": float(rng.normal(j, 1)) for i in range(10)} for j, v in enumerate("ABC")}
    out = stats.compare_variants(values, paired=True)
    assert set(out) == {"variants", "anova", "tukey", "wilcoxon", "friedman"}
    assert out["variants"]["A"]["n"] == 10
    d = out["variants"]["B"]
    assert d["ci_low"] <= d["mean"] <= d["ci_high"]
    assert len(out["tukey"]["pairs"]) == 3
    assert stats.describe([])["mean"] is None


def test_wilcoxon_p_exact_without_ties_and_with_ties():
    from scipy.stats import PermutationMethod, wilcoxon
    d = np.array([0.5, -1.2, 2.0, 3.1, 0.7, 1.9, -0.3])
    assert stats.wilcoxon_p(d)[1] == pytest.approx(wilcoxon(d, method="exact").pvalue)
    tied = np.array([1.0, 1.0, 2.0, -1.0, 2.0, 3.0, 0.0])
    # ties: the exact conditional distribution (scipy's exhaustive permutation test), not the normal approximation
    assert stats.wilcoxon_p(tied)[1] == pytest.approx(
        wilcoxon(tied[tied != 0], method=PermutationMethod(n_resamples=2 ** 6)).pvalue)
