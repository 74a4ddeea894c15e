"""Model usage per variant: calls, tokens and latency, from the calls each record lists.

Written to ``summary.json`` under ``"usage"`` and printed after a run. Cache hits count as calls
but not as server latency (their latency is the cache lookup).
"""
from __future__ import annotations

import math


def _quantile(sorted_values: list[float], q: float) -> float | None:
    """Linear-interpolation quantile (numpy's default) of an already sorted list."""
    if not sorted_values:
        return None
    pos = (len(sorted_values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def usage_table(records: list[dict]) -> dict:
    """Usage of one variant's records (every status: a failed session spent its calls too)."""
    calls = [c for r in records for c in r.get("llm_calls") or []]
    served = sorted(float(c["latency_s"]) for c in calls
                    if not c.get("cache_hit") and c.get("latency_s") is not None)
    prompt = sum(c.get("prompt_tokens") or 0 for c in calls)
    completion = sum(c.get("completion_tokens") or 0 for c in calls)
    sessions = len(records)

    def rnd(x):
        return None if x is None else round(x, 6)
    return {
        "sessions": sessions,
        "calls": len(calls),
        "failed_calls": sum(1 for c in calls if c.get("ok") is False),
        "cache_hits": sum(1 for c in calls if c.get("cache_hit")),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "tokens_per_session": rnd((prompt + completion) / sessions) if sessions else None,
        "calls_per_session": rnd(len(calls) / sessions) if sessions else None,
        "latency_s_total": rnd(sum(served)),
        "latency_s_mean": rnd(sum(served) / len(served)) if served else None,
        "latency_s_p50": rnd(_quantile(served, 0.5)),
        "latency_s_p95": rnd(_quantile(served, 0.95)),
    }


def usage_by_variant(by_variant: dict[str, list[dict]]) -> dict[str, dict]:
    return {name: usage_table(recs) for name, recs in by_variant.items()}


COLUMNS = (("calls", "calls"), ("failed_calls", "failed"), ("cache_hits", "cached"),
           ("prompt_tokens", "prompt tok"), ("completion_tokens", "compl. tok"),
           ("latency_s_mean", "mean s"), ("latency_s_p95", "p95 s"))


def usage_rows(usage: dict[str, dict]) -> list[list[str]]:
    """Rows for a printed table (variants with at least one model call)."""
    rows = []
    for name, u in usage.items():
        if not u["calls"]:
            continue
        rows.append([name] + ["—" if u[k] is None else (f"{u[k]:.3f}" if isinstance(u[k], float) else str(u[k]))
                              for k, _ in COLUMNS])
    return rows
