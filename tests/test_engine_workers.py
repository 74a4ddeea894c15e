"""Process-pool workers end when their parent dies, even by kill -9, and with a Ctrl-C (no orphans)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie has ended; only its exit status is left


def _wait_for(predicate, limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux)")
def test_workers_die_with_a_killed_parent(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(ROOT)}
    parent = subprocess.Popen(
        [sys.executable, "-m", "convsim", "run", "hello_chat", "--sessions", "100000", "--executor", "process",
         "--workers", "2", "--out", str(tmp_path), "--run-id", "long", "-q", "--no-trace", "--no-analysis"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = tmp_path / "long" / "results.jsonl"
    try:
        # workers are running sessions once results arrive
        assert _wait_for(lambda: results.exists() and results.stat().st_size > 0, 120), "the run never started"
        workers = [p for p in _children(parent.pid) if _alive(p)]
        assert len(workers) >= 2  # the two workers (and spawn's resource tracker)
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
    assert _wait_for(lambda: not any(_alive(p) for p in workers), 30), \
        f"orphaned workers still alive: {[p for p in workers if _alive(p)]}"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("executor", ["process", "async"])
def test_ctrl_c_stops_the_run_with_one_line_and_keeps_what_landed(tmp_path, executor):
    """Ctrl-C (SIGINT to the whole process group): exit 130 with one line, no worker left behind (and
    no worker's KeyboardInterrupt traceback), every landed line whole."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(ROOT)}
    cmd = [sys.executable, "-m", "convsim", "run", "hello_chat", "--sessions", "100000", "--executor", executor,
           "--workers", "2", "--concurrency", "4", "--out", str(tmp_path), "--run-id", "int", "-q", "--no-trace",
           "--no-analysis"]
    # a shell's background job ignores SIGINT: the child restores the default and leads its own group
    parent = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: (signal.signal(signal.SIGINT, signal.SIG_DFL), os.setpgrp()))
    results = tmp_path / "int" / "results.jsonl"
    try:
        assert _wait_for(lambda: results.exists() and results.stat().st_size > 0, 120), "the run never started"
        workers = [p for p in _children(parent.pid) if _alive(p)]
        os.killpg(parent.pid, signal.SIGINT)
        _, err = parent.communicate(timeout=60)
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait()
    assert parent.returncode == 130
    assert err.strip().splitlines() == ["interrupted: the sessions that finished are kept; run the same command "
                                        "(same --run-id) again to resume"]
    assert _wait_for(lambda: not any(_alive(p) for p in workers), 30)
    from convsim.store import RunStore
    kept = RunStore(tmp_path / "int").records()  # every line parses (a cut last line would be repaired)
    assert kept and all(r["status"] == "ok" for r in kept)
