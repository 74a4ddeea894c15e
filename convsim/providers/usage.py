"""Model usage per variant: calls, tokens and latency, from the calls each record lists.

Written to ``summary.json`` under ``"usage"`` and printed after a run. Cache hits count as calls
but not as server latency (their latency is the cache lookup).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping


def _quantile(sorted_values: list[float], q: float) -> float | None:
    """Linear-interpolation quantile (numpy's default) of an already sorted list."""
    if not sorted_values:
        return None
    pos = (len(sorted_values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def call_tokens(call: Mapping) -> int:
    """The tokens one recorded call spent: prompt + completion, or the total when the server gave
    only that (0 when it gave no count: see ``calls_without_usage``)."""
    prompt, completion = call.get("prompt_tokens"), call.get("completion_tokens")
    if prompt is None and completion is None:
        return call.get("total_tokens") or 0
    return (prompt or 0) + (completion or 0)


def without_usage(call: Mapping) -> bool:
    """An answered call the server said nothing of its tokens for: the token sums leave it out."""
    return (call.get("ok") is True and call.get("prompt_tokens") is None
            and call.get("completion_tokens") is None and call.get("total_tokens") is None)


class UsageTally:
    """Usage of one variant, a record at a time: only counts and the served latencies are kept."""

    def __init__(self) -> None:
        self.sessions = self.calls = self.failed_calls = self.cache_hits = self.without_usage = 0
        self.prompt_tokens = self.completion_tokens = self.tokens = 0
        self.served: list[float] = []

    def add(self, record: Mapping) -> None:
        self.sessions += 1
        for c in record.get("llm_calls") or []:
            self.calls += 1
            self.failed_calls += c.get("ok") is False
            self.cache_hits += bool(c.get("cache_hit"))
            self.prompt_tokens += c.get("prompt_tokens") or 0
            self.completion_tokens += c.get("completion_tokens") or 0
            self.tokens += call_tokens(c)  # a server that gives only a total counts here alone
            self.without_usage += without_usage(c)
            if not c.get("cache_hit") and c.get("latency_s") is not None:
                self.served.append(float(c["latency_s"]))

    def table(self) -> dict:
        served, sessions = sorted(self.served), self.sessions
        tokens = self.tokens

        def rnd(x):
            return None if x is None else round(x, 6)
        return {
            "sessions": sessions,
            "calls": self.calls,
            "failed_calls": self.failed_calls,
            "cache_hits": self.cache_hits,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "tokens": tokens,
            "calls_without_usage": self.without_usage,
            "tokens_per_session": rnd(tokens / sessions) if sessions else None,
            "calls_per_session": rnd(self.calls / sessions) if sessions else None,
            "latency_s_total": rnd(sum(served)),
            "latency_s_mean": rnd(sum(served) / len(served)) if served else None,
            "latency_s_p50": rnd(_quantile(served, 0.5)),
            "latency_s_p95": rnd(_quantile(served, 0.95)),
        }


def usage_table(records: Iterable[Mapping]) -> dict:
    """Usage of one variant's records (every status: a failed session spent its calls too)."""
    tally = UsageTally()
    for r in records:
        tally.add(r)
    return tally.table()


COLUMNS = (("calls", "calls"), ("failed_calls", "failed"), ("cache_hits", "cached"),
           ("prompt_tokens", "prompt tok"), ("completion_tokens", "compl. tok"), ("calls_without_usage", "no usage"),
           ("latency_s_mean", "mean s"), ("latency_s_p95", "p95 s"))


# every field, for the report (the printed table keeps COLUMNS: 80 columns wide)
REPORT_COLUMNS = (("sessions", "sessions"), ("calls", "calls"), ("failed_calls", "failed"),
                  ("cache_hits", "cached"), ("prompt_tokens", "prompt tokens"),
                  ("completion_tokens", "completion tokens"), ("tokens", "tokens"),
                  ("calls_without_usage", "without usage"),
                  ("tokens_per_session", "tokens / session"), ("calls_per_session", "calls / session"),
                  ("latency_s_mean", "mean s"), ("latency_s_p50", "median s"), ("latency_s_p95", "p95 s"),
                  ("latency_s_total", "total s"))


def printed_columns(usage: dict[str, dict]) -> tuple:
    """COLUMNS, without "no usage" when every answer reported its tokens (the table fits 80 columns),
    and with "tokens" when some server reported a total only (prompt and completion miss it)."""
    rows = [u or {} for u in usage.values()]
    columns = COLUMNS
    if not any(u.get("calls_without_usage") for u in rows):
        columns = tuple(c for c in columns if c[0] != "calls_without_usage")
    if any(u.get("tokens", 0) != u.get("prompt_tokens", 0) + u.get("completion_tokens", 0) for u in rows):
        i = [k for k, _ in columns].index("completion_tokens") + 1
        columns = columns[:i] + (("tokens", "tokens"),) + columns[i:]
    return columns


def usage_rows(usage: dict[str, dict], columns: tuple = COLUMNS) -> list[list[str]]:
    """Rows for a printed table (variants with at least one model call)."""
    rows = []
    for name, u in usage.items():
        if not u["calls"]:
            continue
        rows.append([name] + ["—" if u[k] is None else (f"{u[k]:.3f}" if isinstance(u[k], float) else str(u[k]))
                              for k, _ in columns])
    return rows
