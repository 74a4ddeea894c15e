"""``convsim compare`` as plain text that fits 80 columns: one block per matched variant, led by the
report's answer sentence of each headline metric (B against A), then one row per metric (headline
metrics first, each group ordered by the size of the difference) with A, B, B - A, its 95% CI, the Holm-adjusted p (over the rows that have a p) and the
number of pairs (marked ``!`` below SMALL_N sessions); a CI clipped to the range a difference of
the metric can take (``METRIC_RANGES``) is marked ``‡``.

A and B are means over the same sessions as B - A (``same_denominator_means``): the paired
sessions when the runs share at least two, else each run's own sessions (then n shows "a/b" and
the test is Mann-Whitney U). Sessions outside the pairs are counted under the block.
"""
from __future__ import annotations

from collections.abc import Mapping

from convsim.evaluation.reporting.answer import difference_size, metric_info, pair_sentence
from convsim.evaluation.reporting.headline import fmt_p, sig3
from convsim.evaluation.reporting.stats import SMALL_N
from convsim.results.metric_ranges import metric_ranges, range_of

_UNSET = object()

NUM_W, CI_W, P_W, N_W = 7, 16, 6, 5


def _ci(row: Mapping) -> str:
    if row.get("ci_low") is None:
        return "—"
    return f"[{sig3(row['ci_low'])}, {sig3(row['ci_high'])}]" + ("‡" if row.get("ci_clipped") else "")


def _p(row: Mapping, alpha: float = 0.05) -> str:
    """Holm p with enough digits that the star (p < alpha) never contradicts the printed number."""
    p = row.get("p_holm")
    return "—" if p is None else fmt_p(p, alpha) + ("*" if row.get("significant") else "")


def _small(row: Mapping) -> bool:
    """Fewer than SMALL_N sessions behind the interval (paired: the pairs; else the smaller run)."""
    n = row.get("n_shown") if row.get("basis") == "paired" else min(row.get("n_a") or 0, row.get("n_b") or 0)
    return n is not None and n < SMALL_N


def _n(row: Mapping) -> str:
    n = str(row["n_shown"]) if row.get("basis") == "paired" else f"{row.get('n_a')}/{row.get('n_b')}"
    return n + ("!" if _small(row) else "")


def graph_of(result: Mapping):
    """Run A's graph module (None when its config or graph does not load)."""
    from convsim.evaluation.reporting.records import load_run
    from convsim.evaluation.reporting.run_stats import _graph_module
    try:
        return _graph_module(load_run(result["run_a"]))
    except Exception:  # noqa: BLE001 - ordering and wording are cosmetic: a run without a loadable graph keeps its order
        return None


def headline_first(result: Mapping, module=_UNSET) -> list[str]:
    """The graph's ``SUMMARY_METRICS`` (read from run A's config), to list before the other rows."""
    module = graph_of(result) if module is _UNSET else module
    return list(getattr(module, "SUMMARY_METRICS", []) or [])


def ordered(rows: list, module, first: Mapping[str, int]) -> list:
    """Headline metrics first (``first``), each group by the size of its difference, largest first
    (:func:`convsim.evaluation.reporting.answer.difference_size`: |B − A| over the metric's range)."""
    ranges = metric_ranges(module) if module is not None else {}
    return sorted(rows, key=lambda rc: (rc[0]["metric"] not in first,
                                        -difference_size(rc[0], range_of(ranges, rc[0]["metric"]))))


def sentences(rows: list, module, first: Mapping[str, int], alpha: float) -> list[str]:
    """The report's answer sentence of each headline metric of a block (B against A)."""
    out = []
    for r, _ in rows:
        if r["metric"] not in first:
            continue
        direction = metric_info(module, r["metric"])["direction"] if module is not None else None
        out.append(pair_sentence(r["metric"], "A", {"mean": r.get("mean_a_shown")}, "B", {"mean": r.get("mean_b_shown")},
                                 r, direction, alpha=alpha) + ".")
    return out


def _cells(r: Mapping, alpha: float = 0.05) -> tuple[str, ...]:
    return (sig3(r.get("mean_a_shown")), sig3(r.get("mean_b_shown")), sig3(r.get("diff")), _ci(r), _p(r, alpha), _n(r))


def format_comparison(result: Mapping, *, width: int = 80) -> str:
    """The comparison as lines no wider than ``width`` (a metric name too long for its column gets
    a line of its own, the numbers on the next); the graph's headline metrics come first. The number
    columns widen for wide cells (a p of 0.000123*, a CI of tiny values), and the metric column gives
    up what they take."""
    module = graph_of(result)
    first = {m: i for i, m in enumerate(headline_first(result, module))}
    alpha = result.get("alpha", 0.05)
    cells = [_cells(r, alpha) for r in result["rows"]]
    tested = sum(r.get("p") is not None for r in result["rows"])  # the family Holm corrected over
    widths = [max([w] + [len(c[i]) for c in cells])
              for i, w in enumerate((NUM_W, NUM_W, NUM_W, CI_W, P_W, N_W))]
    numbers = sum(widths) + len(widths) - 1  # A, B, B-A, CI, p, n and the spaces between them
    metric_w = max(len("metric"), width - numbers - 1)  # a longer name takes a line of its own

    def row(name: str, values) -> str:
        return f"{name:<{metric_w}} " + " ".join(f"{v:>{w}}" for v, w in zip(values, widths))
    header = row("metric", ("A", "B", "B−A", "95% CI", "p", "n"))
    lines = [f"A: {result['run_a']}", f"B: {result['run_b']}"]
    blocks: dict[tuple, list] = {}
    for r, c in zip(result["rows"], cells):
        blocks.setdefault((r["variant_a"], r["variant_b"]), []).append((r, c))
    for (va, vb), rows in blocks.items():
        rows = ordered(rows, module, first)
        lines += ["", f"variant {va}" if va == vb else f"variant A {va} vs B {vb}"]
        lines += sentences(rows, module, first, alpha)
        lines += [header, "-" * len(header)]
        for r, c in rows:
            name = r["metric"]
            if len(name) > metric_w:
                lines += [name, row("", c)]
            else:
                lines.append(row(name, c))
        rows = [r for r, _ in rows]
        tests = sorted({r["test"] for r in rows if r.get("test")})
        unpaired = [r for r in rows if r.get("unpaired_a") or r.get("unpaired_b")]
        lines.append(f"test: {', '.join(tests) or 'none'}; p Holm-adjusted over the {tested} row(s) with a p "
                     f"(of {len(result['rows'])}, every variant), * p < {alpha}")
        lines.append("n: sessions paired by id and seeds, trials averaged (a/b: none pair, all sessions used)")
        if any(r.get("ci_clipped") for r in rows):
            lines.append("‡: the CI is clipped to the range a difference of the metric can take (METRIC_RANGES)")
        if any(_small(r) for r in rows):
            lines.append(f"!: n < {SMALL_N}: the CI (and any test) at such n is unreliable or out of reach")
        if unpaired:
            ua = max(r.get("unpaired_a") or 0 for r in unpaired)
            ub = max(r.get("unpaired_b") or 0 for r in unpaired)
            lines.append(f"unpaired, left out of A, B and B−A: A {ua}, B {ub} session(s)")
    return "\n".join(wrap(line, width) for line in lines)


def wrap(line: str, width: int) -> str:
    """Long free-text lines (paths, notes) wrapped at spaces; table rows already fit."""
    if len(line) <= width:
        return line
    import textwrap
    return "\n".join(textwrap.wrap(line, width, subsequent_indent="  ", break_on_hyphens=False)
                     or [line[:width]])
