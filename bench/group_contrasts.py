"""Variant means and the paired C-contrasts of a group-planning run, as docs/group_planning.md
states them: per-session differences B − A over the sessions both variants scored, with the
Student t 95% interval of the differences (convsim.evaluation.group.figures.paired_difference, the
helper behind the ``group_c4_minus_c3`` figure).

    python bench/group_contrasts.py runs/<run>/results.jsonl [--metrics W1,W2,W3,M6]

Prints a markdown table of variant means (n = scored sessions) and one line per contrast.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from convsim.evaluation.group.figures import _by_variant, paired_difference

CONTRASTS = (("C2", "C3"), ("C3", "C4"), ("C4", "C5"), ("C2", "C4"))


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:+.3f}".replace("-", "−")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="a run's results.jsonl")
    ap.add_argument("--metrics", default="W1,W2,W3,M6,M8a,options_in_plan",
                    help="comma-separated dialogue metrics (default: %(default)s)")
    ap.add_argument("--means", default="", help="metrics for the means table (default: --metrics)")
    args = ap.parse_args(argv)
    if not args.results.is_file():
        print(f"{args.results}: no such file", file=sys.stderr)
        return 2
    records = []
    for i, line in enumerate(args.results.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                print(f"{args.results}:{i}: not JSON ({e.msg})", file=sys.stderr)
                return 2
    metrics = [m for m in args.metrics.split(",") if m]
    mean_metrics = [m for m in (args.means or args.metrics).split(",") if m]
    per = {m: _by_variant(records, m) for m in mean_metrics}
    variants = list(dict.fromkeys(str(r.get("variant")) for r in records))
    print("| variant | n | " + " | ".join(mean_metrics) + " |")
    print("|---" * (len(mean_metrics) + 2) + "|")
    for v in variants:
        cells = []
        for m in mean_metrics:
            vals = per[m].get(v) or []
            cells.append(f"{sum(vals) / len(vals):.3f}" if vals else "—")
        n = max((len(per[m].get(v) or []) for m in mean_metrics), default=0)
        print(f"| {v} | {n} | " + " | ".join(cells) + " |")
    print()
    for a, b in CONTRASTS:
        if a not in variants or b not in variants:
            continue
        parts = []
        for m in metrics:
            d = paired_difference(records, m, a=a, b=b)
            if d.get("mean") is None:
                continue
            ci = "" if d.get("ci_low") is None else f" [{_fmt(d['ci_low'])}, {_fmt(d['ci_high'])}]"
            parts.append(f"{m} {_fmt(d['mean'])}{ci}")
        n = paired_difference(records, metrics[0], a=a, b=b).get("n")
        print(f"{b} − {a} (n = {n}): " + ", ".join(parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
