"""The report's numbers are the run's: status counts equal summary.json's for a run with errors,
an interrupted run says what was planned and what landed, metrics with no finite value are shown
as such (findings of a browser audit of report.html)."""

import json
import re
import shlex
import subprocess
import sys

from convsim.config import config_from_dict
from convsim.running.runner import run
from convsim.evaluation.reporting.report import build_report


def _status_table(html: str) -> dict[str, list[int]]:
    table = re.search(r'<table id="status-table">(.*?)</table>', html, re.S).group(1)
    rows = {}
    for tr in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]:
        cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        rows[cells[0]] = [int(c) if c.isdigit() else c for c in cells[1:6]]
    return rows


def test_errored_sessions_are_counted_once_as_in_summary_json(tmp_path, monkeypatch):
    """code_error sessions are in results.jsonl and errors.jsonl: the report counted both."""
    from convsim.contract.graphfile import load_graph_module
    module = load_graph_module("hello_chat")
    original = module.agent

    def agent(state, runtime):
        if runtime.context.params.n_turns == 2 or state["session_id"] == "s001":
            raise KeyError("a bug in graph code")
        return original(state, runtime)
    monkeypatch.setattr(module, "agent", agent)
    cfg = config_from_dict({"graph": "hello_chat", "sessions": 3, "out_dir": str(tmp_path), "run_id": "bug",
                            "trace": False, "analysis": [],
                            "variants": [{"name": "fine"}, {"name": "broken", "params": {"n_turns": 2}}]})
    run_dir = run(cfg, analyze=False)
    assert len((run_dir / "errors.jsonl").read_text().splitlines()) == 4  # s001 of fine, all 3 of broken
    summary = json.loads((run_dir / "summary.json").read_text())
    html = build_report(run_dir).read_text()
    table = _status_table(html)
    for v, d in summary["variants"].items():
        c = d["status_counts"]
        assert table[v] == [c["sessions"], c["ok"], c["agent_failure"], c["simulator_failure"], d["errors"]], v
    assert table["fine"][-1] == 1 and table["broken"] == [3, 0, 0, 0, 3]
    assert "3 error(s)" in html and "6 error(s)" not in html  # the lede of the variant with no clean session


def test_an_interrupted_run_says_what_was_planned_and_how_to_resume(tmp_path):
    """A run stopped half-way read as a complete smaller experiment: the variants with no record
    vanished and nothing compared config.yaml with the records."""
    cfg = config_from_dict({"graph": "hello_chat", "sessions": 4, "out_dir": str(tmp_path), "run_id": "cut",
                            "trace": False, "analysis": [],
                            "variants": [{"name": "a"}, {"name": "b", "params": {"n_turns": 2}},
                                         {"name": "c", "params": {"n_turns": 1}}]})
    run_dir = run(cfg, analyze=False)
    html = build_report(run_dir).read_text()
    assert 'id="incomplete"' not in html and "Incomplete run" not in html  # the whole plan landed
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    kept = [ln for ln in lines if json.loads(ln)["variant"] == "a"
            or (json.loads(ln)["variant"] == "b" and json.loads(ln)["session_id"] in ("s000", "s001"))]
    (run_dir / "results.jsonl").write_text("\n".join(kept) + "\n")  # as if killed: c never ran, b half
    for stale in ("summary.json", "stats.json", "metrics.csv"):
        (run_dir / stale).unlink(missing_ok=True)
    html = build_report(run_dir).read_text()
    note = re.search(r'<span class="warn" id="incomplete">(.*?)</span>', html, re.S).group(1)
    text = re.sub(r"<[^>]+>", "", note)
    assert "3 variant(s) × 4 session(s) × 1 trial(s) = 12 session attempts; 6 finished" in text
    assert "no record at all for 1 variant(s): c" in text
    table = _status_table(html)
    assert table["b"][0] == 2 and "not run yet" in html
    resume = re.search(r"<code>(convsim run .*?)</code>", note).group(1)
    import html as html_lib
    argv = shlex.split(html_lib.unescape(resume))
    assert argv[:2] == ["convsim", "run"]
    subprocess.run([sys.executable, "-m", "convsim", *argv[1:], "--no-analysis", "--quiet"], check=True,
                   cwd=str(tmp_path), env={**__import__("os").environ})
    assert len((run_dir / "results.jsonl").read_text().splitlines()) == 12  # the command resumed this run
    html = build_report(run_dir).read_text()
    assert "Incomplete run" not in html


def test_metrics_with_no_finite_value_are_shown_as_such(tmp_path, monkeypatch):
    """A declared headline metric with no finite value vanished without a note and was missing
    from All metrics; with none of the declared metrics present the first 8 metrics were the
    headline silently; an inf in a session showed as "—" like not-applicable."""
    import types

    from analysis_runs import make_run
    from convsim.evaluation.reporting import report as report_mod

    run_dir = make_run(tmp_path, variants=("a", "b"), sessions=3)
    lines = []
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        r["dialogue_metrics"].update({"nanm": None, "infm": float("inf")})
        lines.append(json.dumps(r))
    (run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")
    graph = types.SimpleNamespace(SUMMARY_METRICS=["tas_grounded", "nanm", "infm"])
    monkeypatch.setattr(report_mod, "_graph_module", lambda run: graph)
    html = build_report(run_dir).read_text()
    rows = re.findall(r'<tr class="headline-row[^"]*"><th class="metric-name">([^<]*)', html, re.S)
    assert rows == ["tas_grounded"]  # the declared metrics with no finite value: counted in one line, not rows
    empty = re.search(r'<p class="note" id="headline-empty">(.*?)</p>', html, re.S).group(1)
    assert empty.startswith("2 more headline metric(s) have no value in this run (n = 0") and "nanm, infm" in empty
    assert 'id="headline-fallback"' not in html
    dump = re.search(r'<table id="summary-table">(.*?)</table>', html, re.S).group(1)
    for m in ("nanm", "infm"):
        row = re.search(rf'<tr class="metric-row"><th>{m}</th>(.*?)</tr>', dump, re.S).group(1)
        assert row.count("no finite value (n=0)") == 2
    assert "infm=inf;" in html and "nanm=—;" in html  # the drill-down: inf is not "not applicable"
    graph.SUMMARY_METRICS = ["nanm"]
    html = build_report(run_dir).read_text()
    note = re.search(r'<p class="note warn" id="headline-fallback">(.*?)</p>', html, re.S).group(1)
    assert "None of the graph's SUMMARY_METRICS (nanm) has a finite value" in note
    assert "first 8 metrics" in note


def test_report_small_print(tmp_path):
    """Floating-point noise was shown as a Δ (−1.85e-17 beside means shown equal); an empty
    judgements list got a fold of its own in every session; the <h1> named the graph, not the
    experiment."""
    from analysis_runs import make_run

    run_dir = make_run(tmp_path, variants=("a", "b"), sessions=3)
    lines = []
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        r["dialogue_metrics"]["noisy"] = 0.3 if r["variant"] == "a" else 0.1 + 0.2
        r["judgements"] = []
        lines.append(json.dumps(r))
    (run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")
    cfg = run_dir / "config.yaml"
    cfg.write_text(cfg.read_text().replace("name: synthetic", "name: my_experiment\ngraph: hello_chat"))
    html = build_report(run_dir).read_text()
    row = re.search(r'<tr class="headline-row"><th class="metric-name">noisy(?:<br>[^\n]*?)?</th>(.*?)</tr>', html, re.S).group(1)
    assert "e-17" not in row and "e-16" not in row
    assert "<summary>judgements</summary>" not in html and "<summary>judge_verdict</summary>" in html
    h1 = re.search(r"<h1>(.*?)</h1>", html, re.S).group(1)
    assert h1.startswith("my_experiment") and "graph hello_chat" in h1
    from convsim.evaluation.reporting.report import _fmt_delta
    assert _fmt_delta(-1.85e-17) == "0" and _fmt_delta(5.551115123125783e-17) == "0" and _fmt_delta(0.0012) == "0.0012"


def test_a_reference_variant_is_shown_but_never_compared(tmp_path):
    """courses' given_lists 'are never mixed into a retriever's mean', yet the headline printed a
    Δ given_lists − tfidf with a test and counted it in the Holm family."""
    import yaml

    from analysis_runs import make_run

    run_dir = make_run(tmp_path, variants=("tfidf", "bm25", "given_lists"), sessions=4)
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    cfg["variants"][2]["reference"] = True
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    html = build_report(run_dir).read_text()
    heads = re.search(r'<table id="headline-table">\s*<thead>(.*?)</thead>', html, re.S).group(1)
    assert "bm25 − tfidf" in heads and "given_lists −" not in heads and "− given_lists" not in heads
    assert "given_lists (reference)" in heads
    n_metrics = len(re.findall(r'<tr class="headline-row">', html))
    n_tests = int(re.search(r"Holm-corrected over the (\d+) tests", html).group(1))
    assert 0 < n_tests <= n_metrics  # at most one per metric: bm25 − tfidf only
    assert 'id="references"' in html
    statistics = json.loads((run_dir / "stats.json").read_text())
    for m, res in statistics["metrics"].items():  # described, outside every between-variant test
        if "not_compared" in res:
            continue
        assert res["variants"]["given_lists"]["reference"] is True
        tested = {row.get(k) for test in ("tukey", "wilcoxon") for row in (res.get(test) or {}).get("pairs", [])
                  for k in ("group1", "group2")}
        assert "given_lists" not in tested, m


def test_a_p_value_is_printed_so_that_its_star_agrees_with_it():
    from convsim.evaluation.reporting.headline import fmt_p
    assert fmt_p(0.04996) == "0.04996" and fmt_p(0.05004) == "0.05" and fmt_p(0.0312) == "0.0312"
