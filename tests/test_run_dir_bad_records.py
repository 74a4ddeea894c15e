"""A run directory's records, read back: a record of the wrong shape is one line naming the file, the
line and the field (exit 2) for every reader (report and the summary, resume, compare); a graph's
``dataset_metrics`` or an ``analysis:`` hook that raises is a code error (HookError, one line, what was
written kept); a trace without its initial state is one line (exit 2); a metric too large to average
leaves the statistics quiet. Before, these were tracebacks (exit 1), wrong output with exit 0, or
pages of numpy warnings."""
import gzip
import json
import shutil
import warnings
from pathlib import Path

import pytest

import convsim
from convsim import ConvsimError
from convsim.errors import HookError
from convsim.results.recordset import check_record
from convsim.results.summary import METRIC_LIMIT, flatten_metrics, summarise_run
from convsim.traces.tracing import read_trace
from cli_helpers import cli, one_line

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A finished 3-session hello_chat run (checkpointed, so it can be resumed and forked)."""
    out = tmp_path_factory.mktemp("runs")
    code, text, exc = cli("run", "hello_chat", "--sessions", "3", "--checkpoint", "--quiet", "--no-analysis",
                          "--out", out, "--run-id", "good")
    assert code == 0, (text, exc)
    return out / "good"


def damaged(good: Path, tmp_path: Path, field: str, value, line: int = 2) -> Path:
    """A copy of the run whose ``line``-th record has ``field`` set to ``value``."""
    run_dir = tmp_path / "run"
    shutil.copytree(good, run_dir)
    results = run_dir / "results.jsonl"
    lines = results.read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[line - 1])
    rec[field] = value
    lines[line - 1] = json.dumps(rec)
    results.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return run_dir


BAD_RECORDS = {  # field, value, the field the error names, what it says
    "dialogue_metrics a string": ("dialogue_metrics", "bad", "dialogue_metrics", "must be object or null, got str"),
    "dialogue_metrics a list": ("dialogue_metrics", [1], "dialogue_metrics", "must be object or null, got list"),
    "llm_calls a string": ("llm_calls", "x", "llm_calls", "must be array or null, got str"),
    "llm_calls an object": ("llm_calls", {"role": "agent"}, "llm_calls", "must be array or null, got dict"),
    "a call not an object": ("llm_calls", [3], "llm_calls[0]", "must be object, got int"),
    "a call of wrong fields": ("llm_calls", [{"role": 5, "total_tokens": "many", "latency_s": "slow"}],
                               "llm_calls[0].role", "must be string or null, got int"),
    "tokens a string": ("llm_calls", [{"role": "agent", "total_tokens": "many"}], "llm_calls[0].total_tokens",
                        "must be number or null, got str"),
    "tokens a boolean": ("llm_calls", [{"prompt_tokens": True}], "llm_calls[0].prompt_tokens",
                         "must be number or null, got bool"),
    "latency a string": ("llm_calls", [{}, {"latency_s": "slow"}], "llm_calls[1].latency_s",
                         "must be number or null, got str"),
    "model a number": ("llm_calls", [{"model": 1}], "llm_calls[0].model", "must be string or null, got int"),
    "turn_metrics a string": ("turn_metrics", "x", "turn_metrics", "must be array or null, got str"),
    "a turn metric not an object": ("turn_metrics", ["x"], "turn_metrics[0]", "must be object, got str"),
}


@pytest.mark.parametrize("case", list(BAD_RECORDS))
def test_report_on_a_record_of_the_wrong_shape_is_one_line(good, tmp_path, case):
    field, value, named, says = BAD_RECORDS[case]
    run_dir = damaged(good, tmp_path, field, value)
    one_line(["report", run_dir], str(run_dir / "results.jsonl"), "record line 2", f"field {named}", says)


@pytest.mark.parametrize("case", ["llm_calls a string", "a call of wrong fields", "a turn metric not an object"])
def test_resuming_a_run_with_a_record_of_the_wrong_shape_is_one_line_and_runs_nothing(good, tmp_path, case):
    field, value, named, says = BAD_RECORDS[case]
    run_dir = damaged(good, tmp_path, field, value)
    before = (run_dir / "results.jsonl").read_bytes()
    one_line(["run", "hello_chat", "--run-id", "run", "--out", tmp_path, "--checkpoint", "--sessions", "4",
              "--quiet", "--no-analysis"], str(run_dir / "results.jsonl"), "record line 2", f"field {named}", says)
    assert (run_dir / "results.jsonl").read_bytes() == before
    assert not (run_dir / "traces" / "default" / "s003.jsonl").exists()


def test_compare_reads_the_records_with_the_same_check(good, tmp_path):
    run_dir = damaged(good, tmp_path, "llm_calls", [{"completion_tokens": "7"}])
    one_line(["compare", good, run_dir], str(run_dir / "results.jsonl"), "record line 2",
             "field llm_calls[0].completion_tokens")


def test_the_summary_checks_the_records_it_indexes(good, tmp_path):
    run_dir = damaged(good, tmp_path, "turn_metrics", [{"turn": 1}, 5], line=3)
    with pytest.raises(ConvsimError) as err:
        summarise_run(run_dir, convsim.load_graph_module("hello_chat"))
    assert err.value.record == "line 3" and err.value.field == "turn_metrics[1]"


def test_a_well_formed_record_passes(good):
    rec = json.loads((good / "results.jsonl").read_text().splitlines()[0])
    check_record(rec, file="r")
    rec["llm_calls"] = [{"role": "agent", "model": "openai:x", "prompt_tokens": 3, "completion_tokens": None,
                         "total_tokens": 3.0, "latency_s": 0.25, "ok": True, "cache_hit": False}, {}]
    rec["turn_metrics"] = None
    check_record(rec, file="r")


# ------------------------------------------------------------------ hooks that raise: code errors
def graph_copy(tmp_path: Path, old: str, new: str) -> Path:
    src = (ROOT / "graphs" / "hello_chat.py").read_text(encoding="utf-8")
    assert old in src
    path = tmp_path / "g" / "dmraises.py"
    path.parent.mkdir()
    path.write_text(src.replace(old, new), encoding="utf-8")
    return path


DM = "def dataset_metrics(records: list[dict]) -> dict:\n"


def test_dataset_metrics_that_raises_keeps_the_results_and_the_summary(tmp_path):
    graph = graph_copy(tmp_path, DM, DM + "    raise RuntimeError('boom in dataset_metrics')\n")
    with pytest.raises(HookError) as err:
        convsim.run(str(graph), sessions=2, out=str(tmp_path / "runs"), run_id="dm")
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{graph}: dataset_metrics raised RuntimeError: boom")
    assert "(line " in message  # where in the graph file
    assert isinstance(err.value.__cause__, RuntimeError) and err.value.hook == "dataset_metrics"
    run_dir = tmp_path / "runs" / "dm"
    assert len((run_dir / "results.jsonl").read_text().splitlines()) == 2
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["variants"]["default"]["n"] == 2 and summary["variants"]["default"]["dataset"] == {}
    assert "accuracy" in summary["variants"]["default"]["metrics"]
    assert any("dataset_metrics raised RuntimeError" in w for w in summary["warnings"])
    assert (run_dir / "metrics.csv").exists() and not (run_dir / "report.html").exists()
    with pytest.raises(HookError, match="dataset_metrics raised RuntimeError"):  # convsim report: the same
        convsim.report(run_dir)


def test_dataset_metrics_that_returns_no_dict_is_a_code_error(tmp_path):
    graph = graph_copy(tmp_path, DM, DM + "    return [1]\n")
    with pytest.raises(HookError, match="dataset_metrics raised TypeError: dataset_metrics must return a dict"):
        convsim.run(str(graph), sessions=1, out=str(tmp_path / "runs"), run_id="dm", analyze=False)


def test_dataset_metrics_raising_bad_input_stays_bad_input(tmp_path):
    graph = graph_copy(tmp_path, DM, DM + "    from convsim import ConvsimError\n"
                                          "    raise ConvsimError('damaged', file='data.json')\n")
    with pytest.raises(ConvsimError, match="data.json: damaged"):
        convsim.run(str(graph), sessions=1, out=str(tmp_path / "runs"), run_id="dm", analyze=False)


def test_an_analysis_hook_that_raises_is_a_code_error(tmp_path, monkeypatch):
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "badhook_r.py").write_text("def main(run_dir):\n    raise ValueError('analysis boom')\n\n\n"
                                        "def bad_input(run_dir):\n    from convsim import ConvsimError\n"
                                        "    raise ConvsimError('bad file', file='x.csv')\n")
    monkeypatch.syspath_prepend(str(hooks))
    cfg = {"graph": "hello_chat", "sessions": 2, "out_dir": str(tmp_path / "runs"), "run_id": "hk",
           "analysis": ["badhook_r:main"]}
    with pytest.raises(HookError) as err:
        convsim.run(cfg)
    message = str(err.value)
    assert "\n" not in message and message.startswith(
        f"{hooks / 'badhook_r.py'}: analysis hook badhook_r:main raised ValueError: analysis boom (line 2)")
    run_dir = tmp_path / "runs" / "hk"
    assert len((run_dir / "results.jsonl").read_text().splitlines()) == 2 and (run_dir / "summary.json").exists()
    with pytest.raises(ConvsimError, match="x.csv: bad file"):
        convsim.run({**cfg, "run_id": "hk2", "analysis": ["badhook_r:bad_input"]})


def test_the_cli_says_one_line_and_exit_3_when_dataset_metrics_raises(tmp_path):
    graph = graph_copy(tmp_path, DM, DM + "    raise RuntimeError('boom in dataset_metrics')\n")
    one_line(["run", graph, "--sessions", "2", "--quiet", "--out", tmp_path / "runs"], str(graph),
             "dataset_metrics raised RuntimeError: boom", code=3)


# ------------------------------------------------------------------ traces without an initial state
def trace_of(good: Path, tmp_path: Path) -> tuple[Path, Path]:
    run_dir = tmp_path / "run"
    shutil.copytree(good, run_dir)
    return run_dir, run_dir / "traces" / "default" / "s000.jsonl"


@pytest.mark.parametrize("at", [[], ["--at", "-1"], ["--at", "9"]])
def test_a_trace_whose_initial_line_is_damaged_is_one_line(good, tmp_path, at):
    run_dir, path = trace_of(good, tmp_path)
    lines = path.read_text(encoding="utf-8").split("\n")
    assert json.loads(lines[0])["type"] == "initial"
    lines[0] = '{"x": 1}'
    path.write_text("\n".join(lines), encoding="utf-8")
    one_line(["trace", run_dir, "s000", *at], str(path), "trace has no initial state")


@pytest.mark.parametrize("packed", [False, True])
def test_an_empty_trace_is_one_line(good, tmp_path, packed):
    run_dir, path = trace_of(good, tmp_path)
    if packed:
        path.unlink()
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(b""))
    else:
        path.write_text("")
    one_line(["trace", run_dir, "s000"], str(path), "trace has no initial state")


def test_a_trace_with_two_initial_states_is_one_error(good, tmp_path):
    run_dir, path = trace_of(good, tmp_path)
    lines = path.read_text(encoding="utf-8").split("\n")
    path.write_text("\n".join(lines[:2] + lines[:1] + lines[2:]), encoding="utf-8")
    with pytest.raises(ConvsimError) as err:
        read_trace(path)
    assert err.value.record == "line 3" and "second initial state" in str(err.value)


def test_a_good_trace_still_reads(good):
    trace = read_trace(good / "traces" / "default" / "s000.jsonl")
    assert trace["initial"]["session_id"] == "s000" and trace["steps"]


# ------------------------------------------------------------------ metrics too large to average
def test_a_metric_too_large_to_average_leaves_the_statistics_quiet(good, tmp_path):
    run_dir = damaged(good, tmp_path, "dialogue_metrics", {"accuracy": 1e308, "turns": 3})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, out, exc = cli("report", run_dir)
    assert code == 0, (out, exc)
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught][:5]
    summary = json.loads((run_dir / "summary.json").read_text())
    accuracy = summary["variants"]["default"]["metrics"]["accuracy"]
    assert accuracy["n"] == 2 and accuracy["mean"] == 1.0  # the other two sessions
    assert any("metric accuracy: 1 value beyond" in w for w in summary["warnings"])
    # and `convsim report` says so, as `run` prints a run's warnings (before: only in summary.json)
    assert "warning: variant default: metric accuracy: 1 value beyond" in " ".join(out.split())


def test_flatten_metrics_leaves_out_what_overflows():
    left_out: list[str] = []
    flat = flatten_metrics({"a": METRIC_LIMIT, "b": -1e200, "c": 10 ** 400, "d": float("nan"), "e": {"f": 1e308},
                            "g": 2, "h": True}, out_of_range=left_out)
    assert flat == {"a": METRIC_LIMIT, "b": None, "c": None, "d": None, "e.f": None, "g": 2.0, "h": 1.0}
    assert left_out == ["b", "c", "e.f"]  # NaN and infinity were never applicable: not reported


def test_a_final_state_of_the_wrong_shape_is_a_code_error_not_a_record_readers_refuse(tmp_path):
    # before: a graph returning dialogue_metrics as a list wrote an "ok" record of that shape; the
    # end-of-run summary crashed (a traceback) and every later reader refused the run directory
    old = '    return {"dialogue_metrics": {"accuracy": sum(correct) / len(correct), "turns": len(correct)}}\n'
    graph = graph_copy(tmp_path, old, '    return {"dialogue_metrics": [sum(correct)]}\n')
    code, out, exc = cli("run", graph, "--sessions", "2", "--quiet", "--out", tmp_path / "runs", "--run-id", "w")
    assert code == 3 and "Traceback" not in out, (out, exc)
    run_dir = tmp_path / "runs" / "w"
    records = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in records] == ["code_error", "code_error"]
    assert all(r["dialogue_metrics"] is None and "dialogue_metrics must be object or null, got list" in r["error"]
               for r in records)
    errors = [json.loads(x) for x in (run_dir / "errors.jsonl").read_text().splitlines()]
    assert len(errors) == 2 and all(e["kind"] == "code" for e in errors)
    # the run directory stays readable: report and resume read it without complaint
    assert cli("report", run_dir)[0] == 0
    assert cli("run", graph, "--sessions", "2", "--quiet", "--out", tmp_path / "runs", "--run-id", "w")[0] == 3


def test_the_partial_state_of_a_failed_session_is_kept_readable(tmp_path):
    # a node wrote dialogue_metrics as a list, then a later node raised: the code_error record keeps
    # the partial state for debugging, with that key nulled, so resume and report can still read the run
    turn_old = '    return {"turn_metrics": [{"turn": turn, **metrics}], **update}\n'
    graph = graph_copy(tmp_path, turn_old, '    return {"turn_metrics": [{"turn": turn, **metrics}], '
                                           '"dialogue_metrics": [1], **update}\n')
    src = graph.read_text().replace("def evaluate_dialogue(state: State) -> dict:\n",
                                    "def evaluate_dialogue(state: State) -> dict:\n    raise RuntimeError('late bug')\n")
    graph.write_text(src)
    code, out, exc = cli("run", graph, "--sessions", "2", "--quiet", "--out", tmp_path / "runs", "--run-id", "p")
    assert code == 3 and "Traceback" not in out, (out, exc)
    records = [json.loads(x) for x in (tmp_path / "runs" / "p" / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in records] == ["code_error"] * 2
    assert all(r["dialogue_metrics"] is None and "late bug" in r["error"] and r["transcript"] for r in records)
    assert cli("run", graph, "--sessions", "2", "--quiet", "--out", tmp_path / "runs", "--run-id", "p")[0] == 3
    assert cli("report", tmp_path / "runs" / "p")[0] == 0
