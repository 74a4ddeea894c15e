"""An A2A server (a2a-sdk, JSON-RPC binding) wrapping an agent callable, for the agent-slot tests.

``python tests/a2a_server.py PORT MODULE.py:ATTR`` serves ``ATTR`` (openevals ``app`` convention:
``app({"messages": [...], "context": {}})`` -> text) on 127.0.0.1:PORT; the server keeps each A2A
context's conversation, so the agent sees the whole dialogue of a session. The scenario's tools,
when convsim serves them for the turn (the message's ``metadata["convsim_tools"]``), are handed on
as ``inputs["convsim_tools"]`` (examples/remote_tools.py reads them).
"""
from __future__ import annotations

import importlib.util
import sys

import uvicorn
from a2a.helpers.proto_helpers import new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from starlette.applications import Starlette


class WrappedAgent(AgentExecutor):
    def __init__(self, app) -> None:
        self.app, self.history = app, {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        history = self.history.setdefault(context.context_id, [])
        history.append({"role": "user", "content": context.get_user_input()})
        inputs = {"messages": list(history), "context": {}}
        if context.message is not None and "convsim_tools" in context.message.metadata:  # the session's tools
            from google.protobuf.json_format import MessageToDict
            inputs["convsim_tools"] = MessageToDict(context.message.metadata)["convsim_tools"]
        reply = self.app(inputs)
        history.append({"role": "assistant", "content": reply})
        await event_queue.enqueue_event(new_text_message(reply, context_id=context.context_id,
                                                         task_id=context.task_id))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def build_app(app, url: str) -> Starlette:
    card = AgentCard(name="test agent", description="wraps a callable", version="1.0",
                     supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
                     skills=[AgentSkill(id="answer", name="answer", description="answers the user", tags=["chat"])],
                     capabilities=AgentCapabilities(streaming=False),
                     default_input_modes=["text/plain"], default_output_modes=["text/plain"])
    handler = DefaultRequestHandler(WrappedAgent(app), InMemoryTaskStore(), card)
    return Starlette(routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/"))


def load(target: str):
    path, _, attr = target.rpartition(":")
    spec = importlib.util.spec_from_file_location("a2a_wrapped_agent", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, attr)


if __name__ == "__main__":
    port = int(sys.argv[1])
    uvicorn.run(build_app(load(sys.argv[2]), f"http://127.0.0.1:{port}/"), host="127.0.0.1", port=port,
                log_level="warning")
