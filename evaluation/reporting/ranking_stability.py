"""How stable is the ranking of the variants? The bootstrap distribution of the ranking.

A table of means orders the variants whether or not the sessions can: on 100 sessions per model the
original CRS study's six models came out with Spearman rho = -0.37 against its own 6,000-session
table. Here the sessions of each variant are resampled with replacement (``n_boot`` times, seeded),
the variants are ranked by their resampled means, and the report gives

* ``p_first``: how often each variant ranks first (of the resamples);
* ``mean_rank`` and the 95 % interval of its rank (percentiles of the resampled ranks);
* ``tau_mean`` / ``tau_low``: Kendall's tau between pairs of resampled rankings (mean and 5th
  percentile; ``scipy.stats.kendalltau``): 1 when every resample orders the variants the same way,
  near 0 when the order is noise;
* ``tau_observed``: mean tau between each resampled ranking and the observed one.

When every variant has the same session ids (a paired design: the same simulated users), the
session ids are resampled jointly; else each variant's sessions independently (``paired``).
A variant with fewer than 2 sessions is left out (``skipped``). Higher is better unless
``higher_is_better`` is False. Nothing here is a test of significance: it says how often the
order of the table would come out the same on another draw of as many sessions.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.stats import kendalltau, rankdata

DEFAULT_BOOT = 1000
MAX_TAU_PAIRS = 2000  # pairs of resampled rankings whose tau is averaged (sampled when more)


def ranking_stability(values: Mapping[str, Mapping[str, float]], *, n_boot: int = DEFAULT_BOOT, seed: int = 0,
                      higher_is_better: bool = True) -> dict | None:
    """``values``: ``{variant: {session id: value}}`` (None / NaN values dropped). Returns the
    bootstrap figures above, or None with fewer than 2 variants of >= 2 sessions."""
    clean = {v: {s: float(x) for s, x in d.items() if x is not None and np.isfinite(float(x))}
             for v, d in values.items()}
    variants = [v for v, d in clean.items() if len(d) >= 2]
    skipped = sorted(set(clean) - set(variants))
    if len(variants) < 2:
        return None
    rng = np.random.default_rng(seed)
    ids = [sorted(clean[v]) for v in variants]
    paired = all(i == ids[0] for i in ids)
    sign = 1.0 if higher_is_better else -1.0
    observed = np.array([np.mean(list(clean[v].values())) for v in variants])
    if paired:
        matrix = np.array([[clean[v][s] for s in ids[0]] for v in variants])  # variants x sessions
        draws = rng.integers(0, matrix.shape[1], size=(n_boot, matrix.shape[1]))
        means = matrix[:, draws].mean(axis=2).T  # n_boot x variants
    else:
        means = np.empty((n_boot, len(variants)))
        for j, v in enumerate(variants):
            arr = np.array([clean[v][s] for s in ids[j]])
            means[:, j] = arr[rng.integers(0, len(arr), size=(n_boot, len(arr)))].mean(axis=1)
    # rank 1 = best; ties share the average rank (a tie is no order)
    ranks = np.vstack([rankdata(-sign * row, method="average") for row in means])
    obs_rank = rankdata(-sign * observed, method="average")
    first = ranks.min(axis=1, keepdims=True) == ranks  # a shared first place counts for each
    n_pairs = min(MAX_TAU_PAIRS, n_boot * (n_boot - 1) // 2)
    a = rng.integers(0, n_boot, size=n_pairs)
    b = (a + rng.integers(1, n_boot, size=n_pairs)) % n_boot  # never a resample with itself
    taus = np.array([_tau(ranks[i], ranks[j]) for i, j in zip(a, b)])
    to_observed = np.array([_tau(r, obs_rank) for r in ranks])
    order = [variants[i] for i in np.argsort(obs_rank, kind="stable")]
    return {
        "variants": order, "paired": paired, "n_boot": n_boot, "seed": seed, "skipped": skipped,
        "sessions": {v: len(clean[v]) for v in order},
        "observed_mean": {v: float(observed[variants.index(v)]) for v in order},
        "observed_rank": {v: float(obs_rank[variants.index(v)]) for v in order},
        "p_first": {v: float(first[:, variants.index(v)].mean()) for v in order},
        "mean_rank": {v: float(ranks[:, variants.index(v)].mean()) for v in order},
        "rank_interval": {v: [float(np.percentile(ranks[:, variants.index(v)], 2.5)),
                              float(np.percentile(ranks[:, variants.index(v)], 97.5))] for v in order},
        "tau_mean": float(np.nanmean(taus)) if np.isfinite(taus).any() else None,
        "tau_low": float(np.nanpercentile(taus, 5)) if np.isfinite(taus).any() else None,
        "tau_observed": float(np.nanmean(to_observed)) if np.isfinite(to_observed).any() else None,
    }


def _tau(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b of two rankings; 1.0 when both are the same constant (every variant tied)."""
    if np.array_equal(x, y):
        return 1.0
    t = kendalltau(x, y).statistic
    return float(t) if t is not None and np.isfinite(t) else float("nan")


def sentence(result: Mapping) -> str:
    """One line for the report: the leader's share of first places and the mean tau."""
    top = max(result["p_first"].values())
    leaders = [v for v, p in result["p_first"].items() if p == top]
    who = (f"{leaders[0]} ranks" if len(leaders) == 1 else f"{', '.join(leaders)} (tied) rank")
    head = f"{who} first in {top:.0%} of {result['n_boot']} resamples"
    if result.get("tau_mean") is None:
        return head
    return (f"{head}; Kendall tau between resampled rankings {result['tau_mean']:.2f} "
            f"(5th percentile {result['tau_low']:.2f})")


def run_ranking_stability(table, variants: Sequence[str], metrics: Sequence[str], *, n_boot: int = DEFAULT_BOOT,
                          seed: int = 0, lower_is_better: Sequence[str] = ()) -> list[dict]:
    """The ranking stability of each metric of ``metrics`` over ``variants`` from a run's
    ``MetricTable`` (the session is the unit: its trials averaged). Empty with fewer than 2 variants."""
    if len(variants) < 2:
        return []
    out = []
    for metric in metrics:
        values = {v: {s: unit[0] for (_, s), unit in table.units(metric, v).items()} for v in variants}
        res = ranking_stability(values, n_boot=n_boot, seed=seed, higher_is_better=metric not in lower_is_better)
        if res is not None:
            out.append({"metric": metric, **res, "sentence": sentence(res)})
    return out
