"""Test doubles shared by several test files."""


class ScriptedModel:
    """A chat-model double answering a fixed string, or ``answer(prompt)`` when it is callable;
    records the system prompts it was given."""
    is_none = False

    def __init__(self, answer):
        self.answer, self.prompts = answer, []

    def invoke(self, messages, purpose="generate"):
        self.prompts.append(messages[0][1])
        return self.answer(messages[0][1]) if callable(self.answer) else self.answer


def goal_answer(prompt: str) -> str:
    """What a faithful user model answers to the CRS user's goal prompt (prompts/user_goal.txt): the
    act it was given, said as one message (its "- " lines joined): it names exactly the films and
    values the act names, so it passes every check of agents/crs/user_goal.py."""
    act = prompt.split("What your message does:\n", 1)[1].split("\n\nRules:", 1)[0]
    return " ".join(line.removeprefix("- ").strip() for line in act.splitlines() if line.strip())


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


class SlowBackend:
    """An in-process model server for budget tests: each answer takes ``latency_s`` (so that many
    calls are in flight at once) and reports a realistic usage: ~4 prompt characters a token, and a
    completion of 1..``max_tokens`` tokens drawn from a hash of the prompt (the same on every run)."""

    def __init__(self, max_tokens: int, latency_s: float = 0.02):
        import threading
        self.max_tokens, self.latency_s = max_tokens, latency_s
        self.lock, self.in_flight, self.most_in_flight = threading.Lock(), 0, 0

    def invoke(self, messages, **kwargs):
        import hashlib
        import time
        from langchain_core.messages import AIMessage
        text = "\n".join(str(m.content) for m in messages)
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        time.sleep(self.latency_s)
        with self.lock:
            self.in_flight -= 1
        prompt = len(text) // 4 + 4
        completion = 1 + hashlib.sha256(text.encode()).digest()[0] % self.max_tokens
        return AIMessage("It is Paris. " * completion, usage_metadata={  # English (the answer check reads it)
            "input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion})
