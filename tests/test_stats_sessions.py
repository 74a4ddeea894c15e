"""The session is the statistical unit: with ``--trials K`` a session's trials replay the same
customer (course gold metrics do not even depend on the trial), so they are averaged per session
before any test or interval. Counting each trial as a unit made 3 identical trials reject a true
null 27-29% of the time at nominal 5%, with 66% CI coverage (the auditor's simulation)."""
import csv
import json

import numpy as np
import pytest

from convsim.results.summary import variant_summary
from convsim.evaluation.reporting.compare import compare_metric
from convsim.evaluation.group.figures import paired_difference, welfare_summary
from convsim.evaluation.reporting.headline import headline_table
from convsim.evaluation.reporting.records import metric_table
from convsim.evaluation.retrieval.compare import compare_retrieval_runs
from convsim.evaluation.reporting.run_stats import run_statistics


def _records(a, b, trials, *, metric="m", status="ok"):
    """Variants A and B over the same sessions, every trial of a session with the same value."""
    return [{"variant": v, "session_id": f"s{j:02d}", "trial": t, "seed": 100 * j + t, "status": status,
             "dialogue_metrics": {metric: float(x)}}
            for v, xs in (("A", a), ("B", b)) for j, x in enumerate(xs) for t in range(trials)]


def test_identical_trials_do_not_inflate_type_one_error_or_shrink_the_ci():
    # the auditor's simulation in miniature: true difference 0, a session-level effect only
    rng = np.random.default_rng(11)
    reps, n = 150, 10
    reject = covered = 0
    for _ in range(reps):
        a = rng.normal(0, 1, n)
        b = a + rng.normal(0, 1, n)
        d = headline_table(metric_table(_records(a, b, 3)), ["A", "B"], ["m"], "A")["rows"][0]["diffs"]["B"]
        reject += d["p"] < 0.05
        covered += d["ci_low"] <= 0 <= d["ci_high"]
    # trials as units: 0.27-0.29 and 0.66; sessions as units: 0.07 and 0.94 here (paired t CI, n=10)
    assert reject / reps <= 0.10
    assert covered / reps >= 0.85


def test_three_identical_trials_give_the_numbers_of_one():
    rng = np.random.default_rng(3)
    a = rng.normal(0, 1, 8)
    b = a + rng.normal(0.3, 1, 8)
    one = headline_table(metric_table(_records(a, b, 1)), ["A", "B"], ["m"], "A")["rows"][0]
    three = headline_table(metric_table(_records(a, b, 3)), ["A", "B"], ["m"], "A")["rows"][0]
    d1, d3 = one["diffs"]["B"], three["diffs"]["B"]
    assert d3["n_paired"] == 8 and d3["n_a"] == 8 and d3["trials_a"] == 3 and d1["trials_a"] == 1
    for key in ("diff", "p", "p_t", "ci_low", "ci_high", "effect_size"):
        assert d3[key] == pytest.approx(d1[key], rel=1e-12), key
    cell = three["cells"]["A"]
    assert cell["n"] == 8 and cell["n_values"] == 24 and cell["trials_per_session"] == 3
    assert (cell["ci_low"], cell["ci_high"]) == pytest.approx((one["cells"]["A"]["ci_low"], one["cells"]["A"]["ci_high"]))


def test_run_statistics_and_summary_count_sessions_not_trials():
    rng = np.random.default_rng(5)
    a = rng.normal(0, 1, 7)
    b = a + rng.normal(0.5, 1, 7)
    one, three = run_statistics(_records(a, b, 1)), run_statistics(_records(a, b, 3))
    w1, w3 = one["metrics"]["m"]["wilcoxon"]["pairs"][0], three["metrics"]["m"]["wilcoxon"]["pairs"][0]
    assert w3["n_paired"] == 7 and w3["p"] == pytest.approx(w1["p"]) and w3["p_t"] == pytest.approx(w1["p_t"])
    assert three["metrics"]["m"]["anova"]["p"] == pytest.approx(one["metrics"]["m"]["anova"]["p"])
    desc = three["metrics"]["m"]["variants"]["A"]
    assert desc["n"] == 7 and desc["n_values"] == 21 and desc["trials_per_session"] == 3
    summary = variant_summary([r for r in _records(a, b, 3) if r["variant"] == "A"])["m"]
    assert summary["n"] == 7 and summary["n_values"] == 21 and summary["trials_per_session"] == 3
    assert summary["ci_low"] == pytest.approx(variant_summary(
        [r for r in _records(a, b, 1) if r["variant"] == "A"])["m"]["ci_low"])


def test_trials_are_averaged_not_dropped():
    recs = [{"variant": "A", "session_id": "s1", "trial": t, "seed": t, "status": "ok",
             "dialogue_metrics": {"m": x}} for t, x in enumerate((0.0, 1.0, 0.5))]
    recs += [{"variant": "A", "session_id": "s2", "trial": 0, "seed": 9, "status": "ok", "dialogue_metrics": {"m": 1.0}}]
    s = variant_summary(recs)["m"]
    assert s["mean"] == pytest.approx(0.75) and s["n"] == 2 and s["n_values"] == 4 and s["trials_per_session"] == 2


def test_metrics_csv_gives_the_trials_beside_the_sessions(tmp_path):
    from types import SimpleNamespace

    from convsim.results.summary import summarise_run
    # s1 ran 3 trials, s2 ran 2: m averages 5 values over 2 sessions; flag is 0/1 in every session
    recs = [{"variant": "A", "session_id": s, "trial": t, "seed": t, "status": "ok",
             "dialogue_metrics": {"m": float(t), "flag": s == "s1"}} for s, k in (("s1", 3), ("s2", 2)) for t in range(k)]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    summary = summarise_run(tmp_path, SimpleNamespace(dataset_metrics=lambda records: {}))
    (row,) = csv.DictReader((tmp_path / "metrics.csv").open(encoding="utf-8"))
    columns = list(row)
    at = columns.index("m_mean")
    assert columns[at:at + 5] == ["m_mean", "m_ci_low", "m_ci_high", "m_n", "m_trials_per_session"]
    assert (row["m_n"], row["m_trials_per_session"], row["flag_trials_per_session"]) == ("2", "2.5", "2.5")
    m = summary["variants"]["A"]["metrics"]["m"]
    assert (m["n"], m["n_values"], m["trials_per_session"], m["ci_method"]) == (2, 5, 2.5, "Student t")
    assert summary["variants"]["A"]["metrics"]["flag"]["ci_method"] == "Wilson score"
    assert float(row["m_ci_low"]) == pytest.approx(m["ci_low"])


def test_correlations_are_over_sessions():
    rng = np.random.default_rng(2)
    x = rng.normal(0, 1, 6)
    recs = [{"variant": "A", "session_id": f"s{j}", "trial": t, "seed": t, "status": "ok",
             "dialogue_metrics": {"auto": float(v), "judge_q": float(v + rng.normal(0, 0.1))}}
            for j, v in enumerate(x) for t in range(3)]
    corr = run_statistics(recs)["correlations"][0]
    assert corr["n"] == 6


def test_retrieval_compare_pairs_cases_not_trials():
    rng = np.random.default_rng(5)
    a_case = rng.uniform(0, 1, 10)
    b_case = a_case + rng.normal(0.05, 0.15, 10)

    def recs(vals, variant, trials):
        return [{"session_id": f"c{i}", "trial": t, "variant": variant, "status": "ok",
                 "dialogue_metrics": {"mrr": float(v)}} for i, v in enumerate(vals) for t in range(trials)]
    one = compare_retrieval_runs(recs(a_case, "bm25", 1), recs(b_case, "tfidf", 1))
    three = compare_retrieval_runs(recs(a_case, "bm25", 3), recs(b_case, "tfidf", 3))
    assert three["pairs"] == 10 and three["trialPairs"] == 30
    m1, m3 = one["metrics"]["mrr"], three["metrics"]["mrr"]
    assert m3["n"] == 10 and m3["trialsPerCase"] == 3 and m3["nValues"] == 30
    for key in ("wilcoxonP", "tP", "diffCiLow", "diffCiHigh"):
        assert m3[key] == pytest.approx(m1[key]), key


def test_group_figures_pair_sessions_over_scored_records():
    recs = [{"variant": v, "session_id": f"s{j}", "trial": t, "status": "agent_failure" if j == 0 else "ok",
             "dialogue_metrics": {"W1": 0.1 * j + (0.2 if v == "C4" else 0.0)}}
            for v in ("C3", "C4") for j in range(4) for t in range(3)]
    d = paired_difference(recs, "W1")
    assert d["n"] == 4 and d["mean"] == pytest.approx(0.2)
    assert welfare_summary(recs)["C3"]["W1"]["n"] == 4  # agent failures are scored, trials averaged


def test_a_run_with_three_trials_reports_sessions(tmp_path):
    import convsim
    run_dir = convsim.run({"name": "t", "graph": "hello_chat", "sessions": 4, "trials": 3, "out_dir": str(tmp_path),
                           "params": {"n_turns": 2},
                           "variants": [{"name": "a"}, {"name": "b", "params": {"n_turns": 3}}]}, run_id="t")
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = {row["variant"]: row for row in csv.DictReader((run_dir / "metrics.csv").open(encoding="utf-8"))}
    for v in ("a", "b"):
        for name, m in summary["variants"][v]["metrics"].items():
            assert (m["n"], m["n_values"], m["trials_per_session"]) == (4, 12, 3), (v, name)
            assert (rows[v][f"{name}_n"], rows[v][f"{name}_trials_per_session"]) == ("4", "3"), (v, name)
    stats = json.loads((run_dir / "stats.json").read_text())
    for name, res in stats["metrics"].items():
        assert {v: d["n"] for v, d in res["variants"].items()} == {"a": 4, "b": 4}, name
        for row in res.get("wilcoxon", {}).get("pairs", []):
            assert row["n_paired"] == 4
    html = (run_dir / "report.html").read_text()
    assert "n=4" in html and "n=12" not in html


def test_the_compact_session_means_are_the_same_bits_as_the_per_session_dicts():
    """The summary and the correlations average trials over arrays (memory flat in sessions,
    bench/analysis_scale.py); they must give what session_means and MetricTable.units give."""
    import random

    import numpy as np

    from convsim.results.aggregate import session_means, session_means_of_columns
    from convsim.evaluation.reporting.records import metric_table
    rng = random.Random(3)
    triples, records = [], []
    for s in range(60):
        for t in rng.sample(range(3), 3):
            v = rng.choice([None, rng.random(), rng.random() * 1e-3])
            triples.append((f"s{s:02d}", t, v))
            records.append({"variant": rng.choice("ab") if t == 0 else "a", "session_id": f"s{s:02d}", "trial": t,
                            "seed": s, "status": "ok", "dialogue_metrics": {"m": v, "k": 1.0}})
    rng.shuffle(triples)
    index = {}
    sessions = np.array([index.setdefault(s, len(index)) for s, _, _ in triples], dtype=np.int64)
    means, counts = session_means_of_columns(sessions, np.array([t for _, t, _ in triples], dtype=np.int64),
                                             np.array([np.nan if v is None else v for *_, v in triples]))
    expected = session_means(triples)
    by_index = sorted((index[s], m, k) for s, (m, k) in expected.items())
    assert [m for _, m, _ in by_index] == means.tolist() and [k for *_, k in by_index] == counts.tolist()
    table = metric_table(records)
    for variant in (None, "a"):
        keys, codes = table.session_keys(variant)
        column = table.session_column("m", codes, len(keys))
        units = table.units("m", variant)
        assert {k: x for k, x in zip(keys, column.tolist()) if not np.isnan(x)} == {k: u[0] for k, u in units.items()}
