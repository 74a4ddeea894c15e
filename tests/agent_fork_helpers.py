"""Helpers of the fork-inside-a-graph-agent tests (tests/test_agent_fork_inner.py,
tests/test_agent_fork_delta.py): run hello_chat with a graph agent from a file, read its trace,
replies and the agent nodes that ran, and fork it."""
import json

from cli_helpers import cli


def logged_node(log, name):
    """A node of the test agents (imported by their files): it writes ``<turn>:<name>`` to ``log``
    when it runs and adds ``(<name> <turn>)``; ``reply`` answers with every such note the agent kept
    across turns and inside this one, so a lost state shows in the transcript."""
    from langchain_core.messages import AIMessage

    def run(state):
        turn = sum(1 for m in state["messages"] if m.type == "human")
        with log.open("a") as fh:
            fh.write(f"{turn}:{name}\n")
        if name == "reply":
            notes = [m.content for m in state["messages"] if m.type == "ai" and m.content.startswith("(")]
            return {"messages": [AIMessage(f"turn {turn}: " + ", ".join(notes))]}
        return {"messages": [AIMessage(f"({name} {turn})")]}
    run.__name__ = name
    return run


def ran(agents):
    log = agents.with_suffix(".log")
    out = log.read_text().split() if log.exists() else []
    log.unlink(missing_ok=True)
    return out


def run(tmp_path, agents, run_id, target="graph", graph="hello_chat", *args):
    code, out, exc = cli("run", graph, "--sessions", 1, "--out", tmp_path / "runs", "--run-id", run_id, "-q",
                         "--no-analysis", "--agent", f"agent={agents}:{target}", "--checkpoint", *args)
    assert code == 0, (out, exc)
    return tmp_path / "runs" / run_id


def steps(run_dir):
    lines = (run_dir / "traces" / "default" / "s000.jsonl").read_text().splitlines()
    return [s for s in map(json.loads, lines) if s["type"] == "step"]


def replies(run_dir):
    rec = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
    return [t["text"] for t in rec["transcript"] if t["speaker"] == "agent"]


def step_of(steps, turn, node):
    return next(s for s in steps if s["turn"] == turn and s["node"] == node)


def fork(run_dir, step, run_id):
    code, out, exc = cli("fork", run_dir, "s000", "--step", step, "--run-id", run_id, "--no-analysis")
    assert code == 0, (out, exc)
    return run_dir.parent / run_id, out
