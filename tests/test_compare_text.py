"""convsim compare at 80 columns: metrics as rows, the same denominator in A, B and B - A, --json."""
import json
import subprocess
import sys

import pytest

from analysis_runs import make_run
from conftest import ROOT
from convsim.evaluation.reporting.compare import compare_runs
from convsim.evaluation.reporting.compare_text import format_comparison


def _drop_sessions(run_dir, keep: set[str]):
    lines = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines if r["session_id"] in keep))


def test_same_denominators_when_only_some_sessions_pair(tmp_path):
    a = make_run(tmp_path / "a", variants=("x",), sessions=12, seed=1)
    b = make_run(tmp_path / "b", variants=("x",), sessions=12, seed=2)
    _drop_sessions(b, {"s000", "s001", "s002"})
    res = compare_runs(a, b)
    row = next(r for r in res["rows"] if r["metric"] == "tas_cas")
    recs_a = {json.loads(x)["session_id"]: json.loads(x) for x in (a / "results.jsonl").read_text().splitlines()}
    paired_mean_a = sum(recs_a[s]["dialogue_metrics"]["tas_cas"] for s in ("s000", "s001", "s002")) / 3
    assert row["basis"] == "paired" and row["n_shown"] == 3
    assert row["mean_a_shown"] == pytest.approx(paired_mean_a)  # not the mean over A's 12 sessions
    assert row["mean_a"] != pytest.approx(paired_mean_a)
    assert row["diff"] == pytest.approx(row["mean_b_shown"] - row["mean_a_shown"])
    assert (row["unpaired_a"], row["unpaired_b"]) == (9, 0)
    text = format_comparison(res)
    assert "A 9, B 0 session(s)" in text


def test_fits_80_columns_with_metrics_as_rows(tmp_path):
    a = make_run(tmp_path / "a", variants=("x", "y"), sessions=6, seed=1)
    b = make_run(tmp_path / "b", variants=("x", "y"), sessions=6, seed=2)
    res = compare_runs(a, b)
    res["rows"][0]["metric"] = "a_metric_name_much_longer_than_its_column"
    text = format_comparison(res)
    assert max(len(line) for line in text.splitlines()) <= 80
    header = next(line for line in text.splitlines() if line.startswith("metric"))
    assert header.split()[:4] == ["metric", "A", "B", "B−A"]
    assert "a_metric_name_much_longer_than_its_column" in text.splitlines()
    assert text.count("variant x") == 1 and text.count("variant y") == 1


def test_wide_numbers_still_fit_80_columns(tmp_path):
    # before, the number columns had fixed widths: a significant p of 0.000123 (with its *) or a CI of
    # tiny values pushed the row past 80 columns, and a terminal wrapped it
    a = make_run(tmp_path / "a", variants=("x",), sessions=6, seed=1)
    b = make_run(tmp_path / "b", variants=("x",), sessions=6, seed=2)
    res = compare_runs(a, b)
    r = res["rows"][0]
    r.update(p_holm=0.000123, significant=True, ci_low=-0.000123, ci_high=-0.0000456,
             mean_a_shown=-0.000123, mean_b_shown=-0.000246, diff=-0.000123)
    text = format_comparison(res)
    assert max(len(line) for line in text.splitlines()) <= 80
    line = next(x for x in text.splitlines() if "0.000123*" in x)
    assert line.split()[-3:-1] == ["-4.56e-05]", "0.000123*"] and "[-0.000123," in line
    header = next(x for x in text.splitlines() if x.startswith("metric"))
    assert len(header) == len(line)  # the columns line up


@pytest.mark.slow
def test_cli_compare_plain_and_json(tmp_path):
    a = make_run(tmp_path / "a", variants=("x",), sessions=5, seed=1)
    b = make_run(tmp_path / "b", variants=("x",), sessions=5, seed=2)
    env = {"PYTHONPATH": str(ROOT), "COLUMNS": "200", "PATH": "/usr/bin:/bin"}
    plain = subprocess.run([sys.executable, "-m", "convsim", "compare", str(a), str(b)], capture_output=True,
                           text=True, env=env, cwd=ROOT, check=True).stdout
    assert all(len(line) <= 80 for line in plain.splitlines()) and "tas_cas" in plain
    out = subprocess.run([sys.executable, "-m", "convsim", "compare", str(a), str(b), "--json"],
                         capture_output=True, text=True, env=env, cwd=ROOT, check=True).stdout
    rows = json.loads(out)["rows"]
    assert {"mean_a_shown", "mean_b_shown", "unpaired_a", "unpaired_b", "basis"} <= set(rows[0])
