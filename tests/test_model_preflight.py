"""A missing model or a dead server (issue 39, item 3): preflight asks each model server once and
refuses a missing model (HTTP 404) or an unreachable server with one line, exit 2, nothing written;
a 404 during a run is an infra_error (never code_error); a run whose server dies mid-way stops
scheduling after ``retry.stop_after_infra_errors`` infra errors in a row and exits 3, resumable."""
from __future__ import annotations

import json
import socket
import threading

import pytest

from cli_helpers import cli, one_line
from fault_server import serve


@pytest.fixture(autouse=True)
def model_check_on(monkeypatch):
    monkeypatch.setenv("CONVSIM_PREFLIGHT_MODELS", "1")  # (off in the rest of the suite: conftest.py)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_missing_model_is_refused_before_anything_is_written(tmp_path):
    with serve(models={"there"}) as server:
        line = one_line(["run", "hello_chat", "--sessions", "2", "--model", f"agent=openai:gone@{server.url}",
                         "--out", tmp_path, "--run-id", "r", "--no-analysis", "-q"],
                        "model not found", "HTTP 404", "openai:gone", "role agent")
        assert server.served["404"] == 1  # asked once
    assert not (tmp_path / "r").exists(), line


def test_an_unreachable_server_is_refused_before_anything_is_written(tmp_path):
    url = f"http://127.0.0.1:{_free_port()}/v1"
    one_line(["run", "hello_chat", "--sessions", "2", "--model", f"agent=openai:m@{url}", "--out", tmp_path,
              "--run-id", "r", "--no-analysis", "-q"], "unreachable", "role agent")
    assert not (tmp_path / "r").exists()


def test_a_served_model_passes_and_each_server_is_asked_once(tmp_path):
    with serve(models={"m"}) as server:
        code, out, exc = cli("run", "hello_chat", "--sessions", "2", "--model", f"agent=openai:m@{server.url}",
                             "--model", f"judge=openai:m@{server.url}", "--out", tmp_path, "--run-id", "r",
                             "--no-analysis", "-q")
        assert code == 0, (out, exc)
        assert server.served["ping"] == 1


def test_a_model_removed_mid_run_is_infra_error_not_code_error(tmp_path):
    with serve(models={"m"}) as server:
        cfg = tmp_path / "c.yaml"
        # the breaker off: every session meets the 404
        cfg.write_text(f"graph: hello_chat\nsessions: 3\nconcurrency: 1\nout_dir: {tmp_path}\nrun_id: r\n"
                       f"analysis: []\nmodels: {{agent: 'openai:m@{server.url}'}}\n"
                       "retry: {attempts: 3, initial_wait: 0, stop_after_infra_errors: null}\n")
        gone_after_ping(server)  # preflight's request finds the model, every later one a 404
        code, out, exc = cli("run", cfg, "-q")
    records = [json.loads(x) for x in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    assert {r["status"] for r in records} == {"infra_error"} and len(records) == 3
    assert all("model not found (HTTP 404)" in r["error"] for r in records)
    # not retried: one attempt per session
    assert all(len(r["llm_calls"]) == 1 for r in records)
    errors = [json.loads(x) for x in (tmp_path / "r" / "errors.jsonl").read_text().splitlines()]
    assert {e["kind"] for e in errors} == {"infrastructure"}


def gone_after_ping(server):
    """Let preflight's one request through (the model is there), then answer 404 to every request."""
    server.models = None
    done = threading.Event()

    def watch():
        while server.served["ping"] < 1:
            done.wait(0.01)
        server.models = set()
    threading.Thread(target=watch, daemon=True).start()


def test_a_server_dying_mid_run_stops_scheduling_and_exits_3_resumable(tmp_path):
    # the first session's 3 calls are answered, then the server answers HTTP 500 to everything
    with serve(script=["ok"] * 3 + ["500"] * 1000) as server:
        cfg = tmp_path / "c.yaml"
        cfg.write_text(f"graph: hello_chat\nsessions: 20\nconcurrency: 1\nout_dir: {tmp_path}\nrun_id: r\n"
                       f"analysis: []\nmodels: {{agent: 'openai:m@{server.url}'}}\n"
                       "retry: {attempts: 2, initial_wait: 0, max_wait: 0, stop_after_infra_errors: 3}\n")
        code, out, exc = cli("run", cfg, "-q")
        assert code == 3, (out, exc)
        assert "3 sessions in a row ended infra_error" in out and "run the same command again" in out, out
        records = [json.loads(x) for x in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
        assert [r["status"] for r in records] == ["ok", "infra_error", "infra_error", "infra_error"]
        # the server is back: the same command resumes the rest
        server.script.clear()
        code, out, exc = cli("run", cfg, "-q")
        assert code == 0, (out, exc)
    records = {}
    for x in (tmp_path / "r" / "results.jsonl").read_text().splitlines():
        r = json.loads(x)
        records[r["session_id"]] = r["status"]
    assert len(records) == 20 and set(records.values()) == {"ok"}
