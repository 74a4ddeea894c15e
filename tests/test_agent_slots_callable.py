"""The researcher's own agent in a slot (convsim.slots), through the command line on real runs:
agent specs, preflight, callables (sync and async), a LangGraph graph as a traced subgraph that a
fork can enter, and the agent's failures (an exception, a garbage answer) as agent_failure."""
import json
import textwrap

import pytest

from cli_helpers import cli, one_line
from convsim.errors import AgentError, ConvsimError
from convsim.slots import AgentTurn, Slot, make_agent, parse_agent_spec

AGENTS = textwrap.dedent('''
    import asyncio
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    FACTS = {"capital of france": "Paris", "boiling point of water": "100 degrees Celsius",
             "author of hamlet": "William Shakespeare", "largest planet": "Jupiter",
             "speed of light": "299,792 kilometres per second", "chemical symbol for gold": "Au"}

    def _answer(question):
        topic = next((t for t in FACTS if t in question.lower()), None)
        return f"The {topic} is {FACTS[topic]}." if topic else "I do not know."

    def sync_app(inputs):
        assert inputs["messages"][-1]["role"] == "user" and "turn" in inputs["context"]
        return _answer(inputs["messages"][-1]["content"])

    async def async_app(inputs):
        await asyncio.sleep(0)
        return {"content": _answer(inputs["messages"][-1]["content"]), "structured": {"unused": 1}}

    def raising(inputs):
        raise ValueError("my agent broke")

    def control(inputs):
        return "bad\\x00answer"

    def empty(inputs):
        return "   "

    def not_text(inputs):
        return 42

    def think(state):
        return {"messages": [AIMessage("(looking it up)")]}

    def reply(state):
        asked = sum(1 for m in state["messages"] if m.type == "human")  # the state it kept across turns
        return {"messages": [AIMessage(f"[{asked}] " + _answer(state["messages"][-2].content))]}

    builder = StateGraph(MessagesState)
    builder.add_node("think", think)
    builder.add_node("reply", reply)
    builder.add_edge(START, "think")
    builder.add_edge("think", "reply")
    builder.add_edge("reply", END)
    graph = builder.compile()
''')


@pytest.fixture
def agents(tmp_path):
    path = tmp_path / "my_agents.py"
    path.write_text(AGENTS)
    return path


def _records(run_dir):
    return [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]


def _run(tmp_path, run_id, *args):
    code, out, exc = cli("run", "hello_chat", "--sessions", 3, "--out", tmp_path / "runs", "--run-id", run_id,
                         "-q", "--no-analysis", *args)
    return code, out, exc, tmp_path / "runs" / run_id


def test_specs_parse_to_their_kind(agents):
    assert parse_agent_spec("facts").kind == parse_agent_spec("builtin:facts").kind == "builtin"
    assert parse_agent_spec(f"{agents}:graph").kind == "graph"
    assert parse_agent_spec(f"{agents}:sync_app").kind == "callable"
    assert parse_agent_spec(f"callable:{agents}:sync_app").kind == "callable"
    spec = parse_agent_spec("openai:my-agent@http://127.0.0.1:9/v1")
    assert (spec.kind, spec.options) == ("openai", {"model": "my-agent", "base_url": "http://127.0.0.1:9/v1"})
    spec = parse_agent_spec("langgraph:http://127.0.0.1:9#agent")
    assert (spec.kind, spec.options["assistant_id"]) == ("langgraph", "agent")
    assert parse_agent_spec("a2a:http://127.0.0.1:9").kind == "a2a"
    assert parse_agent_spec("json:dumps").kind == "callable"  # a module's callable
    for bad in ("", "two words", "openai:model-without-url", "langgraph:http://h:1", "a2a:ftp://h",
                f"graph:{agents}:sync_app", f"{agents}:nothing_here", "no_such_module_xyz:app", "nofile.py:app"):
        with pytest.raises(ConvsimError) as err:
            parse_agent_spec(bad, field="agents.crs")
        assert "agents.crs" in str(err.value)


def test_preflight_refuses_an_unknown_role_or_a_bad_spec_in_one_line(tmp_path, agents):
    out = tmp_path / "runs"
    one_line(["run", "hello_chat", "--agent", "crs=facts", "--out", out, "--run-id", "r"], "agents.crs",
             "unknown agent role")
    one_line(["run", "hello_chat", "--agent", "agent=oracle", "--out", out, "--run-id", "r"], "agents.agent",
             "no built-in agent")
    one_line(["run", "hello_chat", "--agent", f"agent={agents}:missing", "--out", out, "--run-id", "r"],
             "agents.agent", "no attribute")
    one_line(["run", "hello_chat", "--agent", "agent=openai:m", "--out", out, "--run-id", "r"], "agents.agent")
    assert not out.exists()  # nothing written


@pytest.mark.parametrize("attr", ["sync_app", "async_app"])
def test_a_callable_sync_or_async_fills_the_slot(tmp_path, agents, attr):
    code, out, exc, run_dir = _run(tmp_path, attr, "--agent", f"agent={agents}:{attr}")
    assert code == 0, (out, exc)
    recs = _records(run_dir)
    assert len(recs) == 3 and {r["status"] for r in recs} == {"ok"}
    assert all(r["dialogue_metrics"]["accuracy"] == 1.0 for r in recs)  # it answers every fact
    assert {json.dumps(r["agents"]) for r in recs} == {json.dumps({"agent": f"{agents}:{attr}"})}
    turn = [t for t in recs[0]["transcript"] if t["speaker"] == "agent"][0]
    assert turn["meta"] == {"agent_spec": f"{agents}:{attr}", "tool_calls": [], "structured": {}}


def test_the_builtin_is_recorded_when_no_spec_is_given(tmp_path):
    code, out, exc, run_dir = _run(tmp_path, "builtin")
    assert code == 0, (out, exc)
    assert {json.dumps(r["agents"]) for r in _records(run_dir)} == {json.dumps({"agent": "facts"})}


@pytest.mark.parametrize("attr,words", [("raising", ["raised ValueError", "my agent broke"]),
                                        ("control", ["control characters", "bad\\u0000answer"]),
                                        ("empty", ["an empty reply"]), ("not_text", ["int", "42"])])
def test_an_agent_that_raises_or_answers_garbage_is_an_agent_failure(tmp_path, agents, attr, words):
    code, out, exc, run_dir = _run(tmp_path, attr, "--agent", f"agent={agents}:{attr}")
    recs = _records(run_dir)
    assert {r["status"] for r in recs} == {"agent_failure"}, [r["error"] for r in recs]
    assert all(w in r["error"] for r in recs for w in words), recs[0]["error"]
    assert not (run_dir / "errors.jsonl").exists()  # scored, kept, not re-run: no infrastructure


def test_an_empty_answer_of_the_builtin_path_is_flagged(tmp_path):
    from fault_server import serve
    with serve(answer=lambda request: "") as server:
        code, out, exc, run_dir = _run(tmp_path, "empty-model", "--model", f"agent=openai:fake@{server.url}")
    recs = _records(run_dir)
    assert {r["status"] for r in recs} == {"agent_failure"}
    # the model's empty answer fails the answer check: the turn is the agent's failure, raw answer kept
    assert all(f["check"] == "agent_model_failed" and "raw: ''" in f["detail"] for r in recs for f in r["agent_flags"])


def test_agents_in_a_config_and_per_variant_are_recorded(tmp_path, agents):
    config = tmp_path / "cmp.yaml"
    config.write_text(textwrap.dedent(f"""
        name: cmp
        graph: hello_chat
        sessions: 3
        agents: {{agent: "{agents}:sync_app"}}
        variants:
          - name: mine
          - name: builtin
            agents: {{agent: facts}}
          - name: graph
            agents: {{agent: "{agents}:graph"}}
    """))
    code, out, exc = cli("run", config, "--out", tmp_path / "runs", "--run-id", "cmp", "-q", "--no-analysis")
    assert code == 0, (out, exc)
    recs = _records(tmp_path / "runs" / "cmp")
    by_variant = {r["variant"]: r["agents"]["agent"] for r in recs}
    assert by_variant == {"mine": f"{agents}:sync_app", "builtin": "facts", "graph": f"{agents}:graph"}
    # paired users: the same questions meet each agent
    questions = {v: sorted((r["session_id"], tuple(r["questions"])) for r in recs if r["variant"] == v)
                 for v in ("mine", "builtin", "graph")}
    assert len(questions["mine"]) == 3 and questions["mine"] == questions["builtin"] == questions["graph"]


def test_a_graph_agent_keeps_its_state_and_its_steps_are_traced_and_forkable(tmp_path, agents):
    code, out, exc, run_dir = _run(tmp_path, "graph", "--agent", f"agent={agents}:graph", "--checkpoint")
    assert code == 0, (out, exc)
    rec = next(r for r in _records(run_dir) if r["session_id"] == "s000")
    replies = [t["text"] for t in rec["transcript"] if t["speaker"] == "agent"]
    assert [r.split("]")[0] for r in replies] == ["[1", "[2", "[3"]  # one thread: it saw every turn
    assert rec["dialogue_metrics"]["accuracy"] == 1.0
    trace = [json.loads(x) for x in (run_dir / "traces" / "default" / "s000.jsonl").read_text().splitlines()]
    steps = [s for s in trace if s["type"] == "step"]
    inner = [s for s in steps if s["node"].startswith("agent/")]
    assert [s["node"] for s in inner[:2]] == ["agent/think", "agent/reply"] and len(inner) == 6
    assert inner[1]["subgraph"]["update"]["messages"][0]["content"] == replies[0]
    # the trace viewer lists them
    code, out, exc = cli("trace", run_dir, "s000")
    assert code == 0 and "agent/think" in out and "agent/reply" in out, out
    # a fork into the agent's second turn runs it again from there
    second = [s for s in inner if s["turn"] == 2][1]
    code, out, exc = cli("fork", run_dir, "s000", "--step", second["step"], "--run-id", "graph-fork")
    assert code == 0, (out, exc)
    forked = _records(tmp_path / "runs" / "graph-fork")[0]
    assert forked["status"] == "ok"
    assert [t["text"] for t in forked["transcript"] if t["speaker"] == "agent"] == replies


def test_adapters_answer_as_the_contract_says(agents):
    slot = Slot(role="crs", handed="the conversation", returns="reply", structured=("recommended_ids",))
    from langchain_core.messages import HumanMessage
    msgs = [HumanMessage("What is the largest planet?")]
    turn = make_agent(f"{agents}:async_app", slot).invoke(msgs, session_id="s", context={"turn": 1})
    assert isinstance(turn, AgentTurn) and turn.text == "The largest planet is Jupiter."
    assert turn.structured == {}  # only what the slot's metrics read is kept
    with pytest.raises(AgentError) as err:
        make_agent(f"{agents}:control", slot).invoke(msgs, session_id="s", context={})
    assert err.value.raw == '"bad\\u0000answer"'
    with pytest.raises(ConvsimError):
        make_agent("template", slot)


ASYNC_GRAPH = textwrap.dedent('''
    """hello_chat with an async agent node: the slot's agent through acall_slot (ainvoke)."""
    from convsim import compile_with_default_context
    from convsim.graphs import hello_chat as base
    from convsim.graphs.hello_chat import *  # noqa: F401,F403  State, Context, Params, sessions, SLOTS...
    from convsim.slots.nodes import acall_slot

    async def agent(state, runtime):
        spec = runtime.context.params.agents["agent"]
        turn, meta = await acall_slot(spec, base.SLOTS["agent"], state["transcript"],
                                      context={"turn": state["turn"]}, session_id=runtime.context.session_id)
        return {"transcript": [{"turn": state["turn"], "speaker": "agent", "text": turn.text, "meta": meta}]}

    def build(params):
        return base.build(params, agent_node=agent)

    graph = compile_with_default_context(build(base.Params()))
''')


@pytest.mark.parametrize("attr", ["graph", "async_app", "sync_app"])
def test_an_async_agent_node_awaits_the_adapter(tmp_path, agents, attr):
    graph_file = tmp_path / "graphs" / "async_hello.py"
    graph_file.parent.mkdir()
    graph_file.write_text(ASYNC_GRAPH)
    code, out, exc = cli("run", graph_file, "--sessions", 2, "--agent", f"agent={agents}:{attr}",
                         "--out", tmp_path / "runs", "--run-id", attr, "-q", "--no-analysis")
    assert code == 0, (out, exc)
    recs = _records(tmp_path / "runs" / attr)
    assert {r["status"] for r in recs} == {"ok"} and all(r["dialogue_metrics"]["accuracy"] == 1.0 for r in recs)
    if attr == "graph":  # the async stream carries the subgraph's steps too
        trace = (tmp_path / "runs" / attr / "traces" / "default" / "s000.jsonl").read_text()
        assert '"node": "agent/think"' in trace and '"node": "agent/reply"' in trace
