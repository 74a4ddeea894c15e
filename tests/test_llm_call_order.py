"""Model calls of parallel tasks are recorded in task order, not in the order their threads finish.

group_planning asks every member in parallel (LangGraph ``Send`` tasks in its thread pool); each call
was appended to the session's list when it returned, so ``llm_calls`` followed thread scheduling (an
audit saw the same config give two orders). Here the server delays each answer by a hash of the
request salted per run, so the two runs finish the members' calls in different orders."""
import hashlib
import json
import time

from convsim.config import config_from_dict
from convsim.running.runner import run
from fault_server import serve


def _calls(tmp_path, salt: str) -> list[dict]:
    def answer(request):
        digest = hashlib.sha256((salt + json.dumps(request["messages"])).encode()).digest()
        time.sleep(digest[0] / 255 * 0.03)
        return "Somewhere warm with good food, please."
    with serve(answer=answer) as server:
        cfg = config_from_dict({"graph": "group_planning", "sessions": 1, "out_dir": str(tmp_path),
                                "run_id": salt, "models": {"member": f"openai:fake@{server.url}"},
                                "trace": True, "analysis": []})
        run_dir = run(cfg, analyze=False)
    record = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
    return record["llm_calls"]


def test_parallel_member_calls_are_recorded_in_task_order(tmp_path):
    a, b = _calls(tmp_path, "a"), _calls(tmp_path, "b")
    parallel = [c for c in a if c["task"] is not None]
    assert len({c["task"] for c in parallel}) > 1  # the members' calls were Send tasks
    order = [(c["step"], c["node"], c["task"]) for c in a]
    assert order == sorted(order)
    assert [(c["purpose"], c["step"], c["task"]) for c in a] == [(c["purpose"], c["step"], c["task"]) for c in b]


def test_a_subgraphs_calls_stay_after_the_supersteps_before_it():
    # inside a subgraph LangGraph's step restarts: a call there reported step 1, like the parent's
    # first superstep, and ordering by step put it first
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    from convsim.providers.models import _current_task
    from convsim.traces.tracing import ordered_calls

    calls: list[dict] = []

    def record(label):
        node, step, task, inner = _current_task()
        calls.append({"label": label, "node": node, "step": step, "task": task, "subgraph_node": inner})

    class S(TypedDict, total=False):
        x: int

    def inner_node(state):
        record("second")
        return {"x": 2}

    def plan(state):
        record("first")
        return {"x": 1}
    sub = StateGraph(S)
    sub.add_node("inner_node", inner_node)
    sub.add_edge(START, "inner_node")
    sub.add_edge("inner_node", END)
    graph = StateGraph(S)
    graph.add_node("zzz_plan", plan)  # a name that sorts after the subgraph node's
    graph.add_node("sub", sub.compile())
    graph.add_edge(START, "zzz_plan")
    graph.add_edge("zzz_plan", "sub")
    graph.add_edge("sub", END)
    marks = [len(calls) for _ in graph.compile().stream({"x": 0}, stream_mode="values")]
    assert [c["step"] for c in calls] == [1, 1]  # the subgraph's own step number
    assert [c["label"] for c in ordered_calls(calls, marks)] == ["first", "second"]
    assert calls[1]["node"] == "sub" and calls[1]["subgraph_node"] == "inner_node"


def test_the_failure_line_names_the_node_whose_call_came_last():
    from convsim.traces.tracing import TraceRecorder
    calls: list[dict] = []
    recorder = TraceRecorder({"x": 0}, calls)
    recorder.on_values({"x": 0})
    calls.append({"node": "beta", "step": 1, "task": None, "ok": True, "error": None})
    calls += [{"node": "alpha", "step": 1, "task": None, "ok": False, "error": "ConnectError"}] * 2
    recorder.on_failure("ModelUnavailable: alpha's model is down")
    failure = [json.loads(line) for line in recorder.render().splitlines() if '"failure"' in line][0]
    assert failure["node"] == "alpha"
    assert [c["node"] for c in failure["llm_calls"]] == ["alpha", "alpha", "beta"]  # listed in task order
