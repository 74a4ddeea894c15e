"""A stateful adapter (a graph agent's state, an OpenAI-compatible endpoint's conversation) keeps a
session's state while the session runs and drops it when the runner ends the attempt
(convsim.running.session -> convsim.slots.nodes.end_session): a long run holds no finished
session's state, and what the sessions answer is unchanged."""
import json
import textwrap


from cli_helpers import cli
from fault_server import serve
from convsim.slots import Slot, make_agent
from convsim.slots import nodes

FACTS = {"capital of france": "Paris", "boiling point of water": "100 degrees Celsius",
         "author of hamlet": "William Shakespeare", "largest planet": "Jupiter",
         "speed of light": "299,792 kilometres per second", "chemical symbol for gold": "Au"}

GRAPH = textwrap.dedent('''
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    FACTS = %r
    SEEN = []  # how many sessions the adapter held at each call (set by the test)
    WATCH = []

    def reply(state):
        if WATCH:
            SEEN.append(WATCH[0]())
        asked = sum(1 for m in state["messages"] if m.type == "human")  # the state it kept across turns
        question = state["messages"][-1].content.lower()
        topic = next((t for t in FACTS if t in question), None)
        return {"messages": [AIMessage(f"[{asked}] " + (f"The {topic} is {FACTS[topic]}." if topic
                                                         else "I do not know."))]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    graph = builder.compile()
''' % (FACTS,))


def _records(run_dir):
    return [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]


def _adapter(spec_text):
    found = [a for (text, _slot), a in nodes._AGENTS.items() if text == spec_text]
    assert len(found) == 1, list(nodes._AGENTS)
    return found[0]


def _run(tmp_path, run_id, spec, sessions):
    code, out, exc = cli("run", "hello_chat", "--sessions", sessions, "--agent", f"agent={spec}",
                         "--concurrency", 1, "--out", tmp_path / "runs", "--run-id", run_id, "-q", "--no-analysis")
    assert code == 0, (out, exc)
    return _records(tmp_path / "runs" / run_id)


def test_a_graph_agent_holds_a_session_while_it_runs_and_none_after(tmp_path):
    path = tmp_path / "state_agent.py"
    path.write_text(GRAPH)
    spec = f"{path}:graph"
    sessions = 6
    recs = _run(tmp_path, "graph", spec, sessions)
    assert len(recs) == sessions and {r["status"] for r in recs} == {"ok"}
    for r in recs:  # its state was kept across the session's turns: it counted every question
        replies = [t["text"] for t in r["transcript"] if t["speaker"] == "agent"]
        assert [x.split("]")[0] for x in replies] == [f"[{i}" for i in range(1, len(replies) + 1)]
        assert r["dialogue_metrics"]["accuracy"] == 1.0
    assert len(_adapter(spec).sessions) == 0  # no finished session's state is left

    # while a session runs its state is held, and only its own (one session at a time here)
    module = next(m for m in __import__("sys").modules.values()
                  if getattr(m, "__file__", None) == str(path))
    module.WATCH.append(lambda: len(_adapter(spec).sessions))
    again = _run(tmp_path, "graph-again", spec, sessions)
    assert max(module.SEEN) == 1 and module.SEEN.count(0) == sessions  # a session's first turn: none held
    assert len(_adapter(spec).sessions) == 0
    assert [r["transcript"] for r in again] == [r["transcript"] for r in recs]  # the same answers


def test_an_endpoint_agent_drops_each_finished_session_conversation(tmp_path):
    held = []
    spec_box = []

    def answer(request):
        if spec_box:
            held.append(len(_adapter(spec_box[0]).sessions))
        question = [m["content"] for m in request["messages"] if m["role"] == "user"][-1].lower()
        asked = sum(1 for m in request["messages"] if m["role"] == "user")
        topic = next((t for t in FACTS if t in question), None)
        return f"[{asked}] " + (f"The {topic} is {FACTS[topic]}." if topic else "I do not know.")

    sessions = 5
    with serve(answer=answer) as server:
        spec = f"openai:my-agent@{server.url}"
        spec_box.append(spec)
        recs = _run(tmp_path, "endpoint", spec, sessions)
    assert len(recs) == sessions and {r["status"] for r in recs} == {"ok"}
    assert all(r["dialogue_metrics"]["accuracy"] == 1.0 for r in recs)
    turns = sum(1 for r in recs for t in r["transcript"] if t["speaker"] == "agent")
    assert len(held) == turns and max(held) == 1 and held.count(0) == sessions  # its own, while it runs
    assert len(_adapter(spec).sessions) == 0


def test_end_session_drops_one_session_and_the_next_call_starts_over_from_the_transcript(tmp_path):
    from langchain_core.messages import AIMessage, HumanMessage
    path = tmp_path / "state_agent2.py"
    path.write_text(GRAPH)
    agent = make_agent(f"{path}:graph", Slot(role="agent", handed="the conversation", returns="reply"))
    first = [HumanMessage("What is the largest planet?")]
    a1 = agent.invoke(first, session_id="a", context={})
    agent.invoke(first, session_id="b", context={})
    assert len(agent.sessions) == 2  # outside a run nothing ends a session: both are kept
    agent.end_session("a")
    assert len(agent.sessions) == 1 and agent.sessions.get("a", first) is None
    second = first + [AIMessage(a1.text), HumanMessage("And the capital of France?")]
    assert agent.invoke(second, session_id="a", context={}).text == "[2] The capital of france is Paris."
    agent.end_session("no-such-session")  # nothing kept: nothing to do
    assert len(agent.sessions) == 2
