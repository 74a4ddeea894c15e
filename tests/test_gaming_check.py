"""The validity check of a run with gaming references (evaluation/gaming.py): a gaming reference
that is better than its baseline on a headline metric, in the metric's good direction, fails the
check; ties, worse values and missing metrics do not; the report shows the table."""
import json

from convsim.config import config_from_dict
from convsim.evaluation.gaming import gaming_rows, verdict, write_gaming_check
from convsim.running.runner import run

HEADLINE = {"success": ("metrics", True), "violations": ("dataset", False), "absent": ("metrics", True)}


def _summary(gamer_success, gamer_violations):
    return {"variants": {
        "clean": {"metrics": {"success": {"mean": 0.9}}, "dataset": {"violations": 0.1}},
        "gamer": {"metrics": {"success": {"mean": gamer_success}}, "dataset": {"violations": gamer_violations}}}}


def test_a_gaming_reference_better_in_the_good_direction_fails_the_check():
    rows = gaming_rows(_summary(0.5, 0.1), {"gamer": "clean"}, HEADLINE)
    assert [(r["metric"], r["beats"]) for r in rows] == [("success", False), ("violations", False), ("absent", None)]
    assert verdict(rows).startswith("ok")
    rows = gaming_rows(_summary(0.95, 0.1), {"gamer": "clean"}, HEADLINE)
    assert rows[0]["beats"] is True and verdict(rows) == "FAIL: a gaming reference beats the baseline: gamer on success"
    rows = gaming_rows(_summary(0.5, 0.0), {"gamer": "clean"}, HEADLINE)   # fewer violations: better
    assert rows[1]["beats"] is True
    assert gaming_rows(_summary(0.5, 0.1), {"missing": "clean"}, HEADLINE) == []


def test_write_gaming_check_writes_the_table(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps(_summary(0.95, 0.1)))
    rows = write_gaming_check(tmp_path, {"gamer": "clean"}, HEADLINE)
    out = json.loads((tmp_path / "gaming_check.json").read_text())
    assert out["verdict"].startswith("FAIL") and out["rows"] == rows
    assert "| gamer | clean | success | higher | 0.950 | 0.900 | **YES** |" in (tmp_path / "gaming_check.md").read_text()


def test_the_report_shows_the_validity_section(tmp_path):
    cfg = config_from_dict({
        "graph": "customer_service", "sessions": 3, "out_dir": str(tmp_path), "run_id": "v", "seed": 7,
        "params": {"mode": "simulate", "n_sessions": 3, "max_turns": 12, "judge": False}, "trace": False,
        "variants": [{"name": "clean"}, {"name": "never_book", "params": {"fault": "never_book"}}],
        "analysis": ["convsim.evaluation.service.gaming_refs:write_service_gaming_check",
                     "convsim.evaluation.reporting.analysis:analyze_run"]})
    run_dir = run(cfg)
    html = (run_dir / "report.html").read_text()
    assert 'id="validity"' in html and "no gaming reference beats the baseline" in html
    assert json.loads((run_dir / "gaming_check.json").read_text())["rows"]
