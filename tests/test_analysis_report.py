"""analyze_run on a synthetic run: stats.json, figures, report.html (escaping, one row per variant)."""

import json

import pytest

from analysis_runs import XSS, make_run
from convsim.evaluation.reporting.analysis import analyze_run, run_statistics
from convsim.evaluation.reporting.records import load_run
from convsim.evaluation.reporting.report import build_report


@pytest.mark.slow
def test_analyze_run_writes_stats_figures_and_report(tmp_path):
    run_dir = make_run(tmp_path, sessions=8)
    analyze_run(run_dir)
    stats = json.loads((run_dir / "stats.json").read_text())
    assert stats["design"] == "paired"
    assert set(stats["metrics"]) >= {"tas_grounded", "tas_cas", "judge_proactiveness", "n_turns"}
    assert "judge_failed" not in stats["metrics"]
    tukey = stats["metrics"]["tas_cas"]["tukey"]["pairs"]
    assert len(tukey) == 3  # all pairs of 3 variants
    assert "friedman" in stats["metrics"]["tas_cas"]
    assert stats["judge_failures"]["none"] == {"judged": 8, "failed": 0, "heuristic": 8}
    assert {c["judge"] for c in stats["correlations"]} == {"judge_proactiveness", "judge_coherence",
                                                           "judge_personalization"}
    figs = set(stats["figures"])
    assert {"bar_tas_cas", "radar_judge", "correlation_heatmap", "distributions", "tas_vs_judge"} <= figs
    assert any(f.startswith("timeline_") for f in figs)
    for stem in figs:
        assert (run_dir / "figures" / f"{stem}.png").stat().st_size > 0
        assert (run_dir / "figures" / f"{stem}.svg").stat().st_size > 0
    html = (run_dir / "report.html").read_text()
    assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count('class="metric-row"') == len(stats["metrics"]) + 2  # every metric a row (judge_failed, judge_heuristic too)
    # the answer first: the headline table, then one figure per headline metric
    assert html.index('id="headline-table"') < html.index('class="headline-figure"') < html.index('id="fidelity"')
    assert html.count('class="headline-row"') == 6  # no SUMMARY_METRICS: the first metrics
    assert "0.4852415358549975" not in html
    assert "data:image/png;base64," in html and "<link" not in html  # self-contained


def test_small_n_paired_run_warns(tmp_path):
    run_dir = make_run(tmp_path, variants=("a", "b"), sessions=5)
    stats = run_statistics(load_run(run_dir).ok_records)
    assert any("cannot reach p<0.05" in w for w in stats["warnings"])


@pytest.mark.slow
def test_build_report_computes_missing_stats(tmp_path):
    run_dir = make_run(tmp_path, variants=("a", "b"), sessions=4)
    out = build_report(run_dir)
    assert out.exists() and (run_dir / "stats.json").exists()


def test_plots_skip_what_the_data_does_not_allow(tmp_path):
    from convsim.evaluation.reporting import plots
    assert plots.judge_radar({"a": {"judge_x": 3.0, "judge_y": 4.0}}, tmp_path) == []  # < 3 axes
    assert plots.bar_charts({"m": {"a": {"mean": None, "ci_low": None, "ci_high": None, "n": 0}}}, tmp_path) == []
    assert plots.correlation_heatmap([{"dialogue_metrics": {"m": 1.0}}] * 3, ["m"], tmp_path) == []
    assert plots.scatter_against([], [], ["judge_x"], tmp_path) == []
    assert plots.shift_turns([{"turn": 2, "speaker": "user", "text": "", "meta": {"shift_event": True}},
                              {"turn": 3, "speaker": "user", "text": "", "meta": {"user_meta": {"shift_event": True}}},
                              {"turn": 4, "speaker": "system", "text": "", "meta": {"shift_event": True}}]) == [2, 3]
    assert plots.safe_stem("a/b c:d") == "a_b_c_d"


def test_single_variant_report_has_no_between_variant_statistics(tmp_path):
    run_dir = make_run(tmp_path, variants=("only",), sessions=4)
    html = build_report(run_dir).read_text()
    assert "ANOVA" not in html and "Tukey" not in html and "Friedman" not in html
    assert "One variant: no between-variant test" in html


def test_report_counts_statuses_and_shows_flags(tmp_path):
    import json as _json
    run_dir = make_run(tmp_path, variants=("a", "b"), sessions=6)
    lines = [_json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    lines[0].update(status="simulator_failure", simulator_flags=[{"check": "_check_persona", "detail": "spoke as the agent"}])
    lines[1].update(status="agent_failure")
    (run_dir / "results.jsonl").write_text("".join(_json.dumps(x) + "\n" for x in lines))
    html = build_report(run_dir).read_text()
    assert "_check_persona" in html and "spoke as the agent" in html
    # variant a: 4 ok of 6; its headline n is 4 (the flagged and the failed session are not clean)
    assert "n=4" in html


def test_report_decomposes_variance_with_trials(tmp_path):
    import json as _json
    run_dir = make_run(tmp_path, variants=("a",), sessions=5)
    lines = [_json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    again = [dict(r, trial=1, seed=r["seed"] + 1,
                  dialogue_metrics={**r["dialogue_metrics"], "tas_cas": r["dialogue_metrics"]["tas_cas"] + 0.01})
             for r in lines]
    (run_dir / "results.jsonl").write_text("".join(_json.dumps(x) + "\n" for x in lines + again))
    html = build_report(run_dir).read_text()
    assert 'id="variance-table"' in html and "2 trials per session" in html
