"""Bad input found by fuzzing the command line (~730 cases): each is one line naming the file, record
or field, exit 2, no traceback, and nothing written where a run failed its checks. Before, these
wrote outside the run directory, printed tracebacks, or wrote a run directory first."""
import json
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import cli, one_line


ROOT = Path(__file__).resolve().parents[1]
RUN = ["--sessions", "1", "--quiet", "--no-analysis"]


def test_a_run_id_or_a_name_that_would_leave_the_run_directory(tmp_path):
    out = tmp_path / "runs"
    for bad in ("../escape", ".", "/abs/path", "a\\b"):
        one_line(["run", "hello_chat", *RUN, "--out", out, "--run-id", bad], "run_id", "one path component")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("name: ../../etc\ngraph: hello_chat\n")
    one_line(["run", cfg, *RUN, "--out", out], str(cfg), "field name")
    cfg.write_text("graph: hello_chat\nvariants: [{name: a/b}]\n")
    one_line(["run", cfg, *RUN, "--out", out], str(cfg), "variant name")
    cfg.write_text("graph: hello_chat\nvariants: [{name: a}, {name: b}]\nbaseline: c\n")
    one_line(["run", cfg, *RUN, "--out", out], str(cfg), "baseline 'c' is not a variant")
    assert not out.exists() and not (tmp_path / "escape").exists()


def test_a_session_id_from_data_that_names_a_path(tmp_path):
    data = json.loads((ROOT / "catalog/data/courses/testsets/test-set-v1.json").read_text())
    data["cases"][0]["id"] = "../../x"
    ts = tmp_path / "ts.json"
    ts.write_text(json.dumps(data))
    one_line(["run", "course_retrieval", *RUN, "--out", tmp_path / "runs", "--set", "retriever=bm25",
              "--set", f"test_set={ts}"], str(ts), "field id", "'../../x'", "session id")  # names the test set
    assert not (tmp_path / "runs").exists() and not (tmp_path / "x.jsonl").exists()


def test_a_damaged_run_directory_on_resume(tmp_path):
    out = tmp_path / "runs"
    assert cli("run", "hello_chat", "--sessions", "1", "--quiet", "--no-analysis", "--out", out,
               "--run-id", "r", "--checkpoint")[0] == 0
    run_dir = out / "r"
    cfg_text = (run_dir / "config.yaml").read_text()
    for bad, words in (("- a list\n", "must be a YAML mapping"), (b"\xff\xfe", "not UTF-8")):
        (run_dir / "config.yaml").write_bytes(bad.encode() if isinstance(bad, str) else bad)
        one_line(["run", "hello_chat", *RUN, "--out", out, "--run-id", "r", "--checkpoint"], "config.yaml", words)
    (run_dir / "config.yaml").write_text(cfg_text)
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    (run_dir / "results.jsonl").write_text("\n".join([json.dumps({**record, "dialogue_metrics": "x"}), *lines[1:]]) + "\n")
    one_line(["run", "hello_chat", *RUN, "--out", out, "--run-id", "r", "--checkpoint"],
             "results.jsonl", "line 1", "dialogue_metrics must be object or null")
    (run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")
    (run_dir / "checkpoints.sqlite").write_bytes(b"not a database at all" * 100)
    for p in run_dir.glob("checkpoints.sqlite-*"):
        p.unlink()
    one_line(["run", "hello_chat", *RUN, "--out", out, "--run-id", "r", "--checkpoint"],
             "checkpoints.sqlite", "not a usable SQLite checkpoint database")


def test_output_paths_that_cannot_be_written(tmp_path):
    afile = tmp_path / "a.txt"
    afile.write_text("x")
    one_line(["run", "hello_chat", *RUN, "--out", afile], "field out_dir", "cannot create the run directory")
    one_line(["draw", "hello_chat", "--png", afile / "x.png"], "field png", "cannot write the PNG")
    one_line(["draw", "hello_chat", "--png", tmp_path], "field png", "is a directory")


@pytest.mark.parametrize("args,words", [
    (["--model", "agent=ollama:@"], ["models.agent", "expected ollama:<model>"]),
    (["--model", "agent={spec: none, temperature: hot}"], ["models.agent.temperature", "a number in 0..2"]),
    (["--model", "agent={spec: none, max_tokens: -5}"], ["models.agent.max_tokens", "a positive integer"]),
    (["--model", "agent=llamacpp:/nonexistent/m.gguf"], ["models.agent", "no GGUF model file"]),
])
def test_model_specs_and_settings_are_checked(tmp_path, args, words):
    one_line(["run", "hello_chat", *RUN, "--out", tmp_path / "runs", *args], *words)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("graph,sets,words", [
    ("course_retrieval", ["cutoffs=[-1, 0]"], ["params.cutoffs.0", "greater than or equal to 1"]),
    ("course_retrieval", ["cutoffs=[]"], ["params.cutoffs", "at least 1 item"]),
    ("crs_shift", ["min_candidates=100000"], ["field genre", "needs two", "min_candidates=100000"]),
])
def test_params_the_graph_cannot_run_with_fail_before_anything_is_written(tmp_path, graph, sets, words):
    args = [a for s in sets for a in ("--set", s)]
    one_line(["run", graph, *RUN, "--out", tmp_path / "runs", *args], *words)
    assert not (tmp_path / "runs").exists()


def test_eval_checks_its_inputs_as_run_does(tmp_path):
    out = tmp_path / "runs"
    assert cli("run", "crs_shift", "--sessions", "1", "--quiet", "--no-analysis", "--out", out, "--run-id", "src",
               "--set", "n_turns=2")[0] == 0
    results = out / "src" / "results.jsonl"
    one_line(["eval", results, "--out", tmp_path, "--run-id", "e1", "--set", "bogus=1", "--no-analysis"], "unknown param 'bogus'")
    one_line(["eval", results, "--out", tmp_path, "--run-id", "e2", "--model", "bogus=none", "--no-analysis"],
             "unknown model role 'bogus'")
    assert not (tmp_path / "e1").exists() and not (tmp_path / "e2").exists()
    (out / "src" / "config.yaml").write_text("graph: crs_shift\nparams: [1]\n")
    one_line(["eval", results, "--out", tmp_path, "--run-id", "e3", "--no-analysis"], "config.yaml", "field params")


def test_a_data_file_that_breaks_a_later_session_is_one_line(tmp_path):
    # customer_service draws each simulated user's goal from every domain: an empty one broke the
    # second session with an IndexError traceback, after the run directory was written
    src = ROOT / "catalog" / "data" / "service"
    db = tmp_path / "db"
    db.mkdir()
    for f in src.glob("*_db.json"):
        (db / f.name).write_text("[]" if f.name == "restaurant_db.json" else f.read_text())
    one_line(["run", "customer_service", *RUN, "--out", tmp_path / "runs", "--set", f"db_path={db}"],
             "restaurant_db.json", "no restaurant records")
    assert not (tmp_path / "runs").exists()


def test_an_analysis_hook_that_is_not_a_function_of_a_run_directory(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"graph: hello_chat\nsessions: 1\nout_dir: {tmp_path / 'runs'}\nanalysis: ['os:getcwd']\n")
    one_line(["run", cfg, "--quiet"], "field analysis", "not a function of a run directory")


def test_draw_ascii_falls_back_to_mermaid_when_the_layout_fails():
    code, out, _ = cli("draw", "group_planning", "--ascii")
    assert code == 0 and out.startswith("%%") and "Mermaid text instead" in out and "graph TD" in out


@pytest.mark.parametrize("embedder,words", [("bogus", "unknown embedder 'bogus'"),
                                            ("st:/nonexistent/model", "no sentence-transformers model directory")])
def test_an_embedder_is_checked_before_the_run(tmp_path, embedder, words):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"graph: group_planning\nembedder: '{embedder}'\n")
    one_line(["run", cfg, *RUN, "--out", tmp_path / "runs"], "embedder", words)
    assert not (tmp_path / "runs").exists()


def test_a_dialogue_file_with_fields_of_the_wrong_type_names_the_file(tmp_path, shared_data):
    # before: "customer_service, field sessions: ... TypeError: 'int' object is not iterable" (no file)
    dialogues = json.loads((shared_data / "multiwoz/dialogues_unified_sample.json").read_text())
    first = dialogues[0] if isinstance(dialogues, list) else next(iter(dialogues.values()))
    bad = tmp_path / "dialogues.json"
    bad.write_text(json.dumps([{**first, "domains": 5}]))
    one_line(["run", ROOT / "configs/service_replay.yaml", *RUN, "--out", tmp_path / "runs",
              "--set", f"dialogues_path={bad}"], str(bad), "record 0", "malformed dialogue")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("args,words", [(["run", "hello_chat", "--seed", "abc"], ["--seed", "valid integer"]),
                                        (["run", "hello_chat", "--bogus"], ["No such option: --bogus"]),
                                        (["trace"], ["Missing argument 'run'"])])
def test_a_usage_error_is_one_line_too(tmp_path, args, words):
    # before: click's six-line boxed usage message (through the real entry point, not CliRunner)
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "convsim", *args], capture_output=True, text=True, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
                               "COLUMNS": "300"})
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and all(w in lines[0] for w in words), proc.stderr


def test_a_session_id_is_not_a_glob_and_alpha_is_a_probability(tmp_path):
    out = tmp_path / "runs"
    assert cli("run", "hello_chat", "--sessions", "2", "--quiet", "--no-analysis", "--out", out, "--run-id", "r")[0] == 0
    one_line(["trace", out / "r", "*"], "no trace for session '*'")  # before: one arbitrary session
    for alpha in ("-1", "5", "nan"):
        one_line(["compare", out / "r", out / "r", "--alpha", alpha], "field alpha", "must be in (0, 1)")


def test_readers_agree_on_a_half_written_last_line(tmp_path):
    # resume and report cut the line a killed writer left half-written; compare called it bad input
    out = tmp_path / "runs"
    assert cli("run", "hello_chat", "--sessions", "2", "--quiet", "--no-analysis", "--out", out, "--run-id", "r")[0] == 0
    results = out / "r" / "results.jsonl"
    whole = results.read_bytes()
    results.write_bytes(whole + b'{"variant": "default", "session_id": "s009", "tr')
    code, text, exc = cli("compare", out / "r", out / "r")
    assert code == 0, (text, exc)
    results.write_bytes(whole + b"[1, 2]\n")  # a whole line that is not a record is still bad input
    one_line(["compare", out / "r", out / "r"], "results.jsonl", "line 3", "JSON array")


def test_a_prefix_for_a_graph_without_scripted_turns_and_a_misspelled_hook(tmp_path):
    prefix = tmp_path / "p.json"  # any dialogue file: hello_chat refuses every prefix
    prefix.write_text(json.dumps([{"dialogue_id": "d1", "turns": [
        {"speaker": "user", "utterance": "I need a cheap hotel in the north."},
        {"speaker": "system", "utterance": "The Acorn guest house is cheap and in the north."}]}]))
    one_line(["run", "hello_chat", *RUN, "--out", tmp_path / "runs", "--prefix", prefix], "field prefix",
             "cannot open sessions with scripted turns")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("graph: hello_chat\nanalysis: ['evaluaton.analysis:analyze_run']\n")
    one_line(["run", cfg, *RUN, "--out", tmp_path / "runs"], "field analysis", "no module 'evaluaton.analysis'")
    # the module exists, the function is misspelled: before, a warning after the whole run
    cfg.write_text("graph: hello_chat\nanalysis: ['convsim.evaluation.reporting.analysis:analyse_run']\n")
    one_line(["run", cfg, *RUN, "--out", tmp_path / "runs"], "field analysis",
             "module 'convsim.evaluation.reporting.analysis' defines no 'analyse_run'")
    assert not (tmp_path / "runs").exists()


def test_eval_scores_each_conversation_once(tmp_path):
    line = {"session_id": "d1", "variant": "v", "turns": [{"speaker": "user", "text": "I want a comedy"},
                                                         {"speaker": "system", "text": "Try Airplane!"}]}
    imported = tmp_path / "t.jsonl"
    imported.write_text(json.dumps(line) + "\n" + json.dumps(line) + "\n")
    one_line(["eval", imported, "--graph", "crs_shift", "--out", tmp_path, "--run-id", "e1", "--no-analysis"],
             str(imported), "record 2", "'d1'", "appears twice")
    # a run's own results.jsonl may hold a failed attempt before its re-run: the last one is evaluated
    out = tmp_path / "runs"
    assert cli("run", "crs_shift", "--sessions", "1", "--quiet", "--no-analysis", "--out", out, "--run-id", "src",
               "--set", "n_turns=2")[0] == 0
    results = out / "src" / "results.jsonl"
    (record,) = [json.loads(x) for x in results.read_text().splitlines()]
    results.write_text(json.dumps({**record, "status": "code_error"}) + "\n" + json.dumps(record) + "\n")
    assert cli("eval", results, "--out", tmp_path, "--run-id", "e2", "--no-analysis")[0] == 0
    assert len((tmp_path / "e2" / "results.jsonl").read_text().splitlines()) == 1
    # a session whose last attempt is unfinished (infra_error: a partial transcript) is not scored;
    # a simulator_failure stays one (kept out of the agent's scores, as in the run)
    second = {**record, "session_id": "other", "status": "simulator_failure"}
    results.write_text("\n".join(json.dumps(r) for r in (second, {**record, "status": "infra_error"})) + "\n")
    assert cli("eval", results, "--out", tmp_path, "--run-id", "e3", "--no-analysis")[0] == 0
    (evaluated,) = [json.loads(x) for x in (tmp_path / "e3" / "results.jsonl").read_text().splitlines()]
    assert evaluated["session_id"] == "other" and evaluated["status"] == "simulator_failure"
    summary = json.loads((tmp_path / "e3" / "summary.json").read_text())
    assert any("1 unfinished attempt(s)" in w for w in summary["warnings"])


def test_trace_with_an_unknown_key_is_bad_input(tmp_path):
    # before: an empty timeline ("0 of 10 steps") and exit 0 unless --at was given
    out = tmp_path / "runs"
    assert cli("run", "hello_chat", "--sessions", "1", "--quiet", "--no-analysis", "--out", out, "--run-id", "r")[0] == 0
    one_line(["trace", out / "r", "s000", "--key", "nope.x"], "field key", "no state key 'nope'")
    assert cli("trace", out / "r", "s000", "--key", "transcript")[0] == 0
    # a path under a known key that no state of the trace has (before: "0 of N steps", exit 0)
    one_line(["trace", out / "r", "s000", "--key", "transcript.0.nosuch"], "field key",
             "no path 'transcript.0.nosuch' in any state")
    one_line(["trace", out / "r", "s000", "--key", "transcript.99.text"], "field key", "no path")
    # a path that only later states have is fine (the transcript starts empty)
    assert cli("trace", out / "r", "s000", "--key", "transcript.2.text")[0] == 0


def test_a_hook_function_is_found_in_the_module_source_without_importing_it(tmp_path):
    from types import SimpleNamespace

    from convsim.running.preflight import defines
    src = tmp_path / "hooks.py"
    src.write_text("import optional_extra_not_installed as heavy\nfrom os.path import join as joined\n"
                   "def report(run_dir): pass\nclass Figures: pass\nsummary = report\n"
                   "try:\n    def maybe(run_dir): pass\nexcept ImportError:\n    pass\n")
    spec = SimpleNamespace(origin=str(src))
    for name in ("report", "Figures", "summary", "joined", "heavy", "maybe"):
        assert defines(spec, name) is True, name
    assert defines(spec, "reprot") is False
    src.write_text("def __getattr__(name): ...\n")
    assert defines(spec, "anything") is None  # a module-level __getattr__ may provide it
    src.write_text("from os.path import *\n")
    assert defines(spec, "join") is None
    assert defines(SimpleNamespace(origin="built-in"), "x") is None


@pytest.mark.parametrize("code", ["0", "1", "'bye'"])
def test_a_graph_file_that_exits_while_imported_is_one_line(tmp_path, code):
    # before: sys.exit(0) at import ended `run` and `draw` with exit 0, no output, nothing written
    graph = tmp_path / "graphs" / f"exits_{code.strip(chr(39))}.py"
    graph.parent.mkdir()
    graph.write_text(f"import sys\nsys.exit({code})\n")
    out = tmp_path / "runs"
    one_line(["run", graph, "--out", out, "--quiet"], "called sys.exit", str(graph))
    one_line(["draw", graph], "called sys.exit")
    assert not out.exists()
