"""Drop-in interop with openevals' multi-turn simulator (``openevals.simulators``).

Two directions, both call-compatible with openevals' callables (see its
``run_multiturn_simulation(*, app, user, max_turns, ...)``):

* :func:`openevals_app_node` / :func:`openevals_user_node` turn an openevals ``app``
  (``app(inputs: message, *, thread_id, **kw) -> message``) or ``user``
  (``user(trajectory, *, thread_id, turn_counter) -> message``, or a list of static
  responses) into a LangGraph node over a convsim ``State``: it reads the transcript,
  calls the callable, and appends its answer as an utterance.
* :class:`GraphApp` hands a convsim graph file to openevals as its ``app``. The graph's
  user-simulator node is replaced by a node that waits for the openevals user's message
  (LangGraph ``interrupt``; resumed with ``Command(resume=text)``), so the graph's agents
  and evaluation nodes run unchanged and its turn metrics are in :meth:`GraphApp.state`.
  A graph whose user node routes with ``Command`` (or sets more than the transcript and
  the turn) defines ``openevals_user_update(state, text) -> dict | Command`` to say what
  an incoming user message writes.

Messages are OpenAI-style dicts ``{"role", "content"}`` as openevals uses them.
"""
from __future__ import annotations

import dataclasses
import uuid
from typing import Any, Callable, Iterable

from convsim.errors import AgentError, ConvsimError, SimulatorError
from convsim.contract.graphfile import load_graph_module
from convsim.contract.seeding import stable_seed


def message_text(message: Any) -> str:
    """The text of an openevals/LangChain/OpenAI message (or ``{"messages": [...]}`` update)."""
    if isinstance(message, str):
        return message
    if isinstance(message, dict) and "messages" in message:
        msgs = message["messages"]
        return message_text(msgs[-1] if isinstance(msgs, list) and msgs else msgs)
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
    if isinstance(content, list):  # content blocks
        content = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    if content is None:
        raise ConvsimError(f"an openevals callable returned no message content: {message!r:.200}",
                           field="content")
    return str(content)


def _check_answer(text: str, who: str, error: type) -> None:
    """An external agent's or user's answer passes the same check as a model's
    (convsim.providers.answer_text): garbage is that side's failure, with its raw text."""
    from convsim.providers.answer_text import text_defect
    why = text_defect(text)
    if why is not None:
        raise error(f"{who} answered no text ({why}); raw: {text!r}"[:2000])


def transcript_to_messages(transcript: Iterable[dict], *, user_speaker: str = "user") -> list[dict]:
    """A convsim transcript as OpenAI messages: the user speaker is ``user``, every other ``assistant``."""
    return [{"role": "user" if u.get("speaker") == user_speaker else "assistant",
             "content": str(u.get("text", "")), "id": f"t{u.get('turn')}-{i}"}
            for i, u in enumerate(transcript)]


def _turn(state: dict, user_speaker: str) -> int:
    if isinstance(state.get("turn"), int):
        return state["turn"]
    return sum(1 for u in state.get("transcript", []) if u.get("speaker") == user_speaker)


def openevals_app_node(app: Callable, *, speaker: str = "agent", user_speaker: str = "user") -> Callable:
    """A LangGraph node that answers the last user utterance with an openevals ``app``."""
    def node(state: dict) -> dict:
        transcript = state.get("transcript") or []
        last_user = next((u for u in reversed(transcript) if u.get("speaker") == user_speaker), None)
        if last_user is None:
            raise ConvsimError("the openevals app node runs before any user utterance", field="transcript")
        inputs = {"role": "user", "content": str(last_user.get("text", "")), "id": str(uuid.uuid4())}
        answer = message_text(app(inputs, thread_id=str(state.get("session_id", ""))))
        _check_answer(answer, "the openevals app (the agent)", AgentError)  # garbage: the agent's failure
        return {"transcript": [{"turn": _turn(state, user_speaker), "speaker": speaker, "text": answer,
                                "meta": {"source": "openevals_app"}}]}
    node.__name__ = f"openevals_app_{getattr(app, '__name__', 'app')}"
    return node


def openevals_user_node(user: Callable | list, *, speaker: str = "user", turn_key: str | None = "turn") -> Callable:
    """A LangGraph node whose utterance comes from an openevals ``user`` (callable or static list).

    ``turn_counter`` is the number of user turns already taken, as in openevals' loop. With
    ``turn_key`` the node also advances the state's turn counter, like a convsim user node.
    """
    def node(state: dict) -> dict:
        taken = _turn(state, speaker)
        if isinstance(user, list):
            if taken >= len(user):
                raise ConvsimError(f"the static openevals user has {len(user)} responses; turn {taken + 1} "
                                   "asks for more", field="user")
            message = user[taken]
        else:
            message = user(transcript_to_messages(state.get("transcript") or [], user_speaker=speaker),
                           thread_id=str(state.get("session_id", "")), turn_counter=taken)
        text = message_text(message)
        _check_answer(text, "the openevals user (the simulator)", SimulatorError)
        update: dict = {"transcript": [{"turn": taken + 1, "speaker": speaker, "text": text,
                                        "meta": {"source": "openevals_user"}}]}
        if turn_key:
            update[turn_key] = taken + 1
        return update
    node.__name__ = "openevals_user"
    return node


class GraphApp:
    """A convsim graph as an openevals ``app``: ``run_multiturn_simulation(app=GraphApp("hello_chat"), ...)``.

    Each openevals ``thread_id`` is one session (its seed is ``stable_seed(seed, thread_id)``);
    its first state comes from ``initial_state`` or from the graph's first ``sessions()`` item.
    """

    def __init__(self, graph: str, *, params: dict | None = None, models: dict | None = None,
                 seed: int = 0, user_node: str = "user", initial_state: dict | None = None,
                 user_speaker: str = "user") -> None:
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.types import interrupt
        from convsim.providers.models import ChatModel, parse_model_spec
        self.module = load_graph_module(graph)
        self.params = self.module.Params(**(params or {}))
        self._model_specs = {r: parse_model_spec(s, where=f"models.{r}") for r, s in (models or {}).items()}
        self._chat_model = ChatModel
        self.seed, self.user_speaker, self.initial_state = seed, user_speaker, initial_state
        builder = self.module.build(self.params)
        if user_node not in builder.nodes:
            raise ConvsimError(f"the graph has no node {user_node!r} to replace with the openevals user",
                               field="user_node")
        user_update = getattr(self.module, "openevals_user_update", None) or self._default_user_update

        def external_user(state: dict):
            text = interrupt({"waiting_for": "user message"})
            return user_update(state, text)

        spec = builder.nodes[user_node]
        builder.nodes[user_node] = dataclasses.replace(spec, runnable=_as_runnable(external_user, user_node))
        self.graph = builder.compile(checkpointer=InMemorySaver())
        self._contexts: dict[str, Any] = {}
        self.__name__ = f"convsim_{getattr(self.module, '__name__', 'graph')}"

    def _default_user_update(self, state: dict, text: str) -> dict:
        turn = _turn(state, self.user_speaker) + 1
        update: dict = {"transcript": [{"turn": turn, "speaker": self.user_speaker, "text": text,
                                        "meta": {"source": "openevals_user"}}]}
        if "turn" in getattr(self.module.State, "__annotations__", {}):
            update["turn"] = turn
        return update

    def config(self, thread_id: str) -> dict:
        return {"configurable": {"thread_id": thread_id}, "recursion_limit": 100_000}

    def state(self, thread_id: str) -> dict:
        """The session's current state (transcript, turn metrics, dialogue metrics, ...)."""
        return dict(self.graph.get_state(self.config(thread_id)).values)

    def _start(self, thread_id: str):
        ctx = self.module.Context(
            params=self.params, seed=stable_seed(self.seed, thread_id), session_id=thread_id,
            models={r: self._chat_model(spec=s, role=r) for r, s in self._model_specs.items()})
        init = self.initial_state
        if init is None:
            base = self.module.Context(params=self.params, seed=self.seed)
            init = next(iter(self.module.sessions(self.params, base)), None)
            if init is None:
                raise ConvsimError("the graph's sessions() yielded nothing", field="sessions")
        init = {"transcript": [], "turn_metrics": [], "dialogue_metrics": {}, **init, "session_id": thread_id}
        self._contexts[thread_id] = ctx
        self.graph.invoke(init, self.config(thread_id), context=ctx)

    def __call__(self, inputs: Any, *, thread_id: str, **kwargs) -> dict:
        from langgraph.types import Command
        if thread_id not in self._contexts:
            self._start(thread_id)
        snapshot = self.graph.get_state(self.config(thread_id))
        if not snapshot.next:
            raise ConvsimError("the graph's session has ended: lower max_turns to the graph's own length",
                               record=thread_id)
        seen = len(snapshot.values.get("transcript") or [])
        self.graph.invoke(Command(resume=message_text(inputs)), self.config(thread_id),
                          context=self._contexts[thread_id])
        after = self.state(thread_id).get("transcript") or []
        answer = [u for u in after[seen:] if u.get("speaker") != self.user_speaker]
        return {"role": "assistant", "content": "\n".join(str(u.get("text", "")) for u in answer)}


def _as_runnable(fn: Callable, name: str):
    # what StateGraph.add_node wraps a function in; replacing the spec keeps the node's edges
    from langgraph._internal._runnable import RunnableCallable
    return RunnableCallable(fn, name=name, trace=False)
