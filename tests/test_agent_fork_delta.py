"""A graph agent whose messages live in LangGraph's ``DeltaChannel`` (the channel stores a value only
at its snapshots, every ``snapshot_frequency`` updates; in between, the value is rebuilt from the
ancestor checkpoints' writes): a fork at one of its inner steps (``convsim fork --step N``) resumes
it from its inner checkpoint with the messages it had there, as for a plain ``MessagesState`` agent
(tests/test_agent_fork_inner.py). Each inner node appends ``<turn>:<node>`` to a log file, which
says which nodes ran after the fork; each reply lists what the agent kept across turns."""
import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from agent_fork_helpers import fork as _fork, ran as _ran, replies as _replies, run as _run
from agent_fork_helpers import step_of as _step_of, steps as _steps
from cli_helpers import cli

ROOT = Path(__file__).resolve().parents[1]
ASYNC_GRAPH = ROOT / "tests" / "data" / "graphs" / "async_slot_chat.py"

AGENTS = textwrap.dedent('''
    from pathlib import Path
    from typing import Annotated
    from typing_extensions import TypedDict
    from langgraph.channels.delta import DeltaChannel
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import _messages_delta_reducer

    from agent_fork_helpers import logged_node

    LOG = Path(__file__).with_suffix(".log")

    def _state(every):
        class State(TypedDict):  # the messages as deltas, LangGraph's own batch reducer
            messages: Annotated[list, DeltaChannel(_messages_delta_reducer, snapshot_frequency=every)]
        return State

    def _node(name):
        return logged_node(LOG, name)

    def _linear(every):
        names = ("plan", "lookup", "draft", "reply")
        b = StateGraph(_state(every))
        for n in names:
            b.add_node(n, _node(n))
        for a, z in zip((START,) + names, names + (END,)):
            b.add_edge(a, z)
        return b.compile()

    graph = _linear(100)      # no snapshot inside a turn: every value is rebuilt from writes
    snapshots = _linear(2)    # a snapshot every second update: a seed, then writes
    every_update = _linear(1) # a snapshot at every update: the value stored at each checkpoint

    b = StateGraph(_state(100))  # plan, then left and right in one superstep, then reply
    for n in ("plan", "left", "right", "reply"):
        b.add_node(n, _node(n))
    b.add_edge(START, "plan")
    b.add_edge("plan", "left")
    b.add_edge("plan", "right")
    b.add_edge(["left", "right"], "reply")
    b.add_edge("reply", END)
    fanout = b.compile()
''')

NODES = ("plan", "lookup", "draft", "reply")


@pytest.fixture
def agents(tmp_path):
    path = tmp_path / "delta_agents.py"
    path.write_text(AGENTS)
    return path


def _delta_values(run_dir):
    """How the agent's checkpoints stored ``messages``: ``{"snapshot": n, "none": m}`` (a DeltaChannel
    stores nothing between snapshots)."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from langgraph.checkpoint.serde.types import _DeltaSnapshot
    serde, seen = JsonPlusSerializer(), {"snapshot": 0, "none": 0, "value": 0}
    with sqlite3.connect(run_dir / "checkpoints.sqlite") as conn:
        for type_, blob in conn.execute("SELECT type, checkpoint FROM checkpoints WHERE checkpoint_ns LIKE 'agent:%'"):
            v = serde.loads_typed((type_, blob)).get("channel_values", {}).get("messages")
            seen["none" if v is None else "snapshot" if isinstance(v, _DeltaSnapshot) else "value"] += 1
    return seen


@pytest.mark.parametrize("graph", ["hello_chat", ASYNC_GRAPH], ids=["sync-node", "async-node"])
def test_a_fork_inside_a_delta_channel_agent_resumes_with_the_messages_it_had(tmp_path, agents, graph):
    run_dir = _run(tmp_path, agents, "orig", "graph", graph)
    assert _ran(agents) == [f"{t}:{n}" for t in (1, 2, 3) for n in NODES]
    seen = _delta_values(run_dir)  # the channel really kept deltas: no value stored in any checkpoint
    assert seen["none"] > 0 and seen["value"] == 0 and seen["snapshot"] == 0, seen
    steps = _steps(run_dir)  # convsim trace: the agent's inner steps, by inner superstep
    assert [(s["node"], s["subgraph"]["inner_superstep"]) for s in steps if s["turn"] == 2 and "subgraph" in s] == [
        ("agent/plan", 0), ("agent/lookup", 1), ("agent/draft", 2), ("agent/reply", 3)]
    code, out, _ = cli("trace", run_dir, "s000")
    assert code == 0 and all(f"agent/{n}" in out for n in NODES), out
    draft = _step_of(steps, 2, "agent/draft")
    fork_dir, out = _fork(run_dir, draft["step"], "at-draft")
    # turn 2's plan and lookup did not run again; draft and reply did, then turn 3 as usual
    assert _ran(agents) == ["2:draft", "2:reply"] + [f"3:{n}" for n in NODES]
    assert "resumed from its checkpoint before agent/draft" in out and "reproduces the original" in out, out
    # the draft node saw the messages rebuilt from the deltas: turn 1's and turn 2's plan and lookup
    assert _replies(fork_dir) == _replies(run_dir)
    assert _replies(fork_dir)[1] == "turn 2: (plan 1), (lookup 1), (draft 1), (plan 2), (lookup 2), (draft 2)"
    comp = json.loads((fork_dir / "fork_comparison.json").read_text())
    assert comp["identical"] and comp["fork"]["inner"]["inner_superstep"] == 2
    # what the agent's graph was handed in turn 2: its turn-1 state (the user's turn, plan, lookup,
    # draft, reply) and the user's new turn, read back through the channel's delta history
    assert comp["fork"]["inner"]["messages_in"] == 6
    assert [(s["step"], s["node"], s["superstep"]) for s in _steps(fork_dir)] == [
        (s["step"], s["node"], s["superstep"]) for s in steps]


def test_without_the_parent_chain_the_delta_messages_are_lost(tmp_path, agents, monkeypatch):
    """The defect fixed, injected: the inner checkpoint copied alone (as before), without its
    ancestors and their writes. LangGraph then rebuilds the DeltaChannel from nothing: the resumed
    draft node sees no messages at all and the reply differs."""
    run_dir = _run(tmp_path, agents, "orig")
    _ran(agents)
    draft = _step_of(_steps(run_dir), 2, "agent/draft")
    monkeypatch.setattr("convsim.traces.time_travel._ancestor_rows",
                        lambda conn, thread, ns, parent: {"checkpoints": [], "writes": []})
    fork_dir, _ = _fork(run_dir, draft["step"], "no-chain")
    assert _ran(agents)[:2] == ["0:draft", "0:reply"]  # resumed, but with an empty message list
    assert _replies(fork_dir)[1] != _replies(run_dir)[1]


@pytest.mark.parametrize("target", ["snapshots", "every_update"])
def test_a_fork_inside_a_delta_channel_agent_with_snapshots(tmp_path, agents, target):
    """snapshot_frequency=2: some of the agent's checkpoints hold a snapshot, the rest only deltas
    (the fork point's value is a snapshot plus the writes since); 1: a snapshot at every update."""
    run_dir = _run(tmp_path, agents, "orig", target)
    _ran(agents)
    seen = _delta_values(run_dir)
    # nothing stored: with snapshots at every update only each turn's input checkpoint (before any write)
    assert seen["snapshot"] > 0 and (seen["none"] > 3 if target == "snapshots" else seen["none"] == 3), seen
    for turn, node in ((2, "reply"), (3, "lookup")):
        step = _step_of(_steps(run_dir), turn, f"agent/{node}")
        fork_dir, out = _fork(run_dir, step["step"], f"at-{turn}-{node}")
        ran = _ran(agents)
        assert ran[0] == f"{turn}:{node}" and f"{turn}:plan" not in ran, ran
        assert _replies(fork_dir) == _replies(run_dir), out


def test_a_fork_at_a_parallel_step_of_a_delta_channel_agent(tmp_path, agents):
    """Two nodes writing the channel in one superstep: the rebuilt value has their writes in the
    order the run applied them (LangGraph sorts a superstep's writes by task path, copied with
    them), so the reply after the fork is the original's."""
    run_dir = _run(tmp_path, agents, "orig", "fanout")
    _ran(agents)
    steps = _steps(run_dir)
    reply = _step_of(steps, 3, "agent/reply")
    fork_dir, _ = _fork(run_dir, reply["step"], "at-reply")
    ran = _ran(agents)
    assert ran[0] == "3:reply" and not {"3:plan", "3:left", "3:right"} & set(ran), ran
    assert _replies(fork_dir) == _replies(run_dir)
    assert "(left 3), (right 3)" in _replies(fork_dir)[2] or "(right 3), (left 3)" in _replies(fork_dir)[2]


def test_the_delta_channel_fork_on_the_process_executor(tmp_path, agents):
    there = _run(tmp_path, agents, "proc", "graph", "hello_chat", "--executor", "process", "--workers", "2")
    _ran(agents)
    lookup = _step_of(_steps(there), 3, "agent/lookup")
    fork_dir, _ = _fork(there, lookup["step"], "proc-fork")
    assert _ran(agents) == ["3:lookup", "3:draft", "3:reply"]
    assert _replies(fork_dir) == _replies(there)
