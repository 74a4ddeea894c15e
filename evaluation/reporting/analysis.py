"""The post-run hook: statistics (stats.json), figures (figures/*.png|svg) and report.html.

``analyze_run(run_dir)`` works for any graph's records (see :mod:`convsim.evaluation.reporting.run_stats` for what
goes into stats.json and the figures, :mod:`convsim.evaluation.reporting.report` for the page).
"""
from __future__ import annotations

from pathlib import Path

from convsim.evaluation.reporting.records import load_run
from convsim.running.progress import analysis_step
from convsim.evaluation.reporting.report import build_report
from convsim.evaluation.reporting.run_stats import make_figures, run_statistics, write_statistics

__all__ = ["analyze_run", "make_figures", "run_statistics"]


def analyze_run(run_dir: str | Path) -> None:
    """Post-run hook: write stats.json, figures/ and report.html into the run directory."""
    analysis_step("reading the records")
    run = load_run(run_dir)
    analysis_step("statistics")
    write_statistics(run)
    analysis_step("report.html")
    build_report(run_dir, run=run)  # the records already loaded; stats.json read back as written
