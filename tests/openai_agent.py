"""A scripted tool-calling agent behind an OpenAI-compatible endpoint, for tests (stdlib server).

``as_endpoint(policy)`` turns a LangChain chat policy (``messages -> AIMessage``, with or without
tool calls: examples/scripted_models.py's ``service_policy`` and ``film_policy``) into the
``answer(request)`` of tests/fault_server.py: the request's chat-completions messages are read back
as LangChain messages (a ``tool`` message gets the name of the call it answers), the policy's
``AIMessage`` is sent as a chat-completions message, its tool calls as OpenAI ``tool_calls`` with
JSON ``arguments``. So the same agent runs in-process (``create_agent`` over the policy's model)
and through an endpoint, and the two can be compared turn by turn.
"""
from __future__ import annotations

import json
from typing import Callable

from langchain_core.messages import AIMessage, ToolMessage, convert_to_messages


def lc_messages(request: dict) -> list:
    messages = convert_to_messages(request["messages"])
    names = {c["id"]: c["name"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    for m in messages:
        if isinstance(m, ToolMessage) and not m.name:
            m.name = names.get(m.tool_call_id)
    return messages


def openai_message(ai: AIMessage) -> str | dict:
    if not ai.tool_calls:
        return ai.content
    return {"content": ai.content or None,
            "tool_calls": [{"id": c["id"], "type": "function",
                            "function": {"name": c["name"], "arguments": json.dumps(c["args"])}}
                           for c in ai.tool_calls]}


def as_endpoint(policy: Callable[[list], AIMessage], seen: list | None = None) -> Callable[[dict], str | dict]:
    """``answer(request)`` for ``fault_server.serve``; ``seen`` (when given) gets every request."""
    def answer(request: dict) -> str | dict:
        if seen is not None:
            seen.append(request)
        return openai_message(policy(lc_messages(request)))
    return answer
