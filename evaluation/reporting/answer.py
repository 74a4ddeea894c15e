"""The answer a run gives, in plain words: one sentence per headline metric, generated from the
statistics of the headline table (report.html leads with them; ``convsim compare`` prints the same
sentences for two runs).

A sentence names the better variant (from the graph's ``METRIC_DIRECTIONS``), the two means with
their 95% CIs, the difference with its CI, whether it is paired, and the Holm-adjusted p::

    recall_at_10: oracle better than template: 0.583 [0.45, 0.7] vs 0.08 [0.02, 0.27],
    +0.503 [0.38, 0.62] (paired, p < 0.001, Holm).

A difference is *reliable* when its CI excludes 0 and its Holm-adjusted p is below alpha; otherwise
the sentence says "no reliable difference" (a CI that covers 0) or "not significant after Holm
correction" (a CI that excludes 0 but a corrected p at or above alpha). With several variants
compared to the baseline, the sentence names the best one and counts the others. Reference variants
(``reference: true``, e.g. a gaming reference) are quoted, never tested.

The graph file declares, beside ``METRIC_RANGES``, what each metric means and which way is better::

    METRIC_DESCRIPTIONS = {"recall_at_10": "share of sessions whose last list has a target in its top 10"}
    METRIC_DIRECTIONS = {"recall_at_*": "higher", "echo_turn_share": "lower", "options_in_plan": None}

(a ``*`` matches any characters, the exact name first, then the first pattern that matches).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from convsim.results.metric_ranges import _pattern, metric_ranges, range_of
from convsim.evaluation.reporting.headline import fmt_p, sig3

_MISSING = object()
DIRECTION_TEXT = {"higher": "higher is better", "lower": "lower is better", None: "neither direction is better"}


def declaration(declared: Mapping | None, metric: str, default=None):
    """``declared[metric]``, else the value of the first ``*`` pattern that matches ``metric``."""
    declared = declared if isinstance(declared, Mapping) else {}
    if metric in declared:
        return declared[metric]
    for name, value in declared.items():
        if isinstance(name, str) and "*" in name and _pattern(name).match(metric):
            return value
    return default


def range_text(bounds) -> str:
    if not bounds:
        return "range not declared"
    low, high = bounds
    if low is not None and high is not None:
        return f"range [{sig3(low)}, {sig3(high)}]"
    return f"range ≥ {sig3(low)}" if low is not None else f"range ≤ {sig3(high)}"


def metric_info(module, metric: str) -> dict:
    """What a reader needs beside a metric's name: ``meaning`` (one line, or ""), ``direction``
    ("higher", "lower" or None), ``known_direction`` (declared at all), ``range`` and the ``legend``
    line ("higher is better, range [0, 1]")."""
    direction = declaration(getattr(module, "METRIC_DIRECTIONS", None), metric, _MISSING)
    known = direction is not _MISSING and direction in ("higher", "lower", None)
    direction = direction if known else None
    bounds = range_of(metric_ranges(module), metric) if module is not None else None
    legend = ", ".join(([DIRECTION_TEXT[direction]] if known else []) + [range_text(bounds)])
    return {"meaning": str(declaration(getattr(module, "METRIC_DESCRIPTIONS", None), metric, "") or ""),
            "direction": direction, "known_direction": known, "range": bounds, "legend": legend}


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def mean_ci(cell: Mapping | None, mean_key: str = "mean") -> str:
    """``0.583 [0.45, 0.7]``, the mean alone without a CI, "—" without a mean."""
    cell = cell or {}
    if not _finite(cell.get(mean_key)):
        return "—"
    if not _finite(cell.get("ci_low")) or not _finite(cell.get("ci_high")):
        return sig3(cell[mean_key])
    return f"{sig3(cell[mean_key])} [{sig3(cell['ci_low'])}, {sig3(cell['ci_high'])}]"


def _minus(x: float) -> str:
    return sig3(x).replace("-", "−")


def _signed(x: float) -> str:
    return ("+" if x > 0 else "") + sig3(x).replace("-", "−")


def p_text(p, alpha: float) -> str:
    if not _finite(p):
        return "no test"
    return "p < 0.001" if p < 0.001 else f"p = {fmt_p(p, alpha)}"


def verdict(diff: Mapping | None, direction: str | None, alpha: float) -> str:
    """"better", "worse", "higher", "lower" (no declared direction), "unreliable" (the CI covers 0),
    "not significant" (the CI excludes 0, the corrected p does not) or "untested" (no difference)."""
    if not diff or not _finite(diff.get("diff")):
        return "untested"
    lo, hi = diff.get("ci_low"), diff.get("ci_high")
    if not (_finite(lo) and _finite(hi)) or lo <= 0 <= hi or diff["diff"] == 0:
        return "unreliable"
    p = diff.get("p_holm")
    if not _finite(p) or p >= alpha:
        return "not significant"
    up = diff["diff"] > 0
    if direction == "higher":
        return "better" if up else "worse"
    if direction == "lower":
        return "worse" if up else "better"
    return "higher" if up else "lower"


def _diff_text(diff: Mapping, alpha: float) -> str:
    ci = f" [{_minus(diff['ci_low'])}, {_minus(diff['ci_high'])}]" if _finite(diff.get("ci_low")) else ""
    paired = "paired" if (diff.get("n_paired") or 0) >= 2 or diff.get("basis") == "paired" else "unpaired"
    test = f"{p_text(diff.get('p_holm'), alpha)}, Holm" if _finite(diff.get("p_holm")) else "no test"
    return f"{_signed(diff['diff'])}{ci} ({paired}, {test})"


def pair_sentence(metric: str, base: str, base_cell: Mapping | None, other: str, other_cell: Mapping | None,
                  diff: Mapping | None, direction: str | None, *, alpha: float = 0.05,
                  mean_key: str = "mean") -> str:
    """One comparison in words: ``other`` against ``base`` (the difference is other − base)."""
    v = verdict(diff, direction, alpha)
    means = f"{mean_ci(other_cell, mean_key)} vs {mean_ci(base_cell, mean_key)}"
    if mean_ci(other_cell, mean_key) == mean_ci(base_cell, mean_key) == "—":
        return f"{metric}: no value for {other} or {base}"
    if v == "unreliable" and diff.get("diff") == 0 and not _finite(diff.get("p_holm")) \
            and mean_ci(other_cell, mean_key) == mean_ci(base_cell, mean_key):
        return f"{metric}: the same for {other} and {base}: {mean_ci(base_cell, mean_key)} each"
    if v == "untested":
        return f"{metric}: {other} {mean_ci(other_cell, mean_key)}, {base} {mean_ci(base_cell, mean_key)} (no test)"
    few = ""
    if "cannot reach" in str(diff.get("warning") or "") and diff.get("n_paired"):
        few = f"; {diff['n_paired']} pairs cannot reach p < {alpha:g}: run more sessions"
    if v == "unreliable":
        return f"{metric}: no reliable difference between {other} and {base}: {means}, {_diff_text(diff, alpha)}{few}"
    if v == "not significant":
        return (f"{metric}: {other} vs {base} not significant after Holm correction: {means}, "
                f"{_diff_text(diff, alpha)}{few}")
    word = {"better": "better than", "worse": "worse than", "higher": "higher than", "lower": "lower than"}[v]
    return f"{metric}: {other} {word} {base}: {means}, {_diff_text(diff, alpha)}"


def _best(row: Mapping, compared: Sequence[str], direction: str | None, alpha: float) -> str:
    """The compared variant the sentence leads with: among the reliable differences to the baseline,
    the best by the declared direction (the largest without one); with none reliable, the largest
    difference (the one a reader would otherwise take for a finding)."""
    reliable = [v for v in compared if verdict(row["diffs"].get(v), direction, alpha) in RELIABLE]

    def key(v):
        x = (row["diffs"].get(v) or {}).get("diff")
        if not _finite(x):
            return -math.inf
        if not reliable:
            return abs(x)
        return x if direction == "higher" else -x if direction == "lower" else abs(x)
    return max(reliable or compared, key=key)


def headline_sentences(headline: Mapping, variants: Sequence[str], baseline: str | None,
                       references: Sequence[str], module=None, *, alpha: float = 0.05) -> list[dict]:
    """One ``{"metric", "text", "verdict", "meaning", "legend"}`` per row of
    :func:`convsim.evaluation.reporting.headline.headline_table`, in its order."""
    compared = [v for v in variants if v != baseline and v not in references]
    out = []
    for row in headline["rows"]:
        m, cells = row["metric"], row["cells"]
        info = metric_info(module, m)
        if compared and baseline:
            best = _best(row, compared, info["direction"], alpha)
            text = pair_sentence(m, baseline, cells.get(baseline), best, cells.get(best), row["diffs"].get(best),
                                 info["direction"], alpha=alpha)
            v = verdict(row["diffs"].get(best), info["direction"], alpha)
            if len(compared) > 1:
                tally: dict[str, int] = {}
                for other in compared:
                    w = verdict(row["diffs"].get(other), info["direction"], alpha)
                    w = "no reliable difference" if w in ("unreliable", "not significant") else w
                    tally[w] = tally.get(w, 0) + 1
                order = ("better", "higher", "worse", "lower", "no reliable difference", "untested")
                text += (f"; of the {len(compared)} variants against {baseline}: "
                         + ", ".join(f"{tally[w]} {w}" for w in order if tally.get(w)))
        else:
            shown = [v for v in variants if v not in references] or list(variants)
            text = f"{m}: " + ", ".join(f"{v} {mean_ci(cells.get(v))}" for v in shown)
            v = "untested"
        refs = [r for r in references if _finite((cells.get(r) or {}).get("mean"))]
        if refs:
            text += "; " + ", ".join(f"reference {r} {sig3(cells[r]['mean'])}" for r in refs) + " (not tested)"
        out.append({"metric": m, "text": text + ".", "verdict": v, "meaning": info["meaning"],
                    "legend": info["legend"]})
    return sorted(out, key=lambda a: a["verdict"] not in RELIABLE)  # reliable differences first


RELIABLE = ("better", "worse", "higher", "lower")


def difference_size(row: Mapping, bounds) -> float:
    """How large a difference is, comparable across metrics: |B − A| over the width of the metric's
    declared range, else over the larger |mean| (a relative change); −1 without a difference."""
    d = row.get("diff")
    if not _finite(d):
        return -1.0
    if bounds and bounds[0] is not None and bounds[1] is not None:
        return abs(d) / (bounds[1] - bounds[0])
    scale = max(abs(row.get("mean_a_shown") or row.get("mean_a") or 0), abs(row.get("mean_b_shown") or row.get("mean_b") or 0))
    return abs(d) / scale if scale > 0 else (math.inf if d else 0.0)
