"""LangGraph Platform runs with parameters and models (issue 39, item 5): under ``langgraph dev`` a
run's context takes params and models as plain JSON (``{"params": {...}, "models": {"agent": ...}}``),
validated like the CLI's. Through the LangGraph SDK against a ``langgraph dev`` server started from
the project's langgraph.json (skipped, with the reason, when it cannot start here)."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from conftest import ROOT
from convsim.errors import ConvsimError
from fault_server import serve

INIT = {"session_id": "s000", "turn": 0, "questions": ["largest planet", "capital of france", "author of hamlet"],
        "transcript": [], "turn_metrics": [], "dialogue_metrics": {}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def langgraph_dev(tmp_path_factory):
    """``langgraph dev`` serving the project's graphs; yields its URL."""
    pytest.importorskip("langgraph_sdk", reason="langgraph-sdk is not installed (the dev extra)")
    pytest.importorskip("langgraph_runtime_inmem", reason="langgraph-cli[inmem] is not installed (the dev extra)")
    exe = shutil.which("langgraph")
    if exe is None:
        pytest.skip("the langgraph command (langgraph-cli) is not on PATH")
    port = _free_port()
    log = tmp_path_factory.mktemp("langgraph_dev") / "server.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false",
           "LANGGRAPH_CLI_NO_ANALYTICS": "1", "CONVSIM_PREFLIGHT_MODELS": "0"}
    with open(log, "w") as out:
        proc = subprocess.Popen([exe, "dev", "--no-browser", "--no-reload", "--port", str(port), "--config",
                                 str(ROOT / "langgraph.json")], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 120  # starting is slow on a loaded machine; a guard, not a measurement
        while True:
            if proc.poll() is not None:
                pytest.skip(f"langgraph dev exited ({proc.returncode}): {log.read_text()[-500:]}")
            try:
                with urllib.request.urlopen(url + "/ok", timeout=2):
                    break
            except OSError:
                if time.monotonic() > end:
                    pytest.skip(f"langgraph dev did not answer within 120 s: {log.read_text()[-500:]}")
                time.sleep(0.5)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def test_params_and_models_as_plain_json_through_the_sdk(langgraph_dev):
    from langgraph_sdk import get_sync_client
    client = get_sync_client(url=langgraph_dev)
    out = client.runs.wait(None, "hello_chat", input=INIT, context={"params": {"n_turns": 2}})
    assert out["dialogue_metrics"] == {"accuracy": 1.0, "turns": 2}  # params applied (default: 3 turns)
    with serve() as server:  # the agent role on a model server, named in the context
        out = client.runs.wait(None, "hello_chat", input=INIT,
                               context={"params": {"n_turns": 2}, "models": {"agent": f"openai:m@{server.url}"}})
        assert server.served["ok"] == 2  # one answer per turn, from the model
    agent_turns = [e for e in out["transcript"] if e["speaker"] == "agent"]
    assert [e["text"] for e in agent_turns] == ["Paris. 100 degrees Celsius. William Shakespeare. Jupiter. Au."] * 2


def test_a_bad_param_through_the_sdk_is_refused_naming_it(langgraph_dev):
    from langgraph_sdk import get_sync_client
    client = get_sync_client(url=langgraph_dev)
    out = client.runs.wait(None, "hello_chat", input=INIT, context={"params": {"n_turnz": 2}}, raise_error=False)
    # the server shows the error's type (it hides messages); the message names the param (in-process below)
    assert out["__error__"]["error"] == "ConvsimError", out


def test_plain_json_context_in_process():
    """The same coercion without a server: graph.invoke with a dict context."""
    from convsim.graphs import hello_chat
    out = hello_chat.graph.invoke(dict(INIT), context={"params": {"n_turns": 1}, "seed": 3})
    assert out["dialogue_metrics"]["turns"] == 1
    with pytest.raises(ConvsimError, match="valid params: n_turns"):
        hello_chat.graph.invoke(dict(INIT), context={"params": {"n_turnz": 1}})
    with pytest.raises(ConvsimError, match="n_turns"):
        hello_chat.graph.invoke(dict(INIT), context={"params": {"n_turns": 0}})
    with pytest.raises(ConvsimError, match="unknown model role 'critic'"):
        hello_chat.graph.invoke(dict(INIT), context={"models": {"critic": "none"}})
    with pytest.raises(ConvsimError, match="bad model spec"):
        hello_chat.graph.invoke(dict(INIT), context={"models": {"agent": "nonsense"}})
