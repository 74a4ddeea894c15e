"""The trace viewer fragment: escaped content, linked low metrics, and a headless-Chromium check."""
import pytest

from browser import chromium_page, needs_chromium
from convsim import ExperimentConfig, read_trace, run
from convsim.traces.drawing import mermaid_text, parse_mermaid, topology_svg
from convsim.evaluation.reporting.trace_html import (VIEWER_HEAD, fork_comparison_html, report_fragments, topology_html,
                                     trace_timeline_html)
from convsim.traces.tracing import explain_turn_metrics

EVIL = '<script>window.__xss = 1</script><img src=x onerror="window.__xss=2">'


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory):
    cfg = ExperimentConfig(name="hello_chat", graph="hello_chat", sessions=2, out_dir=str(tmp_path_factory.mktemp("v")),
                           run_id="r", analysis=[])
    return run(cfg, analyze=False)


def _evil_trace(run_dir):
    trace = read_trace(run_dir / "traces" / "default" / "s000.jsonl")
    trace["steps"][1]["changed"]["transcript"]["appended"][0]["text"] = EVIL
    trace["steps"][1]["node"] = "agent"
    return trace


def test_fragment_escapes_and_links(traced_run):
    trace = _evil_trace(traced_run)
    ex = explain_turn_metrics(trace, [{"turn": 1, "correct": 0.0}], {"correct": 1.0},
                              metric_inputs={"correct": ["transcript"]})
    html = trace_timeline_html(trace, uid="u1", explanations=ex)
    assert "<script>window.__xss" not in html and "&lt;script&gt;window.__xss" in html
    assert 'onerror="window' not in html
    assert html.count('class="cs-step') == len(trace["steps"])
    # the low metric links to the two steps of turn 1 that wrote the transcript
    assert 'href="#u1-step-0"' in html and 'href="#u1-step-1"' in html
    assert html.count("cs-step cs-linked") == 2


def test_topology_svg_has_every_node_and_edge():
    from convsim import load_graph_module
    text = mermaid_text(load_graph_module("hello_chat").graph)
    nodes, edges = parse_mermaid(text)
    assert nodes[0] == "__start__" and set(nodes) == {"__start__", "user", "agent", "evaluate_turn",
                                                      "evaluate_dialogue", "__end__"}
    assert ("evaluate_turn", "user", True, "") in edges and ("user", "agent", False, "") in edges
    svg = topology_svg(text)
    assert svg.count('class="cs-node"') == 6 and svg.count("marker-end=") == 6
    assert svg.count('stroke-dasharray') == 2  # the two conditional edges


def test_parse_mermaid_edge_labels():
    text = "graph TD;\n\ta(a)\n\tb(b)\n\ta -. &nbsp;go&nbsp; .-> b;\n\tb -- back --> a;\n"
    assert parse_mermaid(text)[1] == [("a", "b", True, "go"), ("b", "a", False, "back")]


def test_report_fragments_of_a_run(traced_run):
    frags = report_fragments(traced_run)
    assert set(frags["sessions"]) == {("default", "s000", 0), ("default", "s001", 0)}
    assert "<svg" in frags["topology"] and frags["fork"] == ""
    assert (traced_run / "topology.mmd").exists()


def test_fork_comparison_html_escapes():
    comp = {"fork": {"run_id": "r", "variant": "v", "session_id": "s", "step": 3}, "identical": False,
            "first_divergent_turn": 1, "first_divergent_step": {"step": 3, "differing_keys": ["transcript"]},
            "turns": [{"turn": 1, "original": [["agent", EVIL]], "forked": [["agent", "ok"]],
                       "same_text": False, "same_metrics": True, "metrics": {"m": {"original": 1, "forked": 1}}}],
            "dialogue_metrics": {"d": {"original": 1, "forked": 0}}}
    html = fork_comparison_html(comp)
    assert "<script>window" not in html and "First divergent turn: 1" in html and "cs-differs" in html


def test_fork_comparison_lists_its_settings_as_text():
    comp = {"fork": {"run_id": "r", "variant": "v", "session_id": "s", "step": 3,
                     "set": ["n_turns=2", "seed=3"], "models": ["crs=none"]}, "identical": True, "turns": []}
    html = fork_comparison_html(comp)
    assert "set n_turns=2, seed=3." in html and "models crs=none," in html and "[" not in html.split("<p>")[1][:200]


@pytest.mark.slow
@pytest.mark.browser
@needs_chromium
def test_viewer_in_headless_chromium(traced_run, tmp_path):
    from convsim import load_graph_module
    trace = _evil_trace(traced_run)
    ex = explain_turn_metrics(trace, [{"turn": 1, "correct": 0.0}], {"correct": 1.0})
    page_html = ("<!doctype html><html><head><meta charset='utf-8'>" + VIEWER_HEAD + "</head><body>"
                 + topology_html(mermaid_text(load_graph_module("hello_chat").graph))
                 + trace_timeline_html(trace, uid="t", explanations=ex) + "</body></html>")
    path = tmp_path / "viewer.html"
    path.write_text(page_html, encoding="utf-8")
    with chromium_page() as b:
        page = b.page
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        steps = page.locator(".cs-step")
        assert steps.count() == len(trace["steps"])
        assert page.locator(".cs-step > summary").first.is_visible()
        assert page.locator("svg.cs-topology .cs-node").count() == 6
        assert page.evaluate("window.__xss === undefined")
        page.locator("#t-step-1 > summary").click()
        assert "<script>window.__xss = 1</script>" in page.locator("#t-step-1").inner_text()
        page.select_option("select.cs-filter[data-by=node]", "agent")
        visible = page.evaluate("Array.from(document.querySelectorAll('.cs-step'))"
                                ".filter(e => e.style.display !== 'none').map(e => e.dataset.node)")
        assert visible and set(visible) == {"agent"}
        page.select_option("select.cs-filter[data-by=node]", "")
        page.select_option("select.cs-filter[data-by=turn]", "2")
        turns = page.evaluate("Array.from(document.querySelectorAll('.cs-step'))"
                              ".filter(e => e.style.display !== 'none').map(e => e.dataset.turn)")
        assert set(turns) == {"2"} and len(turns) == 3
        assert page.locator(".cs-explain a").count() >= 1
    assert b.errors == []
    assert all(u.startswith(("file:", "data:", "about:")) for u in b.requests), b.requests


@pytest.mark.slow
@pytest.mark.browser
@needs_chromium
def test_viewer_in_the_run_report(tmp_path):
    cfg = ExperimentConfig(name="hello_chat", graph="hello_chat", sessions=2, out_dir=str(tmp_path), run_id="rep")
    run_dir = run(cfg, analyze=True)
    page_html = (run_dir / "report.html").read_text()
    assert page_html.count("cs-trace-box") == 2 and 'id="topology"' in page_html
    with chromium_page() as b:
        page = b.page
        page.goto((run_dir / "report.html").as_uri())
        page.locator("#session-1 > summary").click()
        page.locator("#session-1 .cs-trace-box > summary").click()
        steps = page.locator("#session-1 .cs-step")
        assert steps.count() == 10 and steps.first.is_visible()
        assert page.locator("svg.cs-topology").is_visible()
    assert b.errors == []


@needs_chromium
def test_a_failed_sessions_failure_line_in_headless_chromium(traced_run, tmp_path):
    # the trace of a session that ended on an exception ends with what failed; hostile text stays text
    trace = read_trace(traced_run / "traces" / "default" / "s000.jsonl")
    trace["failure"] = {"step": 2, "superstep": 2, "turn": 1, "node": "agent", "error": "ModelUnavailable: " + EVIL,
                        "llm_calls": [{"ok": False}, {"ok": False}]}
    page_html = ("<!doctype html><html><head><meta charset='utf-8'>" + VIEWER_HEAD + "</head><body>"
                 + trace_timeline_html(trace, uid="f") + "</body></html>")
    path = tmp_path / "failed.html"
    path.write_text(page_html, encoding="utf-8")
    with chromium_page() as b:
        b.page.goto(path.as_uri())
        line = b.page.locator(".cs-failure")
        assert line.count() == 1 and line.is_visible()
        text = line.inner_text()
        assert text.startswith("failed after step 1 in node agent (2 of 2 model calls failed)") and EVIL in text
        assert b.page.evaluate("window.__xss") is None and not b.errors and not b.dialogs
