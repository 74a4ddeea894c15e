"""A stdlib server speaking Ollama's wire protocol (``POST /api/chat``), for tests of the ``ollama:``
provider through the real client (langchain-ollama -> ollama -> httpx), 127.0.0.1 only.

    with serve_ollama(models={"m"}, answer=lambda request: "Paris.") as server:
        spec = f"ollama:m@{server.url}"

A streamed request (Ollama's default, what ChatOllama sends) is answered as NDJSON (chunked): one
chunk per piece of the content (a word with the spaces after it), then the closing ``done`` object
with the token counts; ``"stream": false`` as one JSON object. A model not in ``models`` gets
Ollama's HTTP 404 ``model "x" not found, try pulling it first``. ``server.requests`` keeps every
request body (JSON).

A slow server: ``delay_s`` before the first chunk (a queue, loading the model), ``token_s`` between
two chunks, ``stall_s`` after the first chunk only (a stalled stream). ``server.cut`` counts streams
the client left before their end (a cancelled call or a timeout).
"""
from __future__ import annotations

import json
import re
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator

CREATED = "2026-01-01T00:00:00.000000Z"


class OllamaServer:
    def __init__(self, models: set[str], answer: Callable[[dict], str], delay_s: float = 0.0,
                 token_s: float = 0.0, stall_s: float = 0.0) -> None:
        self.models, self.answer = models, answer
        self.delay_s, self.token_s, self.stall_s = delay_s, token_s, stall_s
        self.requests: list[dict] = []
        self.url = ""
        self.cut = 0


def _handler(server: OllamaServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            server.requests.append(request)
            if self.path != "/api/chat":
                return self._send(404, b"404 page not found", "text/plain")
            name = request.get("model")
            if name not in server.models:
                return self._send(404, json.dumps({"error": f'model "{name}" not found, try pulling it first'}).encode())
            content = server.answer(request)
            done = {"model": name, "created_at": CREATED, "message": {"role": "assistant", "content": ""},
                    "done": True, "done_reason": "stop", "total_duration": 1000, "load_duration": 10,
                    "prompt_eval_count": 7, "prompt_eval_duration": 100, "eval_count": 3, "eval_duration": 100}
            if request.get("stream", True) is False:
                return self._send(200, json.dumps({**done, "message": {"role": "assistant", "content": content}}).encode())
            if server.delay_s:
                time.sleep(server.delay_s)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for i, piece in enumerate(re.findall(r"\s+|\S+\s*", content)):
                    if i == 1 and server.stall_s:
                        time.sleep(server.stall_s)
                    elif i and server.token_s:
                        time.sleep(server.token_s)
                    chunk = {"model": name, "created_at": CREATED,
                             "message": {"role": "assistant", "content": piece}, "done": False}
                    self._chunk((json.dumps(chunk) + "\n").encode())
                self._chunk((json.dumps(done) + "\n").encode())
                self._chunk(b"")
            except (BrokenPipeError, ConnectionResetError):
                server.cut += 1
                self.close_connection = True

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%b\r\n" % (len(data), data))
            self.wfile.flush()

    return Handler


@contextmanager
def serve_ollama(models: set[str] | None = None, answer: Callable[[dict], str] = lambda r: "OK", *,
                 delay_s: float = 0.0, token_s: float = 0.0, stall_s: float = 0.0) -> Iterator[OllamaServer]:
    server = OllamaServer(set(models or {"m"}), answer, delay_s=delay_s, token_s=token_s, stall_s=stall_s)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
    httpd.daemon_threads = True
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
