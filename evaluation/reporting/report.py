"""report.html: one self-contained page per run (jinja2 with autoescape; figures embedded).

The page reads like a results section: the headline table (the graph's ``SUMMARY_METRICS`` per
variant over scored sessions (ok and agent failures; trials averaged per session), with 95% CIs,
n, the difference to the baseline variant, its test and its Holm-corrected p) beside one figure per
headline metric; then simulator fidelity (status counts,
simulator-check flags, the variance from re-simulating a user); then the sessions (at most 50 per
variant drawn in full, failures first: :func:`shown_sessions`); then, folded,
every metric, every statistic, the figures, the topology and the configuration.

Everything that comes from a run (transcripts are model output) is escaped by the template
engine; nothing is marked safe except the base64 figure data, which this module produces.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

import jinja2
import yaml

from convsim.results.metric_ranges import metric_ranges
from convsim.results.recordset import RecordSet, keys_of, statuses_of
from convsim.textio import load_json
from convsim.providers.usage import REPORT_COLUMNS, UsageTally
from convsim.evaluation.reporting import fidelity, plots
from convsim.evaluation.reporting.answer import headline_sentences
from convsim.evaluation.reporting.headline import (FALLBACK_HEADLINES, choose_baseline, fmt_p, group_warnings, headline_choice,
                                 headline_table, sig3)
from convsim.evaluation.reporting.records import RunData, load_run, metric_names, reference_variants
from convsim.evaluation.reporting.run_stats import _graph_module, write_statistics
from convsim.evaluation.reporting.trace_html import report_fragments

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _fmt(x, digits: int = 3) -> str:
    """Numbers to 3 significant digits (the report never prints 0.4852415358549975)."""
    return sig3(x)


DELTA_NOISE = 1e-12  # a difference this small is floating-point noise (0.1 + 0.2 - 0.3), shown as 0


def _fmt_delta(x) -> str:
    """A difference or its CI bound: as :func:`_fmt`, but |x| < ``DELTA_NOISE`` is 0, so two means
    shown as equal never show a Δ of −1.85e-17."""
    if isinstance(x, float) and abs(x) < DELTA_NOISE:
        return "0"
    return sig3(x)


def _user_meta(turn: Mapping) -> dict:
    meta = turn.get("meta") or {}
    inner = meta.get("user_meta")
    return inner if isinstance(inner, dict) else meta


def session_view(record: Mapping) -> dict:
    """What the drill-down shows for one session: rows of the transcript with focus, shift marker and
    the turn's metrics (on the turn's last row), dialogue metrics and judge records."""
    transcript = list(record.get("transcript") or [])
    tm_by_turn = {tm.get("turn"): {k: v for k, v in tm.items() if k != "turn"} for tm in record.get("turn_metrics") or []}
    last_row_of_turn = {t.get("turn"): i for i, t in enumerate(transcript)}
    rows = []
    for i, turn in enumerate(transcript):
        is_user = str(turn.get("speaker", "")).lower() == "user"
        meta = _user_meta(turn) if is_user else {}
        focus = f"{meta['focus_field']}={meta.get('focus_value')}" if meta.get("focus_field") else ""
        metrics = tm_by_turn.get(turn.get("turn"), {}) if last_row_of_turn.get(turn.get("turn")) == i else {}
        rows.append({"turn": turn.get("turn"), "speaker": turn.get("speaker"), "text": turn.get("text", ""),
                     "scripted": bool((turn.get("meta") or {}).get("scripted")),
                     "focus": focus, "shift": bool(meta.get("shift_event")), "stage": meta.get("stage", ""),
                     "metrics": {k: _fmt(v) for k, v in metrics.items()
                                 if isinstance(v, (int, float, str, bool)) or v is None}})
    judges = {k: v for k, v in record.items() if k.startswith("judge") and isinstance(v, (dict, list)) and v}
    return {"variant": record.get("variant"), "session_id": record.get("session_id"), "trial": record.get("trial", 0),
            "seed": record.get("seed"), "status": record.get("status", "ok"), "error": record.get("error"),
            "flags": list(record.get("simulator_flags") or []),
            "prefix_turns": (record.get("prefix") or {}).get("turns") if isinstance(record.get("prefix"), dict) else None,
            "rows": rows, "dialogue_metrics": shown_metrics(record.get("dialogue_metrics")),
            "judges": {k: json.dumps(v, indent=1, default=str) for k, v in judges.items()}}


NO_FINITE = "no finite value (n=0)"


def metric_rows(run: RunData, statistics: Mapping, metrics: list[str],
                notes: Mapping[str, str] | None = None) -> list[dict]:
    """Every metric as a row, one ``mean [95% CI] (n)`` cell per variant (from summary.json when
    the engine wrote it, else from stats.json): the full dump, transposed so it never scrolls
    sideways however many metrics a graph has. Metrics the sessions name with no finite value
    (all None, inf or NaN; summary.json's n=0) are rows too, their cells ``no finite value (n=0)``;
    "—" is a variant that does not have the metric. ``notes``: the graph's ``METRIC_NOTES``
    ({metric: text}, e.g. "simulator figure: the same for every agent", "gameable: ..."), shown
    under the metric's name (``note``). An interval clipped to the metric's declared range
    (``METRIC_RANGES``, ``ci_clipped``) says so in its cell."""
    notes = notes or {}
    variants_summary = (run.summary or {}).get("variants", {})
    names = dict.fromkeys(metrics)
    names.update(dict.fromkeys(run.table.empty))
    for d in variants_summary.values():
        names.update(dict.fromkeys((d or {}).get("metrics") or {}))
    rows = []
    for m in names:
        cells = {}
        for v in run.variants:
            d = variants_summary.get(v, {}).get("metrics", {}).get(m) or \
                statistics.get("metrics", {}).get(m, {}).get("variants", {}).get(v) or {}
            if d.get("mean") is not None:
                clipped = ", CI clipped to the metric's range" if d.get("ci_clipped") else ""
                cells[v] = (f"{sig3(d['mean'])} [{sig3(d.get('ci_low'))}, {sig3(d.get('ci_high'))}] "
                            f"(n={d.get('n', '?')}{clipped})")
            else:
                cells[v] = NO_FINITE if d.get("n") == 0 or (not d and m not in metrics) else "—"
        rows.append({"metric": m, "cells": cells, "note": notes.get(m)})
    return rows


def shown_metrics(metrics, prefix: str = "") -> dict[str, str]:
    """A record's metrics as the drill-down prints them, nested dicts flattened as ``a.b``: numbers
    to 3 significant digits, inf, -inf and nan as such (summary.json leaves them out as not finite),
    None as "—" (not applicable)."""
    out: dict[str, str] = {}
    for key, value in (metrics or {}).items() if isinstance(metrics, Mapping) else ():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(shown_metrics(value, name + "."))
        elif isinstance(value, bool):
            out[name] = sig3(float(value))
        elif isinstance(value, (int, float)) or value is None:
            out[name] = sig3(value)
    return out


HEADLINE_PX_PER_INCH = 78  # a headline figure's inch on the page (the 3.2-inch figure: 250 px)


def _figures(run_dir: Path, stems: list[str]) -> list[dict]:
    """The PNGs, base64, with the width to show each at: ``HEADLINE_PX_PER_INCH`` per inch of
    figure (the PNG's width over its dpi), so a figure drawn wider for more variants is shown wider
    rather than squeezed into the same box."""
    out = []
    for stem in stems:
        png = run_dir / "figures" / f"{stem}.png"
        if png.exists():
            data = png.read_bytes()
            px = int.from_bytes(data[16:20], "big") if data[12:16] == b"IHDR" else 0
            out.append({"name": stem, "data": base64.b64encode(data).decode("ascii"),
                        "width": round(px / plots.DPI * HEADLINE_PX_PER_INCH) if px else None})
    return out


BETWEEN_VARIANT_TESTS = ("ANOVA", "Tukey", "Friedman", "Wilcoxon")


def _headline_figures(headline: Mapping, out_dir: Path) -> list[dict]:
    stems = []
    for row in headline["rows"]:
        stems += plots.headline_figure(row["metric"], headline["values"][row["metric"]], row["cells"], out_dir)
    return _figures(out_dir.parent, stems)


def build_report(run_dir: str | Path, *, run: RunData | None = None) -> Path:
    """(Re)build ``report.html`` from the run's files; computes stats.json first if it is missing.
    ``run``: the run as the caller already loaded it (its records are not read again)."""
    run = run if run is not None else load_run(run_dir)
    stats_path = run.run_dir / "stats.json"
    if stats_path.exists():
        statistics = load_json(stats_path, what="stats.json")
    else:
        statistics = write_statistics(run)
    clean = run.table  # the scored sessions' metrics, one pass over the records
    metrics = metric_names(clean)
    module = _graph_module(run)
    references = reference_variants(run)
    baseline, baseline_warning = choose_baseline(run.config.get("baseline"),
                                                 [v for v in run.variants if v not in references])
    compared = [v for v in run.variants if v != baseline and v not in references]
    choice = headline_choice(list(getattr(module, "SUMMARY_METRICS", None) or []), clean)
    headline = headline_table(clean, run.variants, choice["metrics"], baseline, alpha=statistics.get("alpha", 0.05),
                              references=references, ranges=metric_ranges(module))
    notes = getattr(module, "METRIC_NOTES", None) or {}
    answer = headline_sentences(headline, run.variants, baseline if compared else None, references, module,
                                alpha=statistics.get("alpha", 0.05))
    said = {a["metric"]: a for a in answer}
    for row in headline["rows"]:
        row["note"] = notes.get(row["metric"])
        row["meaning"], row["legend"] = said[row["metric"]]["meaning"], said[row["metric"]]["legend"]
    several = len(run.variants) > 1
    warnings = [w for w in statistics.get("warnings", [])
                if several or not any(t in w for t in BETWEEN_VARIANT_TESTS)]
    trials = max((k[2] for k in keys_of(run.records)), default=0) + 1
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True)
    env.filters["fmt"] = _fmt
    env.filters["delta"] = _fmt_delta
    alpha = statistics.get("alpha", 0.05)
    env.filters["pval"] = lambda p: fmt_p(p, alpha)  # never "0.05" beside a star for p = 0.04996
    shown = shown_sessions(run.records, run.variants)
    viewer = report_fragments(run.run_dir, records=shown)
    sessions = []
    for r in shown:
        view = session_view(r)
        view["headline"] = {row["metric"]: view["dialogue_metrics"].get(row["metric"], "—")
                            for row in headline["rows"][:3]}
        view["trace"] = viewer["sessions"].get((str(r.get("variant")), str(r.get("session_id")),
                                                int(r.get("trial", 0))), "")
        sessions.append(view)
    headline_figures = _headline_figures(headline, run.run_dir / "figures")
    from convsim.evaluation.reporting.ranking_stability import run_ranking_stability
    ranking = run_ranking_stability(clean, [v for v in run.variants if v not in references],
                                    [r["metric"] for r in headline["rows"]],
                                    lower_is_better=tuple(getattr(module, "LOWER_IS_BETTER", ()) or ()))
    # the validity check of a run with gaming references (convsim.evaluation.gaming), when its hook ran first
    gaming_path = run.run_dir / "gaming_check.json"
    gaming = load_json(gaming_path, what="gaming_check.json") if gaming_path.exists() else None
    html = env.get_template("report.html.j2").render(
        ranking=ranking,
        run_id=run.run_dir.name, graph=run.config.get("graph"), trials=trials,
        experiment=run.config.get("name") if run.config.get("name") not in (None, "", "experiment") else None,
        config_yaml=yaml.safe_dump(run.config, sort_keys=False) if run.config else "(no config.yaml)",
        variants=run.variants, baseline=baseline, baseline_warning=baseline_warning, several=several,
        compared=compared, references=references,
        headline=headline, headline_figures=headline_figures, answer=answer,
        status=fidelity.status_counts(run.records, run.variants),
        flags=fidelity.simulator_flags(run.records),
        unchecked=fidelity.simulator_unchecked(run.records),
        decomposition=fidelity.variance_decomposition(clean, [r["metric"] for r in headline["rows"]]),
        human_fidelity=_text_if_exists(run.run_dir / "fidelity.md"),  # written by the fidelity hook
        metric_rows=metric_rows(run, statistics, metrics, notes), stats=statistics, warning_groups=group_warnings(warnings),
        dataset_rows=_dataset_rows(run), usage=_usage(run), usage_columns=REPORT_COLUMNS, figures=_figures(run.run_dir, statistics.get("figures", [])),
        sessions=sessions, sessions_total=len(run.records), sessions_per_variant=SESSIONS_PER_VARIANT,
        viewer_head=viewer["head"], topology=viewer["topology"], fork=viewer["fork"],
        progress=run_progress(run, module), choice=choice, no_finite=NO_FINITE, fallback_n=FALLBACK_HEADLINES,
        gaming=gaming)
    out = run.run_dir / "report.html"
    out.write_text(html, encoding="utf-8")
    return out


def _text_if_exists(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None


_FEWER = re.compile(r"^variant (.+): the graph yields (\d+) sessions, fewer than the \d+ asked")


def _planned_sessions(run: RunData, module, variant: Mapping) -> int | None:
    """Sessions one variant plans, when config.yaml says so without iterating the graph's
    ``sessions()``: ``sessions: N``, else an ``n_sessions`` param of a graph that has one."""
    cfg = run.config
    if isinstance(cfg.get("sessions"), int) and not isinstance(cfg.get("sessions"), bool):
        return cfg["sessions"]
    fields = getattr(getattr(module, "Params", None), "model_fields", {}) if module is not None else {}
    if "n_sessions" not in fields:
        return None
    params = {**(cfg.get("params") or {}), **((variant.get("params") or {}) if isinstance(variant, Mapping) else {})}
    n = params.get("n_sessions", fields["n_sessions"].default)
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def run_progress(run: RunData, module=None) -> dict:
    """What config.yaml planned beside what results.jsonl holds, so a run stopped half-way never
    reads as a complete smaller experiment: ``planned`` {variant: session attempts or None},
    ``landed`` {variant: records with a final status}, ``errored`` {variant: infra/code errors,
    re-run on resume}, ``missing`` (configured variants with no record), ``incomplete``, the
    planned total (None when the config cannot tell without iterating the graph's sessions())
    and the ``resume`` command."""
    cfg = run.config or {}
    if not cfg or cfg.get("fork"):  # no config, or a fork (its one session is the plan)
        return {"incomplete": False, "planned": {}, "missing": [], "total": None}
    configured = [v for v in cfg.get("variants") or [] if isinstance(v, Mapping) and v.get("name")] \
        or [{"name": "default"}]
    trials = cfg.get("trials") if isinstance(cfg.get("trials"), int) else 1
    fewer = {}
    for w in (run.summary or {}).get("run_warnings") or []:
        m = _FEWER.match(str(w))
        if m:
            fewer[m.group(1)] = int(m.group(2))
    statuses = statuses_of(run.records)
    landed: dict[str, int] = {}
    errored: dict[str, int] = {}
    for (variant, _, _), status in zip(keys_of(run.records), statuses):
        bucket = errored if status in fidelity.ERROR_STATUSES else landed
        bucket[variant] = bucket.get(variant, 0) + 1
    planned = {}
    for v in configured:
        n = fewer.get(v["name"], _planned_sessions(run, module, v))
        planned[v["name"]] = None if n is None else n * trials
    names = [v["name"] for v in configured]
    missing = [v for v in names if not landed.get(v) and not errored.get(v)]
    short = [v for v in names if planned[v] is not None and landed.get(v, 0) < planned[v]]
    known = all(n is not None for n in planned.values())
    total = sum(planned.values()) if known else None
    done = sum(landed.get(v, 0) for v in names)
    out_dir = run.run_dir.resolve().parent
    resume = (f"convsim run {shlex.quote(str(run.run_dir.resolve() / 'config.yaml'))} "
              f"--run-id {shlex.quote(run.run_dir.name)} --out {shlex.quote(str(out_dir))}")
    sessions = sorted({n // trials for n in planned.values() if n is not None})
    return {"incomplete": bool(missing or short or any(errored.values())), "planned": planned,
            "landed": landed, "errored": errored, "missing": missing, "short": short, "total": total,
            "done": done, "n_errored": sum(errored.values()), "n_variants": len(names), "trials": trials,
            "sessions": sessions[0] if len(sessions) == 1 else None, "resume": resume}


def _usage(run: RunData) -> dict[str, dict]:
    """Model usage per variant (convsim.providers.usage): from summary.json, else from the records; {} when
    no session called a model."""
    path = run.run_dir / "summary.json"
    usage = (load_json(path, what="summary.json").get("usage") if path.exists() else None) or {}
    if not usage:
        tallies = {v: UsageTally() for v in run.variants}
        for r in run.records:
            tallies.setdefault(str(r.get("variant")), UsageTally()).add(r)
        usage = {v: t.table() for v, t in tallies.items()}
    return usage if any((u or {}).get("calls") for u in usage.values()) else {}


SESSIONS_PER_VARIANT = 50  # sessions drawn in full per variant; a run of 10,000 would make a 500 MB page


def shown_sessions(records: Sequence[Mapping], variants: Sequence[str], *,
                   per_variant: int = SESSIONS_PER_VARIANT) -> Sequence[Mapping]:
    """The sessions the page draws in full, in variant order then (session id, trial): per variant,
    those that did not end ``ok`` first (failures are what a reader looks for), then the first ok
    ones, ``per_variant`` at most. Every session stays in results.jsonl and in every figure."""
    keys, statuses = keys_of(records), statuses_of(records)
    order = {v: i for i, v in enumerate(variants)}
    by_variant: dict[str, list[int]] = {}
    for i in sorted(range(len(keys)), key=lambda i: (statuses[i] == "ok", keys[i])):
        chosen = by_variant.setdefault(keys[i][0], [])
        if len(chosen) < per_variant:
            chosen.append(i)
    picked = sorted((i for chosen in by_variant.values() for i in chosen),
                    key=lambda i: (order.get(keys[i][0], len(order)), keys[i]))
    return records.take(picked) if isinstance(records, RecordSet) else [records[i] for i in picked]


def _dataset_rows(run: RunData) -> list[dict]:
    """The graph's dataset-level figures per variant (summary.json ``dataset``), formatted."""
    variants = (run.summary or {}).get("variants", {})
    def shown(x):  # a list of sentences (e.g. annotation_notes: "act labels absent on ...") as text
        return "; ".join(x) if isinstance(x, list) and x and all(isinstance(i, str) for i in x) else _fmt(x)
    return [{"variant": v, "values": {k: shown(x) for k, x in (d.get("dataset") or {}).items()
                                      if not isinstance(x, dict) and (not isinstance(x, list) or (
                                          x and all(isinstance(i, str) for i in x)))}}
            for v, d in variants.items() if d.get("dataset")]
