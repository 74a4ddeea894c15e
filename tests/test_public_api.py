"""Each package's __init__ states its public API; every listed name must resolve.

Every command of the command line is also a function of ``convsim`` that returns data
(convsim/api.py): each is called here on a real (small) run and its answer checked.
"""
import importlib
import json
from pathlib import Path

import pytest
import yaml

import convsim
from convsim import ConvsimError

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("package", ["convsim", "convsim.catalog", "convsim.evaluation", "convsim.agents"])
def test_exports_resolve(package):
    pkg = importlib.import_module(package)
    assert pkg.__all__
    for name in pkg.__all__:
        assert getattr(pkg, name) is not None, name
    with pytest.raises(AttributeError):
        getattr(pkg, "no_such_name")


@pytest.mark.parametrize("name", ["run", "report", "compare", "evaluate", "trace", "fork", "draw",
                                  "list_graphs", "list_configs"])
def test_every_command_is_a_function(name):
    fn = getattr(convsim, name)
    assert callable(fn) and fn.__module__ == "convsim.api", name


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two hello_chat runs over the same sessions: A with 2 questions each, B with the default 3."""
    out = tmp_path_factory.mktemp("api")
    a = convsim.run("hello_chat", sessions=3, params={"n_turns": 2}, models={"agent": "none"},
                    out=out, run_id="a", checkpoint=True, analyze=False)
    b = convsim.run("hello_chat", sessions=3, out=out, run_id="b", analyze=False)
    return a, b


def test_run_takes_models_and_params_as_dicts(runs):
    a, b = runs
    cfg = yaml.safe_load((a / "config.yaml").read_text())
    assert cfg["params"] == {"n_turns": 2} and cfg["models"] == {"agent": "none"}
    assert [r["dialogue_metrics"]["turns"] for r in _records(a)] == [2, 2, 2]
    assert [r["dialogue_metrics"]["turns"] for r in _records(b)] == [3, 3, 3]


def test_run_dict_params_win_over_variants_and_model_dicts_stay_dicts(tmp_path):
    config = {"name": "v", "graph": "hello_chat", "sessions": 1, "out_dir": str(tmp_path), "analysis": [],
              "variants": [{"name": "long", "params": {"n_turns": 4}}]}
    run_dir = convsim.run(config, params={"n_turns": 1}, run_id="v",
                          models={"agent": {"spec": "none", "temperature": 0.0}})
    assert _records(run_dir)[0]["dialogue_metrics"]["turns"] == 1
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert cfg["models"]["agent"] == {"spec": "none", "temperature": 0.0}
    # the command-line form gives the same config
    same = convsim.run(config, set_params=["n_turns=1"], models=["agent=none"], run_id="w")
    assert _records(same)[0]["dialogue_metrics"] == _records(run_dir)[0]["dialogue_metrics"]


def test_report_rebuilds_and_reports_missing_hooks(runs, tmp_path):
    import shutil
    run_dir = Path(shutil.copytree(runs[1], tmp_path / "b"))
    (run_dir / "summary.json").unlink()
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    cfg["analysis"] = ["no_such_module:analyze"]
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    warned = []
    html = convsim.report(run_dir, warn=warned.append)
    assert html is None  # the only hook is missing: nothing wrote a report
    assert json.loads((run_dir / "summary.json").read_text())["variants"]["default"]["n"] == 3
    assert len(warned) == 1 and "no_such_module:analyze" in warned[0]
    with pytest.raises(ConvsimError, match="not a run directory"):
        convsim.report(tmp_path)


def test_report_of_a_run_whose_hooks_write_no_report_says_so(runs, tmp_path):
    # before: convsim report printed "report: <run>/report.html" for a file no hook wrote
    # (configs/crs_reference.yaml and service_faults.yaml replaced the report hook with their own)
    import shutil

    from typer.testing import CliRunner

    from convsim.cli import app
    run_dir = Path(shutil.copytree(runs[1], tmp_path / "own_hook"))
    (run_dir / "report.html").unlink(missing_ok=True)
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    cfg["analysis"] = []
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    assert convsim.report(run_dir) is None and not (run_dir / "report.html").exists()
    res = CliRunner().invoke(app, ["report", str(run_dir)])
    text = " ".join(res.output.split())
    assert res.exit_code == 0 and "report: none" in text and "analyze_run" in text, res.output
    assert "report.html" not in text.replace("write no report.html", "")
    # the shipped configs that add a hook of their own keep the report hook (their gaming checks run
    # before it, so that report.html shows them)
    for name in ("crs_reference", "service_faults"):
        hooks = yaml.safe_load((ROOT / "configs" / f"{name}.yaml").read_text())["analysis"]
        assert "convsim.evaluation.reporting.analysis:analyze_run" in hooks and len(hooks) >= 2


def test_compare_returns_rows_with_the_paired_difference(runs):
    a, b = runs
    result = convsim.compare(a, b)
    row = next(r for r in result["rows"] if r["metric"] == "turns")
    assert row["diff"] == pytest.approx(1.0)  # B asks 3 questions, A 2, in every paired session
    assert row["n_paired"] == 3


def test_evaluate_a_group_csv_and_transcripts(tmp_path):
    result = convsim.evaluate(ROOT / "tests" / "data" / "group" / "external_C3_dialogue.csv")
    assert isinstance(result, dict) and "M1" in result["metrics"]
    transcript = {"session_id": "d1", "turns": [
        {"speaker": "user", "text": "I'd like a war film."},
        {"speaker": "system", "text": "Try Saving Private Ryan, a war film."}]}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(transcript) + "\n")
    run_dir = convsim.evaluate(path, graph="crs_shift", out=tmp_path, run_id="ev", models={"judge": "none"},
                               analyze=False)
    [record] = _records(run_dir)
    assert record["session_id"] == "d1" and record["dialogue_metrics"]
    with pytest.raises(ConvsimError, match="file not found"):
        convsim.evaluate(tmp_path / "missing.jsonl")


def test_trace_returns_steps_or_a_state(runs):
    a, _ = runs
    found = convsim.trace(a, "s000", node="agent")
    assert [s["node"] for s in found["steps"]] == ["agent", "agent"]
    assert found["n_steps"] == len(found["trace"]["steps"]) > 2 and found["file"].exists()
    initial = convsim.trace(a, "s000", at=-1)["state"]
    assert initial["turn"] == 0 and initial["session_id"] == "s000"
    assert convsim.trace(a, "s000", at=-1, key="turn")["state"] == {"turn": 0}


def test_fork_returns_the_comparison(runs, tmp_path):
    a, _ = runs
    # from step 1 (the first answer) on, with one question instead of two: the second turn is gone
    comp = convsim.fork(a, "s001", step=1, params={"n_turns": 1}, models={"agent": "none"},
                        out=tmp_path, run_id="f", analyze=False)
    assert comp["run_dir"] == tmp_path / "f"
    assert not comp["identical"] and comp["first_divergent_turn"] == 2
    assert comp["dialogue_metrics"]["turns"] == {"original": 2, "forked": 1}
    fork_info = yaml.safe_load((comp["run_dir"] / "config.yaml").read_text())["fork"]
    assert fork_info["set"] == ["n_turns=1"] and fork_info["models"] == ["agent=none"]


def test_draw_returns_text_and_falls_back_to_mermaid_without_grandalf(monkeypatch, tmp_path):
    mermaid = convsim.draw("hello_chat")
    assert mermaid.startswith("---") or "graph TD" in mermaid
    assert "evaluate_turn -.-> user" in mermaid
    assert "| evaluate_turn |" in convsim.draw("hello_chat", ascii=True)
    import langchain_core.runnables.graph_ascii as graph_ascii
    monkeypatch.setattr(graph_ascii, "_HAS_GRANDALF", False)
    fallback = convsim.draw("hello_chat", ascii=True)
    assert fallback.splitlines()[0].startswith("%%") and "grandalf" in fallback.splitlines()[0]
    assert "evaluate_turn -.-> user" in fallback


def test_list_graphs_and_configs_describe_each_in_a_sentence(tmp_path):
    graphs = convsim.list_graphs()
    assert set(graphs) >= {"hello_chat", "crs_shift", "customer_service", "group_planning", "course_retrieval"}
    assert graphs["hello_chat"]["path"].name == "hello_chat.py"
    assert graphs["hello_chat"]["description"].startswith("A minimal topology to copy")
    for info in graphs.values():
        assert info["description"].endswith("."), info
    (tmp_path / "good.yaml").write_text("name: g\ndescription: Two short sessions.\ngraph: hello_chat\n")
    (tmp_path / "bad.yaml").write_text("graph: hello_chat\nsesions: 2\n")
    configs = convsim.list_configs(tmp_path)
    assert configs[str(tmp_path / "good.yaml")] == {"name": "g", "graph": "hello_chat",
                                                    "description": "Two short sessions.", "needs": []}
    assert configs[str(tmp_path / "bad.yaml")]["description"].startswith("(invalid")
    shipped = convsim.list_configs(ROOT / "configs")
    assert shipped and all(info["description"] for info in shipped.values()), shipped


def test_the_cli_renders_what_the_functions_return(monkeypatch):
    from typer.testing import CliRunner

    from convsim.cli import app
    cli = CliRunner()
    res = cli.invoke(app, ["list"])
    assert res.exit_code == 0
    text = " ".join(res.output.split())
    assert "A minimal topology to copy" in text and "configs (convsim run configs/<file>)" in text and "crs_shift.yaml" in text
    assert "spec 0" not in text.lower()
    import langchain_core.runnables.graph_ascii as graph_ascii
    monkeypatch.setattr(graph_ascii, "_HAS_GRANDALF", False)
    res = cli.invoke(app, ["draw", "hello_chat", "--ascii"])
    assert res.exit_code == 0 and "needs grandalf" in res.output and "graph TD" in res.output
