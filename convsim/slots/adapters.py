"""Adapters: one per agent spec kind, each answering a turn with an :class:`AgentTurn`.

Every adapter is handed the conversation so far as LangChain messages (the user's turns
``HumanMessage``, the agent's own replies ``AIMessage``), the scenario's JSON-able context for
the turn, and the scenario's domain tools. Faults (the contract in :mod:`convsim.slots`):

* the user's agent raised, or answered garbage (empty, no text, control characters):
  :class:`convsim.errors.AgentError` with ``raw`` (the session's status ``agent_failure``);
* a remote agent's transport failed (refused, 5xx, 429, timeout, unreadable body) after the run's
  retries: :class:`convsim.providers.models.ModelUnavailable` (``infra_error``: logged, re-run on resume).
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
import re
import threading
from collections import OrderedDict
from typing import Any, Iterator, Protocol, Sequence, runtime_checkable

from convsim.errors import AgentError, ConvsimError
from convsim.providers.models import ModelUnavailable
from convsim.slots.contract import AgentTurn, Slot
from convsim.slots.spec import AgentSpec, load_target, parse_agent_spec
from convsim.slots.toolserver import run_tool_call

RAW_KEPT = 2000  # characters of a garbage answer kept in the error (and the record)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@runtime_checkable
class Agent(Protocol):
    """What :func:`make_agent` returns: the researcher's agent behind one slot."""

    spec: AgentSpec

    def invoke(self, messages: list, *, session_id: str, context: dict, tools: Sequence = ()) -> AgentTurn: ...

    async def ainvoke(self, messages: list, *, session_id: str, context: dict,
                      tools: Sequence = ()) -> AgentTurn: ...


# ----------------------------------------------------------------------------- answers


def raw_text(raw: object) -> str:
    """A raw answer as text for a record (JSON where it can be, cut at :data:`RAW_KEPT`)."""
    if isinstance(raw, str) and not _CONTROL.search(raw):
        text = raw
    else:  # JSON escapes control characters: the record stays one readable line
        try:
            text = json.dumps(raw, default=lambda o: getattr(o, "content", None) if hasattr(o, "content") else repr(o),
                              ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(raw)
    return text if len(text) <= RAW_KEPT else text[:RAW_KEPT] + "..."


def garbage(spec: AgentSpec, why: str, raw: object) -> AgentError:
    return AgentError(f"agent {spec.text} answered garbage ({why}); raw: {raw_text(raw)}", raw=raw_text(raw))


def content_text(content: object) -> str | None:
    """A message's content as text: a string, or the text blocks of a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "".join(parts) if parts or not content else None
    return None


def check_text(spec: AgentSpec, text: object, raw: object) -> str:
    """The reply when it is usable text, else :class:`AgentError` (garbage, raw kept)."""
    if not isinstance(text, str):
        raise garbage(spec, f"the reply is a {type(text).__name__}, not text", raw)
    if not text.strip():
        raise garbage(spec, "an empty reply", raw)
    if _CONTROL.search(text):
        raise garbage(spec, "control characters in the reply", raw)
    return text


def _structured(spec: AgentSpec, slot: Slot, found: object, raw: object) -> dict:
    if found is None:
        return {}
    if not isinstance(found, dict):
        raise garbage(spec, f"structured is a {type(found).__name__}, not an object", raw)
    return {k: v for k, v in found.items() if k in slot.structured}


def _tool_calls(spec: AgentSpec, found: object, raw: object) -> list[dict]:
    if found is None:
        return []
    if not isinstance(found, list) or not all(isinstance(c, dict) for c in found):
        raise garbage(spec, "tool_calls is no list of objects", raw)
    return [{"name": c.get("name"), "args": c.get("args", {}), "result": c.get("result")} for c in found]


def normalise_answer(spec: AgentSpec, slot: Slot, raw: object) -> AgentTurn:
    """An agent's answer (a str, an ``AIMessage``, a dict with ``content``/``messages``/``text`` and
    optional ``structured`` and ``tool_calls``, or an :class:`AgentTurn`) as an :class:`AgentTurn`;
    garbage raises :class:`AgentError` with the raw answer."""
    from langchain_core.messages import BaseMessage
    if isinstance(raw, AgentTurn):
        return AgentTurn(check_text(spec, raw.text, raw), _structured(spec, slot, raw.structured, raw),
                         _tool_calls(spec, raw.tool_calls, raw), raw.raw if raw.raw is not None else raw.text)
    if isinstance(raw, str):
        return AgentTurn(check_text(spec, raw, raw), {}, [], raw)
    if isinstance(raw, BaseMessage):
        return AgentTurn(check_text(spec, content_text(raw.content), raw), {}, [], raw_text(raw))
    if isinstance(raw, dict):
        if "text" in raw:
            text = raw["text"]
        elif "content" in raw:
            text = content_text(raw["content"])
        elif isinstance(raw.get("messages"), list) and raw["messages"]:
            last = raw["messages"][-1]
            text = content_text(last.get("content") if isinstance(last, dict) else getattr(last, "content", None))
        else:
            raise garbage(spec, "an object with none of text, content, messages", raw)
        return AgentTurn(check_text(spec, text, raw), _structured(spec, slot, raw.get("structured"), raw),
                         _tool_calls(spec, raw.get("tool_calls"), raw), raw_text(raw))
    raise garbage(spec, f"a {type(raw).__name__}, not text, a message or an object", raw)


def as_role_dicts(messages: Sequence) -> list[dict]:
    """LangChain messages as openevals' ``[{"role": "user"|"assistant", "content": ...}]``."""
    roles = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
    out = []
    for m in messages:
        if isinstance(m, dict):
            out.append({"role": m["role"], "content": m["content"]})
        else:
            out.append({"role": roles.get(m.type, m.type), "content": m.content})
    return out


def run_coroutine(coro: Any) -> Any:
    """Run a coroutine to its end from sync code: on this thread when no event loop runs here, else
    on a helper thread (a sync node called from an async graph)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict = {}
    ctx = contextvars.copy_context()  # the node's LangGraph config and runtime go along

    def target() -> None:
        try:
            box["value"] = ctx.run(asyncio.run, coro)
        except BaseException as exc:  # noqa: BLE001 — re-raised on the caller's thread
            box["error"] = exc
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def user_fault(spec: AgentSpec, exc: Exception) -> Exception:
    """An exception from the user's agent: infrastructure faults and convsim's own bad-input errors
    pass through; anything else is the agent's failure."""
    if isinstance(exc, (ModelUnavailable, AgentError)):
        return exc
    err = AgentError(f"agent {spec.text} raised {type(exc).__name__}: {exc}", raw=None)
    err.__cause__ = exc
    return err


# ----------------------------------------------------------------------------- adapters


class _Adapter:
    def __init__(self, spec: AgentSpec, slot: Slot) -> None:
        self.spec, self.slot = spec, slot

    def invoke(self, messages: list, *, session_id: str, context: dict, tools: Sequence = ()) -> AgentTurn:
        return run_coroutine(self.ainvoke(messages, session_id=session_id, context=context, tools=tools))

    async def ainvoke(self, messages: list, *, session_id: str, context: dict,
                      tools: Sequence = ()) -> AgentTurn:
        raise NotImplementedError

    def end_session(self, key: str) -> None:
        """Forget what is kept for the session ``key`` (:func:`convsim.slots.calls.session_key`): the
        runner calls it for every adapter of the process when a session attempt ends, however it
        ended (convsim.running.session via :func:`convsim.slots.nodes.end_session`). A later attempt
        of that session (a fork, a resume) starts the agent over from the transcript it is handed."""
        sessions = getattr(self, "sessions", None)
        if sessions is not None:
            sessions.drop(key)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec.text} as {self.slot.role}>"


class CallableAgent(_Adapter):
    """A Python callable in openevals' ``app`` convention: ``app(inputs)`` with
    ``inputs = {"messages": [{"role", "content"}, ...], "context": {...}}`` (and ``"tools"``, the
    scenario's LangChain tools, when the scenario offers any), sync or async."""

    def __init__(self, spec: AgentSpec, slot: Slot) -> None:
        super().__init__(spec, slot)
        self.fn = load_target(spec.target, text=spec.text)
        self.is_async = inspect.iscoroutinefunction(self.fn) or inspect.iscoroutinefunction(
            getattr(self.fn, "__call__", None))

    def _inputs(self, messages: list, context: dict, tools: Sequence) -> dict:
        inputs: dict = {"messages": as_role_dicts(messages), "context": dict(context)}
        if tools:
            inputs["tools"] = list(tools)
        return inputs

    def invoke(self, messages: list, *, session_id: str, context: dict, tools: Sequence = ()) -> AgentTurn:
        inputs = self._inputs(messages, context, tools)
        try:
            raw = run_coroutine(self.fn(inputs)) if self.is_async else self.fn(inputs)
            if inspect.isawaitable(raw):
                raw = run_coroutine(_await(raw))
        except Exception as exc:  # noqa: BLE001 — the user's agent failed
            raise user_fault(self.spec, exc) from exc
        return normalise_answer(self.spec, self.slot, raw)

    async def ainvoke(self, messages: list, *, session_id: str, context: dict,
                      tools: Sequence = ()) -> AgentTurn:
        inputs = self._inputs(messages, context, tools)
        try:
            if self.is_async:
                raw = await self.fn(inputs)
            else:  # a sync callable may block: off the event loop
                raw = await asyncio.to_thread(self.fn, inputs)
            if inspect.isawaitable(raw):
                raw = await raw
        except Exception as exc:  # noqa: BLE001 — the user's agent failed
            raise user_fault(self.spec, exc) from exc
        return normalise_answer(self.spec, self.slot, raw)


async def _await(awaitable: Any) -> Any:
    return await awaitable


class _Sessions:
    """Per-session state of a stateful adapter (a graph's state, a remote thread, an A2A context, an
    endpoint conversation), keyed by :func:`convsim.slots.calls.session_key`. A session's state is
    only needed while it runs: the runner drops it when the session attempt ends
    (:meth:`_Adapter.end_session`); ``limit`` bounds what callers outside a run (a script calling an
    adapter, which never ends its sessions) leave behind, the oldest dropped first."""

    def __init__(self, limit: int = 65536) -> None:
        self.limit, self.items, self.lock = limit, OrderedDict(), threading.Lock()

    def get(self, key: str, messages: Sequence) -> Any:
        """What was kept for the session, when the conversation handed now continues the one it was
        kept for (its messages, then the reply); None otherwise (a fork or a session run again in
        this process: the conversation took another way, so the agent starts over from it)."""
        with self.lock:
            kept = self.items.get(key)
        if kept is None:
            return None
        value, said = kept
        if len(said) > len(messages) or [_said(m) for m in messages[:len(said)]] != said:
            return None
        return value

    def drop(self, key: str) -> None:
        """Forget the session ``key`` (nothing when none is kept)."""
        with self.lock:
            self.items.pop(key, None)

    def __len__(self) -> int:
        return len(self.items)

    def put(self, key: str, value: Any, messages: Sequence, reply: str) -> None:
        said = [_said(m) for m in messages] + [("ai", reply)]
        with self.lock:
            self.items[key] = (value, said)
            self.items.move_to_end(key)
            while len(self.items) > self.limit:
                self.items.popitem(last=False)


def _said(message: Any) -> tuple[str, str]:
    """A handed message as what was said: (``human``/``ai``, its text)."""
    kind = getattr(message, "type", None) or (message.get("role") if isinstance(message, dict) else None)
    kind = {"user": "human", "assistant": "ai"}.get(kind, kind)
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", "")
    return str(kind), content_text(content) or ""


def _tool_calls_of(messages: Sequence) -> list[dict]:
    """``[{"name", "args", "result"}]`` of the AI messages' tool calls among ``messages``, each with
    the content of the tool message that answered it (None when none did), in call order; ``"error":
    True`` on a call whose tool message has status ``error``."""
    results, failed = {}, set()
    for m in messages:
        if getattr(m, "type", None) == "tool" or (isinstance(m, dict) and m.get("type") == "tool"):
            cid = m.get("tool_call_id") if isinstance(m, dict) else getattr(m, "tool_call_id", None)
            results[cid] = m.get("content") if isinstance(m, dict) else m.content
            if (m.get("status") if isinstance(m, dict) else getattr(m, "status", None)) == "error":
                failed.add(cid)  # ToolNode's answer to a call it could not run (an unknown tool, bad args)
    out = []
    for m in messages:
        calls = (m.get("tool_calls") if isinstance(m, dict) else getattr(m, "tool_calls", None)) or []
        for c in calls:
            out.append({"name": c.get("name"), "args": c.get("args", {}), "result": results.get(c.get("id")),
                        **({"error": True} if c.get("id") in failed else {})})
    return out


def _state_answer(spec: AgentSpec, slot: Slot, values: object, new_from: int) -> AgentTurn:
    """A graph's output state (``{"messages": [...], <structured keys>...}``) as an AgentTurn: the
    last message is the reply (an AI message with text), ``new_from`` the index where this turn's
    messages start (its tool calls are read from them)."""
    if not isinstance(values, dict) or not isinstance(values.get("messages"), list) or not values["messages"]:
        raise garbage(spec, "the graph's state has no messages", values)
    msgs = values["messages"]
    last = msgs[-1]
    kind = last.get("type", last.get("role")) if isinstance(last, dict) else getattr(last, "type", None)
    if kind not in ("ai", "assistant", "AIMessageChunk"):
        raise garbage(spec, f"the graph's last message is a {kind} message, not the agent's reply", values)
    content = last.get("content") if isinstance(last, dict) else last.content
    text = check_text(spec, content_text(content), values)
    structured = {k: values[k] for k in slot.structured if values.get(k) is not None}
    return AgentTurn(text, structured, _tool_calls_of(msgs[new_from:]), raw_text(content))


class GraphAgent(_Adapter):
    """A LangGraph graph (``StateGraph`` or compiled) taking and returning ``{"messages": [...]}``.

    Run inside the scenario's node, it is a subgraph of the session's graph: its inner node steps are
    in the session's trace (convsim.traces.tracing, ``on_inner_updates``). It keeps its own state across
    a session's turns: each turn it gets the state it ended the last one with plus the user's new
    messages (the conversation so far when it has none for the session: a fork, a resumed run).
    A ``context`` key in its state, when it has one, gets the scenario's context.

    Compiled without a checkpointer of its own, it inherits the session's (``--checkpoint``): its
    inner checkpoints are kept under the node's checkpoint namespace. A fork at one of its inner
    steps (``convsim fork --step N``, convsim.traces.time_travel) resumes it from its checkpoint
    before that step's inner superstep, copied into the fork's run: the agent is invoked with
    ``None`` and that checkpoint's ``checkpoint_ns``/``checkpoint_id`` (LangGraph time travel of a
    nested graph), so its nodes before the step do not run again."""

    def __init__(self, spec: AgentSpec, slot: Slot) -> None:
        super().__init__(spec, slot)
        from langgraph.graph import StateGraph
        obj = load_target(spec.target, text=spec.text)
        if isinstance(obj, StateGraph):
            obj = obj.compile()
        elif getattr(obj, "checkpointer", None) not in (None, False):
            # its state is kept here, per session: a checkpointer of its own would need a thread id
            obj = obj.copy(update={"checkpointer": None})
        self.graph = obj
        self.takes_context = "context" in (getattr(obj, "channels", None) or {})
        self.sessions = _Sessions()

    def _input(self, key: str, messages: list, context: dict) -> tuple[dict, int]:
        prior = self.sessions.get(key, messages)
        if prior is None:
            state: dict = {"messages": list(messages)}
        else:
            values, seen = prior
            state = {**values, "messages": list(values.get("messages") or []) + list(messages[seen:])}
        if self.takes_context:
            state["context"] = dict(context)
        return state, len(state["messages"])

    def _done(self, key: str, out: object, n_in: int, messages: list) -> AgentTurn:
        turn = _state_answer(self.spec, self.slot, out, n_in)
        self.sessions.put(key, (dict(out), len(messages) + 1), messages, turn.text)  # the reply joins it
        return turn

    def _call(self, session_id: str, messages: list, context: dict) -> tuple[str, dict | None, dict | None, int]:
        """The session's key, then either the state to invoke the graph with (and None), or (a fork
        inside this agent) None and the config resuming it from the fork's inner checkpoint; then the
        index where this turn's messages start."""
        from convsim.slots.calls import session_handles
        h = session_handles()
        key = h.get("key") or str(session_id)
        if h.get("resume_inner") is not None:
            resumed = _resume_config(h)
            if resumed is not None:
                config, n_in = resumed
                return key, None, config, n_in
        state, n_in = self._input(key, messages, context)
        return key, state, None, n_in

    def invoke(self, messages: list, *, session_id: str, context: dict, tools: Sequence = ()) -> AgentTurn:
        key, state, config, n_in = self._call(session_id, messages, context)
        try:
            out = self.graph.invoke(state) if config is None else self.graph.invoke(None, config)
        except Exception as exc:  # noqa: BLE001 — the user's graph failed
            raise _graph_fault(self.spec, exc) from exc
        return self._done(key, out, n_in, messages)

    async def ainvoke(self, messages: list, *, session_id: str, context: dict,
                      tools: Sequence = ()) -> AgentTurn:
        key, state, config, n_in = self._call(session_id, messages, context)
        try:
            out = await (self.graph.ainvoke(state) if config is None else self.graph.ainvoke(None, config))
        except Exception as exc:  # noqa: BLE001 — the user's graph failed
            raise _graph_fault(self.spec, exc) from exc
        return self._done(key, out, n_in, messages)


def _resume_config(handles: dict) -> tuple[dict, int] | None:
    """For the first graph-agent call of a fork inside a graph agent (``handles["resume_inner"]``,
    set by convsim.running.session from the fork's ``inner``), made in the node the fork names: the
    config invoking the agent's graph from the copied inner checkpoint (the node's own config, as
    a nested graph inherits it, with that checkpoint's namespace and id), and the number of
    messages the agent was handed that turn. None elsewhere (another node, outside a graph run)."""
    from langgraph.config import get_config
    inner = handles["resume_inner"]
    try:
        config = get_config()
    except RuntimeError:  # not inside a graph run
        return None
    configurable = config.get("configurable") or {}
    here = str(configurable.get("checkpoint_ns") or "").split("|")[0].partition(":")[0]
    if here != inner["path"] or handles.pop("resume_inner", None) is None:  # taken once
        return None
    return ({"configurable": {**configurable, "checkpoint_ns": inner["checkpoint_ns"],
                              "checkpoint_id": inner["checkpoint_id"]}}, int(inner["messages_in"]))


def _graph_fault(spec: AgentSpec, exc: Exception) -> BaseException:
    from langgraph.errors import GraphBubbleUp
    if isinstance(exc, GraphBubbleUp):  # LangGraph's own control flow (an interrupt): not a failure
        return exc
    return user_fault(spec, exc)


class OpenAIAgent(_Adapter):
    """An OpenAI-compatible ``/v1/chat/completions`` endpoint that is the agent: sent the
    conversation, its answer is the reply. Calls go through :class:`convsim.providers.models.ChatModel`
    (the run's limits, retries, call records, ``ModelUnavailable``); the context, when not empty,
    goes first as a system message.

    The scenario's tools, when it offers any, go as OpenAI function-calling ``tools`` (JSON schemas
    by ``langchain_core``'s ``convert_to_openai_tool``). An answer with ``tool_calls`` is executed
    here, against the session's tools, in call order; each result goes back as a ``tool`` message
    (JSON) and the endpoint is asked again, up to ``tool_rounds`` answers with tool calls per turn
    (spec ``openai:<model>@<url>#tool_rounds=N``, default :data:`TOOL_ROUNDS`; ``max_tokens``,
    ``temperature``, ``seed`` beside it: the request's generation settings); one more is the
    agent's failure (``agent_failure``, the last answer kept). ``#tool_choice=`` sends the request's
    ``tool_choice`` (none sent without it: the endpoint's default): ``auto`` and ``none`` on every
    request of a turn, ``required`` and a tool's name (``{"type": "function", "function": {"name":
    ...}}``) on the turn's first request only, ``auto`` on those after it (a reply is never a tool
    call: forcing every request would call tools until ``tool_rounds`` ran out); a name the turn's
    tools lack is bad input (:class:`convsim.ConvsimError`). A call the tools cannot run (an
    unknown tool, arguments that are not a JSON object or do not fit the tool's schema) is answered
    with an error ``tool`` message as LangGraph's ``ToolNode`` words it, and recorded with
    ``"error": true``; the agent may correct itself. The session's conversation with the endpoint
    (its tool calls and their results included) is kept across its turns, as a chat client keeps
    it, so the endpoint sees what an in-process agent's state holds."""

    def __init__(self, spec: AgentSpec, slot: Slot) -> None:
        super().__init__(spec, slot)
        from convsim.providers.models import parse_model_spec
        settings = {k: spec.options[k] for k in ("max_tokens", "seed", "temperature") if k in spec.options}
        self.model_spec = parse_model_spec({"spec": f"openai:{spec.options['model']}@{spec.options['base_url']}",
                                            **settings}, where=f"agents.{slot.role}")
        self.tool_rounds = int(spec.options.get("tool_rounds", TOOL_ROUNDS))
        self.tool_choice: str | None = spec.options.get("tool_choice")
        self.sessions = _Sessions()

    def _tool_choices(self, by_name: dict) -> tuple[Any, Any]:
        """The ``tool_choice`` of a turn's first request and of the requests after tool results
        (None: not sent)."""
        choice = self.tool_choice
        if choice is None or not by_name:
            return None, None
        if choice in ("auto", "none"):
            return choice, choice
        if choice != "required" and choice not in by_name:
            raise ConvsimError(f"bad agent spec {self.spec.text!r}: tool_choice={choice} names no tool of the "
                               f"{self.slot.role} slot; its tools: {', '.join(by_name)}",
                               field=f"agents.{self.slot.role}")
        first = choice if choice == "required" else {"type": "function", "function": {"name": choice}}
        return first, "auto"

    def invoke(self, messages: list, *, session_id: str, context: dict, tools: Sequence = ()) -> AgentTurn:
        from langchain_core.messages import AIMessage, SystemMessage
        from convsim.providers.models import ChatModel
        from convsim.slots.calls import session_handles, session_key
        h = session_handles()
        handle = ChatModel(spec=self.model_spec, role=f"agent:{self.slot.role}",
                           calls=h["calls"] if h.get("calls") is not None else [], retry=h.get("retry"),
                           unavailable=h["unavailable"] if h.get("unavailable") is not None else [],
                           call_tasks=h.get("call_tasks"))
        key = session_key(session_id)
        known = self.sessions.get(key, messages)
        history = list(messages) if known is None else list(known[0]) + list(messages[known[1]:])
        head = ([SystemMessage(f"Context: {json.dumps(context, ensure_ascii=False, default=str)}")]
                if context else [])
        kwargs = {"tools": tool_schemas(tools)} if tools else {}
        by_name = {t.name: t for t in tools}
        first_choice, later_choice = self._tool_choices(by_name)
        calls: list[dict] = []
        for n in range(self.tool_rounds + 1):
            choice = first_choice if n == 0 else later_choice
            if choice is not None:
                kwargs["tool_choice"] = choice
            message = handle._invoke_message(head + history, "agent", **kwargs)  # ModelUnavailable after the retries
            content = getattr(message, "content", None)
            raw_calls = getattr(message, "tool_calls", None)
            if not raw_calls:
                text = check_text(self.spec, content_text(content), content)
                history.append(AIMessage(text))
                self.sessions.put(key, (history, len(messages) + 1), messages, text)
                return AgentTurn(text, {}, calls, raw_text(content))
            raw = {"content": content, "tool_calls": raw_calls}
            if n == self.tool_rounds:
                raise garbage(self.spec, f"still calling tools after {self.tool_rounds} round(s) of tool calls "
                                         f"(tool_rounds)", raw)
            valid, invalid, ordered = _parse_tool_calls(self.spec, raw_calls, raw, n)
            history.append(AIMessage(content_text(content) or "", tool_calls=valid, invalid_tool_calls=invalid))
            for call in ordered:
                reply, record = run_tool_call(call, by_name)
                history.append(reply)
                calls.append(record)
        raise AssertionError("unreachable")  # pragma: no cover — the loop returns or raises

    async def ainvoke(self, messages: list, *, session_id: str, context: dict,
                      tools: Sequence = ()) -> AgentTurn:
        # the provider clients are sync (pooled keep-alive connections, the run's limits' locks):
        # as ChatModel.ainvoke, the request goes out from a worker thread, off the event loop (the
        # thread gets a copy of this context: the scenario's binding of its tools goes along)
        return await asyncio.to_thread(self.invoke, messages, session_id=session_id, context=context,
                                       tools=tools)


TOOL_ROUNDS = 8  # answers with tool calls an openai: agent may give in one turn (spec #tool_rounds=N)
_SCHEMAS: dict[tuple, list] = {}


def tool_schemas(tools: Sequence) -> list[dict]:
    """The tools' OpenAI function-calling schemas (``convert_to_openai_tool``), made once per tool set
    (a scenario makes its tools anew each turn, from the same argument schemas)."""
    key = tuple((t.name, t.description, id(getattr(t, "args_schema", None))) for t in tools)
    schemas = _SCHEMAS.get(key)
    if schemas is None:
        from langchain_core.utils.function_calling import convert_to_openai_tool
        schemas = _SCHEMAS[key] = [convert_to_openai_tool(t) for t in tools]
    return schemas


@contextlib.contextmanager
def _tool_lease(tools: Sequence) -> Iterator[Any]:
    """A remote agent's turn: the session's tools served over HTTP for the turn
    (:mod:`convsim.slots.toolserver`), or None when the scenario offers none."""
    if not tools:
        yield None
        return
    from convsim.slots.toolserver import lease
    with lease(tools, tool_schemas(tools)) as held:
        yield held


def _parse_tool_calls(spec: AgentSpec, raw_calls: object, raw: object, n: int) -> tuple[list, list, list]:
    """An answer's ``tool_calls`` (chat-completions dicts) as LangChain tool calls: ``(valid,
    invalid, both in call order)``, the invalid ones those whose arguments are no JSON object
    (``langchain_core``'s parser, as ChatOpenAI reads them). A list that is not tool calls at all
    is garbage."""
    from langchain_core.exceptions import OutputParserException
    from langchain_core.messages.tool import invalid_tool_call, tool_call
    from langchain_core.output_parsers.openai_tools import parse_tool_call
    if not isinstance(raw_calls, list):
        raise garbage(spec, "tool_calls is no list", raw)
    valid, invalid, ordered = [], [], []
    for i, c in enumerate(raw_calls):
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise garbage(spec, "a tool call with no function name", raw)
        cid = c.get("id") if isinstance(c.get("id"), str) and c.get("id") else f"call_{n}_{i}"
        c = {**c, "id": cid}
        arguments = fn.get("arguments")
        try:
            if arguments is not None and not isinstance(arguments, str):
                raise OutputParserException(f"Function {fn['name']} arguments are a "
                                            f"{type(arguments).__name__}, not a JSON string")
            parsed = parse_tool_call(c, return_id=True)
            if not isinstance(parsed["args"], dict):
                raise OutputParserException(f"Function {fn['name']} arguments:\n\n{arguments}\n\n"
                                            f"are not a JSON object")
            valid.append(tool_call(name=parsed["name"], args=parsed["args"], id=cid))
            ordered.append(valid[-1])
        except OutputParserException as exc:
            invalid.append(invalid_tool_call(name=fn["name"], args=arguments if isinstance(arguments, str)
                                             else json.dumps(arguments, default=str), id=cid, error=str(exc)))
            ordered.append(invalid[-1])
    return valid, invalid, ordered


class LangGraphRemoteAgent(_Adapter):
    """A LangGraph deployment (``langgraph dev``, LangGraph Platform) through LangGraph's own
    ``RemoteGraph``: one thread per session (made on its first turn), sent the user's new messages
    each turn (the thread keeps the rest); the reply is the last message of the thread's state,
    structured outputs are the state keys named like ``Slot.structured``. The scenario's tools, when
    it offers any, are served over HTTP for the turn (:mod:`convsim.slots.toolserver`) and named in
    the run's ``config["configurable"]["convsim_tools"]``; the calls that reached them are the
    turn's ``tool_calls``."""

    def __init__(self, spec: AgentSpec, slot: Slot) -> None:
        super().__init__(spec, slot)
        from convsim.slots.calls import Endpoint
        try:
            from langgraph.pregel.remote import RemoteGraph
            from langgraph_sdk import get_sync_client
        except ImportError as exc:  # pragma: no cover — langgraph-sdk ships with langgraph
            raise ConvsimError(f"agent {spec.text} needs langgraph-sdk (pip install 'convsim[remote]'): {exc}",
                               field=f"agents.{slot.role}") from None
        url, self.assistant_id = spec.options["url"], spec.options["assistant_id"]
        self.sync_client = get_sync_client(url=url)
        self.remote = RemoteGraph(self.assistant_id, sync_client=self.sync_client)
        self.endpoint = Endpoint(spec.text, "langgraph", url)
        self.sessions = _Sessions()

    def invoke(self, messages: list, *, session_id: str, context: dict, tools: Sequence = ()) -> AgentTurn:
        from convsim.slots.calls import remote_call, session_key
        key = session_key(session_id)
        role = f"agent:{self.slot.role}"
        known = self.sessions.get(key, messages)
        if known is None:  # a new session (or one that took another way): a new thread
            thread = remote_call(self.endpoint, lambda: _bare(self.sync_client.threads.create), role=role,
                                 purpose="agent thread")
            known = (thread["thread_id"], 0, 0)
        thread_id, seen, n_thread = known
        new = as_role_dicts(messages[seen:] if seen <= len(messages) else messages)
        payload: dict = {"messages": new}
        if context:
            payload["context"] = dict(context)
        config: dict = {"configurable": {"thread_id": thread_id}}
        with _tool_lease(tools) as held:  # the session's tools, over HTTP for this turn
            if held is not None:
                config["configurable"]["convsim_tools"] = held.descriptor()
            try:
                out = remote_call(self.endpoint, lambda: _bare(self.remote.invoke, payload, config), role=role)
            except ModelUnavailable:
                raise
            except Exception as exc:  # noqa: BLE001 — the deployment answered: the agent's run failed
                raise user_fault(self.spec, exc) from exc
        turn = _state_answer(self.spec, self.slot, out, n_thread)
        if held is not None and held.calls:  # what ran against the scenario's tools, as the tools saw it
            turn.tool_calls = list(held.calls)
        self.sessions.put(key, (thread_id, len(messages) + 1, len(out["messages"])), messages, turn.text)
        return turn

    async def ainvoke(self, messages: list, *, session_id: str, context: dict,
                      tools: Sequence = ()) -> AgentTurn:
        return await asyncio.to_thread(self.invoke, messages, session_id=session_id, context=context,
                                       tools=tools)


class A2AAgent(_Adapter):
    """An A2A agent through the ``a2a-sdk`` client: one A2A context per session (made on its first
    turn), sent the user's new messages each turn as one text message (the agent keeps the rest of
    the context); the reply is the text of the message, or of the task's status message and
    artifacts, the agent answers with. A task that ends failed or rejected is the agent's failure.
    The scenario's tools, when it offers any, are served over HTTP for the turn
    (:mod:`convsim.slots.toolserver`) and named in the message's ``metadata["convsim_tools"]``;
    the calls that reached them are the turn's ``tool_calls``."""

    def __init__(self, spec: AgentSpec, slot: Slot) -> None:
        super().__init__(spec, slot)
        from convsim.slots.calls import Endpoint
        try:
            import a2a.client  # noqa: F401
        except ImportError as exc:
            raise ConvsimError(f"agent {spec.text} needs the a2a-sdk (pip install 'convsim[remote]'): {exc}",
                               field=f"agents.{slot.role}") from None
        self.url = spec.options["url"]
        self.endpoint = Endpoint(spec.text, "a2a", self.url)
        self.card: Any = None
        self.card_lock = threading.Lock()
        self.sessions = _Sessions()

    async def _card(self, http: Any) -> Any:
        from a2a.client import A2ACardResolver
        return await A2ACardResolver(http, self.url).get_agent_card()

    async def _send(self, text: str, context_id: str, timeout: float, metadata: dict | None = None) -> list:
        import httpx
        from a2a.client import ClientConfig, ClientFactory
        from a2a.helpers.proto_helpers import new_text_message
        from a2a.types import Role, SendMessageRequest
        async with httpx.AsyncClient(timeout=timeout) as http:
            if self.card is None:
                self.card = await self._card(http)
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(self.card)
            message = new_text_message(text, context_id=context_id, role=Role.ROLE_USER)
            if metadata:
                message.metadata.update(metadata)
            return [r async for r in client.send_message(SendMessageRequest(message=message))]

    def _reply(self, responses: list) -> AgentTurn:
        from a2a.helpers.proto_helpers import get_artifact_text, get_message_text
        from google.protobuf.json_format import MessageToDict
        raw = [MessageToDict(r) for r in responses]
        if not responses:
            raise garbage(self.spec, "no answer to the message", raw)
        last = responses[-1]
        kind = last.WhichOneof("payload")
        if kind == "message":
            text = get_message_text(last.message)
        elif kind == "task":
            from a2a.types import TaskState
            task = last.task
            if task.status.state in (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED,
                                     TaskState.TASK_STATE_CANCELED):
                raise garbage(self.spec, f"the task ended {TaskState.Name(task.status.state)}", raw)
            parts = [get_message_text(task.status.message)] if task.status.HasField("message") else []
            parts += [get_artifact_text(a) for a in task.artifacts]
            text = "\n".join(p for p in parts if p)
        else:
            raise garbage(self.spec, f"an A2A {kind} event, not a message or a task", raw)
        return AgentTurn(check_text(self.spec, text, raw), {}, [], raw_text(raw))

    def invoke(self, messages: list, *, session_id: str, context: dict, tools: Sequence = ()) -> AgentTurn:
        import uuid
        from convsim.slots.calls import remote_call, session_handles, session_key
        key = session_key(session_id)
        known = self.sessions.get(key, messages)
        context_id, seen = known if known is not None else (uuid.uuid4().hex, 0)
        new = [m for m in messages[seen:] if getattr(m, "type", None) == "human"] or messages[-1:]
        text = "\n".join(content_text(m.content) or "" for m in new)
        timeout = (session_handles().get("retry") or _default_retry()).timeout
        with _tool_lease(tools) as held:  # the session's tools, over HTTP for this turn
            metadata = {"convsim_tools": held.descriptor()} if held is not None else None
            try:
                responses = remote_call(self.endpoint, lambda: run_coroutine(self._send(text, context_id, timeout,
                                                                                         metadata)),
                                        role=f"agent:{self.slot.role}")
            except ModelUnavailable:
                raise
            except Exception as exc:  # noqa: BLE001 — the agent answered with an error: its failure
                raise user_fault(self.spec, exc) from exc
        turn = self._reply(responses)
        if held is not None:
            turn.tool_calls = list(held.calls)
        self.sessions.put(key, (context_id, len(messages) + 1), messages, turn.text)
        return turn

    async def ainvoke(self, messages: list, *, session_id: str, context: dict,
                      tools: Sequence = ()) -> AgentTurn:
        return await asyncio.to_thread(self.invoke, messages, session_id=session_id, context=context,
                                       tools=tools)


def _default_retry() -> Any:
    from convsim.providers.retry import RetryPolicy
    return RetryPolicy()


def _bare(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` outside the calling node's LangGraph context: a ``RemoteGraph`` called inside a
    node would take the session graph's config (its thread id, its checkpoint namespace) as its own."""
    return contextvars.Context().run(fn, *args)


ADAPTERS: dict[str, type] = {"callable": CallableAgent, "graph": GraphAgent, "openai": OpenAIAgent,
                             "langgraph": LangGraphRemoteAgent, "a2a": A2AAgent}


def make_agent(spec: AgentSpec | str, slot: Slot) -> Agent:
    """The adapter for a non-builtin agent spec (a built-in is run by the scenario's own node)."""
    spec = parse_agent_spec(spec, field=f"agents.{slot.role}") if isinstance(spec, str) else spec
    if spec.kind == "builtin":
        raise ConvsimError(f"{spec.text} is a built-in agent: the scenario runs it, make_agent does not",
                           field=f"agents.{slot.role}")
    if spec.kind not in ADAPTERS:
        raise ConvsimError(f"agent spec kind {spec.kind!r} needs an adapter this install lacks",
                           field=f"agents.{slot.role}")
    return ADAPTERS[spec.kind](spec, slot)
