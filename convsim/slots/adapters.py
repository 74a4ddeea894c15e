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
import inspect
import json
import re
import threading
from typing import Any, Protocol, Sequence, runtime_checkable

from convsim.errors import AgentError, ConvsimError
from convsim.providers.models import ModelUnavailable
from convsim.slots.contract import AgentTurn, Slot
from convsim.slots.spec import AgentSpec, load_target, parse_agent_spec

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

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
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


ADAPTERS: dict[str, type] = {"callable": CallableAgent}


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
