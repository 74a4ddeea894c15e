"""The seed experiment's scale: 6 variants x 1,000 sessions analysed end to end without error."""
import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from convsim.results.summary import summarise_run
from convsim.evaluation.reporting.analysis import analyze_run

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("analysis_scale", ROOT / "bench" / "analysis_scale.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_six_variants_by_1000_sessions_analyse_end_to_end(tmp_path):
    run_dir = _bench().write_results(tmp_path / "run", variants=6, sessions=1000)
    summarise_run(run_dir, SimpleNamespace(dataset_metrics=lambda ok: {"n": len(ok)}))
    analyze_run(run_dir)
    stats = json.loads((run_dir / "stats.json").read_text(encoding="utf-8"))
    assert stats["n_records"] == 6000 and stats["design"] == "paired"
    tas = stats["metrics"]["metric_00"]
    assert {v["n"] for v in tas["variants"].values()} == {1000}
    assert tas["friedman"]["p"] is not None and len(tas["wilcoxon"]["pairs"]) == 15
    # every pooled correlation has numbers (n = 6000 used to overflow the p-value floor)
    assert all(c["rho"] is not None and c["ci_low"] is not None for c in stats["correlations"])
    assert len(stats["correlations_by_variant"]) == 6 * len(stats["correlations"])
    assert (run_dir / "report.html").stat().st_size > 0
