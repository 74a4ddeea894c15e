"""What the terminal prints of a run, fitted to its width (80 columns and up): the summary table
with the variants as rows and at most ``MAX_METRICS`` headline metrics as columns (mean on one
line, its 95% CI under it; every other metric is in metrics.csv), and one-line listings.

Numbers are printed at 3 significant digits (:func:`sig3`), as in report.html.
"""
from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence

MAX_METRICS = 4
GAP = 2
DIRECTION_MARK = {"higher": "↑ better", "lower": "↓ better"}


def sig3(x) -> str:
    """A number to 3 significant digits (0.4852415 -> 0.485, 1234.5 -> 1230, 12 -> 12); None -> "—"."""
    if x is None:
        return "—"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    rounded = float(f"{x:.3g}")
    if 1e-4 <= abs(rounded) < 1e7:
        digits = max(0, 2 - int(math.floor(math.log10(abs(rounded)))))
        text = f"{rounded:.{digits}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return f"{rounded:.2e}"


def _ci(d: Mapping) -> str:
    if d.get("ci_low") is None or d.get("ci_high") is None:
        return ""
    return f"[{sig3(d['ci_low'])}, {sig3(d['ci_high'])}]"


def _chunks(text: str, width: int) -> list[str]:
    """A name cut into pieces of ``width`` (at ``_`` or ``@`` when one is near the end)."""
    out = []
    while len(text) > width:
        cut = max(text.rfind("_", 0, width), text.rfind("@", 0, width))
        cut = cut + 1 if cut >= width // 2 else width
        out.append(text[:cut])
        text = text[cut:]
    return out + [text]


def _direction(module, metric: str) -> str | None:
    declared = getattr(module, "METRIC_DIRECTIONS", None) if module is not None else None
    if not isinstance(declared, Mapping):
        return None
    if metric in declared:
        return declared[metric]
    from convsim.results.metric_ranges import _pattern
    for name, value in declared.items():
        if isinstance(name, str) and "*" in name and _pattern(name).match(metric):
            return value
    return None


def summary_lines(summary: Mapping, headline: Sequence[str], *, width: int = 80, module=None,
                  title: str = "", max_metrics: int = MAX_METRICS) -> tuple[list[str], list[str]]:
    """(lines, shown metrics): the summary table of ``summary.json``'s variants with as many of the
    ``headline`` metrics (at most MAX_METRICS, in order) as fit ``width``; each row a variant, its
    scored sessions, then per metric the mean and, on the line under it, the 95% CI."""
    variants: Mapping = summary.get("variants") or {}
    width = max(40, width)
    name_w = min(max([len("variant")] + [len(str(v)) for v in variants]), 24)
    n_w = max(len("scored"), *(len(str(v.get("scored", v.get("n", "")))) for v in variants.values())) if variants else 6
    used = name_w + GAP + n_w
    shown: list[tuple[str, int]] = []
    for m in headline:
        if len(shown) == max_metrics:
            break
        cells = [sig3((v.get("metrics") or {}).get(m, {}).get("mean")) for v in variants.values()]
        cis = [_ci((v.get("metrics") or {}).get(m, {})) for v in variants.values()]
        w = max([len(c) for c in cells + cis] + [len(DIRECTION_MARK["higher"]), min(len(m), 12)])
        if used + GAP + w > width:
            continue
        shown.append((m, w))
        used += GAP + w
    heads = [(_chunks(m, w), w) for m, w in shown]
    depth = max([len(h) for h, _ in heads] + [1])
    lines = [textwrap.shorten(title, width, placeholder="…")] if title else []

    def row(first: str, second: str, cells: Sequence[str]) -> str:
        return (f"{first:<{name_w}}" + " " * GAP + f"{second:>{n_w}}"
                + "".join(" " * GAP + f"{c:>{w}}" for c, (_, w) in zip(cells, shown))).rstrip()
    for i in range(depth):
        pieces = [h[i] if i < len(h) else "" for h, _ in heads]
        last = i == depth - 1
        lines.append(row("variant" if last else "", "scored" if last else "", pieces))
    marks = [DIRECTION_MARK.get(_direction(module, m), "") for m, _ in shown]
    if any(marks):
        lines.append(row("", "", marks))
    lines.append("-" * min(width, used))
    for name, v in variants.items():
        metrics = v.get("metrics") or {}
        label = str(name)
        if len(label) > name_w:  # a long variant name takes a line of its own
            lines.append(label[:width])
            label = ""
        lines.append(row(label, str(v.get("scored", v.get("n", ""))),
                         [sig3(metrics.get(m, {}).get("mean")) for m, _ in shown]))
        cis = [_ci(metrics.get(m, {})) for m, _ in shown]
        if any(cis):
            lines.append(row("", "", cis))
    return lines, [m for m, _ in shown]


def status_lines(summary: Mapping, *, width: int = 80) -> list[str]:
    """One line per variant whose sessions did not all end ok (agent and simulator failures, errors)."""
    out = []
    for name, v in (summary.get("variants") or {}).items():
        c = v.get("status_counts") or {}
        parts = [f"{c[k]} {label}" for k, label in (("agent_failure", "agent failures (scored)"),
                                                   ("simulator_failure", "simulator failures (excluded)"),
                                                   ("errors", "errors (infra, code; not scored)")) if c.get(k)]
        if parts:
            out += textwrap.wrap(f"{name}: {c.get('ok', 0)} sessions ok, " + ", ".join(parts), width,
                                 subsequent_indent="  ", break_on_hyphens=False)
    return out


def one_line(cells: Sequence[str], widths: Sequence[int], width: int = 80) -> str:
    """Cells in columns of ``widths`` (the last takes what is left, cut with "…"): a listing row."""
    head = "".join(f"{c:<{w}}" + " " * GAP for c, w in zip(cells[:-1], widths))
    rest = max(8, width - len(head))
    last = cells[-1] if len(cells[-1]) <= rest else cells[-1][:rest - 1].rstrip() + "…"
    return (head + last).rstrip()


FORK_METRICS = 8


def fork_lines(comp: Mapping, *, headline: Sequence[str] = (), width: int = 80,
               max_metrics: int = FORK_METRICS) -> list[str]:
    """Where a fork departs from its original (the turn and step, or "only in its metrics" when no
    step of the trace differs) and the dialogue metrics that changed, headline metrics first, at most
    ``max_metrics`` (the rest counted; every one is in the fork's comparison file)."""
    fd = comp.get("first_divergent_step") or {}
    turn = comp.get("first_divergent_turn")
    if turn is not None:
        where = f"diverges at turn {turn}" + (f", step {fd['step']}" if fd.get("step") is not None else "")
    elif fd.get("step") is not None:  # the transcripts and turn metrics agree; a later step does not
        node = (fd.get("forked") or fd.get("original") or {}).get("node")
        where = f"the same transcript; diverges at step {fd['step']}" + (f" (node {node})" if node else "")
    else:
        where = "no step of the trace differs; only metrics changed"
    if fd.get("differing_keys"):
        where += f"; differing keys: {', '.join(map(str, fd['differing_keys']))}"
    lines = [textwrap.shorten(where, width, placeholder="…")]
    changed = [(name, v) for name, v in (comp.get("dialogue_metrics") or {}).items()
               if isinstance(v, Mapping) and v.get("original") != v.get("forked")]
    first = {m: i for i, m in enumerate(headline)}
    changed.sort(key=lambda nv: (first.get(nv[0], len(first)), nv[0]))
    for name, v in changed[:max_metrics]:
        lines.append("  " + textwrap.shorten(f"{name}: {sig3(v.get('original'))} -> {sig3(v.get('forked'))}",
                                             width - 2, placeholder="…"))
    if len(changed) > max_metrics:
        lines.append(f"  {len(changed) - max_metrics} more changed metrics in the comparison file")
    return lines
