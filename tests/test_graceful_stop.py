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


def _wait_for(cond, limit=60.0):
    end = time.monotonic() + limit  # a guard against a hang, not a measurement
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("timed out waiting")
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
