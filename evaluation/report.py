"""report.html: one self-contained page per run (jinja2 with autoescape; figures embedded).

Everything that comes from a run (transcripts are model output) is escaped by the template
engine; nothing is marked safe except the base64 figure data, which this module produces.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from pathlib import Path

import jinja2
import yaml

from evaluation.records import RunData, flat_numeric, load_run, metric_names
from evaluation.run_stats import write_statistics
from evaluation.trace_html import report_fragments

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _fmt(x, digits: int = 3) -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, float):
        return f"{x:.{digits}g}" if abs(x) < 1e-3 and x != 0 else f"{x:.{digits}f}"
    return str(x)


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
                     "focus": focus, "shift": bool(meta.get("shift_event")), "stage": meta.get("stage", ""),
                     "metrics": {k: _fmt(v) for k, v in metrics.items()
                                 if isinstance(v, (int, float, str, bool)) or v is None}})
    judges = {k: v for k, v in record.items() if k.startswith("judge") and isinstance(v, (dict, list))}
    return {"variant": record.get("variant"), "session_id": record.get("session_id"), "trial": record.get("trial", 0),
            "seed": record.get("seed"), "status": record.get("status", "ok"), "error": record.get("error"),
            "rows": rows, "dialogue_metrics": {k: _fmt(v) for k, v in flat_numeric(record.get("dialogue_metrics")).items()},
            "judges": {k: json.dumps(v, indent=1, default=str) for k, v in judges.items()}}


def summary_rows(run: RunData, statistics: Mapping, metrics: list[str]) -> list[dict]:
    """One row per variant: n, errors and mean [95% CI] of every metric (from summary.json when the
    engine wrote it, else from stats.json)."""
    rows = []
    variants_summary = (run.summary or {}).get("variants", {})
    for v in run.variants:
        recs = [r for r in run.records if r.get("variant") == v]
        ok = [r for r in recs if r.get("status", "ok") == "ok"]
        cells = {}
        for m in metrics:
            d = variants_summary.get(v, {}).get("metrics", {}).get(m) or \
                statistics.get("metrics", {}).get(m, {}).get("variants", {}).get(v) or {}
            cells[m] = "—" if d.get("mean") is None else (
                f"{_fmt(d['mean'])} [{_fmt(d.get('ci_low'))}, {_fmt(d.get('ci_high'))}]")
        rows.append({"variant": v, "n": len(ok), "errors": len(recs) - len(ok), "cells": cells})
    return rows


def _figures(run_dir: Path, stems: list[str]) -> list[dict]:
    out = []
    for stem in stems:
        png = run_dir / "figures" / f"{stem}.png"
        if png.exists():
            out.append({"name": stem, "data": base64.b64encode(png.read_bytes()).decode("ascii")})
    return out


def build_report(run_dir: str | Path) -> Path:
    """(Re)build ``report.html`` from the run's files; computes stats.json first if it is missing."""
    run = load_run(run_dir)
    stats_path = run.run_dir / "stats.json"
    if stats_path.exists():
        statistics = json.loads(stats_path.read_text(encoding="utf-8"))
    else:
        statistics = write_statistics(run)
    metrics = metric_names(run.ok_records)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True)
    env.filters["fmt"] = _fmt
    viewer = report_fragments(run.run_dir)
    sessions = []
    for r in run.records:
        view = session_view(r)
        view["trace"] = viewer["sessions"].get((str(r.get("variant")), str(r.get("session_id")),
                                                int(r.get("trial", 0))), "")
        sessions.append(view)
    html = env.get_template("report.html.j2").render(
        run_id=run.run_dir.name, config_yaml=yaml.safe_dump(run.config, sort_keys=False) if run.config else "(no config.yaml)",
        metrics=metrics, summary=summary_rows(run, statistics, metrics), stats=statistics,
        dataset_rows=_dataset_rows(run), figures=_figures(run.run_dir, statistics.get("figures", [])),
        sessions=sessions, viewer_head=viewer["head"], topology=viewer["topology"], fork=viewer["fork"])
    out = run.run_dir / "report.html"
    out.write_text(html, encoding="utf-8")
    return out


def _dataset_rows(run: RunData) -> list[dict]:
    """The graph's dataset-level figures per variant (summary.json ``dataset``), formatted."""
    variants = (run.summary or {}).get("variants", {})
    return [{"variant": v, "values": {k: _fmt(x) for k, x in (d.get("dataset") or {}).items()
                                      if not isinstance(x, (dict, list))}}
            for v, d in variants.items() if d.get("dataset")]
