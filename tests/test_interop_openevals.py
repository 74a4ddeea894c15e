"""openevals interop: its app/user callables as convsim nodes, and a convsim graph as its app."""
import operator
from typing import Annotated, TypedDict

import pytest

pytest.importorskip("openevals")
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from openevals.simulators import create_llm_simulated_user, run_multiturn_simulation  # noqa: E402

from convsim import ConvsimError  # noqa: E402
from convsim.contract.interop import (GraphApp, message_text, openevals_app_node, openevals_user_node,  # noqa: E402
                             transcript_to_messages)


class ChatState(TypedDict, total=False):
    session_id: str
    turn: int
    transcript: Annotated[list[dict], operator.add]
    turn_metrics: Annotated[list[dict], operator.add]
    dialogue_metrics: dict


def _loop_graph(user_node, app_node, n_turns=2):
    g = StateGraph(ChatState)
    g.add_node("user", user_node)
    g.add_node("agent", app_node)
    g.add_edge(START, "user")
    g.add_edge("user", "agent")
    g.add_conditional_edges("agent", lambda s: END if s["turn"] >= n_turns else "user", ["user", END])
    return g.compile()


def echo_app(inputs, *, thread_id, **kwargs):
    """An openevals app: one message in, one message out, history kept by thread_id."""
    return {"role": "assistant", "content": f"[{thread_id}] you said: {inputs['content']}"}


def test_openevals_callables_as_convsim_nodes():
    seen = []

    def user(trajectory, *, thread_id, turn_counter):
        seen.append((len(trajectory), turn_counter))
        return {"role": "user", "content": f"question {turn_counter + 1}"}

    graph = _loop_graph(openevals_user_node(user), openevals_app_node(echo_app))
    out = graph.invoke({"session_id": "s1", "turn": 0, "transcript": []})
    assert [(u["turn"], u["speaker"], u["text"]) for u in out["transcript"]] == [
        (1, "user", "question 1"), (1, "agent", "[s1] you said: question 1"),
        (2, "user", "question 2"), (2, "agent", "[s1] you said: question 2")]
    assert seen == [(0, 0), (2, 1)]  # the user sees the trajectory so far, openevals-style


def test_prebuilt_llm_simulated_user_and_static_list_as_nodes():
    client = GenericFakeChatModel(messages=iter([AIMessage("thanks, bye")]))
    sim_user = create_llm_simulated_user(system="You are a customer.", client=client,
                                         fixed_responses=["I need a hotel"])
    out = _loop_graph(openevals_user_node(sim_user), openevals_app_node(echo_app)).invoke(
        {"session_id": "s2", "turn": 0, "transcript": []})
    assert [u["text"] for u in out["transcript"] if u["speaker"] == "user"] == ["I need a hotel", "thanks, bye"]
    static = _loop_graph(openevals_user_node(["a", "b"]), openevals_app_node(echo_app)).invoke(
        {"session_id": "s3", "turn": 0, "transcript": []})
    assert [u["text"] for u in static["transcript"]][::2] == ["a", "b"]
    with pytest.raises(ConvsimError, match="static openevals user has 1"):
        _loop_graph(openevals_user_node(["a"]), openevals_app_node(echo_app)).invoke(
            {"session_id": "s4", "turn": 0, "transcript": []})


def test_convsim_graph_as_openevals_app():
    app = GraphApp("hello_chat", params={"n_turns": 3})
    questions = ["What is the largest planet?", "Who is the author of hamlet?", "What is the meaning of life?"]
    initial = {"session_id": "x", "turn": 0, "questions": ["largest planet", "author of hamlet", "speed of light"]}
    app.initial_state = initial
    result = run_multiturn_simulation(app=app, user=questions, max_turns=3, thread_id="oe-1")
    traj = [(m["role"], m["content"]) for m in result["trajectory"]]
    assert traj == [("user", questions[0]), ("assistant", "The largest planet is Jupiter."),
                    ("user", questions[1]), ("assistant", "The author of hamlet is William Shakespeare."),
                    ("user", questions[2]), ("assistant", "I do not know.")]
    state = app.state("oe-1")
    # the graph's own evaluation nodes ran on the openevals conversation
    assert [m["correct"] for m in state["turn_metrics"]] == [1.0, 1.0, 0.0]
    assert state["dialogue_metrics"]["accuracy"] == pytest.approx(2 / 3)
    assert state["session_id"] == "oe-1"
    with pytest.raises(ConvsimError, match="has ended"):
        app({"role": "user", "content": "more?"}, thread_id="oe-1")


def test_graph_app_with_an_llm_simulated_user_and_evaluator():
    client = GenericFakeChatModel(messages=iter([AIMessage("What is the capital of france?", id=f"q{i}")
                                                 for i in range(3)]))
    user = create_llm_simulated_user(system="Ask a quiz question.", client=client)
    scores = []

    def evaluator(*, outputs, reference_outputs=None):
        scores.append(len(outputs))
        return {"key": "n_messages", "score": len(outputs)}

    app = GraphApp("hello_chat", params={"n_turns": 2})
    result = run_multiturn_simulation(app=app, user=user, max_turns=2, thread_id="oe-2",
                                      trajectory_evaluators=[evaluator])
    assert result["evaluator_results"] == [{"key": "n_messages", "score": 4}]
    assert result["trajectory"][1]["content"] == "The capital of france is Paris."


def test_message_helpers():
    assert message_text({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}) == "b"
    assert message_text(AIMessage("hi")) == "hi"
    assert message_text({"role": "assistant", "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]}) == "xy"
    with pytest.raises(ConvsimError):
        message_text({"role": "assistant"})
    msgs = transcript_to_messages([{"turn": 1, "speaker": "user", "text": "q"}, {"turn": 1, "speaker": "crs", "text": "a"}])
    assert [(m["role"], m["content"]) for m in msgs] == [("user", "q"), ("assistant", "a")]


def test_graph_app_rejects_unknown_user_node():
    with pytest.raises(ConvsimError, match="no node 'nobody'"):
        GraphApp("hello_chat", user_node="nobody")
