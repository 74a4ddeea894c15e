"""Process workers run ``ceil(concurrency / workers)`` sessions at once, and a lost worker stops the run
with one line (finished sessions kept)."""
import sys
from pathlib import Path

import pytest
import yaml

import convsim
from convsim.errors import ConvsimError
from convsim.running.process_executor import sessions_per_worker
from convsim.running.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from latency_server import LatencyServer  # noqa: E402


def write_config(tmp_path, **over):
    cfg = {"name": "wc", "graph": "hello_chat", "sessions": 8, "seed": 5, "analysis": [],
           "out_dir": str(tmp_path / "runs"), "params": {"n_turns": 2}}
    cfg.update(over)
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def comparable(run_dir):
    out = []
    for rec in RunStore(run_dir).records():
        rec = {k: v for k, v in rec.items() if k not in ("run_id", "elapsed_s")}
        for call in rec["llm_calls"]:
            call.pop("latency_s")
        out.append(rec)
    return sorted(out, key=lambda r: r["session_id"])


def test_sessions_per_worker_spreads_the_concurrency():
    assert [sessions_per_worker(c, 2) for c in (1, 2, 3, 8, 32)] == [1, 1, 2, 4, 16]
    assert sessions_per_worker(4, 1) == 4


@pytest.mark.slow
def test_process_workers_keep_the_concurrency_in_flight_at_the_server(tmp_path):
    """8 sessions in flight over 2 workers reach the server 8 at a time (4 threads each); before,
    each worker ran one session and the server saw 2. The records are those of the async executor."""
    # calls long enough that the second worker's start-up (~1 s) cannot hide the overlap
    with LatencyServer(latency_s=0.4) as server:
        spec = {"agent": f"openai:fake@{server.base_url}"}
        many = convsim.run(write_config(tmp_path, models=spec, concurrency=8, executor="process", workers=2),
                           run_id="eight", analyze=False)
        eight = server.max_in_flight
        server.reset()
        few = convsim.run(write_config(tmp_path, models=spec, concurrency=2, executor="process", workers=2),
                          run_id="two", analyze=False)
        two = server.max_in_flight
        server.reset()
        ref = convsim.run(write_config(tmp_path, models=spec, concurrency=8), run_id="async", analyze=False)
    assert eight == 8 and two == 2
    assert comparable(many) == comparable(few) == comparable(ref)
    assert all(r["status"] == "ok" for r in RunStore(many).records())


def hello_chat_with_user(tmp_path, name: str, user_body: str, extra: str = ""):
    """A graph file ``name`` in tmp_path/graphs: hello_chat whose user node is ``user_body`` (which may
    call ``_user(state, runtime)``, the original) and ``extra`` module code, beside a copy of
    hello_chat to import."""
    graphs = tmp_path / "graphs"
    graphs.mkdir(exist_ok=True)
    (graphs / "hello_chat.py").write_text((ROOT / "graphs" / "hello_chat.py").read_text())
    body = "\n".join("    " + line for line in user_body.strip().splitlines())
    (graphs / f"{name}.py").write_text(f"""
import os
from convsim.errors import ConvsimError
from convsim.graphs.hello_chat import *  # noqa: F401,F403 (the same graph, sessions and metrics)
from convsim.graphs.hello_chat import build as _build, user as _user


def user(state, runtime):
{body}


def build(params):
    g = _build(params)
    g.nodes["user"].runnable.func = user  # the node spec LangGraph keeps for "user"
    return g
{extra}
""")
    return graphs / f"{name}.py"


@pytest.mark.slow
def test_a_worker_that_dies_stops_the_run_with_one_line_and_keeps_what_landed(tmp_path):
    graph = hello_chat_with_user(tmp_path, "dying_chat", """
if state["session_id"] == "s005":
    os._exit(7)  # the worker process dies (as if killed by the OOM killer)
return _user(state, runtime)""")
    cfg = write_config(tmp_path, graph=str(graph), concurrency=1, executor="process", workers=1, trace=False)
    with pytest.raises(ConvsimError, match=r"a worker process ended \(exit code 7\)"):
        convsim.run(cfg, run_id="dies", analyze=False)
    kept = RunStore(tmp_path / "runs" / "dies").records()
    assert sorted(r["session_id"] for r in kept) == [f"s{i:03d}" for i in range(5)]  # those before s005


@pytest.mark.slow
def test_a_call_budget_spread_over_threaded_workers_stops_cleanly_and_resumes(tmp_path):
    """max_calls 10 over 2 workers (2 session threads each, 3 calls a session): the run stops with
    BudgetReached, keeps what finished, spends the budget to its last call and never over it at the
    server, and the same command without the budget finishes the rest with the records of an async run."""
    from convsim.providers.limits import BudgetReached
    with LatencyServer(latency_s=0.02) as server:
        common = dict(models={"agent": f"openai:fake@{server.base_url}"}, params={"n_turns": 3}, concurrency=4)
        with pytest.raises(BudgetReached, match=r"\(max_calls=10 reached; this attempt: 10 calls"):
            convsim.run(write_config(tmp_path, **common, executor="process", workers=2, limits={"max_calls": 10}),
                        run_id="budget", analyze=False)
        assert server.requests == 10
        kept = RunStore(tmp_path / "runs" / "budget").records()
        assert 1 <= sum(r["status"] == "ok" for r in kept) <= 3  # 10 calls hold at most 3 whole sessions
        assert all(r["status"] in ("ok", "infra_error") for r in kept)
        done = convsim.run(write_config(tmp_path, **common, executor="process", workers=2), run_id="budget",
                           analyze=False)
        ref = convsim.run(write_config(tmp_path, **common), run_id="ref", analyze=False)
    assert comparable(done) == comparable(ref) and len(comparable(done)) == 8


@pytest.mark.slow
def test_bad_input_met_in_a_worker_is_the_same_one_line_as_in_the_driver(tmp_path):
    graph = hello_chat_with_user(tmp_path, "bad_input", """
raise ConvsimError("no title", file="movies.json", record=3, field="title")""")
    cfg = write_config(tmp_path, graph=str(graph), executor="process", workers=2, concurrency=4)
    with pytest.raises(ConvsimError) as err:
        convsim.run(cfg, run_id="bad", analyze=False)
    assert str(err.value) == "movies.json, record 3, field title: no title"
    assert any("process_executor" in str(entry.path) for entry in err.traceback)  # raised by the driver


@pytest.mark.slow
def test_a_bug_met_in_a_worker_stops_the_run_with_the_workers_traceback(tmp_path):
    graph = hello_chat_with_user(tmp_path, "buggy_checks", "return _user(state, runtime)", extra="""

def simulator_checks(state):
    return [1 / 0]  # a bug outside the graph's nodes: not a session's code_error
""")
    cfg = write_config(tmp_path, graph=str(graph), executor="process", workers=1, concurrency=1)
    with pytest.raises(RuntimeError, match="ZeroDivisionError in a worker process") as err:
        convsim.run(cfg, run_id="bug", analyze=False)
    assert "in simulator_checks" in str(err.value)  # where it happened, in the worker
