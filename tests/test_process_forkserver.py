"""The process executor's workers fork from a fork server that imported LangGraph, LangChain and
convsim once; each takes the driver's environment, working directory and import path of the moment
it starts (not the fork server's, which are those of the first process run); each worker has its
own inbox, filled evenly. ``cached_once``: a loader many session threads call at once runs once."""
import json
import multiprocessing
import os
import textwrap
import threading
import time
from functools import lru_cache

import pytest
from cli_helpers import cli

from convsim.lazy import cached_once

pytestmark = pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(),
                                reason="no fork server on this platform (workers are spawned)")

GRAPH = textwrap.dedent('''
    """hello_chat whose agent says which process it runs in, and what it sees of its environment."""
    import os
    from multiprocessing import parent_process

    from convsim.graphs.hello_chat import *  # noqa: F401,F403
    from convsim.graphs.hello_chat import build, Params

    def where(state, runtime):
        seen = {"pid": os.getpid(), "ppid": os.getppid(), "starter": parent_process().pid,
                "mark": os.environ.get("CONVSIM_TEST_MARK"), "cwd": os.getcwd()}
        return {"transcript": [{"turn": state["turn"], "speaker": "agent", "text": "The answer is Paris.",
                                "meta": seen}]}

    _build = build

    def build(params, agent_node=None):
        return _build(params, agent_node=where)

    graph = build(Params()).compile()
''')


def _seen(run_dir):
    out = []
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        rec = json.loads(line)
        out += [t["meta"] for t in rec["transcript"] if t["speaker"] == "agent"]
    return out


def test_workers_fork_from_the_fork_server_with_the_drivers_environment_of_now(tmp_path, monkeypatch):
    graph = tmp_path / "where_chat.py"
    graph.write_text(GRAPH)
    args = ("--sessions", 6, "--executor", "process", "--workers", 2, "--out", tmp_path / "runs", "-q",
            "--no-analysis", "--no-trace")
    monkeypatch.setenv("CONVSIM_TEST_MARK", "first")
    code, out, exc = cli("run", graph, *args, "--run-id", "one")
    assert code == 0, (out, exc)
    # the fork server now runs with the environment of its start; the driver's changes since must
    # still reach the next run's workers
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("CONVSIM_TEST_MARK", "second")
    monkeypatch.chdir(elsewhere)
    code, out, exc = cli("run", graph, *args, "--run-id", "two")
    assert code == 0, (out, exc)
    one, two = _seen(tmp_path / "runs" / "one"), _seen(tmp_path / "runs" / "two")
    assert {s["mark"] for s in one} == {"first"} and {s["mark"] for s in two} == {"second"}
    assert {s["cwd"] for s in two} == {str(elsewhere)}
    from multiprocessing import forkserver
    server = forkserver._forkserver._forkserver_pid
    for seen in one + two:
        assert seen["starter"] == os.getpid()  # started by this driver...
        assert seen["ppid"] == server != os.getpid()  # ...forked by the fork server
    # two workers per run, both ran sessions (each has its own inbox, filled evenly)
    assert len({s["pid"] for s in one}) == 2 and len({s["pid"] for s in two}) == 2


def _herd(decorate, callers: int = 8) -> int:
    """How many times ``callers`` threads asking a slow cached loader at once made it compute."""
    computed = []

    @decorate(maxsize=1)
    def load() -> frozenset:
        computed.append(1)
        time.sleep(0.05)  # a catalog or a vocabulary: long enough for every caller to miss
        return frozenset({"word"})
    gate = threading.Barrier(callers)

    def call():
        gate.wait()
        assert load() == {"word"}
    threads = [threading.Thread(target=call) for _ in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert load() == {"word"} and load.cache_info().currsize == 1
    return len(computed)


def test_cached_once_computes_once_however_many_threads_ask_at_once():
    assert _herd(cached_once) == 1
    assert _herd(lru_cache) > 1  # the defect it fixes: every thread that missed computed the value


def test_without_workers_the_process_executor_runs_one_worker_per_32_sessions_in_flight(tmp_path):
    from convsim.running.process_executor import default_workers
    cores = os.cpu_count() or 1
    assert default_workers(8) == cores and default_workers(128) == max(cores, 4)
    assert default_workers(32 * cores + 1) == cores + 1
    graph = tmp_path / "where_chat.py"
    graph.write_text(GRAPH)
    code, out, exc = cli("run", graph, "--sessions", 12, "--concurrency", 70, "--executor", "process",
                         "--out", tmp_path / "runs", "-q", "--no-analysis", "--no-trace", "--run-id", "wide")
    assert code == 0, (out, exc)
    # every worker got sessions (the least-held one first): as many processes as the default
    assert len({s["pid"] for s in _seen(tmp_path / "runs" / "wide")}) == min(12, default_workers(70))
