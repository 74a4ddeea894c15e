"""Simulator fidelity beside the agent's scores: status counts, simulator-check flags, and the share
of a metric's variance that comes from re-simulating the same user.

A session whose simulator failed (a ``SimulatorError``, or a flag from the graph's
``simulator_checks``) has status ``simulator_failure``: it is counted here and left out of every
agent metric. ``variance_decomposition`` needs ``--trials K`` (K >= 2): the same session id is
then simulated K times with different seeds.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from convsim.results.recordset import RecordSet
from convsim.evaluation.reporting.records import MetricTable, metric_table, scored

STATUSES = ("ok", "agent_failure", "simulator_failure")
ERROR_STATUSES = ("infra_error", "code_error")


def status_counts(records: Sequence[Mapping], variants: Sequence[str]) -> dict[str, dict[str, int]]:
    """Per variant: ok, agent_failure, simulator_failure and errors (``infra_error`` and
    ``code_error``), each session attempt counted once, from the records alone: results.jsonl is
    the record of every session (errors included), ``errors.jsonl`` only the log of failed attempts
    (the same sessions again), so the counts are summary.json's."""
    out = {v: {**{s: 0 for s in STATUSES}, "errors": 0} for v in variants}
    pairs = zip((k[0] for k in records.keys), records.statuses) if isinstance(records, RecordSet) else \
        ((str(r.get("variant")), r.get("status", "ok")) for r in records)
    for variant, status in pairs:
        row = out.setdefault(variant, {**{s: 0 for s in STATUSES}, "errors": 0})
        row[status if status in STATUSES else "errors"] += 1
    return out


def simulator_flags(records: Sequence[Mapping]) -> dict[str, dict]:
    """Per check name: how many sessions it flagged per variant and the first one as an example.
    A simulator that raised (no check flag) is counted under ``raised``."""
    out: dict[str, dict] = {}
    if isinstance(records, RecordSet):
        records = records.where(statuses={"simulator_failure"})
    for r in records:
        if r.get("status") != "simulator_failure":
            continue
        flags = r.get("simulator_flags") or [{"check": "raised", "detail": (r.get("error") or "").split("\n")[0]}]
        for name in dict.fromkeys(str(f.get("check")) for f in flags):
            entry = out.setdefault(name, {"count": {}, "example": None})
            v = str(r.get("variant"))
            entry["count"][v] = entry["count"].get(v, 0) + 1
            if entry["example"] is None:
                detail = next(str(f.get("detail", "")) for f in flags if str(f.get("check")) == name)
                entry["example"] = {"variant": v, "session_id": r.get("session_id"), "trial": r.get("trial", 0),
                                    "detail": detail}
    return out


def simulator_unchecked(records: Sequence[Mapping]) -> dict[str, int]:
    """Per variant: the sessions a simulator judge could not check (its answer was unreadable: the
    graph records a ``simulator_judge_failed`` of 1). Such a session flags nothing, so without this
    count an empty flags table would read as "the simulator behaved"."""
    out: dict[str, int] = {}
    for r in records:
        if ((r.get("dialogue_metrics") or {}).get("simulator_judge_failed") or 0) >= 1:
            v = str(r.get("variant"))
            out[v] = out.get(v, 0) + 1
    return out


def random_effects_shares(groups: Sequence[Sequence[float]]) -> dict | None:
    """One-way random-effects decomposition of values grouped by session (a group = one session's
    trials): ``within`` = MSW (re-simulating the same user), ``between`` = max(0, (MSB - MSW) / n0)
    (which user), n0 = (N - sum n_i^2 / N) / (k - 1) for unbalanced groups. None when fewer than two
    sessions have two or more trials, or when the metric does not vary at all."""
    gs = [np.asarray(g, dtype=float) for g in groups if len(g) >= 2]
    k = len(gs)
    if k < 2:
        return None
    n = np.array([len(g) for g in gs], dtype=float)
    total = n.sum()
    grand = np.concatenate(gs).mean()
    msw = sum(((g - g.mean()) ** 2).sum() for g in gs) / (total - k)
    msb = sum(len(g) * (g.mean() - grand) ** 2 for g in gs) / (k - 1)
    n0 = (total - (n ** 2).sum() / total) / (k - 1)
    within, between = float(msw), float(max(0.0, (msb - msw) / n0))
    if within + between == 0:
        return None
    return {"within": within, "between": between, "share_within": within / (within + between),
            "sessions": k, "trials": int(total)}


def variance_decomposition(records: Sequence[Mapping] | MetricTable, metrics: Sequence[str]) -> list[dict]:
    """Per metric and variant, the share of variance from re-simulating the same user (clean
    sessions only: a MetricTable is taken to hold the scored records); rows only where the run has
    repeated trials."""
    table = records if isinstance(records, MetricTable) else metric_table(scored(records))
    rows = []
    by_variant: dict[str, dict[str, dict[str, list[float]]]] = {}
    for m in metrics:
        col = table.columns.get(m)
        if col is None:
            continue
        for value, variant, session in zip(col, table.variants, table.sessions):
            if not np.isnan(value):
                by_variant.setdefault(variant, {}).setdefault(m, {}).setdefault(session, []).append(float(value))
    for v, per_metric in by_variant.items():
        for m in metrics:
            res = random_effects_shares(list(per_metric.get(m, {}).values()))
            if res:
                rows.append({"metric": m, "variant": v, **res})
    return rows
