"""A run's statistics (stats.json) and figures (figures/*.png|svg), computed from its records.

``write_statistics(run)`` works for any graph's records: metrics are discovered from
``dialogue_metrics``; judge metrics are ``judge_*``; a graph module may add scenario figures by
defining ``figures(records, out_dir) -> list[str]`` (stems written), which is called when present,
and may name metrics that are not a property of the variant (``UNCOMPARED_METRICS``, ``{metric:
reason}``, e.g. a figure of the user simulator that every agent meets alike): they get descriptives
and the reason (``stats.json`` → ``metrics.<m>.not_compared``), no between-variant test. The graph's
``METRIC_RANGES`` (convsim.results.metric_ranges) clip each declared metric's intervals to its range
(``ci_clipped``); a session whose value is outside it is a warning in stats.json.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from convsim import ConvsimError, load_graph_module
from convsim.results.aggregate import trials_info
from convsim.running.progress import analysis_step
from convsim.results.metric_ranges import Range, metric_ranges, out_of_range_warning, outside, range_of
from convsim.evaluation.reporting import plots, stats
from convsim.evaluation.reporting.records import (JUDGE_FLAGS, RunData, reference_variants, flat_numeric, is_heuristic_metric, is_judge_metric,
                                is_paired, MetricTable, metric_table, sort_records)

log = logging.getLogger(__name__)

# Bookkeeping counters are summarised but not tested: a test on "judge_failed" would be noise.
NOT_TESTED = JUDGE_FLAGS


def judge_failures(records: Sequence[Mapping]) -> dict[str, dict]:
    """Per variant: sessions judged, judge failures and heuristic verdicts (counted, never hidden)."""
    out: dict[str, dict] = {}
    for r in records:
        dm = flat_numeric(r.get("dialogue_metrics"))
        if "judge_failed" not in dm:
            continue
        row = out.setdefault(str(r.get("variant")), {"judged": 0, "failed": 0, "heuristic": 0})
        row["judged"] += 1
        row["failed"] += int(dm.get("judge_failed") or 0)
        row["heuristic"] += int(dm.get("judge_heuristic") or 0)
    return out


def correlations(records: Sequence[Mapping] | MetricTable, metrics: Sequence[str], *, seed: int = 0,
                 variant: str | None = None) -> list[dict]:
    """Spearman (bootstrap CI) of every automatic metric against every judge metric: all sessions
    pooled, or one variant's sessions when ``variant`` is given (then each row names it); one pair per
    session (its trials averaged: trials of one session are not independent). Heuristic
    judges' scores are on neither side (``is_heuristic_metric``)."""
    table = records if isinstance(records, MetricTable) else metric_table(records)
    judge = [m for m in metrics if is_judge_metric(m) and not is_heuristic_metric(m) and m in table.columns]
    auto = [m for m in metrics if not m.startswith("judge_") and m not in JUDGE_FLAGS
            and not is_heuristic_metric(m) and m in table.columns]
    out = []
    # one pair per session, trials averaged; each metric one float array over the same units (NaN:
    # no value), never a dict per metric: 50,000 sessions x every metric stay small
    keys, codes = table.session_keys(variant)
    ys_of = {j: table.session_column(j, codes, len(keys)) for j in judge}
    for a in auto:
        xs = table.session_column(a, codes, len(keys))
        for j in judge:
            res = stats.spearman_bootstrap(xs, ys_of[j], seed=seed, n_boot=500)
            out.append({**({"variant": variant} if variant is not None else {}), "automatic": a, "judge": j, **res})
    return out


def across_metrics(per_metric: Mapping[str, Mapping], *, alpha: float) -> dict:
    """Holm across the metrics tested in one comparison (the family is one pair of variants, or the
    omnibus test), beside the per-metric correction across pairs. Rows: group1, group2, metric,
    test, p, p_holm_metrics, reject."""
    families: dict[tuple[str, str], list[dict]] = {}
    for m, res in per_metric.items():
        for row in res.get("wilcoxon", {}).get("pairs", []):
            families.setdefault((row["group1"], row["group2"]), []).append(
                {"group1": row["group1"], "group2": row["group2"], "metric": m, "test": "paired Wilcoxon",
                 "p": row.get("p")})
        if not res.get("wilcoxon"):
            for row in res.get("tukey", {}).get("pairs", []):
                families.setdefault((row["group1"], row["group2"]), []).append(
                    {"group1": row["group1"], "group2": row["group2"], "metric": m, "test": "Tukey HSD",
                     "p": row.get("p_adj")})
        omnibus = res.get("friedman") or res.get("anova") or {}
        if len(res.get("variants", {})) >= 3:  # with two variants the pair is the omnibus
            families.setdefault(("*", "*"), []).append(
                {"group1": "*", "group2": "*", "metric": m, "test": omnibus.get("test"), "p": omnibus.get("p")})
    rows = []
    for key in sorted(families):
        fam = families[key]
        for row, adj in zip(fam, stats.holm([r["p"] for r in fam])):
            rows.append({**row, "p_holm_metrics": adj, "reject": None if adj is None else bool(adj < alpha)})
    return {"method": "Holm", "family": "all metrics tested for one pair of variants (group1 vs group2), "
            "or for the omnibus test (group '*')", "alpha": alpha, "rows": rows}


def run_statistics(records: Sequence[Mapping], *, alpha: float = stats.ALPHA, seed: int = 0,
                   table: MetricTable | None = None, uncompared: Mapping[str, str] | None = None,
                   references: Sequence[str] = (), ranges: Mapping[str, Range] | None = None) -> dict:
    """Everything that goes into stats.json for a list of ok records (sorted by variant, session id and
    trial first, so the file does not depend on the order the sessions finished in). ``table``: the
    records' MetricTable when the caller has it (otherwise built here, one pass over the records).
    ``uncompared``: ``{metric: reason}`` of metrics that do not measure the variant (the graph's
    ``UNCOMPARED_METRICS``): descriptives and the reason only, no ANOVA, Tukey, Friedman or Wilcoxon.
    ``references``: variants shown but never compared (``reference: true`` in the config): their
    descriptives are in each metric's ``variants`` (marked ``reference``), outside every test.
    ``ranges``: the graph's checked ``METRIC_RANGES``: a declared metric's CIs are clipped to its
    range (``ci_clipped``), and a session (its trials' mean) outside it is a warning."""
    records = sort_records(records)
    table = table if table is not None else metric_table(records)
    metrics = table.names
    paired = is_paired(table)
    per_metric = {}
    warnings = []
    uncompared = uncompared or {}
    described = {}
    for m in metrics:
        if m in NOT_TESTED:
            continue
        by_session, counts = table.sessions_and_trials(m)
        bounds = range_of(ranges or {}, m)
        for v, vals in sorted(by_session.items()):
            wrong = int(outside(list(vals.values()), bounds).sum())
            if wrong:
                warnings.append(out_of_range_warning(v, m, wrong, bounds))
        if m in uncompared:
            described[m] = {"variants": {v: {**stats.describe([vals[k] for k in sorted(vals)], bounds=bounds),
                                             **trials_info(counts.get(v, []))}
                                         for v, vals in sorted(by_session.items())},
                            "not_compared": uncompared[m]}
            continue
        res = stats.compare_variants({v: vals for v, vals in by_session.items() if v not in references},
                                     paired=paired, alpha=alpha, bounds=bounds)
        for v in references:
            if v in by_session:
                vals = by_session[v]
                res["variants"][v] = {**stats.describe([vals[k] for k in sorted(vals)], bounds=bounds),
                                      "reference": True}
        for v, per_session in counts.items():
            if v in res["variants"]:
                res["variants"][v].update(trials_info(per_session))
        per_metric[m] = res
        for test in ("anova", "tukey", "friedman"):
            if res.get(test, {}).get("warning"):
                warnings.append(f"{m}: {res[test]['warning']}")
        for row in res.get("wilcoxon", {}).get("pairs", []):
            if row.get("warning"):
                warnings.append(f"{m}: {row['group1']} vs {row['group2']}: {row['warning']}")
    corr = correlations(table, metrics, seed=seed)
    warnings += [f"{c['automatic']} ~ {c['judge']}: {c['warning']}" for c in corr if c.get("warning")]
    variants = sorted(set(table.variants))
    corr_by_variant = [row for v in variants for row in correlations(table, metrics, seed=seed, variant=v)] \
        if len(variants) > 1 else []
    return {"alpha": alpha, "design": "paired" if paired else "independent", "n_records": len(records),
            "unit": "session (a session's trials averaged before any test or interval)",
            "metrics": {**per_metric, **described}, "across_metrics": across_metrics(per_metric, alpha=alpha),
            "correlations": corr, "correlations_by_variant": corr_by_variant,
            "judge_failures": judge_failures(records), "warnings": sorted(set(warnings))}



def make_figures(run: RunData, statistics: Mapping, out_dir: Path) -> list[str]:
    """All figures of a run. Per-metric figures (bars, distributions) cover the graph's
    ``SUMMARY_METRICS`` and the judge metrics when the graph names headline metrics, every metric
    otherwise; the correlation heatmap always covers every metric."""
    records, table = run.ok_records, run.table
    module = _graph_module(run)
    metrics = list(statistics.get("metrics", {}))
    judge = [m for m in metrics if is_judge_metric(m)]
    headline = [m for m in getattr(module, "SUMMARY_METRICS", []) if m in metrics]
    per_metric = list(dict.fromkeys(headline + judge)) if headline else metrics
    describe = {m: statistics["metrics"][m]["variants"] for m in metrics}
    stems = plots.bar_charts({m: describe[m] for m in per_metric}, out_dir)
    stems += plots.judge_radar({v: {m: describe[m].get(v, {}).get("mean") for m in judge}
                                for v in run.variants}, out_dir)
    stems += plots.correlation_heatmap(table, metrics, out_dir)
    stems += plots.distributions({m: {v: list(vals.values()) for v, vals in table.by_variant(m).items()}
                                  for m in per_metric}, out_dir)
    tas = [m for m in metrics if m.startswith("tas")][:3]
    stems += plots.scatter_against(table, tas, [m for m in judge if not is_heuristic_metric(m)], out_dir)
    stems += plots.tas_timelines(records, out_dir)
    hook = getattr(module, "figures", None)
    stems += list(hook(records, out_dir) or []) if callable(hook) else []
    return stems


def _graph_module(run: RunData):
    """The run's graph module (for its SUMMARY_METRICS and figures hook), or None."""
    graph = run.config.get("graph")
    if not graph:
        return None
    try:
        return load_graph_module(graph)
    except ConvsimError as exc:
        log.warning("graph %s not loadable for its figures hook: %s", graph, exc)
        return None


def write_statistics(run: RunData) -> dict:
    """Compute stats.json and the figures of a loaded run, write both, and return the statistics."""
    module = _graph_module(run)
    uncompared = getattr(module, "UNCOMPARED_METRICS", None) or {}
    statistics = run_statistics(run.ok_records, table=run.table, uncompared=uncompared,
                                references=reference_variants(run), ranges=metric_ranges(module))
    figure_dir = run.run_dir / "figures"
    analysis_step("figures")
    statistics["figures"] = make_figures(run, statistics, figure_dir)
    (run.run_dir / "stats.json").write_text(json.dumps(statistics, indent=1, default=str), encoding="utf-8")
    return statistics
