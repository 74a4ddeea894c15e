"""The report's figures with hostile names and many variants (findings of a browser audit):
a "$" in a name is text, not mathtext; figures grow with the number of variants."""

import json

import pytest

from analysis_runs import make_run
from evaluation import plots
from evaluation.analysis import analyze_run

MATH = "$\\frac{a$ b_c^d"
DOLLARS = "$5 vs $10"


def _rename(run_dir, metrics: dict, variants: dict):
    path = run_dir / "results.jsonl"
    out = []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        r["dialogue_metrics"] = {metrics.get(k, k): v for k, v in r["dialogue_metrics"].items()}
        r["variant"] = variants.get(r["variant"], r["variant"])
        out.append(json.dumps(r))
    path.write_text("\n".join(out) + "\n")
    cfg = run_dir / "config.yaml"
    text = cfg.read_text()
    for a, b in variants.items():
        text = text.replace(f"name: {a}\n", f"name: '{b}'\n")
    cfg.write_text(text)


def test_dollar_signs_in_names_are_text_not_mathtext(tmp_path):
    """matplotlib parsed "$\\frac{a$" as a formula and raised: the analysis hook failed and no
    report was written."""
    run_dir = make_run(tmp_path, variants=("a", "b"), sessions=4)
    _rename(run_dir, {"tas_grounded": MATH, "tas_cas": DOLLARS, "judge_coherence": "judge_$x$"},
            {"a": "v$1", "b": "$b_2$"})
    analyze_run(run_dir)
    html = (run_dir / "report.html").read_text()
    assert "$\\frac{a$ b_c^d" in html and "$5 vs $10" in html
    figures = {p.name for p in (run_dir / "figures").glob("*.png")}
    assert any(name.startswith("headline_") for name in figures) and "distributions.png" in figures


@pytest.mark.parametrize("name", [MATH, DOLLARS])
def test_every_figure_takes_a_dollar_name(tmp_path, name):
    d = {"n": 2, "mean": 1.0, "ci_low": 0.5, "ci_high": 1.5}
    assert plots.headline_figure(name, {name: [1.0, 2.0], "b": [2.0]}, {name: d, "b": d}, tmp_path)
    assert plots.bar_charts({name: {name: d, "b": d}}, tmp_path)
    assert plots.distributions({name: {name: [1.0, 2.0]}}, tmp_path)
    assert plots.judge_radar({name: {f"judge_{name}": 3, "judge_b": 4, "judge_c": 2}}, tmp_path)
    recs = [{"variant": name, "session_id": f"s{i}", "seed": i, "status": "ok",
             "dialogue_metrics": {name: float(i), "m": float(i % 3), "k": float(i * i % 5)},
             "turn_metrics": [{"turn": 1, f"tas_{name}": 0.5}, {"turn": 2, f"tas_{name}": 0.7}],
             "transcript": []} for i in range(6)]
    assert plots.correlation_heatmap(recs, [name, "m", "k"], tmp_path)
    assert plots.scatter_against(recs, [name], ["m"], tmp_path)
    assert plots.tas_timelines(recs, tmp_path)
