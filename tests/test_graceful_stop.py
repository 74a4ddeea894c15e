"""A stop stops (issue 39, item 2): on the first SIGTERM / SIGINT no new session or model call
starts, the HTTP calls in flight are cancelled, the finished sessions are written and the command
exits 143 (130) without waiting for the server. Driven through the CLI in a subprocess against a
slow stdlib server (tests/fault_server.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from fault_server import serve

SLOW_S = 120.0  # how long a delayed answer takes: far longer than any graceful exit


def _wait_for(cond, limit=60.0, state=lambda: None):
    end = time.monotonic() + limit  # a guard against a hang, not a measurement
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting ({state()})")
        time.sleep(0.05)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_a_run_against_a_slow_server(tmp_path, sig, code):
    # 6 fast answers (two sessions of 3 turns finish), then every answer takes SLOW_S
    def delay(n, request):
        return 0.0 if n < 7 else SLOW_S  # n 0: preflight's test request

    with serve(delay=delay) as server:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "CONVSIM_PREFLIGHT_MODELS": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "convsim", "run", "hello_chat", "--sessions", "8", "--concurrency", "2",
             "--model", f"agent=openai:fake@{server.url}", "--out", str(tmp_path), "--run-id", "stop",
             "--no-analysis", "--quiet"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            results = tmp_path / "stop" / "results.jsonl"
            _wait_for(lambda: len(server.arrivals) >= 9  # two calls waiting on the slow server ...
                      and results.exists() and len(results.read_text().splitlines()) == 2)  # ... two sessions done
            sent = time.monotonic()
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=60)
            exited = time.monotonic()
        finally:
            if proc.poll() is None:
                proc.kill()
        late = [t for t in server.arrivals if t > sent]
        print(f"signal-to-exit {exited - sent:.2f} s; requests after the signal: {len(late)}")
        assert proc.returncode == code, (out, err)
        assert late == []  # no model call started after the signal
        assert server.served["ok"] <= 7  # the slow calls were never answered: the command did not wait
        lines = [x for x in err.splitlines() if x.strip()]
        assert len(lines) == 1 and ("terminated" if code == 143 else "interrupted") in lines[0], err
        assert "resume" in lines[0], err
        records = [json.loads(x) for x in (tmp_path / "stop" / "results.jsonl").read_text().splitlines()]
        # the finished sessions are written (ok), the abandoned ones are not (they run again on resume)
        assert records and all(r["status"] == "ok" for r in records)
        assert len(records) == 2, [(r["session_id"], r["status"]) for r in records]
        assert (tmp_path / "stop" / "summary.json").exists()


def test_a_signal_cancels_streamed_calls_mid_answer_and_resume_reruns_them(tmp_path):
    """Streamed answers (``--stream``): two sessions finish, then every answer streams one word every
    30 s. SIGTERM while two calls are mid-answer: the calls are cancelled (the server sees its client
    leave each stream), nothing of the abandoned sessions is written, and the same command resumes
    them once the server is fast again."""
    slow = [True]

    def token_s(n, request):
        return 30.0 if slow[0] and n >= 6 else 0.0

    def answer(request):
        return "Paris. " + " ".join(["and"] * 40)

    with serve(answer=answer, token_s=token_s) as server:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "CONVSIM_PREFLIGHT_MODELS": "0"}
        args = [sys.executable, "-m", "convsim", "run", "hello_chat", "--sessions", "8", "--concurrency", "2",
                "--model", f"agent=openai:fake@{server.url}", "--out", str(tmp_path), "--run-id", "stop",
                "--no-analysis", "--quiet", "--stream"]
        proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            results = tmp_path / "stop" / "results.jsonl"
            _wait_for(lambda: server.stream_started >= 8  # two streams begun on the slow server ...
                      and results.exists() and len(results.read_text().splitlines()) == 2)  # ... two sessions done
            sent = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
            exited = time.monotonic()
        finally:
            if proc.poll() is None:
                proc.kill()
        print(f"streamed: signal-to-exit {exited - sent:.2f} s")
        assert proc.returncode == 143, (out, err)
        assert [t for t in server.arrivals if t > sent] == []
        _wait_for(lambda: server.stream_cut == 2)  # both streams left mid-answer by the client
        assert server.streamed == 6  # only the two finished sessions' answers were streamed to the end
        records = [json.loads(x) for x in results.read_text().splitlines()]
        assert len(records) == 2 and all(r["status"] == "ok" for r in records)
        done = {r["session_id"] for r in records}
        slow[0] = False
        rerun = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr
        records = [json.loads(x) for x in results.read_text().splitlines()]
        assert len(records) == 8 and all(r["status"] == "ok" for r in records)
        assert done < {r["session_id"] for r in records}


def _has_ray() -> bool:
    import importlib.util
    return importlib.util.find_spec("ray") is not None


@pytest.mark.parametrize("executor", ["process", pytest.param("ray", marks=pytest.mark.skipif(
    not _has_ray(), reason="the ray extra is not installed"))])
def test_a_signal_reaches_process_workers_mid_call_and_resume_runs_each_session_once(tmp_path, executor):
    """``--executor process --workers 2`` (and ``ray``: its actors): the driver relays its stop to the
    workers, which cancel their HTTP calls in flight and abandon their sessions (not waiting for the
    120-s answers). Sessions finish fast until two are written; SIGTERM while each worker waits on a
    slow call: exit 143, no request after the signal, only the finished sessions written; the same
    command then runs the others, each exactly once."""
    slow = [True]
    results = tmp_path / "stop" / "results.jsonl"

    def kept() -> int:
        return len(results.read_text().splitlines()) if results.exists() else 0

    def delay(n, request):  # fast until two sessions are written, then every call takes SLOW_S
        return SLOW_S if slow[0] and kept() >= 2 else 0.0

    with serve(delay=delay) as server:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "CONVSIM_PREFLIGHT_MODELS": "1"}
        args = [sys.executable, "-m", "convsim", "run", "hello_chat", "--sessions", "8", "--concurrency", "2",
                "--executor", executor, "--workers", "2",
                "--model", f"agent=openai:fake@{server.url}", "--out", str(tmp_path), "--run-id", "stop",
                "--no-analysis", "--quiet"]
        proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # both session slots (one per worker) wait on a slow call, after at least two sessions were written
            _wait_for(lambda: kept() >= 2 and server.in_service == 2, limit=300,
                      state=lambda: (len(server.arrivals), server.in_service, kept(), proc.poll(),
                                     proc.poll() is not None and proc.communicate()))
            before = kept()
            sent = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
            exited = time.monotonic()
        finally:
            if proc.poll() is None:
                proc.kill()
        late = [t for t in server.arrivals if t > sent]
        print(f"{executor} executor: signal-to-exit {exited - sent:.2f} s; requests after the signal: {len(late)} "
              f"({len(server.arrivals)} requests, {server.served}; {before} sessions written before the signal)")
        assert proc.returncode == 143, (out, err)
        assert late == []  # no model call started after the signal, in any worker
        # the two slow calls were never answered (cancelled): the workers did not wait for them
        assert server.served["ok"] == len(server.arrivals) - server.served["ping"] - 2, server.served
        lines = [x for x in err.splitlines() if x.strip()]  # (Ray says first how many workers it started)
        assert "terminated" in lines[-1] and "resume" in lines[-1] and "Traceback" not in err, err
        records = [json.loads(x) for x in results.read_text().splitlines()]
        # the finished sessions are written, the abandoned ones are not (they run again on resume)
        assert len(records) == before and all(r["status"] == "ok" for r in records), records
        assert not (tmp_path / "stop" / "errors.jsonl").exists() or not (
            tmp_path / "stop" / "errors.jsonl").read_text().strip()
        assert (tmp_path / "stop" / "summary.json").exists()
        done = {r["session_id"] for r in records}
        slow[0] = False
        rerun = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr
        records = [json.loads(x) for x in results.read_text().splitlines()]
        ids = [r["session_id"] for r in records]
        assert len(ids) == 8 and len(set(ids)) == 8 and all(r["status"] == "ok" for r in records), ids
        assert done < set(ids)
