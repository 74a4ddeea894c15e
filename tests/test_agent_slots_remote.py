"""Remote agents through the command line on real runs: a graph served by ``langgraph dev``
(langgraph-cli's in-memory runtime) evaluated through LangGraph's ``RemoteGraph`` (one thread per
session), and an A2A server (a2a-sdk) wrapping an agent evaluated through the A2A client (one
context per session). Each server is started on 127.0.0.1 on a free port by a fixture."""
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from cli_helpers import cli

HERE = Path(__file__).resolve().parent

AGENT = textwrap.dedent('''
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    FACTS = {"capital of france": "Paris", "boiling point of water": "100 degrees Celsius",
             "author of hamlet": "William Shakespeare", "largest planet": "Jupiter",
             "speed of light": "299,792 kilometres per second", "chemical symbol for gold": "Au"}

    def _answer(question):
        topic = next((t for t in FACTS if t in question.lower()), None)
        return f"The {topic} is {FACTS[topic]}." if topic else "I do not know."

    def app(inputs):
        asked = sum(1 for m in inputs["messages"] if m["role"] == "user")
        return f"[{asked}] " + _answer(inputs["messages"][-1]["content"])

    def reply(state):
        humans = [m for m in state["messages"] if m.type == "human"]
        return {"messages": [AIMessage(f"[{len(humans)}] " + _answer(humans[-1].content))]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    graph = builder.compile()
''')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, proc: subprocess.Popen, seconds: float = 180.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"the server did not answer {url} in {seconds} s")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def agent_file(tmp_path):
    (tmp_path / "served").mkdir()
    path = tmp_path / "served" / "agent.py"
    path.write_text(AGENT)
    return path


@contextlib.contextmanager
def serve_langgraph_dev(served: Path, graph: str):
    """``langgraph dev`` (the in-memory runtime) on 127.0.0.1 serving ``served/agent.py:graph`` as
    ``graph``; yields its base URL. Skips where langgraph-cli or its runtime is not installed."""
    exe = shutil.which("langgraph")
    if exe is None:
        pytest.skip("langgraph-cli is not installed (pip install 'langgraph-cli[inmem]', in the dev extra)")
    pytest.importorskip("langgraph_api", reason="langgraph-cli's in-memory runtime is not installed "
                                                "(pip install 'langgraph-cli[inmem]')")
    (served / "langgraph.json").write_text(json.dumps({"dependencies": ["."], "graphs": {graph: "./agent.py:graph"}}))
    env = {**os.environ, "LANGSMITH_TRACING": "false", "LANGGRAPH_CLI_NO_ANALYTICS": "1"}
    with _served([exe, "dev", "--host", "127.0.0.1", "--port", "{port}", "--no-browser", "--no-reload",
                  "--config", str(served / "langgraph.json")], "/ok", served / "langgraph_dev.log", cwd=served,
                 env=env) as url:
        yield url


@contextlib.contextmanager
def serve_a2a(served: Path, agent_ref: str):
    """tests/a2a_server.py on 127.0.0.1 wrapping the callable ``agent_ref`` (``file.py:app``), run from
    ``served`` with it on the path; yields its base URL."""
    pytest.importorskip("a2a.server", reason="the a2a-sdk server side is not installed (pip install 'a2a-sdk[http-server]')")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(served), os.environ.get("PYTHONPATH", "")])}
    with _served([sys.executable, str(HERE / "a2a_server.py"), "{port}", agent_ref], "/.well-known/agent-card.json",
                 served / "a2a.log", cwd=served, env=env) as url:
        yield url


@contextlib.contextmanager
def _served(argv: list[str], ready_path: str, log_path: Path, *, cwd: Path, env: dict):
    port = free_port()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([a.replace("{port}", str(port)) for a in argv], cwd=cwd, stdout=log,
                                stderr=subprocess.STDOUT, env=env)
        try:
            wait_for(f"http://127.0.0.1:{port}{ready_path}", proc)
            yield f"http://127.0.0.1:{port}"
        finally:
            stop(proc)


@pytest.fixture
def langgraph_dev(agent_file):
    with serve_langgraph_dev(agent_file.parent, "facts") as url:
        yield url


@pytest.fixture
def a2a_server(agent_file):
    with serve_a2a(agent_file.parent, f"{agent_file}:app") as url:
        yield url


def _run(tmp_path, run_id, spec):
    code, out, exc = cli("run", "hello_chat", "--sessions", 3, "--agent", f"agent={spec}", "--out", tmp_path / "runs",
                         "--run-id", run_id, "-q", "--no-analysis", "--concurrency", 3)
    assert code == 0, (out, exc)
    return [json.loads(x) for x in (tmp_path / "runs" / run_id / "results.jsonl").read_text().splitlines()]


def _check(recs, spec, calls_per_session):
    assert len(recs) == 3 and {r["status"] for r in recs} == {"ok"}, [r["error"] for r in recs]
    for r in recs:
        assert r["agents"] == {"agent": spec}
        assert r["dialogue_metrics"]["accuracy"] == 1.0
        # one thread / context per session: the agent saw the session's every turn, and no other's
        assert [t["text"].split("]")[0] for t in r["transcript"] if t["speaker"] == "agent"] == ["[1", "[2", "[3"]
        assert len(r["llm_calls"]) == calls_per_session and {c["role"] for c in r["llm_calls"]} == {"agent:agent"}


def test_a_langgraph_deployment_through_remote_graph(tmp_path, langgraph_dev):
    spec = f"langgraph:{langgraph_dev}#facts"
    _check(_run(tmp_path, "lg", spec), spec, calls_per_session=4)  # the thread, then one run a turn


def test_an_a2a_agent_through_the_a2a_client(tmp_path, a2a_server):
    spec = f"a2a:{a2a_server}"
    _check(_run(tmp_path, "a2a", spec), spec, calls_per_session=3)


def test_an_unreachable_remote_agent_is_infrastructure(tmp_path):
    port = free_port()  # nothing listens there
    for spec in (f"a2a:http://127.0.0.1:{port}", f"langgraph:http://127.0.0.1:{port}#facts"):
        config = tmp_path / "down.yaml"
        config.write_text(f'graph: hello_chat\nsessions: 2\nretry: {{attempts: 2, initial_wait: 0.01, max_wait: 0.02}}\n'
                          f'agents: {{agent: "{spec}"}}\n')
        run_id = spec.split(":")[0]
        code, out, exc = cli("run", config, "--out", tmp_path / "runs", "--run-id", run_id, "-q", "--no-analysis")
        assert code == 3, (out, exc)
        recs = [json.loads(x) for x in (tmp_path / "runs" / run_id / "results.jsonl").read_text().splitlines()]
        assert {r["status"] for r in recs} == {"infra_error"}
        errors = [json.loads(x) for x in (tmp_path / "runs" / run_id / "errors.jsonl").read_text().splitlines()]
        assert len(errors) == 2 and all("ModelUnavailable" in e["error"] for e in errors), errors
