"""The scenario's tools served to a remote agent (a LangGraph deployment, an A2A agent) over HTTP JSON.

A remote agent runs in another process, so it cannot be handed the session's LangChain tools. For
each agent turn that offers tools, its adapter opens a *lease* here: a random token naming that
turn's tools (the session's own objects: customer-service bookings land in the session's booking
system). The agent is told the lease as a small JSON object (:meth:`Lease.descriptor`)::

    {"url": "http://127.0.0.1:<port>/tools/<token>", "tools": [<OpenAI function-calling schemas>]}

(a LangGraph deployment in ``config["configurable"]["convsim_tools"]``, an A2A agent in the
message's ``metadata["convsim_tools"]``), and calls them during the turn:

* ``GET <url>`` -> ``200 {"tools": [...]}``;
* ``POST <url>/call`` with ``{"name": <tool>, "args": {...}}`` -> ``200 {"ok": true, "result": <the
  tool's result>}``, or ``200 {"ok": false, "error": <text>}`` for a call the tools cannot run (an
  unknown tool, arguments that are no object or do not fit the tool's schema; worded as LangGraph's
  ``ToolNode`` words them, as the ``openai:`` agent's tool errors are);
* a body that is not a JSON object with a string ``name``: ``400``; a token no open lease has (a turn
  that ended, a guess): ``404``.

The lease closes when the turn's answer is in: its URL then answers 404. Every call, refused ones
included, is recorded on the lease in arrival order (``{"name", "args", "result"}``, ``"error":
true`` when refused) and becomes the turn's ``tool_calls``. Calls of one lease run one at a time
(the session's tools are not thread-safe). One server per process, started on first use (a daemon
thread). Where it listens and the URL the agent is told come from the run's ``tool_server:`` config
(:class:`ToolServerConfig`; ``convsim run --tool-host/--tool-port/--tool-url``): by default
127.0.0.1 and a free port, which an agent on another host cannot reach; ``host: 0.0.0.0`` (or one of
the machine's addresses) with ``url: http://<address the agent reaches>`` serves the tools to other
hosts. The token (``secrets.token_urlsafe``, 192 bits) is the only credential: anyone who learns it
(any local process; beyond loopback, anyone on the network path: plain HTTP) can call the turn's
tools while the turn runs, which the run says in a one-line warning when it binds beyond loopback.
``examples/remote_tools.py`` is a client a remote agent can copy.
"""
from __future__ import annotations

import json
import secrets
import socket
import sys
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator, Sequence

from convsim.config import ToolServerConfig
from convsim.errors import ConvsimError

MAX_BODY = 1 << 20  # bytes a call's body may have


class Lease:
    """One agent turn's tools, reachable at :attr:`url` until the turn ends."""

    def __init__(self, token: str, url: str, tools: Sequence, schemas: list[dict]) -> None:
        self.token, self.url, self.schemas = token, url, schemas
        self.by_name = {t.name: t for t in tools}
        self.calls: list[dict] = []
        self.lock = threading.Lock()

    def descriptor(self) -> dict:
        """What the agent is told: ``{"url", "tools"}`` (JSON)."""
        return {"url": self.url, "tools": self.schemas}

    def call(self, name: str, args: object) -> dict:
        """Run one call; the answer body (``{"ok": true, "result"}`` or ``{"ok": false, "error"}``)."""
        if isinstance(args, dict):
            call: dict = {"name": name, "args": args, "id": "http", "type": "tool_call"}
        else:
            call = {"name": name, "args": json.dumps(args, default=str), "id": "http", "type": "invalid_tool_call",
                    "error": f"Function {name} arguments are a {type(args).__name__}, not a JSON object"}
        with self.lock:
            _, record = run_tool_call(call, self.by_name)
            self.calls.append(record)
        if record.get("error"):
            return {"ok": False, "error": record["result"]}
        return {"ok": True, "result": record["result"]}


class _Server:
    def __init__(self, settings: ToolServerConfig) -> None:
        self.settings = settings
        self.leases: dict[str, Lease] = {}
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body, ensure_ascii=False, default=str).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _lease(self, suffix: str) -> Lease | None:
                parts = self.path.split("?")[0].strip("/").split("/")
                want = ["tools", "*"] + ([suffix] if suffix else [])
                if len(parts) != len(want) or parts[0] != "tools" or (suffix and parts[2] != suffix):
                    return None
                with outer.lock:
                    return outer.leases.get(parts[1])

            def do_GET(self) -> None:  # noqa: N802 — http.server's naming
                lease = self._lease("")
                if lease is None:
                    return self._send(404, {"error": "no such tool lease (the turn ended, or a wrong URL)"})
                return self._send(200, {"tools": lease.schemas})

            def do_POST(self) -> None:  # noqa: N802
                lease = self._lease("call")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(min(length, MAX_BODY)) if length else b""
                if lease is None:
                    return self._send(404, {"error": "no such tool lease (the turn ended, or a wrong URL)"})
                try:
                    request = json.loads(body)
                except (ValueError, UnicodeDecodeError):
                    request = None
                if length > MAX_BODY or not isinstance(request, dict) or not isinstance(request.get("name"), str):
                    return self._send(400, {"error": 'the body is {"name": <tool>, "args": {...}}'})
                return self._send(200, lease.call(request["name"], request.get("args", {})))

        family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
        server_class = type("ToolHTTPServer", (ThreadingHTTPServer,), {"address_family": family})
        try:
            self.httpd = server_class((settings.host, settings.port), Handler)
        except OSError as exc:
            field = "tool_server.port" if settings.port else "tool_server.host"
            raise ConvsimError(f"the tool server cannot listen on {settings.host} port {settings.port or '(free)'}: "
                               f"{exc.strerror or exc}", field=field) from None
        self.httpd.daemon_threads = True
        self.base = settings.base_url(self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, name="convsim-toolserver", daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


_SERVER: _Server | None = None
_SETTINGS = ToolServerConfig()
_START = threading.Lock()


def configure(settings: ToolServerConfig | dict | None) -> None:
    """Use ``settings`` for the process's tool server from now on (a run's ``tool_server:``; the
    planner calls it in the driver and in every worker). A server already running with other
    settings is replaced on next use (closed when no turn holds a lease on it)."""
    global _SETTINGS
    settings = ToolServerConfig.model_validate(settings or {}) if not isinstance(settings, ToolServerConfig) else settings
    with _START:
        _SETTINGS = settings


def server() -> _Server:
    """The process's tool server (started on first use, with the configured settings)."""
    global _SERVER
    srv = _SERVER
    if srv is None or srv.settings != _SETTINGS:
        with _START:
            if _SERVER is None or _SERVER.settings != _SETTINGS:
                old, _SERVER = _SERVER, None
                if old is not None and not old.leases:  # closed first: the new one may want its port
                    old.close()
                _SERVER = _Server(_SETTINGS)
            srv = _SERVER
    return srv


def announce(settings: ToolServerConfig) -> None:
    """Print the one-line warning (stderr) when ``settings`` bind beyond loopback."""
    text = settings.warning()
    if text:
        print(f"warning: {text}", file=sys.stderr, flush=True)


@contextmanager
def lease(tools: Sequence, schemas: list[dict]) -> Iterator[Lease]:
    """A lease on ``tools`` for the block (one agent turn): reachable at ``lease.url`` until it ends."""
    srv = server()
    token = secrets.token_urlsafe(24)
    held = Lease(token, f"{srv.base}/tools/{token}", tools, schemas)
    with srv.lock:
        srv.leases[token] = held
    try:
        yield held
    finally:
        with srv.lock:
            srv.leases.pop(token, None)


def run_tool_call(call: dict, by_name: dict) -> tuple[Any, dict]:
    """One tool call run against the session's tools: the ``ToolMessage`` for the agent and the
    record ``{"name", "args", "result"}`` (``"error": True`` when the tools could not run it). The
    error texts are LangGraph ``ToolNode``'s; a tool that raises anything but a validation error is
    convsim's own bug and propagates."""
    from langchain_core.messages import ToolMessage
    from langgraph.prebuilt.tool_node import INVALID_TOOL_NAME_ERROR_TEMPLATE, TOOL_CALL_ERROR_TEMPLATE
    from pydantic import ValidationError
    name, cid = call["name"], call["id"]
    if call.get("type") == "invalid_tool_call":  # arguments that are no JSON object
        text = TOOL_CALL_ERROR_TEMPLATE.format(error=call.get("error"))
        return (ToolMessage(text, name=name, tool_call_id=cid, status="error"),
                {"name": name, "args": call.get("args"), "result": text, "error": True})
    tool = by_name.get(name)
    if tool is None:
        text = INVALID_TOOL_NAME_ERROR_TEMPLATE.format(requested_tool=name, available_tools=", ".join(by_name))
        return (ToolMessage(text, name=name, tool_call_id=cid, status="error"),
                {"name": name, "args": call["args"], "result": text, "error": True})
    try:
        result = tool.invoke(call["args"])
    except ValidationError as exc:  # arguments that do not fit the tool's schema
        text = TOOL_CALL_ERROR_TEMPLATE.format(error=repr(exc))
        return (ToolMessage(text, name=name, tool_call_id=cid, status="error"),
                {"name": name, "args": call["args"], "result": text, "error": True})
    content = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    return ToolMessage(content, name=name, tool_call_id=cid), {"name": name, "args": call["args"], "result": result}
