"""Streamed chat against an Ollama server (``POST /api/chat``, NDJSON), without ChatOllama's client.

What an ``ollama:`` model spec talks to when answers are streamed (``retry.stream``): the request
ChatOllama's client sends (it streams too: ``"stream": true``, the same fields, options and
messages; tests/test_streaming.py compares the two bodies), sent through
:mod:`convsim.providers.httpjson` so that

* the timeouts measure the server's work, not its queue: the first chunk must arrive within
  ``retry.first_token_timeout`` (the server's queue, loading the model, the prompt), each next one
  within ``retry.idle_timeout``, the whole answer within ``retry.total_timeout``
  (:class:`convsim.providers.retry.StreamTimeouts`); ChatOllama's httpx client has one read timeout
  for all three;
* a graceful stop (convsim.providers.stopping) cancels the call in flight (its socket shut down);
  httpx's is not reachable from a signal handler.

The answer is read as ChatOllama reads it: the chunks' ``message.content`` joined, the token counts
of the closing ``done`` chunk (``prompt_eval_count``, ``eval_count``; unknown unless both are
there). Failures are named as :mod:`convsim.providers.retry` reads them: an HTTP error raises
``HTTPStatusError`` (404: the model is missing), a chunk carrying ``error`` a
:class:`~convsim.providers.retry.MalformedCompletion` (infrastructure; ChatOllama's client raised a
``ResponseError`` with no status, which read as a bug in graph code), a stream that ends without its
``done`` chunk a ``RemoteProtocolError``.
"""
from __future__ import annotations

import json
import os
from typing import Any

from convsim.providers.httpjson import RemoteProtocolError
from convsim.providers.retry import MalformedCompletion, StreamTimeouts

DEFAULT_HOST = "http://localhost:11434"
_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def server_url(spec: Any) -> str:
    """The spec's Ollama server: its own, else ``OLLAMA_HOST`` (``host``, ``host:port`` or a URL, as
    the ollama client reads it), else localhost:11434."""
    host = spec.base_url or os.environ.get("OLLAMA_HOST") or DEFAULT_HOST
    if "://" not in host:
        host = "http://" + host
    scheme, _, rest = host.partition("://")
    hostport = rest.split("/", 1)[0]
    if ":" not in hostport.rsplit("]", 1)[-1]:  # no port (an IPv6 address's colons are not one)
        rest = rest.replace(hostport, f"{hostport}:{11434 if scheme == 'http' else 443}", 1)
    return f"{scheme}://{rest}".rstrip("/")


class Answer:
    """What :meth:`OllamaChat.invoke` returns: the fields ChatModel reads from an ``AIMessage``."""

    __slots__ = ("content", "usage_metadata", "finish_reason")

    def __init__(self, content: str, usage_metadata: dict | None, finish_reason: str | None) -> None:
        self.content, self.usage_metadata, self.finish_reason = content, usage_metadata, finish_reason


class OllamaChat:
    """One model on one Ollama server with fixed generation settings, answers streamed (thread-safe)."""

    def __init__(self, spec: Any, timeout: float, stream: StreamTimeouts) -> None:
        from convsim.providers.openai_client import shared_poster
        self.url = server_url(spec)
        self.poster = shared_poster(self.url, timeout)
        self.stream = stream
        self.model = spec.model
        # ChatOllama's options: only the settings that are set, in its order
        options = {"num_ctx": spec.num_ctx, "num_predict": spec.max_tokens, "temperature": spec.temperature,
                   "seed": spec.seed}
        self.options = {k: v for k, v in options.items() if v is not None}

    def body(self, messages: list, **kwargs: Any) -> dict:
        """The body ChatOllama's client sends for ``messages`` and per-call ``format`` / ``options``."""
        options = kwargs.pop("options", None)
        fmt = kwargs.pop("format", None)
        if kwargs:
            raise TypeError(f"OllamaChat.invoke() got unexpected keyword arguments {sorted(kwargs)}")
        body: dict[str, Any] = {"model": self.model, "stream": True,
                                "options": dict(self.options) if options is None else options}
        if fmt is not None:
            body["format"] = fmt
        body["messages"] = [_message(m) for m in messages]
        body["tools"] = []
        return body

    def invoke(self, messages: list, **kwargs: Any) -> Answer:
        from convsim.providers.openai_client import dumps
        body = self.body(messages, **kwargs)
        stream = self.poster.post_stream("/api/chat", dumps(body), self.stream)
        try:
            return assemble_ndjson(stream.lines())
        finally:
            stream.close()


def _message(m: Any) -> dict:
    """A message as the ollama client sends it: its role and content, an empty content left out
    (the client drops a message's empty fields)."""
    if isinstance(m, dict):
        role, content = m["role"], m["content"]
    else:
        role, content = _ROLES.get(m.type), m.content
        if role is None:
            raise ValueError(f"message type {m.type!r} has no Ollama role")
    if not isinstance(content, str):
        raise ValueError("an Ollama message's content must be text")
    return {"role": role, "content": content} if content else {"role": role}


def assemble_ndjson(lines: Any) -> Answer:
    """The answer the NDJSON chunks ``lines`` stream (see the module's docstring)."""
    pieces: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        chunk = json.loads(line)  # JSONDecodeError / UnicodeDecodeError: an unreadable body
        if not isinstance(chunk, dict):
            raise MalformedCompletion(f"unexpected chunk from the server: {str(chunk)[:200]!r}")
        if chunk.get("error"):
            raise MalformedCompletion(f"the server streamed an error: {str(chunk['error'])[:300]}")
        content = (chunk.get("message") or {}).get("content")
        if isinstance(content, str):
            pieces.append(content)
        if chunk.get("done"):
            prompt, completion = chunk.get("prompt_eval_count"), chunk.get("eval_count")
            usage = None if prompt is None or completion is None else \
                {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion}
            return Answer("".join(pieces), usage, chunk.get("done_reason"))
    raise RemoteProtocolError("the stream ended before the answer did (no done chunk)")
