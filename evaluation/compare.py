"""``convsim compare <runA> <runB>``: per-metric differences between two runs.

Variants are matched by name (or, when each run has exactly one variant, with each other).
Per matched variant and shared metric: means, the difference B - A with a bootstrap 95% CI, and a
test: paired Wilcoxon over the sessions both runs have (same session id and trial, and the same
seed where both record one), else Mann-Whitney U over all sessions. p-values are Holm-adjusted
over all rows; effect sizes are d_z (paired) or Cohen's d (independent).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import stats as sps

from convsim import ConvsimError
from evaluation import stats
from evaluation.records import flat_numeric, load_run, metric_names, pair_key

NOT_COMPARED = ("judge_failed", "judge_heuristic")


def _values(records, variant, metric) -> dict[str, tuple[float, object]]:
    out = {}
    for r in records:
        if str(r.get("variant")) != variant:
            continue
        v = flat_numeric(r.get("dialogue_metrics")).get(metric)
        if v is not None:
            out[pair_key(r)] = (v, r.get("seed"))
    return out


def _bootstrap_diff(a: np.ndarray, b: np.ndarray, *, paired: bool, seed: int = 0, n_boot: int = 1000):
    rng = np.random.default_rng(seed)
    if paired:
        d = b - a
        boots = d[rng.integers(0, len(d), (n_boot, len(d)))].mean(axis=1)
    else:
        boots = (b[rng.integers(0, len(b), (n_boot, len(b)))].mean(axis=1)
                 - a[rng.integers(0, len(a), (n_boot, len(a)))].mean(axis=1))
    return float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def compare_metric(a: dict, b: dict, *, alpha: float = stats.ALPHA) -> dict:
    """One row: ``a``/``b`` are ``{pair_key: (value, seed)}``."""
    shared = sorted(k for k in a.keys() & b.keys() if a[k][1] is None or b[k][1] is None or a[k][1] == b[k][1])
    va = np.array([v for v, _ in a.values()])
    vb = np.array([v for v, _ in b.values()])
    row = {"n_a": len(va), "n_b": len(vb), "n_paired": len(shared),
           "mean_a": float(va.mean()) if len(va) else None, "mean_b": float(vb.mean()) if len(vb) else None,
           "diff": None, "ci_low": None, "ci_high": None, "test": None, "statistic": None, "p": None,
           "effect_size": None, "warning": None}
    if not len(va) or not len(vb):
        row["warning"] = "a run has no value for this metric"
        return row
    if len(shared) >= 2:
        pa, pb = np.array([a[k][0] for k in shared]), np.array([b[k][0] for k in shared])
        d = pb - pa
        row.update(diff=float(d.mean()), test="paired Wilcoxon", effect_size=stats.cohens_dz(d))
        row["ci_low"], row["ci_high"] = _bootstrap_diff(pa, pb, paired=True)
        nz = int(np.count_nonzero(d))
        if nz:
            stat, p = stats.wilcoxon_p(d)
            row.update(statistic=stat, p=p)
        row["warning"] = (stats._power_warning("Wilcoxon", nz, stats.min_p_wilcoxon(nz), alpha)
                          if nz else "no non-zero paired differences")
    else:
        row.update(diff=float(vb.mean() - va.mean()), test="Mann-Whitney U", effect_size=stats.cohens_d(va, vb))
        row["ci_low"], row["ci_high"] = _bootstrap_diff(va, vb, paired=False)
        if len(set(va) | set(vb)) > 1:
            res = sps.mannwhitneyu(va, vb)
            row.update(statistic=float(res.statistic), p=float(res.pvalue))
    return row


def same_denominator_means(a: dict, b: dict) -> dict:
    """The means of A and B over the sessions the difference is taken over, so that A, B and B - A
    share one denominator: the paired sessions when two or more pair (the paired test), else all of
    each run's sessions (the independent test). The sessions left out are counted, not hidden."""
    shared = [k for k in a.keys() & b.keys() if a[k][1] is None or b[k][1] is None or a[k][1] == b[k][1]]
    if len(shared) >= 2:
        keys_a = keys_b = shared
        basis = "paired"
    else:
        keys_a, keys_b, basis = list(a), list(b), "all"
    mean = (lambda d, ks: float(np.mean([d[k][0] for k in ks])) if ks else None)
    return {"basis": basis, "mean_a_shown": mean(a, keys_a), "mean_b_shown": mean(b, keys_b),
            "n_shown": len(shared) if basis == "paired" else None,
            "unpaired_a": len(a) - len(keys_a), "unpaired_b": len(b) - len(keys_b)}


def compare_runs(run_a: str | Path, run_b: str | Path, *, alpha: float = stats.ALPHA) -> dict:
    """Per-metric differences (B - A) for every matched variant; see the module docstring."""
    a, b = load_run(run_a), load_run(run_b)
    va, vb = a.variants, b.variants
    matches = [(v, v) for v in va if v in vb]
    if not matches and len(va) == 1 and len(vb) == 1:
        matches = [(va[0], vb[0])]
    if not matches:
        raise ConvsimError(f"the runs share no variant (A: {va}, B: {vb}) and do not have one variant each",
                           file=str(run_b), field="variant")
    ra, rb = a.ok_records, b.ok_records
    shared_metrics = [m for m in metric_names(ra) if m in set(metric_names(rb)) and m not in NOT_COMPARED]
    rows = []
    for var_a, var_b in matches:
        for m in shared_metrics:
            values_a, values_b = _values(ra, var_a, m), _values(rb, var_b, m)
            rows.append({"variant_a": var_a, "variant_b": var_b, "metric": m,
                         **compare_metric(values_a, values_b, alpha=alpha),
                         **same_denominator_means(values_a, values_b)})
    for row, adj in zip(rows, stats.holm([r["p"] for r in rows])):
        row["p_holm"] = adj
        row["significant"] = None if adj is None else bool(adj < alpha)
    return {"run_a": str(a.run_dir), "run_b": str(b.run_dir), "alpha": alpha, "rows": rows}
