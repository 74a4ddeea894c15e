"""A busy server is not a failure (issue 39, item 4): against a single-slot server (llama.cpp with
one slot answers one request at a time, the others wait in its queue) with 8 sessions in flight,
the request timeout measures the server's work, not its queue: preflight reads the server's slots
(``GET /props`` ``total_slots``) and the run keeps that many calls in flight, the others wait in
convsim, where no timeout runs. ``--timeout`` sets the request timeout."""
from __future__ import annotations

import json

import pytest

from cli_helpers import cli
from fault_server import serve
from convsim.running.model_check import server_slots

WORK_S = 0.25  # what the server computes per request
TIMEOUT_S = 1.0  # the request timeout: 4 requests' work, shorter than 8 sessions' queue


@pytest.fixture(autouse=True)
def model_check_on(monkeypatch):
    monkeypatch.setenv("CONVSIM_PREFLIGHT_MODELS", "1")  # (off in the rest of the suite: conftest.py)


def _run(tmp_path, url, run_id, *extra):
    cfg = tmp_path / f"{run_id}.yaml"
    cfg.write_text(f"graph: hello_chat\nsessions: 8\nconcurrency: 8\nout_dir: {tmp_path}\nrun_id: {run_id}\n"
                   f"analysis: []\ntrace: false\nmodels: {{agent: 'openai:m@{url}'}}\n"
                   "retry: {attempts: 1, stop_after_infra_errors: null}\n")
    code, out, exc = cli("run", cfg, "--timeout", TIMEOUT_S, "-q", *extra)
    records = [json.loads(x) for x in (tmp_path / run_id / "results.jsonl").read_text().splitlines()]
    return code, out, exc, records


def test_eight_sessions_on_a_single_slot_server_have_no_infra_errors(tmp_path):
    with serve(slots=1, props={"total_slots": 1}, delay=lambda n, r: WORK_S) as server:
        code, out, exc, records = _run(tmp_path, server.url, "capped")
        assert code == 0, (out, exc)
        assert len(records) == 8 and {r["status"] for r in records} == {"ok"}
        assert server.max_in_service == 1
    saved = (tmp_path / "capped" / "config.yaml").read_text()
    assert "max_in_flight_by_server" in saved and server.url in saved  # what the run kept, recorded


def test_without_the_cap_the_queue_would_time_out(tmp_path):
    """The control: the same server and timeout with 8 calls allowed in flight: requests time out
    waiting in the server's queue (what the cap prevents)."""
    with serve(slots=1, props={"total_slots": 1}, delay=lambda n, r: WORK_S) as server:
        code, out, exc, records = _run(tmp_path, server.url, "uncapped", "--max-in-flight", "8")
    assert any(r["status"] == "infra_error" and "timeout" in r["error"] for r in records), records


def test_what_a_server_reports_of_its_slots(tmp_path):
    with serve(props={"total_slots": 3}) as server:
        assert server_slots(server.url) == 3
    with serve() as server:  # a server that says nothing: no cap
        assert server_slots(server.url) is None
    # llama-cpp-python's server (one request at a time) lists its models as owned by "me"
    llama_cpp_python = {"object": "list", "data": [{"id": "gemma", "object": "model", "owned_by": "me",
                                                    "permissions": []}]}
    with serve(listing=llama_cpp_python) as server:
        assert server_slots(server.url) == 1
    with serve(listing={"object": "list", "data": [{"id": "gpt", "object": "model", "owned_by": "openai"}]}) as server:
        assert server_slots(server.url) is None


def test_streamed_the_queue_is_not_timed_without_a_cap(tmp_path):
    """Streamed answers (``--stream``): the same single-slot server with 8 calls allowed in flight
    (the control above, which times out) has 0 infra errors: the long first-token timeout covers
    the server's queue, the short idle timeout (1 s, as the request timeout above) its work."""
    with serve(slots=1, props={"total_slots": 1}, delay=lambda n, r: WORK_S) as server:
        code, out, exc, records = _run(tmp_path, server.url, "streamed", "--max-in-flight", "8", "--stream",
                                       "--idle-timeout", TIMEOUT_S)
        assert code == 0, (out, exc)
        assert len(records) == 8 and {r["status"] for r in records} == {"ok"}, records
        # 8 sessions x 3 turns, and preflight's test request: all streamed
        assert server.max_in_service == 1 and len(server.finished) == 24 and server.streamed == 25
