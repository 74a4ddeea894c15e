"""Figures of a run (matplotlib, Agg backend, PNG + SVG), generic over metrics and variants.

Each function writes ``<out_dir>/<stem>.png`` and ``.svg`` and returns the stems it wrote
(none when the data does not allow the figure, e.g. a radar with fewer than 3 judge metrics).
Metric, variant and session names are user text: every figure is drawn with mathtext off
(``text.parse_math``), so a "$" in a name is a dollar sign, never a formula that fails to parse.
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from convsim.results.recordset import keys_of  # noqa: E402
from convsim.evaluation.reporting.records import MetricTable, metric_table  # noqa: E402


def _plain_text(draw):
    """Draw with mathtext off: names are shown as written ("$5 vs $10", "$\\frac{a$")."""
    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        with plt.rc_context({"text.parse_math": False}):
            return draw(*args, **kwargs)
    return wrapper


def _save(fig, out_dir: Path, stem: str, **margins) -> str:
    out_dir.mkdir(parents=True, exist_ok=True)
    # Fixed margins rather than tight_layout: layout solving dominated analysis time.
    fig.subplots_adjust(**{"left": 0.14, "right": 0.97, "bottom": 0.2, "top": 0.88, "wspace": 0.45,
                           "hspace": 0.7, **margins})
    for ext in ("png", "svg"):
        fig.savefig(out_dir / f"{stem}.{ext}", dpi=DPI)
    plt.close(fig)
    return stem


DPI = 110
CHAR_IN = 0.0085  # inches one character takes per point of font size (DejaVu Sans, on average)


def wrap(text: str, inches: float, fontsize: float, *, max_lines: int = 3) -> str:
    """``text`` in lines that fit ``inches`` at ``fontsize`` (long words broken), at most
    ``max_lines`` (the last ends in "…" when cut): titles and tick labels never run off the figure."""
    width = max(4, int(inches / (CHAR_IN * fontsize)))
    lines = textwrap.wrap(str(text), width, break_long_words=True, break_on_hyphens=False) or [""]
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][:max(1, width - 1)] + "…"
    return "\n".join(lines)


def variant_ticks(ax, positions, names: Sequence[str], notes: Sequence[str], fig_width: float,
                  fontsize: float = 7) -> int:
    """Variant names under the x axis, each wrapped to its share of the width (with its note, e.g.
    n, on its own line); rotated 30° when a share is too narrow for 8 characters. Returns the
    lines of the tallest label (for the bottom margin)."""
    share = 0.8 * fig_width / max(1, len(names))
    rotate = share < 8 * CHAR_IN * fontsize
    labels = [wrap(v, 1.0 if rotate else share, fontsize, max_lines=2 if rotate else 3) + (f"\n{note}" if note else "")
              for v, note in zip(names, notes)]
    ax.set_xticks(positions, labels, fontsize=fontsize, rotation=30 if rotate else 0,
                  ha="right" if rotate else "center", rotation_mode="anchor" if rotate else "default")
    lines = max((label.count("\n") + 1 for label in labels), default=1)
    return lines + 3 if rotate else lines


def safe_stem(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "metric"


@_plain_text
def bar_charts(describe: Mapping[str, Mapping[str, Mapping]], out_dir: Path) -> list[str]:
    """One bar chart per metric: mean per variant with its 95% CI (stats.describe) as error bars.
    ``describe`` is ``{metric: {variant: {"mean", "ci_low", "ci_high", "n"}}}``."""
    stems = []
    for metric, per_variant in describe.items():
        variants = [v for v, d in per_variant.items() if d.get("mean") is not None]
        if not variants:
            continue
        means = np.array([per_variant[v]["mean"] for v in variants])
        lows = np.array([per_variant[v]["ci_low"] if per_variant[v]["ci_low"] is not None else per_variant[v]["mean"]
                         for v in variants])
        highs = np.array([per_variant[v]["ci_high"] if per_variant[v]["ci_high"] is not None else per_variant[v]["mean"]
                          for v in variants])
        width = min(12.0, max(4, 1.1 * len(variants) + 2))
        fig, ax = plt.subplots(figsize=(width, 3.2))
        ax.bar(range(len(variants)), means, color="#4C78A8",
               yerr=[np.maximum(means - lows, 0), np.maximum(highs - means, 0)], capsize=4)
        lines = variant_ticks(ax, range(len(variants)), variants, [f"(n={per_variant[v]['n']})" for v in variants],
                              width, fontsize=8)
        title = wrap(f"{metric} (mean, 95% CI)", 0.9 * width, 10, max_lines=2)
        height = 3.2 + 0.14 * max(0, lines - 2) + 0.18 * title.count("\n")
        fig.set_size_inches(width, height)
        ax.set_title(title, fontsize=10)
        stems.append(_save(fig, out_dir, f"bar_{safe_stem(metric)}", bottom=(0.25 + 0.14 * lines) / height,
                           top=1 - (0.3 + 0.18 * title.count("\n")) / height))
    return stems


@_plain_text
def judge_radar(means: Mapping[str, Mapping[str, float]], out_dir: Path, *, lo: float = 1, hi: float = 5) -> list[str]:
    """Radar of the judge metrics, one polygon per variant; ``means`` is ``{variant: {metric: mean}}``."""
    metrics = sorted({m for d in means.values() for m, v in d.items() if v is not None})
    if len(metrics) < 3:
        return []
    angles = np.linspace(0, 2 * np.pi, len(metrics), endpoint=False).tolist()
    fig = plt.figure(figsize=(5, 5))
    ax = fig.add_subplot(polar=True)
    for variant, d in means.items():
        vals = [d.get(m) if d.get(m) is not None else np.nan for m in metrics]
        ax.plot(angles + angles[:1], vals + vals[:1], label=variant)
        ax.fill(angles + angles[:1], vals + vals[:1], alpha=0.1)
    ax.set_xticks(angles, [m.removeprefix("judge_") for m in metrics])
    ax.set_ylim(lo, hi)
    ax.legend(loc="lower right", fontsize=7, bbox_to_anchor=(1.25, -0.1))
    ax.set_title("Judge metrics (mean per variant)", fontsize=10)
    return [_save(fig, out_dir, "radar_judge")]


@_plain_text
def correlation_heatmap(records: Sequence[Mapping] | MetricTable, metrics: Sequence[str], out_dir: Path) -> list[str]:
    """Spearman correlations between metrics, pooled over all sessions (pairwise complete)."""
    import pandas as pd
    table = records if isinstance(records, MetricTable) else metric_table(records)
    df = pd.DataFrame({m: table.columns.get(m, np.full(len(table.keys), np.nan)) for m in metrics},
                      columns=list(metrics)).astype(float)
    df = df.loc[:, df.nunique(dropna=True) > 1]
    if df.shape[1] < 2:
        return []
    corr = df.corr(method="spearman", min_periods=3)
    size = max(5, 0.45 * len(corr) + 2)
    fig, ax = plt.subplots(figsize=(size, size * 0.85))
    im = ax.imshow(corr.to_numpy(), cmap="RdBu_r", vmin=-1, vmax=1)
    ax.set_xticks(range(len(corr)), corr.columns, rotation=90, fontsize=7)
    ax.set_yticks(range(len(corr)), corr.columns, fontsize=7)
    fig.colorbar(im, ax=ax, shrink=0.7, label="Spearman rho")
    ax.set_title("Metric correlations (Spearman, all sessions)", fontsize=10)
    return [_save(fig, out_dir, "correlation_heatmap", left=0.3, bottom=0.3, right=0.95)]


@_plain_text
def distributions(values: Mapping[str, Mapping[str, Sequence[float]]], out_dir: Path, *, per_row: int = 4) -> list[str]:
    """Box plots of every metric's per-session values per variant; ``{metric: {variant: [values]}}``."""
    metrics = [m for m, d in values.items() if any(len(v) for v in d.values())]
    if not metrics:
        return []
    n_variants = max(len(values[m]) for m in metrics)
    # a panel widens with the variants (their labels side by side), fewer panels to a row then
    panel = min(13.0, max(3.2, 0.65 * n_variants))
    per_row = max(1, min(per_row, int(13.0 // panel)))
    rows = -(-len(metrics) // per_row)
    fig, axes = plt.subplots(rows, per_row, figsize=(panel * per_row, 2.6 * rows), squeeze=False)
    lines = 1
    for ax, metric in zip(axes.ravel(), metrics):
        variants = list(values[metric])
        ax.boxplot([values[metric][v] or [np.nan] for v in variants], showmeans=True)
        lines = max(lines, variant_ticks(ax, range(1, len(variants) + 1), variants, [""] * len(variants), panel,
                                         fontsize=6))
        ax.set_title(wrap(metric, 0.9 * panel, 8, max_lines=2), fontsize=8)
    for ax in axes.ravel()[len(metrics):]:
        ax.axis("off")
    height = (2.6 + 0.1 * max(0, lines - 2)) * rows
    fig.set_size_inches(panel * per_row, height)
    return [_save(fig, out_dir, "distributions", hspace=0.7 + 0.12 * max(0, lines - 2),
                  bottom=(0.3 + 0.1 * lines) / height, top=1 - 0.45 / height)]


@_plain_text
def scatter_against(records: Sequence[Mapping] | MetricTable, x_metrics: Sequence[str], y_metrics: Sequence[str],
                    out_dir: Path, *, stem: str = "tas_vs_judge") -> list[str]:
    """Scatter of each x metric (e.g. tas_*) against each y metric (judge_*), colour = variant."""
    if not x_metrics or not y_metrics:
        return []
    table = records if isinstance(records, MetricTable) else metric_table(records)
    variants = sorted(set(table.variants))
    colours = dict(zip(variants, plt.cm.tab10.colors * 3))
    fig, axes = plt.subplots(len(x_metrics), len(y_metrics), squeeze=False,
                             figsize=(3 * len(y_metrics), 2.6 * len(x_metrics)))
    for i, xm in enumerate(x_metrics):
        for j, ym in enumerate(y_metrics):
            ax = axes[i][j]
            for v in variants:
                xs, ys = (table.values(xm, v) if xm in table.columns else []), \
                    (table.values(ym, v) if ym in table.columns else [])
                pts = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None]
                if pts:
                    ax.scatter(*zip(*pts), s=10, alpha=0.6, color=colours[v], label=v)
            ax.set_xlabel(xm, fontsize=7)
            ax.set_ylabel(ym, fontsize=7)
    axes[0][0].legend(fontsize=6)
    return [_save(fig, out_dir, stem)]


def _turn_meta(turn: Mapping) -> dict:
    meta = turn.get("meta") or {}
    inner = meta.get("user_meta")
    return inner if isinstance(inner, dict) else meta


def shift_turns(transcript: Sequence[Mapping]) -> list[int]:
    """Turn numbers of the user turns the simulator marked as a shift (``shift_event``)."""
    return sorted({int(t.get("turn", 0)) for t in transcript
                   if str(t.get("speaker", "")).lower() == "user" and _turn_meta(t).get("shift_event")})


@_plain_text
def tas_timelines(records: Sequence[Mapping], out_dir: Path, *, max_sessions: int = 6, prefix: str = "tas") -> list[str]:
    """Per session: every turn metric whose name starts with ``prefix`` against the turn, one line per
    variant, with the simulator's true shifts as dashed vertical lines."""
    first = sorted({k[1] for k in keys_of(records)})[:max_sessions]
    by_session: dict[str, list[Mapping]] = {}
    for r in records:  # only the sessions drawn are kept (the records may be 10,000s, read from disk)
        if str(r.get("session_id")) in first:
            by_session.setdefault(str(r.get("session_id")), []).append(r)
    stems = []
    for sid in sorted(by_session)[:max_sessions]:
        fig, ax = plt.subplots(figsize=(7, 2.8))
        plotted = False
        for r in by_session[sid]:
            for name in sorted({k for tm in r.get("turn_metrics") or [] for k in tm if k.startswith(prefix)}):
                pts = [(tm["turn"], tm[name]) for tm in r.get("turn_metrics") or []
                       if isinstance(tm.get(name), (int, float)) and not isinstance(tm.get(name), bool)]
                if pts:
                    ax.plot(*zip(*pts), marker=".", label=f"{r.get('variant')}: {name}")
                    plotted = True
        if not plotted:
            plt.close(fig)
            continue
        for t in shift_turns(by_session[sid][0].get("transcript") or []):
            ax.axvline(t, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xlabel("turn (dashed: true preference shifts)")
        ax.set_title(f"session {sid}", fontsize=9)
        ax.legend(fontsize=6, loc="upper right")
        stems.append(_save(fig, out_dir, f"timeline_{safe_stem(sid)}"))
    return stems


@_plain_text
def headline_figure(metric: str, values: Mapping[str, Sequence[float]], describe: Mapping[str, Mapping],
                    out_dir: Path) -> list[str]:
    """One headline metric: every clean session as a dot, the mean with its 95% CI as a bar over
    them, one column per variant (small, so several fit beside the headline table)."""
    variants = [v for v in values if len(values[v])]
    if not variants:
        return []
    # wider with more variants (about 0.7 inch each beyond three), so their labels never overlap
    width = min(9.6, max(3.2, 1.1 + 0.7 * len(variants)))
    fig, ax = plt.subplots(figsize=(width, 2.4))
    rng = np.random.default_rng(0)  # jitter only: fixed so the figure is reproducible
    for i, v in enumerate(variants):
        pts = np.asarray(values[v], dtype=float)
        ax.scatter(i + rng.uniform(-0.12, 0.12, len(pts)), pts, s=9, alpha=0.45, color="#4C78A8", linewidths=0)
        d = describe.get(v) or {}
        if d.get("mean") is not None:
            lo = d["ci_low"] if d.get("ci_low") is not None else d["mean"]
            hi = d["ci_high"] if d.get("ci_high") is not None else d["mean"]
            ax.errorbar([i + 0.28], [d["mean"]], yerr=[[d["mean"] - lo], [hi - d["mean"]]], fmt="o",
                        color="#E45756", capsize=4, markersize=5)
    lines = variant_ticks(ax, range(len(variants)), variants, [f"n={len(values[v])}" for v in variants], width)
    ax.set_xlim(-0.6, len(variants) - 0.4)
    ax.tick_params(axis="y", labelsize=7)
    title = wrap(f"{metric}: sessions, mean ± 95% CI", 0.92 * width, 8)
    height = 2.4 + 0.12 * max(0, lines - 2) + 0.14 * title.count("\n")
    fig.set_size_inches(width, height)
    ax.set_title(title, fontsize=8)
    return [_save(fig, out_dir, f"headline_{safe_stem(metric)}", left=0.55 / width, right=1 - 0.1 / width,
                  bottom=(0.2 + 0.12 * lines) / height, top=1 - (0.28 + 0.14 * title.count("\n")) / height)]
