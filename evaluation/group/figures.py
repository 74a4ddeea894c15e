"""Figures of a group-planning run: welfare by condition, the paired C4 − C3 welfare difference
beside the options each condition chose, and a heatmap of M-metrics by condition.

Every number is over the scored sessions (status ok or agent_failure, as the headline table and
summary.json), one value per session (its trials averaged).

``group_figures(records, out_dir)`` writes ``group_welfare.png/.svg`` (W1–W3 means with 95% CIs
per variant, convsim.results.aggregate.mean_ci), ``group_c4_minus_c3.png/.svg`` (per-session paired
differences C4 − C3 of W1–W3 with paired t 95% CIs, and the mean options per actionable slot of
each condition) and
``group_metrics_heatmap.png/.svg`` (mean of each M-metric per variant; blank where a metric does
not apply) and returns the stems written. matplotlib Agg.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from convsim.results.aggregate import mean_ci, session_means  # noqa: E402
from convsim.results.summary import SCORED_STATUSES  # noqa: E402
from convsim.evaluation.reporting.records import slim_records  # noqa: E402

WELFARE = ("W1", "W2", "W3")
HEATMAP_METRICS = ("M1", "M2", "M2_false_alarm", "M3", "M4", "M4b", "M5", "M6", "M8", "M8a", "M8b",
                   "M8_placed", "M9", "M10", "M10b", "M11", "M12", "M13", "M14", "M15", "M16")


def _by_variant(records: Sequence[Mapping], metric: str) -> dict[str, list[float]]:
    """``{variant: [one value per session]}`` over the scored sessions (status ok or agent_failure,
    as every other figure and table), a session's trials averaged (the session is the unit)."""
    triples: dict[str, list] = {}
    for r in records:
        if r.get("status", "ok") not in SCORED_STATUSES:
            continue
        v = (r.get("dialogue_metrics") or {}).get(metric)
        bucket = triples.setdefault(str(r.get("variant", "default")), [])
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            bucket.append((r.get("session_id"), r.get("trial", 0), float(v)))
    return {variant: [m for m, _ in session_means(t).values()] for variant, t in triples.items()}


def _save(fig, out_dir: Path, stem: str) -> str:
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(out_dir / f"{stem}.{ext}", dpi=110)
    plt.close(fig)
    return stem


def welfare_summary(records: Sequence[Mapping]) -> dict[str, dict[str, dict]]:
    """``{variant: {W: {"mean", "n", "ci_low", "ci_high", "ci_method"}}}`` (95% CI,
    convsim.results.aggregate.mean_ci)."""
    out: dict[str, dict[str, dict]] = {}
    for w in WELFARE:
        for variant, vals in _by_variant(records, w).items():
            out.setdefault(variant, {})[w] = mean_ci(vals)
    return out


def paired_difference(records: Sequence[Mapping], metric: str, a: str = "C3", b: str = "C4") -> dict:
    """Mean of ``b − a`` over sessions both variants scored (status ok or agent_failure; same session
    id, each side's trials averaged: the session is the unit), with the t 95% CI of the differences:
    ``{"mean", "ci_low", "ci_high", "n", "ci_method"}`` (n: paired sessions)."""
    by: dict[str, list] = {a: [], b: []}
    for r in records:
        v = (r.get("dialogue_metrics") or {}).get(metric)
        if r.get("status", "ok") in SCORED_STATUSES and r.get("variant") in by and isinstance(v, (int, float)) \
                and not isinstance(v, bool):
            by[r["variant"]].append((str(r.get("session_id")), r.get("trial", 0), float(v)))
    means = {side: {s: m for s, (m, _) in session_means(triples).items()} for side, triples in by.items()}
    diffs = [means[b][k] - means[a][k] for k in sorted(set(means[a]) & set(means[b]))]
    return mean_ci(diffs, binary=False)  # a difference can be -1: never Wilson


def _contrast_figure(records: Sequence[Mapping], out_dir: Path) -> list[str]:
    diffs = {w: paired_difference(records, w) for w in WELFARE}
    if not all(d["n"] >= 2 for d in diffs.values()):
        return []
    options = {v: np.mean(vals) if (vals := _by_variant(records, "options_in_plan").get(v)) else np.nan
               for v in ("C3", "C4")}
    fig, ax = plt.subplots(figsize=(4.6, 3.4))
    m = np.array([diffs[w]["mean"] for w in WELFARE])
    lo = np.array([diffs[w]["ci_low"] for w in WELFARE])
    hi = np.array([diffs[w]["ci_high"] for w in WELFARE])
    ax.bar(range(len(WELFARE)), m, yerr=[m - lo, hi - m], capsize=3, color="#4c72b0")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(range(len(WELFARE)), WELFARE)
    ax.set_ylabel("C4 − C3, paired mean (95% t CI)")
    ax.set_title(f"n = {diffs['W1']['n']} paired sessions; options per slot: "
                 f"C3 {options['C3']:.2f}, C4 {options['C4']:.2f}", fontsize=8)
    stem = _save(fig, out_dir, "group_c4_minus_c3")
    (out_dir / f"{stem}.json").write_text(json.dumps(
        {"difference": "C4 - C3 per paired session", "welfare": diffs,
         "options_per_actionable_slot": {k: (None if np.isnan(v) else float(v)) for k, v in options.items()}},
        indent=1), encoding="utf-8")
    return [stem]


def group_figures(records: Sequence[Mapping], out_dir) -> list[str]:
    out_dir = Path(out_dir)
    records = slim_records(records)  # one pass; the figures below pass over the metrics many times
    summary = welfare_summary(records)
    if not summary:
        return []
    variants = sorted(summary)
    stems = _contrast_figure(records, out_dir)
    # left: W over the preferences stated in the dialogue; right: over every member's
    # private preferences (simulation only), which is what C1's spokesperson leaves out
    panels = [("stated preferences", "")]
    if any(_by_variant(records, "W1_all_members").get(v) for v in variants):
        panels.append(("every member's preferences", "_all_members"))
    fig, axes = plt.subplots(1, len(panels), figsize=(1.6 + 2.4 * len(variants), 3.6), squeeze=False)
    width = 0.8 / len(WELFARE)
    for ax, (title, suffix) in zip(axes[0], panels):
        for j, w in enumerate(WELFARE):
            stats = [mean_ci(_by_variant(records, w + suffix).get(v, [])) for v in variants]
            m = np.array([np.nan if s["mean"] is None else s["mean"] for s in stats], dtype=float)
            lo = np.array([np.nan if s["mean"] is None else s["ci_low"] for s in stats], dtype=float)
            hi = np.array([np.nan if s["mean"] is None else s["ci_high"] for s in stats], dtype=float)
            ax.bar(np.arange(len(variants)) + (j - 1) * width, m, width, label=w,
                   yerr=[m - lo, hi - m], capsize=2)
        ax.set_xticks(np.arange(len(variants)), variants)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"Welfare over {title}", fontsize=9)
    axes[0][0].set_ylabel("mean, 95% CI")
    axes[0][0].legend(fontsize=8)
    stems.append(_save(fig, out_dir, "group_welfare"))
    metrics = [m for m in HEATMAP_METRICS if any(_by_variant(records, m).get(v) for v in variants)]
    if metrics:
        mat = np.array([[np.mean(vals) if (vals := _by_variant(records, m).get(v)) else np.nan
                         for m in metrics] for v in variants], dtype=float)
        fig, ax = plt.subplots(figsize=(1.0 + 0.55 * len(metrics), 1.0 + 0.5 * len(variants)))
        im = ax.imshow(np.ma.masked_invalid(mat), vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(metrics)), metrics, rotation=60, fontsize=8)
        ax.set_yticks(range(len(variants)), variants)
        for i in range(len(variants)):
            for j in range(len(metrics)):
                if np.isfinite(mat[i, j]):
                    ax.text(j, i, f"{mat[i, j]:.2f}", ha="center", va="center", fontsize=6,
                            color="white" if mat[i, j] < 0.5 else "black")
        fig.colorbar(im, ax=ax, fraction=0.03)
        ax.set_title("M-metrics by condition (mean; blank = not applicable)")
        stems.append(_save(fig, out_dir, "group_metrics_heatmap"))
    return stems
