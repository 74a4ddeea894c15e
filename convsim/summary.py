"""Dataset-level summary of a run: ``metrics.csv`` (a row per variant) and ``summary.json``."""
from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .aggregate import bootstrap_ci
from .store import RunStore, unit_key
from .usage import usage_by_variant


def flatten_metrics(d: Mapping | None, prefix: str = "") -> dict[str, float | None]:
    """Numeric leaves of a nested metrics dict as ``{"a.b": value}``.

    Booleans count as 0/1, ``None`` and non-finite numbers stay as ``None`` (not applicable),
    strings and lists are left out.
    """
    out: dict[str, float | None] = {}
    for key, value in (d or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten_metrics(value, name + "."))
        elif isinstance(value, bool):
            out[name] = float(value)
        elif isinstance(value, (int, float)):
            out[name] = float(value) if math.isfinite(float(value)) else None
        elif value is None:
            out.setdefault(name, None)
    return out


def variant_summary(records: list[dict], *, seed: int = 0) -> dict[str, dict]:
    """Mean, n and bootstrap 95% CI of every numeric dialogue metric over ok sessions."""
    ok = [r for r in records if r.get("status") == "ok"]
    flat = [flatten_metrics(r.get("dialogue_metrics") or {}) for r in ok]
    names: list[str] = []
    for f in flat:
        for k in f:
            if k not in names:
                names.append(k)
    return {name: bootstrap_ci([f.get(name) for f in flat], seed=seed) for name in names}


def _scalar_items(d: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in (d or {}).items():
        if isinstance(v, dict):
            out.update(_scalar_items(v, f"{prefix}{k}."))
        elif v is None or isinstance(v, (int, float, str, bool)):
            out[f"{prefix}{k}"] = v
    return out


def _in_run_order(run_dir: Path, by_variant: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """Variants in config order, sessions by key: the summary must not depend on which session
    finished first (executors land them in completion order)."""
    import yaml
    cfg_path = Path(run_dir) / "config.yaml"
    declared = []
    if cfg_path.exists():
        declared = [v.get("name") for v in (yaml.safe_load(cfg_path.read_text()) or {}).get("variants") or []]
    order = {name: i for i, name in enumerate(declared)}
    names = sorted(by_variant, key=lambda n: (order.get(n, len(order)), list(by_variant).index(n)))
    return {n: sorted(by_variant[n], key=unit_key) for n in names}


def summarise_run(run_dir: Path, module: Any, *, seed: int = 0) -> dict:
    """Write ``summary.json`` and ``metrics.csv`` from ``results.jsonl``; returns the summary."""
    store = RunStore(run_dir)
    records = store.records()
    by_variant: dict[str, list[dict]] = {}
    for r in records:
        by_variant.setdefault(r["variant"], []).append(r)
    by_variant = _in_run_order(run_dir, by_variant)
    summary: dict[str, Any] = {"variants": {}}
    rows = []
    for variant, recs in by_variant.items():
        ok = [r for r in recs if r.get("status") == "ok"]
        metrics = variant_summary(recs, seed=seed)
        dataset = module.dataset_metrics(ok) if ok else {}
        summary["variants"][variant] = {"n": len(ok), "errors": len(recs) - len(ok),
                                        "metrics": metrics, "dataset": dataset}
        row: dict[str, Any] = {"variant": variant, "n": len(ok), "errors": len(recs) - len(ok)}
        for name, ci in metrics.items():
            row[f"{name}_mean"] = ci["mean"]
            row[f"{name}_ci_low"] = ci["ci_low"]
            row[f"{name}_ci_high"] = ci["ci_high"]
            row[f"{name}_n"] = ci["n"]
        for name, value in _scalar_items(dataset, "dataset.").items():
            row[name] = value
        rows.append(row)
    summary["usage"] = usage_by_variant(by_variant)  # calls, tokens, latency (convsim.usage)
    store.write_json("summary.json", summary)
    columns: list[str] = []
    for row in rows:
        for k in row:
            if k not in columns:
                columns.append(k)
    with open(Path(run_dir) / "metrics.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow(row)
    return summary
