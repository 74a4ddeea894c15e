"""What crosses a process boundary, and what a failure record says, do not depend on the executor."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import convsim
from convsim.running.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
ODD = str(ROOT / "tests" / "data" / "graphs" / "odd_chat.py")


def _run(tmp_path, run_id, odd, **over):
    cfg = {"name": "odd", "graph": ODD, "sessions": 3, "seed": 5, "out_dir": str(tmp_path), "analysis": [],
           "params": {"n_turns": 2, "odd": odd}, "concurrency": 2, **over}
    return convsim.run(cfg, run_id=run_id, analyze=False)


def _errors(run_dir: Path) -> dict:
    recs = {r["session_id"]: r for r in RunStore(run_dir).records()}
    logged = [json.loads(line)["error"] for line in (run_dir / "errors.jsonl").read_text().splitlines()]
    return {"records": {sid: (r["status"], r["error"]) for sid, r in sorted(recs.items())}, "errors.jsonl": logged}


EXECUTORS = [{}, {"executor": "process", "workers": 1},
             pytest.param({"executor": "ray", "workers": 1}, marks=pytest.mark.slow, id="ray")]


@pytest.mark.parametrize("executor", EXECUTORS, ids=lambda e: e.get("executor", "async"))
def test_failure_records_are_the_same_text_on_every_executor(tmp_path, executor):
    # before, the error kept the six outermost frames (runner and LangGraph, never the node that
    # raised) with absolute paths, and LangGraph's note named the task by a random id: two runs of
    # the same config, on any executor, wrote different agent_failure records
    if executor.get("executor") == "ray":
        pytest.importorskip("ray", reason="the ray extra is not installed")
    first = _errors(_run(tmp_path, "a", "raise"))
    assert first == _errors(_run(tmp_path, "b", "raise", **executor))
    status, error = first["records"]["s001"]
    assert status == "agent_failure" and error.startswith("AgentError: the agent gave up\n")
    assert 'graphs/odd_chat.py", line' in error and "in odd_agent" in error  # the node's own frame
    assert 'File "/' not in error and " and id '" not in error
    assert first["records"]["s002"][0] == "code_error" and first["errors.jsonl"][0].startswith("RuntimeError: a bug")


def test_an_event_that_does_not_pickle_does_not_stop_a_worker(tmp_path):
    # before, the session's events crossed the pipe as the graph made them: a lock in one made the
    # worker's session thread die, and the driver waited forever for its outcome
    a = _run(tmp_path, "a", "bad_event")
    b = _run(tmp_path, "b", "bad_event", executor="process", workers=2)
    assert [r["status"] for r in RunStore(b).records()] == ["ok"] * 3
    assert sorted(RunStore(a).records(), key=lambda r: r["session_id"])[1]["transcript"] == \
        sorted(RunStore(b).records(), key=lambda r: r["session_id"])[1]["transcript"]


def _cli(*args, timeout=120, env=None):
    return subprocess.run([sys.executable, "-m", "convsim", "run", *args, "-q", "--no-analysis"], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env=None if env is None else {**os.environ, **env})


def test_a_session_init_that_does_not_pickle_is_one_line_for_the_process_executor(tmp_path):
    # before, the queue's feeder thread dropped the unit and the run waited forever
    done = _cli(ODD, "--set", "odd=bad_init", "--sessions", "3", "--executor", "process", "--workers", "1",
                "--out", str(tmp_path), "--run-id", "bad")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "odd_chat.py" in done.stderr and "s001" in done.stderr and "--executor async" in done.stderr


@pytest.mark.parametrize("address", ["127.0.0.1:1", "ray://127.0.0.1:1", "not-an-address"])
def test_an_unreachable_ray_address_is_one_line_and_writes_nothing(tmp_path, address):
    # before, Ray retried for minutes, printing C++ warnings, after the run directory was written
    done = _cli("hello_chat", "--executor", "ray", "--address", address, "--out", str(tmp_path), "--run-id", "x",
                timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "address" in done.stderr
    assert not (tmp_path / "x").exists()


def test_address_auto_is_checked_where_ray_would_look(tmp_path):
    # auto resolves as Ray resolves it (RAY_ADDRESS here), then must answer: before, a stale address
    # made Ray retry for minutes, after the run directory was written
    pytest.importorskip("ray", reason="the ray extra is not installed")
    done = _cli("hello_chat", "--executor", "ray", "--address", "auto", "--out", str(tmp_path), "--run-id", "x",
                timeout=60, env={"RAY_ADDRESS": "127.0.0.1:1"})
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "127.0.0.1:1" in done.stderr, done.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("executor", ["process", "ray"])
def test_async_nodes_with_checkpoints_on_workers_is_one_line(tmp_path, executor):
    # a worker's checkpointer is sync: every session of such a graph failed (code_error), and since
    # the earlier attempt's thread is cleared first, the run crashed with a traceback
    done = _cli(ODD, "--set", "odd=async", "--checkpoint", "--sessions", "2", "--executor", executor,
                "--workers", "1", "--out", str(tmp_path), "--run-id", "x")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "async API" in done.stderr and "--executor async" in done.stderr
    assert not (tmp_path / "x").exists()
    ok = _run(tmp_path, "a", "async", checkpoint=True)  # the asyncio executor runs it
    assert [r["status"] for r in RunStore(ok).records()] == ["ok"] * 3


def test_error_paths_are_relative_whatever_the_import_path(tmp_path, monkeypatch):
    # '' on sys.path is the working directory; convsim's own frames are relative even when the
    # project root is not on sys.path (an editable install), as on a Ray worker where it always is
    import importlib
    import os
    from convsim import textio
    from convsim.errors import ConvsimError
    from convsim.running.session import error_text
    (tmp_path / "boom_mod.py").write_text("def boom():\n    raise ValueError('boom')\n")
    monkeypatch.chdir(tmp_path)
    root = str(ROOT)
    monkeypatch.setattr(sys, "path", [""] + [p for p in sys.path if p and os.path.abspath(p) != root])
    boom = importlib.import_module("boom_mod")
    try:
        boom.boom()
    except ValueError as exc:
        assert 'File "boom_mod.py", line 2, in boom' in error_text(exc)
    try:
        textio.parse_json("{", file="f.json")
    except ConvsimError as exc:
        assert 'File "convsim/textio.py"' in error_text(exc) and 'File "/' not in error_text(exc)


def test_the_progress_bar_event_is_plain_numbers():
    from convsim.running.progress import turn_metrics_event
    event = {"kind": "turn", "metrics": {"huge": 10 ** 400, "flag": True, "nan": float("nan"), "x": 1, "s": "a"}}
    assert turn_metrics_event(event) == {"kind": "turn", "metrics": {"x": 1.0}}
    assert turn_metrics_event({"kind": "dialogue", "metrics": {"x": 1}}) is None
