"""For a scenario's agent node: call the agent filling a slot on the session's transcript.

A graph file's node does, when the spec is not one of the slot's built-ins::

    turn, meta = call_slot(spec, SLOTS["agent"], state["transcript"], context={"turn": t},
                           session_id=runtime.context.session_id)
    # the reply: turn.text; meta ({"agent_spec", "tool_calls", "structured"}) goes in the turn's meta

(``acall_slot`` in an ``async def`` node). The adapter is made once per process and spec.
"""
from __future__ import annotations

import functools

import threading
from typing import Iterable, Sequence

from convsim.slots.adapters import Agent, make_agent
from convsim.slots.contract import AgentTurn, Slot
from convsim.slots.spec import AgentSpec, parse_agent_spec

USER_SPEAKERS = frozenset({"user", "seeker", "customer", "member"})

_AGENTS: dict[tuple[str, Slot], Agent] = {}
_LOCK = threading.Lock()


def is_builtin(spec: str | AgentSpec | None, slot: Slot) -> bool:
    """Whether ``spec`` names one of the slot's built-in agents (or nothing: the default)."""
    if spec is None or spec == "":
        return True
    if isinstance(spec, AgentSpec):
        return spec.kind == "builtin"
    text = spec.strip()
    return ":" not in text or text.startswith("builtin:")


def user_spec(ctx: object, slot: Slot) -> str | None:
    """The spec filling ``slot`` in this session when it is the researcher's agent, None when one of
    the slot's built-ins runs: the context's ``agents`` (the run's), overridden by its params'
    ``agents`` (a variant's or ``--agent``'s)."""
    specs = dict(getattr(ctx, "agents", None) or {})
    specs.update(getattr(getattr(ctx, "params", None), "agents", None) or {})
    text = specs.get(slot.role)
    return text if text and not _parsed_builtin(text, slot.role) else None


@functools.lru_cache(maxsize=256)
def _parsed_builtin(text: str, role: str) -> bool:
    return parse_agent_spec(text, field=f"agents.{role}").is_builtin


def builtin_name(spec: str | AgentSpec | None, slot: Slot) -> str | None:
    """The built-in agent a spec names (the slot's default for none)."""
    if spec is None or spec == "":
        return slot.default
    return (spec.target if isinstance(spec, AgentSpec) else spec.strip().removeprefix("builtin:"))


def cached_agent(spec: str | AgentSpec, slot: Slot) -> Agent:
    """``make_agent(spec, slot)``, made once per process for each spec and slot (a graph is compiled
    once, a remote client's connections are pooled)."""
    text = spec.text if isinstance(spec, AgentSpec) else str(spec).strip()
    key = (text, slot)
    agent = _AGENTS.get(key)
    if agent is None:
        with _LOCK:
            agent = _AGENTS.get(key)
            if agent is None:
                parsed = spec if isinstance(spec, AgentSpec) else parse_agent_spec(text, field=f"agents.{slot.role}")
                agent = _AGENTS[key] = make_agent(parsed, slot)
    return agent


def end_session(key: str) -> None:
    """Drop every adapter's state for the session attempt ``key`` (``variant/session/t<trial>``,
    the ``agent_session`` key): called by convsim.running.session when the attempt ends, so a long
    run keeps no finished session's graph state, thread, context or endpoint conversation."""
    for agent in list(_AGENTS.values()):
        end = getattr(agent, "end_session", None)
        if end is not None:
            end(key)


def transcript_messages(transcript: Iterable[dict], *, user_speakers: Iterable[str] = USER_SPEAKERS) -> list:
    """A convsim transcript (``[{"speaker", "text", ...}]``) as LangChain messages: the user's turns
    ``HumanMessage``, every other speaker's (the agent's own replies) ``AIMessage``."""
    from langchain_core.messages import AIMessage, HumanMessage
    users = frozenset(user_speakers)
    return [HumanMessage(str(t.get("text") or "")) if t.get("speaker") in users else AIMessage(str(t.get("text") or ""))
            for t in transcript]


def turn_meta(spec: str | AgentSpec, turn: AgentTurn) -> dict:
    """What a transcript turn's ``meta`` records of an agent's turn."""
    return {"agent_spec": spec.text if isinstance(spec, AgentSpec) else str(spec),
            "tool_calls": list(turn.tool_calls), "structured": dict(turn.structured)}


def call_slot(spec: str | AgentSpec, slot: Slot, transcript: Iterable[dict], *, context: dict,
              session_id: str, tools: Sequence = (), user_speakers: Iterable[str] = USER_SPEAKERS
              ) -> tuple[AgentTurn, dict]:
    """The agent's turn on the transcript so far, and the meta to record with it (sync nodes)."""
    agent = cached_agent(spec, slot)
    messages = transcript_messages(transcript, user_speakers=user_speakers)
    turn = agent.invoke(messages, session_id=session_id, context=context, tools=tools)
    check_language(agent.spec, slot, turn, messages)
    return turn, turn_meta(spec, turn)


def check_language(spec: AgentSpec, slot: Slot, turn: AgentTurn, messages: Sequence) -> None:
    """An ``AgentError`` (garbage, raw kept) when the reply is not in the slot's ``language``
    (convsim.providers.answer_language; the words of the conversation and ``slot.vocabulary()``
    known). An empty reply of a ranking or plan slot is not looked at."""
    if slot.language is None or not isinstance(turn.text, str) or not turn.text.strip():
        return
    from convsim.providers.answer_check import message_texts
    from convsim.providers.answer_language import english_words, language_defect
    from convsim.slots.adapters import garbage
    vocabulary = slot.vocabulary() if slot.vocabulary is not None else frozenset()
    why = language_defect(turn.text, language=slot.language, vocabulary=vocabulary)
    if why is not None:  # the conversation's words are known too: read only when the reply needs them
        why = language_defect(turn.text, language=slot.language, vocabulary=vocabulary,
                              extra=english_words(message_texts(messages)))
    if why is not None:
        raise garbage(spec, why, turn.raw)


async def acall_slot(spec: str | AgentSpec, slot: Slot, transcript: Iterable[dict], *, context: dict,
                     session_id: str, tools: Sequence = (), user_speakers: Iterable[str] = USER_SPEAKERS
                     ) -> tuple[AgentTurn, dict]:
    """:func:`call_slot` for ``async def`` nodes."""
    agent = cached_agent(spec, slot)
    messages = transcript_messages(transcript, user_speakers=user_speakers)
    turn = await agent.ainvoke(messages, session_id=session_id, context=context, tools=tools)
    check_language(agent.spec, slot, turn, messages)
    return turn, turn_meta(spec, turn)


def tool_errors(turn: AgentTurn) -> list[dict]:
    """The agent's tool calls the scenario's tools never ran (an unknown tool, arguments that are no
    JSON object or do not fit the tool's schema: ``"error": True``, answered with an error message as
    LangGraph's ``ToolNode`` answers them). A scenario whose turn records its tools' own log
    (``meta["tool_calls"]``: what ran) keeps these beside it as ``meta["tool_errors"]``."""
    return [c for c in turn.tool_calls if c.get("error")]


def reason_missing(slot: Slot, key: str, what: str | None = None) -> str:
    """The reason a metric is None when the agent did not report ``key``: "the agent reports no ..."."""
    return f"the agent reports no {what or key.replace('_', ' ')}"


__all__ = ["acall_slot", "builtin_name", "cached_agent", "call_slot", "is_builtin", "reason_missing",
           "tool_errors", "transcript_messages", "turn_meta"]
