"""A small pooled HTTP/1.1 client for posting JSON to a model server (stdlib ``http.client``).

Why not httpx or the openai SDK: measured on bench/concurrency.py, a chat completion through the
SDK's client costs ~0.8 ms of CPU (1.1-1.3 ms with 32 calls in flight), through httpx ~0.5 ms
(0.8), and through ``http.client`` on a kept-alive connection ~0.2 ms (0.23). At 32 sessions in
flight on two cores that difference decides whether the platform or the server is the bottleneck.

What it does, and no more: keep-alive connections pooled per server (any thread takes an idle one
or opens a new one; an idle connection the server has closed is dropped before reuse, as httpcore
does, and a request that finds a reused connection closed under it is sent once more on a fresh
one); one timeout per connect / send / read, like httpx's; TLS for ``https://``; no redirects, no
proxies (convsim.openai_client sends proxied URLs through the openai SDK instead).

Failures raise exceptions named as httpx names them, so :func:`convsim.retry.infra_fault` reads
them the same way: :class:`ConnectError`, :class:`ConnectTimeout`, :class:`ReadTimeout`,
:class:`ReadError`, :class:`RemoteProtocolError`, and :class:`HTTPStatusError` (``status_code``,
``response.headers`` for ``Retry-After``) for any status >= 400.
"""
from __future__ import annotations

import http.client
import os
import select
import socket
import threading
import weakref
from typing import Any
from urllib.parse import urlsplit

_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)
MAX_IDLE = 256  # idle connections kept per server (one per call in flight is what gets reused)


class TransportError(Exception):
    """A request that got no HTTP answer."""


class ConnectError(TransportError):
    pass


class ConnectTimeout(TransportError):
    pass


class ReadTimeout(TransportError):
    pass


class ReadError(TransportError):
    pass


class RemoteProtocolError(TransportError):
    pass


class Response:
    """What a caller reads of an answer (also the ``response`` of :class:`HTTPStatusError`)."""

    __slots__ = ("status_code", "headers", "content")

    def __init__(self, status_code: int, headers: Any, content: bytes) -> None:
        self.status_code, self.headers, self.content = status_code, headers, content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class HTTPStatusError(Exception):
    """The server answered with status >= 400 (or a redirect, which is not followed)."""

    def __init__(self, message: str, response: Response) -> None:
        super().__init__(message)
        self.response = response
        self.status_code = response.status_code


class _OneWrite:
    """Headers and body in one ``send``: http.client writes them separately, and on a local server
    each write is a syscall plus a wake-up of the server's reading thread (~0.1 ms of CPU per call
    on the bench, more than all of this module's Python)."""

    def _send_output(self, message_body=None, encode_chunked=False):
        if not isinstance(message_body, bytes) or encode_chunked:
            return super()._send_output(message_body, encode_chunked)  # type: ignore[misc]
        self._buffer.extend((b"", b""))  # type: ignore[attr-defined]
        msg = b"\r\n".join(self._buffer)  # type: ignore[attr-defined]
        del self._buffer[:]  # type: ignore[attr-defined]
        self.send(msg + message_body)  # type: ignore[attr-defined]


class _HTTPConnection(_OneWrite, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_OneWrite, http.client.HTTPSConnection):
    pass


def _readable(sock: socket.socket) -> bool:
    """Whether an idle connection's socket has something to read: for HTTP/1.1 that can only be
    the server closing it (httpcore's test before reusing a pooled connection)."""
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class JSONPoster:
    """Posts JSON bodies to one server (scheme, host, port), reusing connections across threads."""

    def __init__(self, base_url: str, timeout: float, headers: dict[str, str]) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.https = parts.scheme == "https"
        self.host, self.port = parts.hostname, parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json", "Accept": "application/json", **headers}
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        _POSTERS.add(self)

    def _forget_connections(self) -> None:
        """In a forked child: the parent's sockets are not this process's to use."""
        self._idle, self._lock = [], threading.Lock()

    def _new(self) -> http.client.HTTPConnection:
        cls = _HTTPSConnection if self.https else _HTTPConnection
        conn = cls(self.host, self.port, timeout=self.timeout)
        try:
            conn.connect()
        except TimeoutError as exc:
            raise ConnectTimeout(f"connecting to {self.host}:{self.port} timed out") from exc
        except OSError as exc:  # refused, unreachable, DNS failure, TLS handshake failure
            raise ConnectError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def _take(self) -> tuple[http.client.HTTPConnection, bool]:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._new(), False
            if conn.sock is not None and not _readable(conn.sock):
                return conn, True
            conn.close()  # the server closed it while it was idle

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def post(self, path: str, body: bytes) -> Response:
        """POST ``body`` to ``path`` (under the base URL's path); the answer, whatever its body."""
        url = self.prefix + path
        conn, reused = self._take()
        try:
            try:
                response = self._exchange(conn, url, body)
            except _STALE:
                if not reused:
                    raise
                conn.close()  # closed by the server just as it was reused: once more, on a fresh one
                conn = self._new()
                response = self._exchange(conn, url, body)
        except TimeoutError as exc:
            conn.close()
            raise ReadTimeout(f"no answer from {self.host}:{self.port} within {self.timeout} s") from exc
        except http.client.HTTPException as exc:  # a malformed status line, headers or body
            conn.close()
            raise RemoteProtocolError(f"{self.host}:{self.port}: {type(exc).__name__}: {exc}") from exc
        except OSError as exc:
            conn.close()
            raise ReadError(f"{self.host}:{self.port}: {type(exc).__name__}: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        if response.status_code >= 300:
            text = response.text[:300]
            raise HTTPStatusError(f"HTTP {response.status_code} from {self.host}:{self.port}{url}: {text}",
                                  response)
        return response

    def _exchange(self, conn: http.client.HTTPConnection, url: str, body: bytes) -> Response:
        conn.request("POST", url, body=body, headers=self.headers)
        answer = conn.getresponse()
        content = answer.read()
        response = Response(answer.status, answer.headers, content)
        if answer.will_close:
            conn.close()
        else:
            self._give_back(conn)
        return response


_POSTERS: "weakref.WeakSet[JSONPoster]" = weakref.WeakSet()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: [p._forget_connections() for p in list(_POSTERS)])
