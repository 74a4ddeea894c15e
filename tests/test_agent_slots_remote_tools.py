"""A LangGraph deployment and an A2A agent use the scenario's tools, through the CLI on real runs.

convsim serves the session's tools on 127.0.0.1 for each agent turn (convsim/slots/toolserver.py) and
tells the agent where: ``config["configurable"]["convsim_tools"]`` for a graph served by
``langgraph dev`` (through ``RemoteGraph``), the message's ``metadata["convsim_tools"]`` for an A2A
agent. The agent below (the same code behind both) uses examples/remote_tools.py, copied next to it
as a researcher would: on the customer's first turn it searches, books the first restaurant found,
and makes one call the tools refuse. The booking lands in the session's booking system (graded from
state), every call is recorded per turn, the refused one as a tool error, and the turn's URL is dead
once the turn is over.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from cli_helpers import cli
from test_agent_slots_remote import HERE, free_port, stop, wait_for

ROOT = HERE.parent

AGENT = textwrap.dedent('''
    import json
    from pathlib import Path

    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    from remote_tools import descriptor_of, langchain_tools

    SEEN = Path(__file__).with_name("seen_urls.txt")

    def act(descriptor, user_turns):
        if descriptor is None:
            return "I was given no tools."
        with SEEN.open("a") as f:
            f.write(descriptor["url"] + "\\n")
        tools = {t.name: t for t in langchain_tools(descriptor)}
        if user_turns > 1:
            return "Is there anything else I can help with?"
        found = tools["find_entities"].invoke({"domain": "restaurant", "constraints": {"area": "north",
                                                                                    "pricerange": "cheap"}})
        name = found["results"][0]["name"]
        out = tools["book"].invoke({"domain": "restaurant", "name": name, "people": "2", "day": "monday",
                                    "time": "12:00"})
        if not out.get("ok"):
            return f"I could not book {name}: {json.dumps(out)}"
        refused = tools["book"].invoke({"domain": "hotel"})  # no name: the tools refuse it
        assert refused.startswith("Error:"), refused
        return f"I booked {name} for you, reference {out['reference']}."

    def app(inputs):  # tests/a2a_server.py hands on the message's metadata["convsim_tools"]
        users = sum(1 for m in inputs["messages"] if m["role"] == "user")
        return act(descriptor_of(inputs.get("convsim_tools")), users)

    def reply(state, config):
        users = sum(1 for m in state["messages"] if m.type == "human")
        return {"messages": [AIMessage(act(descriptor_of(config), users))]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    graph = builder.compile()
''')


@pytest.fixture
def served(tmp_path):
    folder = tmp_path / "served"
    folder.mkdir()
    (folder / "agent.py").write_text(AGENT)
    shutil.copy(ROOT / "examples" / "remote_tools.py", folder / "remote_tools.py")  # as a researcher copies it
    return folder


@pytest.fixture
def langgraph_dev(served):
    exe = shutil.which("langgraph")
    if exe is None:
        pytest.skip("langgraph-cli is not installed (pip install 'langgraph-cli[inmem]', in the dev extra)")
    pytest.importorskip("langgraph_api", reason="langgraph-cli's in-memory runtime is not installed")
    (served / "langgraph.json").write_text(json.dumps({"dependencies": ["."], "graphs": {"clerk": "./agent.py:graph"}}))
    port = free_port()
    log = open(served / "langgraph_dev.log", "w")
    env = {**os.environ, "LANGSMITH_TRACING": "false", "LANGGRAPH_CLI_NO_ANALYTICS": "1"}
    proc = subprocess.Popen([exe, "dev", "--host", "127.0.0.1", "--port", str(port), "--no-browser", "--no-reload",
                             "--config", str(served / "langgraph.json")], cwd=served, stdout=log,
                            stderr=subprocess.STDOUT, env=env)
    try:
        wait_for(f"http://127.0.0.1:{port}/ok", proc)
        yield f"langgraph:http://127.0.0.1:{port}#clerk"
    finally:
        stop(proc)
        log.close()


@pytest.fixture
def a2a_agent(served):
    pytest.importorskip("a2a.server", reason="the a2a-sdk server side is not installed (pip install 'a2a-sdk[http-server]')")
    port = free_port()
    log = open(served / "a2a.log", "w")
    proc = subprocess.Popen([sys.executable, str(HERE / "a2a_server.py"), str(port), f"{served / 'agent.py'}:app"],
                            stdout=log, stderr=subprocess.STDOUT, cwd=served,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(served), os.environ.get("PYTHONPATH", "")])})
    try:
        wait_for(f"http://127.0.0.1:{port}/.well-known/agent-card.json", proc)
        yield f"a2a:http://127.0.0.1:{port}"
    finally:
        stop(proc)
        log.close()


def _run_and_check(tmp_path, served, spec):
    code, out, exc = cli("run", "customer_service", "--sessions", 2, "--set", "max_turns=2", "--agent",
                         f"service={spec}", "--out", tmp_path / "runs", "--run-id", "r", "-q", "--no-analysis")
    assert code == 0, (out, exc)
    records = [json.loads(x) for x in (tmp_path / "runs" / "r" / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2 and {r["status"] for r in records} == {"ok"}, [r.get("error") for r in records]
    for r in records:
        assert r["agents"] == {"service": spec}
        first = next(e for e in r["transcript"] if e["speaker"] == "system")
        # what ran against the session's tools, and the refused call beside it
        assert [c["name"] for c in first["meta"]["tool_calls"]] == ["find_entities", "book"]
        booked = first["meta"]["tool_calls"][1]["result"]
        assert booked["ok"] and booked["reference"] in first["text"]
        errors = first["meta"]["tool_errors"]
        assert len(errors) == 1 and errors[0]["name"] == "book" and "validation error" in errors[0]["result"]
        # the booking is in the session's booking system, and state grading read it
        assert [b["reference"] for b in r["agent_bookings"]] == [booked["reference"]]
        assert r["dialogue_metrics"]["bookings_made"] == 1
        assert r["dialogue_metrics"]["task_success_state"] is not None
    urls = (served / "seen_urls.txt").read_text().split()
    assert len(urls) == len(set(urls)) >= 4  # a fresh URL each agent turn (2 sessions, 2+ turns each)
    for url in urls:  # each dead once its turn was over
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url, timeout=5)
        assert err.value.code == 404


def test_a_langgraph_deployment_books_through_the_served_tools(tmp_path, served, langgraph_dev):
    _run_and_check(tmp_path, served, langgraph_dev)


def test_an_a2a_agent_books_through_the_served_tools(tmp_path, served, a2a_agent):
    _run_and_check(tmp_path, served, a2a_agent)


def test_the_tool_server_protocol_edges():
    """A lease's URL: the schemas on GET, 400 for a body that is no call, a refused call answered
    ok false and recorded, calls of one lease one at a time, 404 once the lease closed."""
    import threading

    from langchain_core.tools import tool

    from convsim.slots.adapters import tool_schemas
    from convsim.slots.toolserver import lease

    inside, most = [0], [0]
    lock = threading.Lock()

    @tool
    def slow_add(a: int, b: int) -> int:
        """Add two numbers, slowly."""
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        threading.Event().wait(0.05)
        with lock:
            inside[0] -= 1
        return a + b

    def post(url, body: bytes):
        request = urllib.request.Request(url + "/call", data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    with lease([slow_add], tool_schemas([slow_add])) as held:
        url = held.url
        with urllib.request.urlopen(url, timeout=10) as r:
            assert json.loads(r.read())["tools"][0]["function"]["name"] == "slow_add"
        assert post(url, b"not json")[0] == 400 and post(url, b'{"args": {}}')[0] == 400
        status, body = post(url, b'{"name": "slow_add", "args": [1, 2]}')
        assert status == 200 and body["ok"] is False and "not a JSON object" in body["error"]
        status, body = post(url, b'{"name": "slow_sub", "args": {}}')
        assert status == 200 and body == {"ok": False, "error": "Error: slow_sub is not a valid tool, try one of "
                                                               "[slow_add]."}
        status, body = post(url, b'{"name": "slow_add", "args": {"a": "x"}}')
        assert status == 200 and not body["ok"] and "validation error" in body["error"]
        answers = []
        threads = [threading.Thread(target=lambda i=i: answers.append(
            post(url, json.dumps({"name": "slow_add", "args": {"a": i, "b": 1}}).encode()))) for i in range(4)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert sorted(a[1]["result"] for a in answers) == [1, 2, 3, 4] and most[0] == 1
        assert [c.get("error", False) for c in held.calls] == [True] * 3 + [False] * 4
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(url, timeout=10)
    assert err.value.code == 404 and post(url, b'{"name": "slow_add", "args": {"a": 1, "b": 1}}')[0] == 404
