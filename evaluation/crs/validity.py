"""Validity of the CRS metrics against reference systems of known quality
(configs/crs_reference.yaml, docs/crs_shift.md "Reference systems").

A metric that claims to measure recommendation quality must order the references the way their
construction orders them. ``reference_checks`` states each claim and whether a run meets it:

* recall_at_10 and pc_final: oracle > random (the oracle ranks by the user's true taste);
* recall_at_10 of the oracle below 1.0 unless it names every session's target (it does not
  know the targets, only the taste they were drawn from);
* echo_turn_share: the echo reference flagged (>= 0.5 of its turns), no film-naming reference
  flagged (< 0.1);
* judge_heuristic_personalization (when reported): random < oracle; otherwise the heuristic
  judge must not be reported.

``reference_validity(run_dir)`` is the run's analysis hook: it prints the ordering of every
reference variant per metric and writes ``reference_validity.json``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from convsim.recordset import RecordSet
from convsim.summary import SCORED_STATUSES

ORDERED_METRICS = ("recall_at_10", "pc_final", "tas_grounded", "echo_turn_share",
                   "judge_heuristic_personalization")


def agent_of(record: Mapping) -> str:
    return str((record.get("params") or {}).get("crs_agent", "template"))


def agent_means(records: Sequence[Mapping], metrics: Sequence[str] = ORDERED_METRICS
                ) -> dict[str, dict[str, float | None]]:
    """``{agent: {metric: mean over scored sessions}}`` (None when no session has the metric)."""
    values: dict[str, dict[str, list[float]]] = {}
    for r in records:
        if r.get("status", "ok") not in SCORED_STATUSES:
            continue
        dm = r.get("dialogue_metrics") or {}
        row = values.setdefault(agent_of(r), {m: [] for m in metrics})
        for m in metrics:
            v = dm.get(m)
            if isinstance(v, (int, float)) and math.isfinite(v):
                row[m].append(float(v))
    return {a: {m: (sum(v) / len(v) if v else None) for m, v in row.items()}
            for a, row in values.items()}


def _gt(means, metric, hi, lo) -> bool | None:
    a, b = means.get(hi, {}).get(metric), means.get(lo, {}).get(metric)
    return None if a is None or b is None else a > b


def reference_checks(means: Mapping[str, Mapping[str, float | None]]) -> dict[str, bool | None]:
    """Each claimed ordering -> True / False (None when the run lacks the variants)."""
    checks = {"recall_at_10: oracle > random": _gt(means, "recall_at_10", "oracle", "random"),
              "pc_final: oracle > random": _gt(means, "pc_final", "oracle", "random")}
    oracle_recall = means.get("oracle", {}).get("recall_at_10")
    checks["recall_at_10: oracle < 1.0"] = None if oracle_recall is None else oracle_recall < 1.0
    echo = means.get("echo", {}).get("echo_turn_share")
    naming = [m.get("echo_turn_share") for a, m in means.items() if a != "echo"]
    checks["echo_turn_share: echo flagged"] = None if echo is None else echo >= 0.5
    checks["echo_turn_share: film-naming systems not flagged"] = (
        None if not naming or None in naming else all(v < 0.1 for v in naming))
    checks["judge_heuristic_personalization: oracle > random"] = _gt(
        means, "judge_heuristic_personalization", "oracle", "random")
    return checks


def ordering(means: Mapping[str, Mapping[str, float | None]], metric: str) -> list[tuple[str, float]]:
    rows = [(a, m[metric]) for a, m in means.items() if m.get(metric) is not None]
    return sorted(rows, key=lambda r: -r[1])


def reference_validity(run_dir: Path) -> dict:
    means = agent_means(RecordSet.scan(Path(run_dir) / "results.jsonl"))  # read one record at a time
    out = {"means": means, "checks": reference_checks(means),
           "ordering": {m: ordering(means, m) for m in ORDERED_METRICS}}
    (Path(run_dir) / "reference_validity.json").write_text(json.dumps(out, indent=2),
                                                          encoding="utf-8")
    for metric, rows in out["ordering"].items():
        if rows:
            print(f"{metric}: " + " > ".join(f"{a} {v:.3f}" for a, v in rows))
    for claim, ok in out["checks"].items():
        print(f"  [{'ok' if ok else 'n/a' if ok is None else 'FAILED'}] {claim}")
    return out
