"""Validity: does any gaming reference beat its baseline on a headline metric?

A *gaming reference* is an agent written to win a metric without serving the user (the plan that
places everything, the self-reporting talker, the never-booking agent, the relabelled course
list). Each system's reference config runs it beside an honest baseline; this check reads the
run's ``summary.json`` and, for every gaming variant and every headline metric, compares the
gaming value with the baseline value in the metric's good direction. A gaming reference *beats*
the baseline when it is better by more than ``tolerance`` (default 1e-9: any real gain). The
check passes when no gaming reference beats its baseline on any headline metric.

``headline`` maps a metric to ``(source, higher_is_better)``: ``source`` is ``"metrics"`` (the
mean of the dialogue metric) or ``"dataset"`` (a dataset figure). A metric missing on either side
is reported as not comparable (``beats`` None), never as a pass or a fail.
"""
from __future__ import annotations

import json
from pathlib import Path


def _value(variant: dict, metric: str, source: str):
    if source == "dataset":
        v = (variant.get("dataset") or {}).get(metric)
    else:
        v = ((variant.get("metrics") or {}).get(metric) or {}).get("mean")
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def gaming_rows(summary: dict, gaming: dict[str, str], headline: dict[str, tuple[str, bool]],
                tolerance: float = 1e-9) -> list[dict]:
    """One row per (gaming variant present in the run, headline metric)."""
    variants = summary.get("variants") or {}
    rows = []
    for name, baseline in gaming.items():
        if name not in variants or baseline not in variants:
            continue
        for metric, (source, higher) in headline.items():
            g, b = _value(variants[name], metric, source), _value(variants[baseline], metric, source)
            beats = None if g is None or b is None else (g - b > tolerance if higher else b - g > tolerance)
            rows.append({"gaming": name, "baseline": baseline, "metric": metric, "source": source,
                         "better": "higher" if higher else "lower", "gaming_value": g, "baseline_value": b,
                         "beats": beats})
    return rows


def _fmt(x) -> str:
    return "—" if x is None else f"{x:.3f}"


def markdown(rows: list[dict]) -> str:
    lines = ["| gaming reference | baseline | metric | better | gaming | baseline | gaming beats baseline |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        verdict = {True: "**YES**", False: "no", None: "not comparable"}[r["beats"]]
        lines.append(f"| {r['gaming']} | {r['baseline']} | {r['metric']} | {r['better']} | {_fmt(r['gaming_value'])} "
                     f"| {_fmt(r['baseline_value'])} | {verdict} |")
    return "\n".join(lines) + "\n"


def verdict(rows: list[dict]) -> str:
    beaten = [f"{r['gaming']} on {r['metric']}" for r in rows if r["beats"]]
    if not rows:
        return "no gaming reference in this run"
    return ("FAIL: a gaming reference beats the baseline: " + "; ".join(beaten)) if beaten else \
        "ok: no gaming reference beats the baseline on a headline metric"


def write_gaming_check(run_dir: Path, gaming: dict[str, str], headline: dict[str, tuple[str, bool]]) -> list[dict]:
    """Writes ``gaming_check.md`` / ``gaming_check.json`` into the run directory and prints the
    table; returns the rows (none when the run has no gaming variant)."""
    run_dir = Path(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    rows = gaming_rows(summary, gaming, headline)
    if not rows:
        return rows
    text = f"Validity: gaming references vs the baseline ({verdict(rows)})\n\n" + markdown(rows)
    (run_dir / "gaming_check.md").write_text(text, encoding="utf-8")
    (run_dir / "gaming_check.json").write_text(json.dumps({"verdict": verdict(rows), "rows": rows}, indent=2),
                                               encoding="utf-8")
    print(text)
    return rows
