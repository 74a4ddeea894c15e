"""Chat completions against an OpenAI-compatible server, without ChatOpenAI.

What an ``openai:`` model spec talks to. It sends exactly the request body langchain-openai's
``ChatOpenAI`` sends (same fields, same order, same serialisation, so a server, a recorded fake or
a fault injector that hashes the body sees the same bytes) and reads the same fields back, but
skips what costs CPU and buys nothing here: LangChain's callback and run-manager layers, the
SDK's per-call ``TypedDict`` transform of the parameters (a no-op for plain text messages), its
pydantic parsing of the completion, and its httpx client: requests go through
:mod:`convsim.providers.httpjson` (stdlib, pooled keep-alive connections). A URL the environment proxies,
or every URL with ``CONVSIM_OPENAI_TRANSPORT=sdk``, goes through the ``openai`` SDK's client
instead (same body, same failure classes). bench/concurrency.py ``--steps`` shows each layer's cost.

Behaviour kept from ``ChatOpenAI`` (tests/test_openai_client.py compares the two):

* one connection pool per base URL and timeout, shared by every session, role and thread of the
  process; no retries below convsim's: :mod:`convsim.providers.retry` retries, records and classifies each
  attempt;
* HTTP errors, timeouts and refused connections raise exceptions carrying what convsim.providers.retry reads
  (``status_code``, the response's ``Retry-After``, httpx's or the SDK's exception names), an
  unreadable body raises ``JSONDecodeError`` / ``UnicodeDecodeError``;
* a JSON-mode answer (``response_format`` given) that stopped at ``max_tokens`` raises
  ``openai.LengthFinishReasonError`` with the completion (so the cut text and its tokens are kept),
  and one stopped by a content filter ``openai.ContentFilterFinishReasonError``;

With ``retry.stream`` the request asks for a streamed answer (``"stream": true`` and
``stream_options.include_usage``: the one field ChatOpenAI's body would differ by) and
:func:`assemble_sse` builds, from its server-sent events, the completion the unstreamed request
returns; the first-token, idle and total timeouts of :class:`convsim.providers.retry.StreamTimeouts`
replace the request timeout (docs/real_models.md).

Two deviations, both about a server's malformed 200, which ChatOpenAI turned into errors that read as
a bug in graph code (``code_error``, never retried):

* a 200 whose body is not JSON is always an unreadable body (``JSONDecodeError``, retried as
  infrastructure); ChatOpenAI called it a ``ValueError`` when the server also sent a non-JSON content
  type (an HTML page from a proxy);
* a 200 whose JSON carries ``error``, or no, null or empty ``choices``, or is not an object, raises
  :class:`convsim.providers.retry.MalformedCompletion` (retried as infrastructure, then ``infra_error``);
  ChatOpenAI raised ``ValueError`` / ``KeyError`` / ``TypeError`` / ``IndexError``.
"""
from __future__ import annotations

import json
import os
import threading
from typing import Any
from urllib.parse import urlsplit

from convsim.providers.httpjson import JSONPoster
from convsim.providers.retry import MalformedCompletion

# "http": convsim.providers.httpjson (stdlib, pooled keep-alive; the default); "sdk": the openai SDK's client
# (httpx), which proxied URLs always take. The environment variable is an escape hatch for a server
# the small client mishandles.
TRANSPORT = os.environ.get("CONVSIM_OPENAI_TRANSPORT", "http")

_CLIENTS: dict[tuple, Any] = {}
_CLIENTS_LOCK = threading.Lock()

# BaseMessage.type -> the chat-completions role (what langchain-openai maps them to)
_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "function",
          "developer": "developer"}


def _api_key() -> str:
    return os.environ.get("OPENAI_API_KEY", "none")


def _shared(key: tuple, make) -> Any:
    client = _CLIENTS.get(key)
    if client is None:
        with _CLIENTS_LOCK:
            client = _CLIENTS.get(key)
            if client is None:
                client = _CLIENTS[key] = make()
    return client


def shared_client(base_url: str, timeout: float) -> Any:
    """The process's ``openai.OpenAI`` client for ``base_url`` (built once; thread-safe, pooled)."""
    import openai  # only for proxied URLs or CONVSIM_OPENAI_TRANSPORT=sdk: the import costs ~0.3 s
    key = ("sdk", base_url, timeout, _api_key())
    return _shared(key, lambda: openai.OpenAI(base_url=base_url, api_key=key[3], timeout=timeout, max_retries=0))


def shared_poster(base_url: str, timeout: float) -> JSONPoster:
    """The process's :class:`JSONPoster` for ``base_url`` (connections shared by every thread)."""
    key = ("http", base_url, timeout, _api_key())
    return _shared(key, lambda: JSONPoster(base_url, timeout, {"Authorization": f"Bearer {key[3]}",
                                                               "User-Agent": "convsim"}))


def proxied(url: str) -> bool:
    """Whether the environment sends requests to ``url`` through a proxy (HTTP_PROXY, NO_PROXY...)."""
    import urllib.request
    scheme, host = urlsplit(url).scheme, urlsplit(url).hostname or ""
    return scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(host)


def dumps(body: dict) -> bytes:
    """JSON as the openai SDK (and httpx) serialise a request body: the same bytes reach the server."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class Answer:
    """What :meth:`OpenAIChat.invoke` returns: the fields ChatModel reads from an ``AIMessage``, and
    the message's ``tool_calls`` as the server sent them (chat-completions dicts; None when it sent
    none), read by the ``openai:`` agent adapter (convsim.slots.adapters)."""

    __slots__ = ("content", "usage_metadata", "finish_reason", "tool_calls")

    def __init__(self, content: str, usage_metadata: dict | None, finish_reason: str | None,
                 tool_calls: list | None = None) -> None:
        self.content, self.usage_metadata, self.finish_reason = content, usage_metadata, finish_reason
        self.tool_calls = tool_calls


def message_dicts(messages: list) -> list[dict]:
    """LangChain messages as chat-completions messages (``{"content", "role"}``, ChatOpenAI's order);
    a message that is such a dict already (``models.PlainMessage``) is kept as it is. An AI message's
    tool calls (valid and invalid) and a tool message's ``tool_call_id`` go as ChatOpenAI sends them
    (the tool-calling ``openai:`` agent's turns)."""
    out = []
    for m in messages:
        if isinstance(m, dict):
            out.append(m)
            continue
        role = getattr(m, "role", None) or _ROLES.get(m.type)
        if role is None:
            raise ValueError(f"message type {m.type!r} has no chat-completions role")
        message = {"content": m.content, "role": role}
        if getattr(m, "name", None) and role != "tool":
            message["name"] = m.name
        if role == "assistant" and (getattr(m, "tool_calls", None) or getattr(m, "invalid_tool_calls", None)):
            message["tool_calls"] = (
                [{"type": "function", "id": c["id"], "function": {
                    "name": c["name"], "arguments": json.dumps(c["args"], ensure_ascii=False)}} for c in m.tool_calls]
                + [{"type": "function", "id": c["id"], "function": {"name": c["name"], "arguments": c["args"]}}
                   for c in m.invalid_tool_calls])
            # "" beside tool calls, where ChatOpenAI sends null: the API allows both, and
            # llama-cpp-python's server (0.3.36) refuses null (HTTP 500) and a missing content too
            message["content"] = message["content"] or ""
        elif role == "tool":
            message["tool_call_id"] = m.tool_call_id
        out.append(message)
    return out


def _usage(usage: Any) -> dict | None:
    if not isinstance(usage, dict):
        return None
    # a count the server left out stays unknown (None), never 0: a token budget must know
    prompt, completion, total = (usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens"))
    if prompt is None and completion is None and total is None:
        return None
    return {"input_tokens": prompt, "output_tokens": completion,
            "total_tokens": total if total is not None else (prompt or 0) + (completion or 0)}


class OpenAIChat:
    """One model on one OpenAI-compatible server with fixed generation settings (thread-safe)."""

    def __init__(self, spec: Any, timeout: float = 120.0, transport: str | None = None,
                 stream: Any = None) -> None:
        transport = transport or TRANSPORT
        if transport == "sdk" or proxied(spec.base_url):
            self.client, self.poster = shared_client(spec.base_url, timeout), None
        else:
            self.client, self.poster = None, shared_poster(spec.base_url, timeout)
        # the timeouts of a streamed answer (convsim.providers.retry.StreamTimeouts), or None: not
        # streamed. Through the SDK's client (a proxied URL) answers are not streamed.
        self.stream = stream if self.poster is not None else None
        self.model = spec.model
        # ChatOpenAI's body: the settings it sends, in the (sorted) order it sends them
        settings: dict[str, Any] = {"temperature": spec.temperature}
        self.extra: dict[str, Any] = {}
        if spec.seed is not None:
            settings["seed"] = spec.seed
        if spec.max_tokens is not None:
            settings["max_completion_tokens"] = spec.max_tokens
            if "api.openai.com" not in spec.base_url:
                # langchain-openai sends only max_completion_tokens, which llama.cpp's server ignores
                # (it then generates until the context is full): send the classic field as well
                self.extra["max_tokens"] = spec.max_tokens
        self.settings = settings

    def body(self, messages: list, **kwargs: Any) -> dict:
        """The request body for ``messages`` (LangChain messages or chat-completions dicts) and
        per-call parameters."""
        params = {**self.settings, **kwargs}
        body: dict[str, Any] = {"model": self.model, "stream": False, "messages": message_dicts(messages)}
        for key in sorted(params):
            if params[key] is not None:
                body[key] = params[key]
        body.update(self.extra)
        return body

    def invoke(self, messages: list, **kwargs: Any) -> Answer:
        body = self.body(messages, **kwargs)
        if self.stream is not None:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}  # the token counts, in the last event
            data = self._streamed(body)
        else:
            if self.poster is not None:
                response = self.poster.post("/chat/completions", dumps(body))
            else:
                response = self.client.post("/chat/completions", body=body, cast_to=_raw_response_type())
            data = json.loads(response.content)  # JSONDecodeError / UnicodeDecodeError: unreadable body
        choice = _first_choice(data)
        finish = choice.get("finish_reason")
        if "response_format" in body and finish in ("length", "content_filter"):
            import openai
            completion = _completion(data)
            if finish == "length":
                raise openai.LengthFinishReasonError(completion=completion)
            raise openai.ContentFilterFinishReasonError(completion=completion)
        message = choice.get("message") or {}
        return Answer(message.get("content") or "", _usage(data.get("usage")), finish,
                      message.get("tool_calls") or None)


    def _streamed(self, body: dict) -> Any:
        """The completion a streamed request (``stream: true``) answers, assembled from its
        server-sent events as the one JSON object the same request without streaming answers:
        the content deltas joined, the last ``finish_reason``, the ``usage`` of the last event
        (``stream_options.include_usage``; a server that leaves it out leaves the counts unknown).
        A server that answers one JSON object instead is read as that object."""
        stream = self.poster.post_stream("/chat/completions", dumps(body), self.stream, progress=_sse_data)
        try:
            if stream.content_type != "text/event-stream":
                return json.loads(stream.read_all())  # a server that ignored "stream"
            return assemble_sse(stream.lines(), stream)
        finally:
            stream.close()


def _sse_data(line: bytes) -> bool:
    """Whether a stripped line of an event stream carries data (a comment, ``: ping``, does not)."""
    return line.startswith(b"data:")


def assemble_sse(lines: Any, where: Any = None) -> dict:
    """The chat completion the server-sent events ``lines`` (each a line, its end stripped) stream:
    ``{"id", "object", "created", "model", "choices": [{"index", "finish_reason", "message"}],
    "usage"}``; the message's ``tool_calls`` joined from their deltas (by index: id, name, the
    arguments' pieces). An event carrying ``error`` raises :class:`MalformedCompletion`; an event that is
    not JSON raises ``JSONDecodeError`` (an unreadable body); a stream that ends before its
    ``[DONE]`` and before a ``finish_reason``, or whose choice never got a ``finish_reason``, raises
    ``RemoteProtocolError`` (the answer was cut)."""
    from convsim.providers.httpjson import RemoteProtocolError
    head: dict = {}
    pieces: list[str] = []
    calls: dict[int, dict] = {}  # the tool calls by index, their arguments joined from the deltas
    finish = usage = None
    role, chosen, ended = "assistant", False, False
    data: list[bytes] = []

    def event(payload: bytes) -> None:
        nonlocal finish, usage, role, chosen, ended
        if payload.strip() == b"[DONE]":
            ended = True
            return
        chunk = json.loads(payload)
        if not isinstance(chunk, dict):
            raise MalformedCompletion(f"unexpected event from the server: {str(chunk)[:200]!r}")
        if chunk.get("error"):
            raise MalformedCompletion(f"the server streamed an error: {str(chunk['error'])[:300]}")
        for key in ("id", "created", "model"):
            if key not in head and key in chunk:
                head[key] = chunk[key]
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            chosen = True
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                pieces.append(delta["content"])
            if delta.get("role"):
                role = delta["role"]
            for part in delta.get("tool_calls") or ():
                if not isinstance(part, dict):
                    continue
                call = calls.setdefault(part.get("index", len(calls)), {"id": None, "type": "function",
                                                                        "function": {"name": "", "arguments": ""}})
                if part.get("id"):
                    call["id"] = part["id"]
                if part.get("type"):
                    call["type"] = part["type"]
                function = part.get("function") or {}
                if function.get("name"):
                    call["function"]["name"] += function["name"]
                if isinstance(function.get("arguments"), str):
                    call["function"]["arguments"] += function["arguments"]
            if choice.get("finish_reason") is not None:
                finish = choice["finish_reason"]

    for line in lines:
        if not line:  # the end of an event
            if data:
                event(b"\n".join(data))
                data = []
            if ended:
                break
        elif line.startswith(b"data:"):
            data.append(line[6:] if line[5:6] == b" " else line[5:])
        # (a comment ": ..." or an event:/id:/retry: field carries no completion)
    if data:
        event(b"\n".join(data))
    if finish is None and chosen:
        # every complete answer says why it ended before its [DONE]; llama-cpp-python's server, when
        # another request arrives (its interrupt_requests, on by default), ends a stream mid-answer
        # with a bare [DONE]: that is a cut answer, never a short one
        raise RemoteProtocolError("the stream ended before the answer did (no finish_reason"
                                  + (")" if ended else ", no [DONE])"))
    if not ended and finish is None:
        raise RemoteProtocolError("the stream ended before the answer did (no finish_reason, no [DONE])")
    message: dict = {"role": role, "content": "".join(pieces)}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    choices = [{"index": 0, "finish_reason": finish, "message": message}] if chosen else []
    return {"id": head.get("id", ""), "object": "chat.completion", "created": head.get("created", 0),
            "model": head.get("model", ""), "choices": choices, "usage": usage}


def _raw_response_type() -> type:
    """The class the SDK's ``post`` returns unparsed: httpx's ``Response`` (the SDK's 3.x fork,
    httpx2, accepts httpx's too when httpx is installed, which langchain-ollama's client needs)."""
    try:
        import httpx
    except ImportError:  # an SDK on httpx2 alone
        import httpx2 as httpx  # type: ignore[no-redef]
    return httpx.Response


def _first_choice(data: Any) -> dict:
    """The completion's first choice; anything else the server sent with its 200 (an ``error``
    body, no, null or empty ``choices``, not an object) is a :class:`MalformedCompletion`."""
    if not isinstance(data, dict):
        raise MalformedCompletion(f"unexpected response from the server: {str(data)[:200]!r}")
    if data.get("error"):
        raise MalformedCompletion(f"the server answered an error: {str(data['error'])[:300]}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedCompletion(f"the server answered no usable choices ({str(choices)[:100]!r}; "
                                  f"response keys: {list(data)[:10]})")
    return choices[0]


def _completion(data: dict) -> Any:
    """The completion as the SDK's ``ChatCompletion``, built as the SDK builds it: nested models,
    no validation (a server that leaves out fields keeps what it sent)."""
    from openai.types.chat import ChatCompletion
    return ChatCompletion.construct(**data)


def langchain_equivalent(spec: Any, timeout: float = 120.0, *, api_key: str | None = None) -> Any:
    """The ChatOpenAI an ``openai:`` spec was served by before this module: the reference whose
    request bytes :class:`OpenAIChat` reproduces (tests) and the "before" of bench/concurrency.py."""
    from langchain_openai import ChatOpenAI
    kwargs = {"model": spec.model, "base_url": spec.base_url, "temperature": spec.temperature,
              "api_key": api_key if api_key is not None else _api_key(), "max_retries": 0, "timeout": timeout}
    if spec.seed is not None:
        kwargs["seed"] = spec.seed
    if spec.max_tokens is not None:
        kwargs["max_tokens"] = spec.max_tokens
        kwargs["extra_body"] = {"max_tokens": spec.max_tokens}
    return ChatOpenAI(**kwargs)
