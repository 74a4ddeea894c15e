"""``convsim compare`` as plain text that fits 80 columns: one block per matched variant, one row
per metric with A, B, B - A, its 95% CI, the Holm-adjusted p and the number of pairs.

A and B are means over the same sessions as B - A (``same_denominator_means``): the paired
sessions when the runs share at least two, else each run's own sessions (then n shows "a/b" and
the test is Mann-Whitney U). Sessions outside the pairs are counted under the block.
"""
from __future__ import annotations

from collections.abc import Mapping

from evaluation.headline import sig3

NUM_W, CI_W, P_W, N_W = 7, 16, 6, 5


def _ci(row: Mapping) -> str:
    if row.get("ci_low") is None:
        return "—"
    return f"[{sig3(row['ci_low'])}, {sig3(row['ci_high'])}]"


def _p(row: Mapping) -> str:
    p = row.get("p_holm")
    return "—" if p is None else sig3(p) + ("*" if row.get("significant") else "")


def _n(row: Mapping) -> str:
    return str(row["n_shown"]) if row.get("basis") == "paired" else f"{row.get('n_a')}/{row.get('n_b')}"


def headline_first(result: Mapping) -> list[str]:
    """The graph's ``SUMMARY_METRICS`` (read from run A's config), to list before the other rows."""
    from evaluation.records import load_run
    from evaluation.run_stats import _graph_module
    try:
        return list(getattr(_graph_module(load_run(result["run_a"])), "SUMMARY_METRICS", []) or [])
    except Exception:  # noqa: BLE001 - ordering is cosmetic: a run without a loadable graph keeps its order
        return []


def format_comparison(result: Mapping, *, width: int = 80) -> str:
    """The comparison as lines no wider than ``width`` (a metric name too long for its column gets
    a line of its own, the numbers on the next); the graph's headline metrics come first."""
    first = {m: i for i, m in enumerate(headline_first(result))}
    numbers = 3 * (NUM_W + 1) + (CI_W + 1) + (P_W + 1) + N_W  # A, B, B-A, CI, p, n and their spaces
    metric_w = max(12, width - numbers - 1)
    header = (f"{'metric':<{metric_w}} {'A':>{NUM_W}} {'B':>{NUM_W}} {'B−A':>{NUM_W}} "
              f"{'95% CI':>{CI_W}} {'p':>{P_W}} {'n':>{N_W}}")
    lines = [f"A: {result['run_a']}", f"B: {result['run_b']}"]
    blocks: dict[tuple, list] = {}
    for row in result["rows"]:
        blocks.setdefault((row["variant_a"], row["variant_b"]), []).append(row)
    for (va, vb), rows in blocks.items():
        lines += ["", f"variant {va}" if va == vb else f"variant A {va} vs B {vb}", header, "-" * len(header)]
        for r in sorted(rows, key=lambda r: first.get(r["metric"], len(first))):
            nums = (f"{sig3(r.get('mean_a_shown')):>{NUM_W}} {sig3(r.get('mean_b_shown')):>{NUM_W}} "
                    f"{sig3(r.get('diff')):>{NUM_W}} {_ci(r):>{CI_W}} {_p(r):>{P_W}} {_n(r):>{N_W}}")
            name = r["metric"]
            if len(name) > metric_w:
                lines += [name, f"{'':<{metric_w}} {nums}"]
            else:
                lines.append(f"{name:<{metric_w}} {nums}")
        tests = sorted({r["test"] for r in rows if r.get("test")})
        unpaired = [r for r in rows if r.get("unpaired_a") or r.get("unpaired_b")]
        lines.append(f"test: {', '.join(tests) or 'none'}; p Holm-adjusted over {len(result['rows'])} rows, "
                     f"* p < {result.get('alpha', 0.05)}")
        lines.append("n: sessions paired by id, trial and seed (a/b: none pair, all sessions used)")
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
