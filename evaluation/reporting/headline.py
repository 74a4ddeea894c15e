"""The answer a report leads with: each headline metric per variant (mean, 95% CI, n over scored
sessions, status ok or agent_failure; a session's trials averaged first, n counts sessions) and the paired difference of every other variant to the baseline variant.

Headline metrics are the graph file's ``SUMMARY_METRICS`` (every metric when it declares none,
capped at ``FALLBACK_HEADLINES``). The baseline is the config's ``baseline:`` (default: the first
variant). A difference is tested with :func:`convsim.evaluation.reporting.compare.compare_metric` (paired Wilcoxon
over the sessions both variants ran with the same seed, Mann-Whitney U when fewer than two pair);
its p-values are Holm-corrected over every difference in the table.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from convsim.results.aggregate import trials_info
from convsim.results.summary_text import sig3  # 3 significant digits wherever a person reads a number
from convsim.results.metric_ranges import Range, range_of
from convsim.evaluation.reporting import stats
from convsim.evaluation.reporting.compare import compare_metric
from convsim.evaluation.reporting.records import JUDGE_FLAGS, MetricTable, metric_names, metric_table

FALLBACK_HEADLINES = 8


def fmt_p(p, alpha: float = stats.ALPHA) -> str:
    """A p-value as :func:`sig3` prints it, with more significant digits where 3 would carry it across
    ``alpha`` (so a star for p < alpha never sits beside a printed value >= alpha): 0.04996 ->
    0.04996, not 0.05; 0.0312 -> 0.0312; 0.05004 -> 0.05; None -> an em dash."""
    text = sig3(p)
    if p is None or isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or p == 0:
        return text
    for digits in range(4, 17):
        if (float(text) < alpha) == (p < alpha):
            return text
        text = f"{p:.{digits}g}"
        text = f"{float(text):.{digits - 1}e}" if "e" in text else text
    return text


def headline_metrics(declared: Sequence[str], records: Sequence[Mapping] | MetricTable) -> list[str]:
    return headline_choice(declared, records)["metrics"]


def headline_choice(declared: Sequence[str], records: Sequence[Mapping] | MetricTable) -> dict:
    """``metrics``: the declared metrics with a finite value in some clean session, else the first
    ``FALLBACK_HEADLINES`` metrics; ``empty``: the declared ones with no finite value (shown as such,
    never silently dropped); ``fallback``: True when the headline is not the declared metrics."""
    present = [m for m in metric_names(records) if m not in JUDGE_FLAGS]
    chosen = [m for m in declared if m in present]
    return {"metrics": chosen or present[:FALLBACK_HEADLINES], "declared": list(declared),
            "empty": [m for m in declared if m not in present], "fallback": not chosen}


def choose_baseline(configured: str | None, variants: Sequence[str]) -> tuple[str | None, str | None]:
    """(baseline, warning): the configured variant when the run has it, else the first one."""
    if not variants:
        return None, None
    if configured and configured not in variants:
        return variants[0], f"baseline {configured!r} is not a variant of this run; using {variants[0]!r}"
    return configured or variants[0], None


def _values(table: MetricTable, variant: str, metric: str) -> dict[str, tuple[float, object, int]]:
    """``{session id: (mean over its trials, seeds, trials)}`` of one variant's sessions that have the
    metric: the session is the unit (trials replay the same customer; :meth:`MetricTable.units`)."""
    return {s: unit for (_, s), unit in table.units(metric, variant).items()}


def headline_table(clean: Sequence[Mapping] | MetricTable, variants: Sequence[str], metrics: Sequence[str], baseline: str | None,
                   *, alpha: float = stats.ALPHA, references: Sequence[str] = (),
                   ranges: Mapping[str, Range] | None = None) -> dict:
    """``{"rows": [{metric, cells: {variant: describe}, diffs: {variant: compare row}}], "values",
    "n_comparisons"}`` over the scored records (status ok or agent_failure). ``references``:
    variants described but never compared (no diff, no test, not in the Holm family). ``ranges``:
    the graph's checked ``METRIC_RANGES``: cells' and differences' intervals clipped (``ci_clipped``)."""
    table = clean if isinstance(clean, MetricTable) else metric_table(clean)
    rows, values = [], {}
    others = [v for v in variants if v != baseline and v not in references]
    for m in metrics:
        bounds = range_of(ranges or {}, m)
        per_variant = {v: _values(table, v, m) for v in variants}
        values[m] = {v: [x for x, _, _ in vals.values()] for v, vals in per_variant.items()}
        cells = {v: {**stats.describe(values[m][v], bounds=bounds),
                     **trials_info(k for _, _, k in per_variant[v].values())} for v in variants}
        diffs = {v: compare_metric(per_variant[baseline], per_variant[v], alpha=alpha, bounds=bounds)
                 for v in others} if baseline else {}
        rows.append({"metric": m, "cells": cells, "diffs": diffs})
    flat = [d for r in rows for d in r["diffs"].values()]
    for d, adj in zip(flat, stats.holm([d["p"] for d in flat])):
        d["p_holm"] = adj
        d["significant"] = adj is not None and adj < alpha
    return {"rows": rows, "values": values, "n_comparisons": sum(d["p"] is not None for d in flat)}


# a number standing alone ("got 2", "p = 0.03"), never the digits of a name ("C3", "ndcg@10", "v1.2")
_NUMBER = re.compile(r"(?<![\w.@#:/-])-?\d+(\.\d+)?(e-?\d+)?(?![\w@#:/-]|\.\w)")


def group_warnings(warnings: Sequence[str]) -> list[dict]:
    """Warnings grouped by kind (the text after the metric name with its numbers blanked), each with
    a count and its first occurrence as the example, most frequent first."""
    groups: dict[str, dict] = {}
    for w in warnings:
        _, sep, rest = w.partition(": ")
        kind = _NUMBER.sub("#", rest if sep else w)
        g = groups.setdefault(kind, {"kind": kind, "count": 0, "example": w})
        g["count"] += 1
    return sorted(groups.values(), key=lambda g: -g["count"])
