"""A fault-injecting OpenAI-compatible chat server (stdlib only, 127.0.0.1) for tests.

    with serve(seed=3, faults={"500": 0.1, "429": 0.1, "hang": 0.05}) as server:
        spec = f"openai:fake@{server.url}"          # server.url ends in /v1
        ...
    server.served  # Counter of what was answered: "ok", "500", "429", "hang", "nonjson", ...

Faults (each a probability in ``faults``, or an explicit ``script`` served in order):

* ``500``      HTTP 500 with a JSON error body
* ``429``      HTTP 429 with ``Retry-After: <retry_after>``
* ``hang``     no answer for ``hang_s`` seconds (longer than the client's timeout)
* ``nonjson``  HTTP 200, ``application/json`` content type, an HTML body
* ``nonutf8``  HTTP 200, bytes that are not UTF-8
* ``garbage``  HTTP 200, a well-formed completion whose content is ``GARBAGE``, placeholder Latin
               (not infrastructure)
* ``nonsense`` HTTP 200, a well-formed completion whose content is well-formed nonsense, one of
               ``NONSENSE`` (lorem ipsum, a salad of English words, a reply in French, German or
               Spanish), drawn per request; each is kept in ``server.nonsense``
* ``junk``     HTTP 200, a well-formed completion whose content is random bytes read as Latin-1
               with a NUL inside (what a broken model or server sends; not infrastructure); each is
               kept in ``server.junk``
* ``stall``    streamed: the first piece of the answer, then nothing for ``hang_s`` seconds (a
               server stalled mid-stream), then the rest; not streamed: as ``hang``
* ``ok``       HTTP 200, ``answer(request_json)`` as the content; an answer that is a dict is the
               message itself (``{"content": ..., "tool_calls": [...]}``: a scripted tool-calling
               agent, finish reason ``tool_calls``)

Streamed answers: a request with ``"stream": true`` is answered as OpenAI's server-sent events
(chunked): a first event with the role, one event per piece of the content (:func:`pieces`: a word
with the spaces after it), an event with the ``finish_reason``, then, when the request asked for
``stream_options.include_usage``, an event with no choices and the usage, and ``data: [DONE]``.
``token_s``: seconds between two pieces (a model generating), or ``token_s(n, request_json)`` for
the n-th request. ``ping_s``: the head is sent at once
and an SSE comment ``: ping`` every ``ping_s`` seconds while the answer's ``delay`` runs (what
llama-cpp-python's server does). ``server.stream_cut`` counts streams the client left before their
end (a cancelled call). Faults other than ``stall``, ``garbage`` and ``junk`` answer as unstreamed.

Preflight's test request (``Reply with OK.``, convsim.running.model_check) is answered ``OK`` at
once, outside the script, the draws and the delays (``served["ping"]`` counts it).

Slow and busy servers: ``delay(n, request_json)`` is the seconds the n-th request (0-based) of an
answer takes (a model computing); ``slots=1`` serves one request at a time (a single-slot llama.cpp
server: the others wait in its queue). ``models``: the model names served; a request naming another
gets HTTP 404 ``model ... not found`` (Ollama's and OpenAI's answer). ``server.arrivals`` holds each
request's ``time.monotonic()`` on arrival, ``server.finished`` each answer's; ``max_in_service`` the
most requests served at once. ``props``: what ``GET /props`` answers (llama.cpp's server reports its
``total_slots`` there), else 404.

The draw is deterministic per request: it hashes the seed, the request body and how many times
that same body was sent before, so a retried request gets a fresh draw and the order in which
concurrent sessions reach the server does not change which requests fail.
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

FAULTS = ("500", "429", "hang", "nonjson", "nonutf8", "garbage", "junk", "stall", "nonsense")
GARBAGE = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt."
# well-formed text, decodable, no control character, sentence-shaped: and no answer
NONSENSE = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit. Ut enim ad minim veniam, quis nostrud "
    "exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat.",
    "Velvet harbor quietly seventeen marmalade, orbit lantern cathedral pudding, whisper gravel.",
    "Je vous recommande vivement ce film, une comédie romantique qui se passe à Paris.",
    "Natürlich kann ich Ihnen einen Tisch für zwei Personen um acht Uhr reservieren.",
    "Claro, te recomiendo esta película de ciencia ficción, te va a encantar seguro.",
)


def default_answer(request: dict) -> str:
    """A JSON verdict when JSON was asked for, else a short sentence naming a few facts."""
    if request.get("response_format"):
        return json.dumps({"correct": True, "reason": "looks right"})
    return "Paris. 100 degrees Celsius. William Shakespeare. Jupiter. Au."


def junk_text(body: bytes, n: int) -> str:
    """48 pseudo-random bytes (from the request and a counter) read as Latin-1, a NUL in the middle."""
    raw = hashlib.sha256(body + str(n).encode()).digest() + hashlib.sha256(str(n).encode() + body).digest()[:16]
    text = raw.decode("latin-1")
    return text[:24] + "\x00" + text[24:]


class FaultServer:
    def __init__(self, *, seed: int, faults: dict[str, float] | None, script: list[str] | None,
                 retry_after: str, hang_s: float, answer: Callable[[dict], str | dict],
                 delay: Callable[[int, dict], float] | None = None, slots: int | None = None,
                 models: set[str] | None = None, props: dict | None = None,
                 listing: dict | None = None, token_s: Any = 0.0, ping_s: float | None = None) -> None:
        unknown = set(faults or {}) - set(FAULTS) | set(script or []) - set(FAULTS) - {"ok"}
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {FAULTS}")
        self.seed, self.faults = seed, dict(faults or {})
        self.script = list(script or [])
        self.retry_after, self.hang_s, self.answer = retry_after, hang_s, answer
        self.served: Counter = Counter()
        self.seen: Counter = Counter()
        self.junk: list[str] = []  # every junk content served, in order
        self.nonsense: list[str] = []  # every nonsense content served, in order
        self.lock = threading.Lock()
        self.httpd: ThreadingHTTPServer | None = None
        self.url = ""
        self.delay, self.models, self.props, self.listing = delay, models, props, listing
        self.slots = threading.BoundedSemaphore(slots) if slots else None
        self.arrivals: list[float] = []
        self.finished: list[float] = []
        self.in_service = self.max_in_service = 0
        self.token_s, self.ping_s = token_s, ping_s
        self.stream_cut = 0  # streams the client left before their end
        self.stream_started = 0  # streamed answers whose first piece was sent
        self.streamed = 0  # streamed answers sent to their end

    def choose(self, body: bytes) -> str:
        with self.lock:
            if self.script:
                return self.script.pop(0)
            digest = hashlib.sha256(body).hexdigest()
            self.seen[digest] += 1
            h = hashlib.sha256(f"{self.seed}:{digest}:{self.seen[digest]}".encode()).digest()
        u = int.from_bytes(h[:8], "big") / 2 ** 64
        for fault in FAULTS:
            p = self.faults.get(fault, 0.0)
            if u < p:
                return fault
            u -= p
        return "ok"


def _completion(request: dict, content: str | dict) -> dict:
    """A completion whose message is ``content`` (text), or the message ``content`` is (a dict: a
    scripted tool-calling answer, ``{"content": ..., "tool_calls": [...]}``)."""
    message = ({"role": "assistant", "content": content} if not isinstance(content, dict)
               else {"role": "assistant", **content})
    finish = "tool_calls" if isinstance(content, dict) and content.get("tool_calls") else "stop"
    return {"id": "chatcmpl-fault", "object": "chat.completion", "created": 0,
            "model": request.get("model", "fake"),
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}


def pieces(content: str) -> list[str]:
    """How a streamed answer is cut: each word with the whitespace after it (leading whitespace alone)."""
    return re.findall(r"\s+|\S+\s*", content) if content else []


def _chunk(request: dict, delta: dict | None, finish: str | None = None, **extra) -> dict:
    chunk = {"id": "chatcmpl-fault", "object": "chat.completion.chunk", "created": 0,
             "model": request.get("model", "fake"),
             "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return {**chunk, **extra}


def _handler(server: FaultServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes, headers: dict | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            # one request per connection: a kept-alive connection would outlive serve()'s block
            self.send_header("Connection", "close")
            self.close_connection = True
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
                pass

        def _stream_head(self) -> None:
            if getattr(self, "_streaming", False):
                return
            self._streaming = True
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.close_connection = True
            self.end_headers()

        def _write_chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%b\r\n" % (len(data), data))
            self.wfile.flush()

        def _event(self, payload: dict | str) -> None:
            text = payload if isinstance(payload, str) else json.dumps(payload)
            self._write_chunk(f"data: {text}\n\n".encode())

        def _stream(self, request: dict, content: str, stall: bool, n: int = -1) -> None:
            """Answer ``content`` as server-sent events (see the module's docstring)."""
            token_s = server.token_s(n, request) if callable(server.token_s) else server.token_s
            try:
                self._stream_head()
                self._event(_chunk(request, {"role": "assistant", "content": ""}))
                calls = content.get("tool_calls") or [] if isinstance(content, dict) else []
                content = (content.get("content") or "") if isinstance(content, dict) else content
                for i, piece in enumerate(pieces(content)):
                    if i == 1 and stall:
                        time.sleep(server.hang_s)
                    elif i and token_s:
                        time.sleep(token_s)
                    self._event(_chunk(request, {"content": piece}))
                    if i == 0:
                        with server.lock:
                            server.stream_started += 1
                for i, call in enumerate(calls):  # a tool call: its id and name, then its arguments in pieces
                    function = call.get("function") or {}
                    self._event(_chunk(request, {"tool_calls": [{"index": i, "id": call.get("id"), "type": "function",
                                                                 "function": {"name": function.get("name"),
                                                                              "arguments": ""}}]}))
                    arguments = function.get("arguments") or ""
                    for at in range(0, len(arguments), 7):
                        self._event(_chunk(request, {"tool_calls": [{"index": i, "function": {
                            "arguments": arguments[at:at + 7]}}]}))
                self._event(_chunk(request, {}, "tool_calls" if calls else "stop"))
                if (request.get("stream_options") or {}).get("include_usage"):
                    self._event(_chunk(request, None, usage={"prompt_tokens": 5, "completion_tokens": 5,
                                                             "total_tokens": 10}))
                self._event("[DONE]")
                self._write_chunk(b"")
                with server.lock:
                    server.streamed += 1
            except (BrokenPipeError, ConnectionResetError):  # the client left (a stop, a timeout)
                with server.lock:
                    server.stream_cut += 1

        def _wait(self, seconds: float, streaming: bool) -> None:
            """The answer's delay; while streaming with ``ping_s``, the head at once and pings."""
            if not (streaming and server.ping_s):
                time.sleep(seconds)
                return
            end = time.monotonic() + seconds
            self._stream_head()
            while (left := end - time.monotonic()) > 0:
                time.sleep(min(left, server.ping_s))
                try:
                    self._write_chunk(b": ping\n\n")
                except (BrokenPipeError, ConnectionResetError):
                    return

        def do_GET(self) -> None:  # noqa: N802 — llama.cpp's /props (``props``), else 404
            if self.path == "/props" and server.props is not None:
                return self._send(200, json.dumps(server.props).encode())
            if self.path == "/v1/models" and server.listing is not None:  # what GET /v1/models answers
                return self._send(200, json.dumps(server.listing).encode())
            return self._send(404, b'{"error": {"message": "not found"}}')

        def do_POST(self) -> None:  # noqa: N802 — http.server's naming
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with server.lock:
                n = len(server.arrivals)
                server.arrivals.append(time.monotonic())
            if server.models is not None:
                name = json.loads(body or b"{}").get("model")
                if name not in server.models:
                    with server.lock:
                        server.served["404"] += 1
                    return self._send(404, json.dumps({"error": {"message": f"model '{name}' not found",
                                                                  "type": "not_found_error"}}).encode())
            request = json.loads(body or b"{}")
            if request.get("messages") == [{"role": "user", "content": "Reply with OK."}]:
                with server.lock:  # preflight's test request (convsim.running.model_check): answered at
                    server.served["ping"] += 1  # once, outside the script, the draws and the delays
                if request.get("stream") is True:
                    return self._stream(request, "OK", False)
                return self._send(200, json.dumps(_completion(request, "OK")).encode())
            if server.slots is not None:
                server.slots.acquire()  # a single-slot server: the others wait in its queue
            try:
                with server.lock:
                    server.in_service += 1
                    server.max_in_service = max(server.max_in_service, server.in_service)
                if server.delay is not None:
                    self._wait(server.delay(n, request), request.get("stream") is True)
                self._answer(body, n)
            finally:
                with server.lock:
                    server.in_service -= 1
                    server.finished.append(time.monotonic())
                if server.slots is not None:
                    server.slots.release()

        def _answer(self, body: bytes, n: int = -1) -> None:
            fault = server.choose(body)
            with server.lock:
                server.served[fault] += 1
            if fault == "500":
                return self._send(500, b'{"error": {"message": "internal error", "type": "server_error"}}')
            if fault == "429":
                return self._send(429, b'{"error": {"message": "slow down", "type": "rate_limit"}}',
                                  {"Retry-After": server.retry_after})
            request = json.loads(body or b"{}")
            streaming = request.get("stream") is True
            if fault == "hang" or fault == "stall" and not streaming:
                time.sleep(server.hang_s)
                return self._send(503, b'{"error": {"message": "too late"}}')
            if fault == "nonjson":
                return self._send(200, b"<html><body>502 Bad Gateway</body></html>")
            if fault == "nonutf8":
                return self._send(200, b'{"id": "x", "choices": [{"message": {"content": "\xff\xfe\xfd"}}]}')
            if fault == "junk":
                content = junk_text(body, len(server.junk))
                with server.lock:
                    server.junk.append(content)
            elif fault == "nonsense":
                with server.lock:
                    content = NONSENSE[(int(hashlib.sha256(body).hexdigest(), 16) + len(server.nonsense))
                                       % len(NONSENSE)]
                    server.nonsense.append(content)
            else:
                content = GARBAGE if fault == "garbage" else server.answer(request)
            if streaming:
                return self._stream(request, content, fault == "stall", n)
            return self._send(200, json.dumps(_completion(request, content)).encode())

    return Handler


@contextmanager
def serve(port: int = 0, seed: int = 0, faults: dict[str, float] | None = None, *,
          script: list[str] | None = None, retry_after: str = "1", hang_s: float = 3.0,
          answer: Callable[[dict], str | dict] = default_answer, delay: Callable[[int, dict], float] | None = None,
          slots: int | None = None, models: set[str] | None = None,
          props: dict | None = None, listing: dict | None = None, token_s: Any = 0.0,
          ping_s: float | None = None) -> Iterator[FaultServer]:
    """Serve on 127.0.0.1 (``port=0``: a free port) until the block ends."""
    server = FaultServer(seed=seed, faults=faults, script=script, retry_after=retry_after,
                         hang_s=hang_s, answer=answer, delay=delay, slots=slots, models=models,
                         props=props, listing=listing, token_s=token_s, ping_s=ping_s)
    httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(server))
    httpd.daemon_threads = True
    server.httpd = httpd
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
