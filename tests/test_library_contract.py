"""What a researcher who scripts convsim relies on: run ids never reused by a different call,
``--out`` meaning the same for every command, a graph that skips its evaluation flagged, a
comparison of runs with nothing in common refused, and what each shipped config needs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import convsim
from convsim import ConvsimError
from convsim.running.plan import new_run_id
from convsim.running.requirements import config_needs
from tests.cli_helpers import cli

ROOT = Path(__file__).resolve().parents[1]

NO_EVALUATION = '''"""hello_chat with an edge to END straight after the agent: no evaluation node ever runs."""
from convsim.graphs.hello_chat import *  # noqa: F401,F403
from convsim.graphs import hello_chat as _base
from langgraph.graph import END, START, StateGraph


def build(params):
    g = StateGraph(_base.State, context_schema=_base.Context)
    g.add_node("user", _base.user)
    g.add_node("agent", _base.agent)
    g.add_edge(START, "user")
    g.add_edge("user", "agent")
    g.add_edge("agent", END)
    return g


graph = build(Params()).compile()
'''


def test_two_scripted_runs_in_a_row_get_their_own_run_directories(tmp_path):
    a = convsim.run("hello_chat", sessions=1, params={"n_turns": 1}, out=tmp_path, analyze=False)
    b = convsim.run("hello_chat", sessions=1, params={"n_turns": 2}, out=tmp_path, analyze=False)
    assert a != b and a.parent == b.parent == tmp_path
    for run_dir, turns in ((a, 1), (b, 2)):
        [record] = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
        assert record["dialogue_metrics"]["turns"] == turns


def test_a_default_run_id_is_never_an_existing_run(tmp_path):
    first = new_run_id("exp", tmp_path)
    (tmp_path / first).mkdir()
    second = new_run_id("exp", tmp_path)
    assert second != first and not (tmp_path / second).exists()
    stamp = first.split("-", 1)[1]
    assert len(stamp.split("-")) == 3 and len(stamp.split("-")[2]) == 3  # date, time, milliseconds


def test_out_is_the_directory_runs_are_written_under_for_run_eval_and_fork(tmp_path):
    code, out, _ = cli("run", "crs_shift", "--sessions", "1", "--set", "n_turns=2", "--out", tmp_path / "runs",
                       "--run-id", "src", "--checkpoint", "--no-analysis", "-q")
    assert code == 0, out
    src = tmp_path / "runs" / "src"
    code, out, _ = cli("eval", src / "results.jsonl", "--out", tmp_path / "evals", "--run-id", "e", "--no-analysis",
                       "-q")
    assert code == 0, out
    assert (tmp_path / "evals" / "e" / "results.jsonl").is_file()
    code, out, _ = cli("fork", src, "u0001", "--step", "2", "--out", tmp_path / "forks", "--run-id", "f",
                       "--no-analysis")
    assert code == 0, out
    assert (tmp_path / "forks" / "f" / "results.jsonl").is_file()


def test_a_graph_that_ends_without_dialogue_metrics_is_flagged(tmp_path):
    graph = tmp_path / "no_eval.py"
    graph.write_text(NO_EVALUATION, encoding="utf-8")
    code, err, _ = cli("run", graph, "--sessions", "2", "--out", tmp_path / "runs", "--run-id", "r", "--no-analysis")
    summary = json.loads((tmp_path / "runs" / "r" / "summary.json").read_text())
    assert summary["variants"]["default"]["no_dialogue_metrics"] == 2
    assert "2 of 2 scored sessions ended without dialogue metrics" in err


def test_compare_of_runs_with_nothing_in_common_is_one_line_and_exit_2(tmp_path):
    a = convsim.run("hello_chat", sessions=2, out=tmp_path, run_id="a", analyze=False, trace=False)
    b = convsim.run("course_retrieval", sessions=2, out=tmp_path, run_id="b", analyze=False, trace=False)
    with pytest.raises(ConvsimError, match="share no metric"):
        convsim.compare(a, b)
    code, out, _ = cli("compare", a, b)
    assert code == 2 and len(out.strip().splitlines()) == 1 and "hello_chat and course_retrieval" in out


def test_the_needs_of_the_shipped_configs():
    from convsim.config import load_config
    needs = {p.name: {(n.kind, n.what) for n in config_needs(load_config(p))}
             for p in (ROOT / "configs").glob("*.yaml")}
    assert needs["crs_shift.yaml"] == set() and needs["courses.yaml"] == set()
    assert ("extra", "local") in needs["crs_models_demo.yaml"]
    assert ("extra", "embeddings") in needs["courses_embedding.yaml"]
    assert ("server", "ollama") in needs["crs_models.yaml"]
    assert any(kind == "data" and "multiwoz" in what for kind, what in needs["service_replay.yaml"])
    listed = convsim.list_configs(ROOT / "configs")
    assert all("needs" in info for info in listed.values())


def test_a_hook_saved_before_the_rename_names_the_same_function():
    from convsim.config import config_from_dict
    cfg = config_from_dict({"graph": "hello_chat", "analysis": [
        "evaluation.analysis:analyze_run", "evaluation.crs.validity:reference_validity", "my_hooks:main"]})
    assert cfg.analysis == ["convsim.evaluation.reporting.analysis:analyze_run",
                            "convsim.evaluation.crs.validity:reference_validity", "my_hooks:main"]
