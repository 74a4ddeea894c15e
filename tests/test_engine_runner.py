"""The runner: run layout, determinism, pairing of seeds, resume after a kill, errors."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import convsim
from convsim import ConvsimError
from convsim.running.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
SLOW = str(ROOT / "tests" / "data" / "graphs" / "slow_chat.py")


def write_config(tmp_path, **over):
    cfg = {"name": "t", "graph": "hello_chat", "sessions": 6, "seed": 3, "out_dir": str(tmp_path / "runs"),
           "analysis": [], "params": {"n_turns": 3}}
    cfg.update(over)
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def stable_lines(run_dir: Path) -> list[dict]:
    out = []
    for rec in RunStore(run_dir).records():
        rec = {k: v for k, v in rec.items() if k not in ("run_id", "elapsed_s")}
        out.append(rec)
    return sorted(out, key=lambda r: (r["variant"], r["session_id"], r["trial"]))


def test_run_layout(tmp_path):
    run_dir = convsim.run(write_config(tmp_path), run_id="a")
    assert run_dir == tmp_path / "runs" / "a"
    for name in ("config.yaml", "results.jsonl", "metrics.csv", "summary.json"):
        assert (run_dir / name).exists(), name
    recs = RunStore(run_dir).records()
    assert len(recs) == 6 and all(r["status"] == "ok" for r in recs)
    rec = recs[0]
    assert {"transcript", "turn_metrics", "dialogue_metrics", "seed", "models", "params"} <= set(rec)
    assert len(rec["turn_metrics"]) == 3
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["variants"]["default"]["metrics"]["accuracy"]["n"] == 6
    assert len(list((run_dir / "traces" / "default").glob("*.jsonl"))) == 6


def test_same_config_and_seed_give_identical_results(tmp_path):
    cfg = write_config(tmp_path, concurrency=3)
    a = convsim.run(cfg, run_id="a")
    b = convsim.run(cfg, run_id="b")
    assert stable_lines(a) == stable_lines(b)
    c = convsim.run(cfg, run_id="c", seed=99)
    assert [r["seed"] for r in stable_lines(c)] != [r["seed"] for r in stable_lines(a)]


def test_variants_are_paired(tmp_path):
    cfg = write_config(tmp_path, variants=[{"name": "x"}, {"name": "y", "params": {"n_turns": 2}}])
    recs = stable_lines(convsim.run(cfg, run_id="p"))
    by = {(r["variant"], r["session_id"]): r for r in recs}
    for sid in {r["session_id"] for r in recs}:
        x, y = by[("x", sid)], by[("y", sid)]
        assert x["seed"] == y["seed"]
        assert x["questions"][:2] == y["questions"][:2]


def test_resume_skips_finished_sessions_and_repairs_a_cut_line(tmp_path):
    cfg = write_config(tmp_path)
    run_dir = convsim.run(cfg, run_id="r")
    path = run_dir / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2]) + lines[2][: len(lines[2]) // 2])  # crash mid-write
    convsim.run(cfg, run_id="r")
    keys = [(r["variant"], r["session_id"]) for r in RunStore(run_dir).records()]
    assert len(keys) == 6 and len(set(keys)) == 6


def test_resume_after_a_real_kill(tmp_path):
    cfg = write_config(tmp_path, graph=SLOW, sessions=8, concurrency=1, params={"n_turns": 3, "pause_s": 0.15})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "convsim.cli", "run", str(cfg), "--run-id", "k", "--quiet", "--no-analysis"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    results = tmp_path / "runs" / "k" / "results.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline:
        if results.exists() and len(results.read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = len(results.read_text().splitlines())
    assert 2 <= first < 8, "the kill must land midway"
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    keys = [r["session_id"] for r in RunStore(tmp_path / "runs" / "k").records()]
    assert sorted(keys) == sorted(set(keys)) and len(keys) == 8


def test_bad_params_name_the_field(tmp_path):
    with pytest.raises(ConvsimError) as err:
        convsim.run(write_config(tmp_path, params={"n_turns": -1}))
    assert "params.n_turns" in str(err.value)


def test_turn_metrics_are_streamed_live(tmp_path):
    from convsim.running.progress import LiveProgress
    seen = []
    original = LiveProgress.observe

    def spy(self, event):
        seen.append(event)
        return original(self, event)
    LiveProgress.observe = spy
    try:
        convsim.run(write_config(tmp_path, sessions=2), run_id="live")
    finally:
        LiveProgress.observe = original
    turn_events = [e for e in seen if e.get("kind") == "turn"]
    assert len(turn_events) == 2 * 3
    assert set(turn_events[0]["metrics"]) == {"correct", "answer_words"}


def test_identical_results_across_processes_and_concurrency(tmp_path):
    """Same config and seed: identical results.jsonl in fresh processes with different hash seeds
    and different numbers of sessions in flight (the executor changes throughput, never results)."""
    cfg = write_config(tmp_path, graph="crs_shift", sessions=6, params={"n_turns": 8, "judge": True})
    outs = []
    for hashseed, conc in (("1", "1"), ("2", "4")):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": hashseed}
        proc = subprocess.run([sys.executable, "-m", "convsim.cli", "run", str(cfg), "--run-id", f"h{hashseed}",
                               "--quiet", "--no-analysis", "--no-trace", "--concurrency", conc],
                              cwd=tmp_path, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        outs.append(stable_lines(tmp_path / "runs" / f"h{hashseed}"))
    for rec in outs[0] + outs[1]:
        for call in rec["llm_calls"]:
            call.pop("latency_s", None)
    assert outs[0] == outs[1]


def test_process_executor_gives_the_same_results(tmp_path):
    """executor: process (a pool for CPU-bound runs) lands the same records through the same writer."""
    base = dict(graph="crs_shift", sessions=4, params={"n_turns": 5}, seed=11)
    a = convsim.run(write_config(tmp_path, **base), run_id="async")
    b = convsim.run(write_config(tmp_path, **base, executor="process", workers=2), run_id="proc")
    strip = lambda recs: [{k: v for k, v in r.items() if k != "llm_calls"} for r in recs]  # noqa: E731
    assert strip(stable_lines(a)) == strip(stable_lines(b))
    assert len(list((b / "traces").rglob("*.jsonl"))) == 4


def test_process_executor_keeps_checkpoints(tmp_path):
    from langgraph.checkpoint.sqlite import SqliteSaver
    run_dir = convsim.run(write_config(tmp_path, executor="process", workers=2, checkpoint=True), run_id="pc")
    mod = convsim.load_graph_module("hello_chat")
    with SqliteSaver.from_conn_string(str(run_dir / "checkpoints.sqlite")) as saver:
        graph = mod.build(mod.Params()).compile(checkpointer=saver)
        for rec in RunStore(run_dir).records():
            snap = graph.get_state({"configurable": {"thread_id": f"default/{rec['session_id']}/t0"}})
            assert snap.next == () and snap.values["transcript"] == rec["transcript"]


def test_resuming_with_a_different_config_is_refused(tmp_path):
    cfg = write_config(tmp_path, sessions=2)
    convsim.run(cfg, run_id="same")
    more = convsim.run(cfg, run_id="same", sessions=4)  # more sessions: the run is extended
    assert len(RunStore(more).records()) == 4
    with pytest.raises(ConvsimError) as err:
        convsim.run(cfg, run_id="same", seed=4)
    assert "seed" in str(err.value) and "config.yaml" in str(err.value)


def test_a_resume_may_add_sessions_but_not_drop_them(tmp_path):
    # before, --sessions 2 on a 3-session run was accepted: config.yaml said 2, results and the summary kept 3
    import convsim
    from convsim import ConvsimError
    cfg = {"name": "g", "graph": "hello_chat", "out_dir": str(tmp_path), "analysis": [], "params": {"n_turns": 1}}
    convsim.run(cfg, sessions=3, run_id="r", analyze=False)
    with pytest.raises(ConvsimError, match="may add sessions, not drop them"):
        convsim.run(cfg, sessions=2, run_id="r", analyze=False)
    assert "sessions: 3" in (tmp_path / "r" / "config.yaml").read_text()
    convsim.run(cfg, sessions=4, run_id="r", analyze=False)  # growing is a resume


def test_the_summary_counts_the_sessions_its_metrics_average_over(tmp_path):
    """Before, the printed table's header said n=<sessions ok> above metrics that average ok and
    agent-failure sessions (an all-agent-failure variant read "n=0" over metrics with n=2)."""
    odd = str(ROOT / "tests" / "data" / "graphs" / "odd_chat.py")  # s001's agent raises AgentError
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}
    done = subprocess.run([sys.executable, "-m", "convsim", "run", odd, "--sessions", "2", "--out", str(tmp_path),
                           "--run-id", "s", "--no-analysis"], capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    variant = json.loads((tmp_path / "s" / "summary.json").read_text())["variants"]["default"]
    assert (variant["n"], variant["scored"]) == (1, 2)
    assert re.search(r"^default +2 ", done.stdout, re.M) and "n=1" not in done.stdout  # the scored column
    assert "default: 1 sessions ok, 1 agent failures (scored)" in done.stdout
    import csv
    row = next(csv.DictReader((tmp_path / "s" / "metrics.csv").open()))
    assert (row["n"], row["scored"], row["agent_failures"]) == ("1", "2", "1")
