"""Test doubles shared by several test files."""


class ScriptedModel:
    """A chat-model double answering a fixed string; records the system prompts it was given."""
    is_none = False

    def __init__(self, answer):
        self.answer, self.prompts = answer, []

    def invoke(self, messages, purpose="generate"):
        self.prompts.append(messages[0][1])
        return self.answer


class Backend:
    """The provider behind a real ChatModel (patched in for ``models._backend``): a fixed answer, or
    an exception to raise (an HTTP 400: no answer)."""

    def __init__(self, answer):
        self.answer = answer

    def invoke(self, messages, **kwargs):
        from langchain_core.messages import AIMessage
        if isinstance(self.answer, Exception):
            raise self.answer
        return AIMessage(self.answer, usage_metadata={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2})


def fan_graph(state_cls, user, left, right, join, *, last_turn: int):
    """user -> (left, right in parallel) -> join -> user ... until ``turn >= last_turn``, compiled with
    an in-memory checkpointer: the shape the trace tests replay (parallel writes to one key)."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    g = StateGraph(state_cls)
    for name, fn in (("user", user), ("left", left), ("right", right), ("join", join)):
        g.add_node(name, fn)
    g.add_edge(START, "user")
    g.add_edge("user", "left")
    g.add_edge("user", "right")
    g.add_edge(["left", "right"], "join")
    g.add_conditional_edges("join", lambda s: END if s["turn"] >= last_turn else "user", ["user", END])
    return g.compile(checkpointer=InMemorySaver())
