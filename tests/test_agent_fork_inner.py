"""A fork at an inner step of a graph agent (``convsim fork --step N`` where step N is
``agent/<inner node>``) resumes the agent's graph from its own checkpoint before that step: the
agent's nodes before it do not run again. Each inner node of the agents below appends
``<turn>:<node>`` to a log file, which says which nodes ran after the fork."""
import json
import textwrap
from pathlib import Path

import pytest

from agent_fork_helpers import fork as _fork, ran as _ran, replies as _replies, run as _run
from agent_fork_helpers import step_of as _step_of, steps as _steps

ROOT = Path(__file__).resolve().parents[1]
ASYNC_GRAPH = ROOT / "tests" / "data" / "graphs" / "async_slot_chat.py"

AGENTS = textwrap.dedent('''
    import operator
    from pathlib import Path
    from langgraph.graph import END, START, MessagesState, StateGraph

    from agent_fork_helpers import logged_node

    LOG = Path(__file__).with_suffix(".log")

    def _node(name):
        return logged_node(LOG, name)

    def _linear(*names, **compile_kw):
        b = StateGraph(MessagesState)
        for n in names:
            b.add_node(n, _node(n))
        for a, z in zip((START,) + names, names + (END,)):
            b.add_edge(a, z)
        return b.compile(**compile_kw)

    graph = _linear("plan", "lookup", "draft", "reply")
    no_checkpoints = _linear("plan", "lookup", "draft", "reply", checkpointer=False)

    b = StateGraph(MessagesState)  # plan, then left and right in one superstep, then reply
    for n in ("plan", "left", "right", "reply"):
        b.add_node(n, _node(n))
    b.add_edge(START, "plan")
    b.add_edge("plan", "left")
    b.add_edge("plan", "right")
    b.add_edge(["left", "right"], "reply")
    b.add_edge("reply", END)
    fanout = b.compile()
''')


@pytest.fixture
def agents(tmp_path):
    path = tmp_path / "inner_agents.py"
    path.write_text(AGENTS)
    return path


@pytest.mark.parametrize("graph", ["hello_chat", ASYNC_GRAPH], ids=["sync-node", "async-node"])
def test_a_fork_at_an_inner_step_runs_only_the_agent_nodes_from_there(tmp_path, agents, graph):
    run_dir = _run(tmp_path, agents, "orig", "graph", graph)
    assert _ran(agents) == [f"{t}:{n}" for t in (1, 2, 3) for n in ("plan", "lookup", "draft", "reply")]
    steps = _steps(run_dir)
    assert [(s["node"], s["subgraph"]["inner_superstep"]) for s in steps if s["turn"] == 2 and "subgraph" in s] == [
        ("agent/plan", 0), ("agent/lookup", 1), ("agent/draft", 2), ("agent/reply", 3)]
    draft = _step_of(steps, 2, "agent/draft")
    fork_dir, out = _fork(run_dir, draft["step"], "at-draft")
    # turn 2's plan and lookup did not run again; draft and reply did, then turn 3 as usual
    assert _ran(agents) == ["2:draft", "2:reply"] + [f"3:{n}" for n in ("plan", "lookup", "draft", "reply")]
    assert "resumed from its checkpoint before agent/draft" in out and "reproduces the original" in out, out
    # the agent resumed with the state it had then (turn 1's notes and turn 2's plan and lookup)
    assert _replies(fork_dir) == _replies(run_dir)
    assert _replies(fork_dir)[1] == "turn 2: (plan 1), (lookup 1), (draft 1), (plan 2), (lookup 2), (draft 2)"
    comp = json.loads((fork_dir / "fork_comparison.json").read_text())
    assert comp["identical"] and comp["fork"]["step"] == draft["step"] and comp["fork"]["inner"]["inner_superstep"] == 2
    # the fork's trace: the original up to the draft, then the same steps again, numbered alike
    assert [(s["step"], s["node"], s["superstep"]) for s in _steps(fork_dir)] == [
        (s["step"], s["node"], s["superstep"]) for s in steps]


def test_without_the_inner_resume_the_agent_nodes_before_the_step_would_run_again(tmp_path, agents, monkeypatch):
    """The defect the fork fixes, injected: the adapter not resuming the agent's graph."""
    run_dir = _run(tmp_path, agents, "orig")
    _ran(agents)
    draft = _step_of(_steps(run_dir), 2, "agent/draft")
    monkeypatch.setattr("convsim.slots.adapters._resume_config", lambda handles: None)
    fork_dir, _ = _fork(run_dir, draft["step"], "no-resume")
    ran = _ran(agents)
    assert ran[:4] == ["2:plan", "2:lookup", "2:draft", "2:reply"]  # the nodes before the step ran again
    # and the agent started turn 2 over from the conversation: what it kept of turn 1 is gone
    assert _replies(fork_dir)[1] != _replies(run_dir)[1]


def test_a_fork_at_a_parallel_inner_step_runs_its_whole_inner_superstep_again(tmp_path, agents):
    run_dir = _run(tmp_path, agents, "orig", "fanout")
    _ran(agents)
    steps = _steps(run_dir)
    turn2 = [(s["node"], s["subgraph"]["inner_superstep"]) for s in steps if s["turn"] == 2 and "subgraph" in s]
    assert sorted(turn2) == sorted([("agent/plan", 0), ("agent/left", 1), ("agent/right", 1), ("agent/reply", 2)])
    second = [s for s in steps if s["turn"] == 2 and "subgraph" in s][2]  # the later of left and right
    fork_dir, _ = _fork(run_dir, second["step"], "at-second")
    ran = _ran(agents)
    assert sorted(ran[:2]) == ["2:left", "2:right"] and ran[2] == "2:reply" and "2:plan" not in ran
    assert _replies(fork_dir) == _replies(run_dir)
    assert json.loads((fork_dir / "fork_comparison.json").read_text())["fork"]["step"] == second["step"] - 1


def test_an_agent_without_checkpoints_runs_its_node_again_and_the_fork_says_why(tmp_path, agents):
    run_dir = _run(tmp_path, agents, "orig", "no_checkpoints")
    _ran(agents)
    draft = _step_of(_steps(run_dir), 2, "agent/draft")
    fork_dir, out = _fork(run_dir, draft["step"], "nocp")
    assert _ran(agents)[:2] == ["2:plan", "2:lookup"]
    assert "the whole node ran again" in out and "checkpointer=False" in out, out
    fork = json.loads((fork_dir / "fork_comparison.json").read_text())["fork"]
    assert "inner" not in fork and "checkpointer=False" in fork["inner_fallback"]


def test_the_inner_supersteps_and_the_fork_are_the_same_on_the_process_executor(tmp_path, agents):
    here = _run(tmp_path, agents, "async")
    there = _run(tmp_path, agents, "proc", "graph", "hello_chat", "--executor", "process", "--workers", "2")
    _ran(agents)

    def shape(steps):
        return [(s["step"], s["node"], (s.get("subgraph") or {}).get("inner_superstep")) for s in steps]
    assert shape(_steps(here)) == shape(_steps(there))
    lookup = _step_of(_steps(there), 3, "agent/lookup")
    fork_dir, _ = _fork(there, lookup["step"], "proc-fork")
    assert _ran(agents) == ["3:lookup", "3:draft", "3:reply"]
    assert _replies(fork_dir) == _replies(there)
