"""Use a convsim scenario's tools from a remote agent (a LangGraph deployment, an A2A agent).

Each agent turn, convsim serves the session's tools for the turn (on 127.0.0.1, or where the run's
``tool_server:`` says) and tells the agent where (docs/agents.md, "Tools for a remote agent")::

    {"url": "http://127.0.0.1:<port>/tools/<token>", "tools": [<OpenAI function-calling schemas>]}

* a LangGraph deployment finds it in ``config["configurable"]["convsim_tools"]``;
* an A2A agent in the user message's ``metadata["convsim_tools"]``.

This file is a stdlib-only client a researcher's agent can copy::

    from remote_tools import descriptor_of, langchain_tools

    def agent_node(state, config):
        tools = langchain_tools(descriptor_of(config))   # LangChain tools: bind them to a model,
        ...                                              # put them in a ToolNode, or .invoke() them

``call_tool(descriptor, name, args)`` is one call: the tool's result, or :class:`ToolError` with the
message convsim answered (an unknown tool, arguments that do not fit the schema). The URL answers
only while the turn runs.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

KEY = "convsim_tools"


class ToolError(RuntimeError):
    """The tools could not run the call (convsim's message says why, in ToolNode's words)."""


def descriptor_of(carrier: Any) -> dict | None:
    """The tools descriptor in a LangGraph config (``{"configurable": {...}}``), an A2A message's
    metadata (a dict or a protobuf ``Struct``), or the descriptor itself; None when there is none."""
    if carrier is None:
        return None
    if hasattr(carrier, "metadata") and not isinstance(carrier, dict):  # an A2A Message
        carrier = carrier.metadata
    if not isinstance(carrier, dict) and hasattr(carrier, "fields"):  # a protobuf Struct
        from google.protobuf.json_format import MessageToDict
        carrier = MessageToDict(carrier)
    if not isinstance(carrier, dict):
        return None
    if isinstance(carrier.get("url"), str) and "tools" in carrier:
        return carrier
    for inner in (carrier.get(KEY), (carrier.get("configurable") or {}).get(KEY)):
        if isinstance(inner, dict) and isinstance(inner.get("url"), str):
            return inner
    return None


def call_tool(descriptor: dict, name: str, args: dict, timeout: float = 60.0) -> Any:
    """One call of the scenario's tool ``name``; its result (JSON), or :class:`ToolError`."""
    body = json.dumps({"name": name, "args": args}).encode()
    request = urllib.request.Request(descriptor["url"] + "/call", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        answer = json.loads(response.read())
    if not answer.get("ok"):
        raise ToolError(answer.get("error") or "the tool call was refused")
    return answer["result"]


def langchain_tools(descriptor: dict | None) -> list:
    """The scenario's tools as LangChain ``StructuredTool`` objects calling convsim ([] for none).
    A refused call returns convsim's error text as the tool's result, so an agent loop shows it to
    the model (as LangGraph's ToolNode does)."""
    if not descriptor:
        return []
    from langchain_core.tools import StructuredTool
    tools = []
    for schema in descriptor.get("tools") or []:
        fn = schema["function"]

        def run(_name: str = fn["name"], **kwargs: Any) -> Any:
            try:
                return call_tool(descriptor, _name, kwargs)
            except ToolError as exc:
                return str(exc)
        tools.append(StructuredTool.from_function(
            func=lambda _run=run, **kwargs: _run(**kwargs), name=fn["name"],
            description=fn.get("description", ""), args_schema=fn.get("parameters") or {"type": "object",
                                                                                       "properties": {}}))
    return tools
