"""A latency-bound OpenAI-compatible server (stdlib only): every chat completion takes a fixed time.

For the concurrency bench and the provider-limit tests: it answers ``/v1/chat/completions`` after
``latency_s`` with a fixed text and fixed token usage, serves ``/v1/models``, records when each
request started and how many were in flight at most, and stops by itself after ``max_requests``
requests or ``idle_s`` seconds without one. Binds 127.0.0.1 only.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LatencyServer:
    def __init__(self, latency_s: float = 0.05, *, answer: str = "The answer is Paris.",
                 prompt_tokens: int = 10, completion_tokens: int = 5, max_requests: int = 10_000_000,
                 idle_s: float = 120.0, json_answer: str | None = None) -> None:
        self.latency_s, self.answer = latency_s, answer
        self.json_answer = json_answer  # given: the answer to a JSON-mode request (response_format)
        self.usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}
        self.max_requests, self.idle_s = max_requests, idle_s
        self.lock = threading.Lock()
        self.starts: list[float] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.last_seen = time.monotonic()
        self.last_request: dict = {}
        self.finish_reason = "stop"  # "length": an answer cut at max_tokens
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the client's connection pool reuses sockets
            # headers and body go out as two writes: without TCP_NODELAY, Nagle + the client's delayed
            # ACK hold the body back ~40 ms on every call
            disable_nagle_algorithm = True

            def log_message(self, *args):  # quiet
                pass

            def _send(self, obj: dict) -> None:
                body = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._send({"object": "list", "data": [{"id": "fake", "object": "model"}]})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                outer.last_request = request
                content = (outer.json_answer if request.get("response_format") and outer.json_answer is not None
                           else outer.answer)
                outer._enter()
                try:
                    time.sleep(outer.latency_s)
                finally:
                    outer._leave()
                self._send({"id": "cmpl", "object": "chat.completion", "created": 0,
                            "model": request.get("model", "fake"),
                            "choices": [{"index": 0, "finish_reason": outer.finish_reason,
                                         "message": {"role": "assistant", "content": content}}],
                            "usage": outer.usage})

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # listen backlog (the stdlib's 5 resets connections when 32 open at once)

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._watch = threading.Thread(target=self._watchdog, daemon=True)

    def _enter(self) -> None:
        with self.lock:
            self.starts.append(time.monotonic())
            self.last_seen = time.monotonic()
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self.lock:
            self.in_flight -= 1
            done = len(self.starts) >= self.max_requests
        if done:
            threading.Thread(target=self.httpd.shutdown, daemon=True).start()

    def _watchdog(self) -> None:
        while self._thread.is_alive():
            time.sleep(0.2)
            if time.monotonic() - self.last_seen > self.idle_s:
                self.httpd.shutdown()
                return

    @property
    def requests(self) -> int:
        return len(self.starts)

    def reset(self) -> None:
        with self.lock:
            self.starts.clear()
            self.max_in_flight = self.in_flight

    def __enter__(self) -> "LatencyServer":
        self._thread.start()
        self._watch.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _serve(latency_s: float, conn, idle_s: float, json_answer: str | None) -> None:
    with LatencyServer(latency_s, idle_s=idle_s, json_answer=json_answer) as server:
        conn.send(server.base_url)
        conn.recv()  # until the parent says stop (or goes away)


class LatencyServerProcess:
    """The server in its own process, as a real model server is: its threads do not share the
    benchmark's GIL. ``with LatencyServerProcess(0.05) as base_url: ...``"""

    def __init__(self, latency_s: float = 0.05, idle_s: float = 120.0, json_answer: str | None = None) -> None:
        import multiprocessing
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(latency_s, child, idle_s, json_answer), daemon=True)

    def __enter__(self) -> str:
        self.proc.start()
        return self.conn.recv()

    def __exit__(self, *exc) -> None:
        try:
            self.conn.send("stop")
        except OSError:
            pass
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.terminate()
