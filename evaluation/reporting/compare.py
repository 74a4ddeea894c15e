"""``convsim compare <runA> <runB>``: per-metric differences between two runs.

Variants are matched by name (or, when each run has exactly one variant, with each other).
Per matched variant and shared metric: means, the difference B - A with a 95% CI
(convsim.results.aggregate.mean_diff_ci: over the paired sessions paired t, or Newcombe's paired score for
0/1 metrics; else Newcombe's hybrid score for 0/1 metrics or Welch's t; ``ci_method`` says which), and a test: paired Wilcoxon over the sessions
both runs have (same session id, and the same seeds on the trials both ran where both record one),
else Mann-Whitney U over all sessions, exact (ties included) up to ``stats.EXACT_MWU_MAX`` sessions
(``p_method`` says how p was computed); paired rows also carry the paired t-test (``t``, ``p_t``).
p-values are Holm-adjusted over all rows, i.e. across every metric
and variant compared (``p_holm``, ``p_t_holm``); effect sizes are d_z (paired) or Cohen's d
(independent). The unit is the session: with ``--trials K`` a session's trials are averaged first
(they replay the same customer and are not independent), so n counts sessions and
``trials_a``/``trials_b`` the trials per session. Values are taken in sorted order, so the rows do
not depend on record order. A metric that both runs' graph files declare a bounded range for
(``METRIC_RANGES``, convsim.results.metric_ranges; their hull when they differ) has its difference's
interval clipped to [low - high, high - low] (``ci_clipped``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from convsim import ConvsimError, load_graph_module
from convsim.results.aggregate import mean_diff_ci, trials_info
from convsim.results.metric_ranges import Range, hull, metric_ranges, range_of
from convsim.evaluation.reporting import stats
from convsim.evaluation.reporting.records import JUDGE_FLAGS, MetricTable, RunData, load_run, metric_table, seeds_match

NOT_COMPARED = JUDGE_FLAGS  # bookkeeping counters: summarised, not tested (as in stats.json)


def _values(table: MetricTable, variant: str, metric: str) -> dict[str, tuple[float, object, int]]:
    """``{session id: (mean over its trials, its (trial, seed) pairs, trials)}`` of one variant."""
    return {s: unit for (_, s), unit in table.units(metric, variant).items()}


def _ranges(run: RunData) -> dict[str, Range]:
    """The declared ``METRIC_RANGES`` of the run's graph file; none when the run names no graph or
    its graph file cannot be loaded here (the comparison goes on, unclipped)."""
    graph = run.config.get("graph")
    try:
        return metric_ranges(load_graph_module(graph)) if graph else {}
    except ConvsimError:
        return {}


def _shared(a: dict, b: dict) -> list[str]:
    """The sessions both sides have with the same seeds (:func:`convsim.evaluation.reporting.records.seeds_match`)."""
    return sorted(k for k in a.keys() & b.keys() if seeds_match(a[k][1], b[k][1]))


def _trials(d: dict) -> int | float | None:
    return trials_info(t[2] if len(t) > 2 else 1 for t in d.values())["trials_per_session"]


def _diff_ci(a: np.ndarray, b: np.ndarray, *, paired: bool, bounds: Range | None = None) -> dict:
    """``ci_low``, ``ci_high`` and ``ci_method`` of the 95% CI of mean(b) - mean(a), and
    ``ci_clipped`` when a range applies (:func:`convsim.results.aggregate.mean_diff_ci`)."""
    ci = mean_diff_ci(a, b, paired=paired, bounds=bounds)
    return {k: ci[k] for k in ("ci_low", "ci_high", "ci_method", "ci_clipped") if k in ci}


def compare_metric(a: dict, b: dict, *, alpha: float = stats.ALPHA, bounds: Range | None = None) -> dict:
    """One row: ``a``/``b`` are ``{session: (value, seeds[, trials])}``, one entry per independent
    unit (a session, its trials averaged: :meth:`MetricTable.units`); n_a, n_b and n_paired count
    them, ``trials_a``/``trials_b`` give the trials per session. ``bounds``: the metric's declared
    range: the difference's interval is clipped to [low - high, high - low] (``ci_clipped``)."""
    shared = _shared(a, b)
    va = np.sort(np.array([t[0] for t in a.values()], dtype=float))
    vb = np.sort(np.array([t[0] for t in b.values()], dtype=float))
    row = {"n_a": len(va), "n_b": len(vb), "n_paired": len(shared), "trials_a": _trials(a), "trials_b": _trials(b),
           "mean_a": float(va.mean()) if len(va) else None, "mean_b": float(vb.mean()) if len(vb) else None,
           "diff": None, "ci_low": None, "ci_high": None, "ci_method": None, "test": None, "statistic": None,
           "p": None, "p_method": None,
           "t": None, "p_t": None, "effect_size": None, "warning": None}
    if not len(va) or not len(vb):
        row["warning"] = "a run has no value for this metric"
        return row
    if len(shared) >= 2:
        pa, pb = np.array([a[k][0] for k in shared]), np.array([b[k][0] for k in shared])
        d = pb - pa
        row.update(diff=float(d.mean()), test="paired Wilcoxon", effect_size=stats.cohens_dz(d))
        row.update(_diff_ci(pa, pb, paired=True, bounds=bounds))
        nz = stats.nonzero_count(d)
        if nz:
            stat, p = stats.wilcoxon_p(d)
            row.update(statistic=stat, p=p, p_method=stats.wilcoxon_method(nz))
        row["t"], row["p_t"] = stats.paired_t(d)
        warnings = [stats._power_warning("Wilcoxon", nz, stats.min_p_wilcoxon(nz), alpha)
                    if nz else "no non-zero paired differences", stats.small_n_warning(len(shared))]
        row["warning"] = "; ".join(w for w in warnings if w) or None
    else:
        row.update(diff=float(vb.mean() - va.mean()), test="Mann-Whitney U", effect_size=stats.cohens_d(va, vb))
        warnings = []
        if min(len(va), len(vb)) >= 2:
            row.update(_diff_ci(va, vb, paired=False, bounds=bounds))
            warnings.append(stats.small_n_warning(min(len(va), len(vb))))
        else:
            warnings.append(f"no interval: a run has {min(len(va), len(vb))} session(s) (at least 2 each needed)")
        if not stats.is_constant(np.concatenate([va, vb])):
            u, p, method = stats.mannwhitney_p(va, vb)
            row.update(statistic=u, p=p, p_method=method)
        # p < alpha out of reach: complete separation has p = 2 / C(n_a + n_b, n_a) (1 vs 2: 0.667)
        # without ties; with the values' ties held fixed the most extreme split can be more common
        warnings.append(stats._power_warning(f"Mann-Whitney U ({len(va)} vs {len(vb)})", len(va) + len(vb),
                                             stats.min_p_mannwhitney_observed(va, vb), alpha))
        row["warning"] = "; ".join(w for w in warnings if w) or None
    return row


def same_denominator_means(a: dict, b: dict) -> dict:
    """The means of A and B over the sessions the difference is taken over, so that A, B and B - A
    share one denominator: the paired sessions when two or more pair (the paired test), else all of
    each run's sessions (the independent test). The sessions left out are counted, not hidden."""
    shared = _shared(a, b)
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
    ta, tb = metric_table(a.ok_records), metric_table(b.ok_records)
    shared_metrics = [m for m in ta.names if m in tb.columns and m not in NOT_COMPARED]
    if not shared_metrics:  # e.g. runs of two different graphs: nothing to compare is an input error
        graphs = (a.config.get("graph"), b.config.get("graph"))
        why = f"runs of different graphs ({graphs[0]} and {graphs[1]})" if graphs[0] != graphs[1] else \
            "no metric has values in both"
        raise ConvsimError(f"the runs share no metric to compare: {why}", file=str(run_b), field="metrics")
    ranges_a, ranges_b = _ranges(a), _ranges(b)
    rows = []
    for var_a, var_b in matches:
        for m in shared_metrics:
            values_a, values_b = _values(ta, var_a, m), _values(tb, var_b, m)
            bounds = hull(range_of(ranges_a, m), range_of(ranges_b, m))
            rows.append({"variant_a": var_a, "variant_b": var_b, "metric": m,
                         **compare_metric(values_a, values_b, alpha=alpha, bounds=bounds),
                         **same_denominator_means(values_a, values_b)})
    for row, adj, adj_t in zip(rows, stats.holm([r["p"] for r in rows]), stats.holm([r["p_t"] for r in rows])):
        row["p_holm"] = adj
        row["significant"] = None if adj is None else bool(adj < alpha)
        row["p_t_holm"] = adj_t
    return {"run_a": str(a.run_dir), "run_b": str(b.run_dir), "alpha": alpha,
            "correction": "Holm across every row (all metrics and variants compared)", "rows": rows}
