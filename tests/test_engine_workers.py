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
    """Every descendant of ``pid``: the workers are the children of the executor's fork server,
    itself the driver's child (or the driver's own children where workers are spawned)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
    out, frontier = [], [pid]
    while frontier:
        kids = [child for child, parent in parents.items() if parent in frontier]
        out += kids
        frontier = kids
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
        assert len(workers) >= 3  # the two workers, the fork server (and the resource tracker)
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
    assert _wait_for(lambda: not any(_alive(p) for p in workers), 30), \
        f"orphaned workers still alive: {[p for p in workers if _alive(p)]}"


STOPS = {  # how the run is stopped -> (signal, to the whole process group?, exit code, first word)
    "ctrl-c": (signal.SIGINT, True, 130, "interrupted"),
    # a batch scheduler (Slurm) signals every process of the job; Kubernetes and `kill` the driver only
    "sigterm-group": (signal.SIGTERM, True, 143, "terminated (SIGTERM)"),
    "sigterm": (signal.SIGTERM, False, 143, "terminated (SIGTERM)"),
}


def stop_a_run(tmp_path, executor: str, stop: str, extra: tuple = ()) -> tuple[int, list[str], list[int]]:
    """Start a long hello_chat run, stop it once sessions land; (exit code, stderr lines, the pids that
    were the driver's children)."""
    sig, group, _, _ = STOPS[stop]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}  # (Ray writes ~/.ray)
    cmd = [sys.executable, "-m", "convsim", "run", "hello_chat", "--sessions", "100000", "--executor", executor,
           "--workers", "2", "--concurrency", "4", "--out", str(tmp_path), "--run-id", "int", "-q", "--no-trace",
           "--no-analysis", *extra]
    # a shell's background job ignores SIGINT: the child restores the default and leads its own group
    parent = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: (signal.signal(signal.SIGINT, signal.SIG_DFL), os.setpgrp()))
    results = tmp_path / "int" / "results.jsonl"
    try:
        assert _wait_for(lambda: results.exists() and results.stat().st_size > 0, 120), "the run never started"
        workers = [p for p in _children(parent.pid) if _alive(p)]
        if group:
            os.killpg(parent.pid, sig)
        else:
            os.kill(parent.pid, sig)
        _, err = parent.communicate(timeout=60)
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait()
    return parent.returncode, err.strip().splitlines(), workers


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("executor, stop", [("process", "ctrl-c"), ("async", "ctrl-c"), ("process", "sigterm-group"),
                                            ("process", "sigterm"), ("async", "sigterm")])
def test_ctrl_c_or_sigterm_stops_the_run_with_one_line_and_keeps_what_landed(tmp_path, executor, stop):
    """Ctrl-C (SIGINT to the whole process group): exit 130 with one line, no worker left behind (and
    no worker's KeyboardInterrupt traceback), every landed line whole. SIGTERM the same, with exit 143:
    before, it killed the driver mid-write with no word (the process executor's workers, signalled
    with it, died first and the stop read as a worker's crash)."""
    code, err, workers = stop_a_run(tmp_path, executor, stop)
    _, _, expected_code, how = STOPS[stop]
    assert code == expected_code
    assert err == [f"{how}: the sessions that finished are kept; run the same command (same --run-id) again "
                   "to resume"]
    assert _wait_for(lambda: not any(_alive(p) for p in workers), 30)
    from convsim.running.store import RunStore
    kept = RunStore(tmp_path / "int").records()  # every line parses (a cut last line would be repaired)
    assert kept and all(r["status"] == "ok" for r in kept)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux)")
def test_sigterm_stops_a_fork_with_one_line_and_the_fork_resumes(tmp_path):
    """Before, Ctrl-C in `convsim fork` printed 'aborted' with exit 1 and SIGTERM killed it silently."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    graph = str(ROOT / "tests" / "data" / "graphs" / "slow_chat.py")
    base = [sys.executable, "-m", "convsim"]
    subprocess.run(base + ["run", graph, "--sessions", "1", "--checkpoint", "--out", str(tmp_path), "--run-id", "o",
                           "-q", "--no-analysis"], cwd=ROOT, env=env, check=True, capture_output=True)
    fork = base + ["fork", str(tmp_path / "o"), "s000", "--step", "2", "--run-id", "f", "--no-analysis"]
    fork += ["--set", "pause_s=3"]  # the forked part's agent pauses 3 s a turn: SIGTERM lands during one
    slow = subprocess.Popen(fork, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_for(lambda: (tmp_path / "f" / "config.yaml").exists(), 60), "the fork never started"
        time.sleep(1)
        slow.send_signal(signal.SIGTERM)
        _, err = slow.communicate(timeout=60)
    finally:
        if slow.poll() is None:
            slow.kill()
            slow.wait()
    assert slow.returncode == 143
    assert err.strip().splitlines() == ["terminated (SIGTERM): the fork keeps its checkpoint: the same fork "
                                        "command with --run-id <the fork's directory name> resumes it"]
    assert not (tmp_path / "f" / "results.jsonl").read_text().strip()  # nothing landed
    done = subprocess.run(fork, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    from convsim.running.store import RunStore
    assert [r["status"] for r in RunStore(tmp_path / "f").records()] == ["ok"]


class _RaisesInDel:
    def __del__(self):
        raise KeyboardInterrupt  # as a Ctrl-C landing in a weakref callback or a __del__ does


def test_a_ctrl_c_python_swallowed_still_stops_the_command():
    """Before, a Ctrl-C landing in a weakref callback (seen 4 times in 20 late Ctrl-Cs, while the
    report was written) was printed as "Exception ignored" and the run went on to exit 0. It still
    goes on (Python swallowed the exception), but it ends as interrupted: one line, exit 130."""
    import typer
    from convsim.cli import stopped_cleanly
    before = sys.unraisablehook
    with pytest.raises(typer.Exit) as stop:
        with stopped_cleanly("kept"):
            _RaisesInDel()  # swallowed: Python calls sys.unraisablehook
    assert stop.value.exit_code == 130
    assert sys.unraisablehook is before  # put back


def test_other_unraisable_exceptions_still_reach_the_previous_hook():
    from convsim.cli import stopped_cleanly
    seen = []
    previous, sys.unraisablehook = sys.unraisablehook, lambda u: seen.append(u.exc_type)
    try:
        class Bad:
            def __del__(self):
                raise ValueError("x")
        with stopped_cleanly("kept"):
            Bad()
    finally:
        sys.unraisablehook = previous
    assert seen == [ValueError]


def test_a_file_written_atomically_is_never_left_cut(tmp_path, monkeypatch):
    """config.yaml and summary.json: before, a kill while writing left a cut config.yaml (the resume
    then refused the run). A write that fails midway leaves the old file whole, and no temporary."""
    from convsim.textio import write_atomic
    target = tmp_path / "config.yaml"
    write_atomic(target, "name: a\nsessions: 4\n")
    real = Path.write_text

    def cut(self, text, *a, **k):
        real(self, text[:5], *a, **k)
        raise KeyboardInterrupt  # killed midway
    monkeypatch.setattr(Path, "write_text", cut)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, "name: b\nsessions: 8\n")
    monkeypatch.undo()
    assert target.read_text() == "name: a\nsessions: 4\n"
    assert [p.name for p in tmp_path.iterdir()] == ["config.yaml"]
    write_atomic(target, "name: b\nsessions: 8\n")
    assert target.read_text() == "name: b\nsessions: 8\n"
