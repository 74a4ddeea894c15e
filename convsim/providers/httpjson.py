"""A small pooled HTTP/1.1 client for posting JSON to a model server (stdlib ``http.client``).

Why not httpx or the openai SDK: measured on bench/concurrency.py, a chat completion through the
SDK's client costs ~0.8 ms of CPU (1.1-1.3 ms with 32 calls in flight), through httpx ~0.5 ms
(0.8), and through ``http.client`` on a kept-alive connection ~0.2 ms (0.23). At 32 sessions in
flight on two cores that difference decides whether the platform or the server is the bottleneck.
Of http.client only the connection (connect, TLS) and the body reading of ``HTTPResponse`` are
used as they are: the request head is built by http.client once per URL (then only its
Content-Length changes) and sent with the body in one ``sendall``, and the answer's header fields
are read without the ``email`` parser http.client runs on every answer (:class:`_Answer`; the
parser still reads any header block that is not plain ``name: value`` lines, and a failed call's
headers). One post on one thread, client CPU against the local bench server: 0.29 -> 0.15 ms.

What it does, and no more: keep-alive connections pooled per server (any thread takes an idle one
or opens a new one; an idle connection the server has closed is dropped before reuse, as httpcore
does, and a request that finds a reused connection closed under it is sent once more on a fresh
one); one timeout per connect / send / read, like httpx's; TLS for ``https://``; no redirects, no
proxies (convsim.providers.openai_client sends proxied URLs through the openai SDK instead).
Streamed answers (:meth:`JSONPoster.post_stream`: server-sent events, NDJSON) are read line by line
with a first-token, an idle and a total deadline instead of the one timeout (docs/real_models.md).

Failures raise exceptions named as httpx names them, so :func:`convsim.providers.retry.infra_fault` reads
them the same way: :class:`ConnectError`, :class:`ConnectTimeout`, :class:`ReadTimeout`,
:class:`ReadError`, :class:`RemoteProtocolError`, and :class:`HTTPStatusError` (``status_code``,
``response.headers`` for ``Retry-After``) for any status >= 400.
"""
from __future__ import annotations

import http.client
import io
import os
import re
import select
import socket
import time
import weakref
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

from convsim.providers import stopping

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
    """What a caller reads of an answer (also the ``response`` of :class:`HTTPStatusError`).
    ``headers``: an ``http.client.HTTPMessage``, or the raw header lines of the answer, parsed
    into one on first use (a successful call never reads them)."""

    __slots__ = ("status_code", "_headers", "content")

    def __init__(self, status_code: int, headers: Any, content: bytes) -> None:
        self.status_code, self._headers, self.content = status_code, headers, content

    @property
    def headers(self) -> http.client.HTTPMessage:
        if isinstance(self._headers, list):
            self._headers = http.client.parse_headers(io.BytesIO(b"".join(self._headers)))
        return self._headers

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class HTTPStatusError(Exception):
    """The server answered with status >= 400 (or a redirect, which is not followed)."""

    def __init__(self, message: str, response: Response) -> None:
        super().__init__(message)
        self.response = response
        self.status_code = response.status_code


_FIELD = re.compile(r"([!-9;-~]+):[ \t]*([^\r\n]*)\r?\n")


class _Fields(dict):
    """The header fields of an answer by lower-cased name, each its first value: what
    ``HTTPMessage.get`` returns for a header block whose every line matches ``_FIELD`` (no folded
    line, no line without a name, no stray CR), without the ``email`` package (~0.1 ms an answer)."""

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return dict.get(self, name.lower(), default)


def _fields(lines: list[bytes]) -> Any:
    """The header block ``lines`` (as ``http.client._read_headers`` reads them) for
    :meth:`_Answer.begin`: :class:`_Fields` when every line is a plain ``name: value``, else the
    ``HTTPMessage`` http.client itself builds (whatever its parser makes of an odd block)."""
    fields = _Fields()
    for line in lines:
        if line in (b"\r\n", b"\n", b""):
            break
        match = _FIELD.fullmatch(line.decode("iso-8859-1"))
        if match is None:
            return http.client.parse_headers(io.BytesIO(b"".join(lines)))
        fields.setdefault(match[1].lower(), match[2])
    return fields


class _Answer(http.client.HTTPResponse):
    """``HTTPResponse`` whose ``begin`` reads the header fields with :func:`_fields` instead of the
    ``email`` parser, and keeps the raw block for :attr:`Response.headers` (parsed as http.client
    parses it, on first use: only a failed request's headers are read, for ``Retry-After``).
    Everything else (status line, 100 Continue, chunked and fixed-length bodies, keep-alive and
    its failure exceptions) is http.client's own; ``begin`` is its 3.11-3.13 code."""

    raw_headers: list[bytes] = []

    def begin(self) -> None:
        if self.headers is not None:
            return
        while True:
            version, status, reason = self._read_status()  # type: ignore[attr-defined]
            if status != http.client.CONTINUE:
                break
            http.client._read_headers(self.fp)  # type: ignore[attr-defined]  # the 100's headers
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.raw_headers = http.client._read_headers(self.fp)  # type: ignore[attr-defined]
        self.headers = self.msg = _fields(self.raw_headers)
        tr_enc = self.headers.get("transfer-encoding")
        self.chunked = bool(tr_enc and tr_enc.lower() == "chunked")
        if self.chunked:
            self.chunk_left = None
        self.will_close = self._check_close()  # type: ignore[attr-defined]
        self.length = None
        length = self.headers.get("content-length")
        if length and not self.chunked:
            try:
                self.length = int(length)
            except ValueError:
                self.length = None
            else:
                if self.length < 0:
                    self.length = None
        if status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED) or 100 <= status < 200:
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True


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
        if {k.lower() for k in headers} & {"content-length", "transfer-encoding"}:
            raise ValueError("Content-Length and Transfer-Encoding are set per request body")
        self._heads: dict[str, tuple[bytes, bytes]] = {}  # url -> the request head around its length
        # idle connections, taken and given back by any thread without a lock: list.pop and
        # list.append are atomic (a lock here cost more than the rest of the pool's bookkeeping)
        self._idle: list[http.client.HTTPConnection] = []
        self._busy: set = set()  # connections with a request in flight (cancel_in_flight shuts them down)
        _POSTERS.add(self)

    def _forget_connections(self) -> None:
        """In a forked child: the parent's sockets are not this process's to use."""
        self._idle = []

    def _new(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
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
            try:
                conn = self._idle.pop()
            except IndexError:
                return self._new(), False
            if conn.sock is not None and not _readable(conn.sock):
                return conn, True
            conn.close()  # the server closed it while it was idle

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        if len(self._idle) < MAX_IDLE:  # (a bound, not an exact count: two threads may pass at once)
            self._idle.append(conn)
        else:
            conn.close()

    def post(self, path: str, body: bytes) -> Response:
        """POST ``body`` to ``path`` (under the base URL's path); the answer, whatever its body."""
        url = self.prefix + path
        stopping.check()
        conn, reused = self._take()
        self._busy.add(conn)
        try:
            try:
                response = self._exchange(conn, url, body)
            except _STALE:
                if not reused or stopping.requested():
                    raise
                conn.close()  # closed by the server just as it was reused: once more, on a fresh one
                self._busy.discard(conn)
                conn = self._new()
                self._busy.add(conn)
                response = self._exchange(conn, url, body)
        except Exception as exc:
            if stopping.requested():  # cancelled by a stop (cancel_in_flight): no fault of the server
                conn.close()
                raise stopping.RunStopped(stopping.reason()) from exc
            self._failed(conn, exc)
        except BaseException:
            conn.close()
            raise
        finally:
            self._busy.discard(conn)
        if response.status_code >= 300:
            text = response.text[:300]
            raise HTTPStatusError(f"HTTP {response.status_code} from {self.host}:{self.port}{url}: {text}",
                                  response)
        return response

    def post_stream(self, path: str, body: bytes, timeouts: Any,
                    progress: Callable[[bytes], bool] = bool) -> "Streamed":
        """POST ``body`` to ``path`` and return once the answer's head arrived: a :class:`Streamed`
        whose :meth:`~Streamed.lines` reads its body line by line (SSE, NDJSON).

        ``timeouts`` (a :class:`convsim.providers.retry.StreamTimeouts`) replace this poster's
        one timeout: the first ``progress`` line (by default any non-empty line; an SSE comment, a
        server's keep-alive ping, is not one) must arrive within ``first_token`` seconds of the
        send (the server's queue and prompt processing), each next one within ``idle`` seconds of
        the last (the server's work), and the whole answer within ``total`` (None: no cap). Each
        bound exceeded raises :class:`ReadTimeout` naming it; an answer >= 300 raises
        :class:`HTTPStatusError` as :meth:`post` does. A stop (``cancel_in_flight``) ends the read
        at once with :class:`convsim.providers.stopping.RunStopped`."""
        url = self.prefix + path
        stopping.check()
        stream = Streamed(self, url, timeouts, progress)
        conn, reused = self._take()
        stream.conn = conn
        self._busy.add(conn)
        try:
            try:
                stream.start(body)
            except _STALE:
                if not reused or stopping.requested():
                    raise
                conn.close()  # closed by the server just as it was reused: once more, on a fresh one
                self._busy.discard(conn)
                conn = stream.conn = self._new()
                self._busy.add(conn)
                stream.start(body)
        except Exception as exc:
            self._busy.discard(conn)
            stream.fail(exc)
        except BaseException:
            self._busy.discard(conn)
            conn.close()
            raise
        if stream.answer.status >= 300:
            content = stream.read_all()
            text = content.decode("utf-8", "replace")[:300]
            raise HTTPStatusError(f"HTTP {stream.answer.status} from {self.host}:{self.port}{url}: {text}",
                                  Response(stream.answer.status, stream.answer.raw_headers, content))
        return stream

    def cancel_in_flight(self) -> None:
        """Shut down the sockets of the requests in flight: each ``post`` waiting on one returns at once."""
        for conn in list(self._busy):
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _failed(self, conn, exc: Exception):
        """Raise what a failed exchange is, named as httpx names it."""
        try:
            raise exc
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

    def _head(self, url: str) -> tuple[bytes, bytes]:
        """The request head http.client sends for a POST of ``url`` with this poster's headers, cut
        around its ``Content-Length`` value: built by http.client itself (its checks of the URL and
        the header values included) once per URL, then only the length changes per call."""
        head = self._heads.get(url)
        if head is None:
            recorder = _HeadRecorder(self.host, self.port)
            recorder.default_port = 443 if self.https else 80  # the Host header leaves out the default
            recorder.request("POST", url, body=b"", headers=self.headers)
            before, mark, after = b"".join(recorder.sent).partition(b"\r\nContent-Length: 0\r\n")
            if not mark:
                raise ValueError(f"no Content-Length in the request head for {url!r}")
            head = self._heads[url] = (before + b"\r\nContent-Length: ", b"\r\n" + after)
        return head

    def _exchange(self, conn: http.client.HTTPConnection, url: str, body: bytes) -> Response:
        # the head and the body in one send: on a local server each write is a syscall plus a
        # wake-up of the server's reading thread (http.client writes them separately); the
        # answer is read by http.client's HTTPResponse (_Answer: without the email parser)
        before, after = self._head(url)
        conn.sock.sendall(b"%b%d%b%b" % (before, len(body), after, body))
        answer = _Answer(conn.sock, method="POST")
        answer.begin()
        content = answer.read()
        response = Response(answer.status, answer.raw_headers, content)
        if answer.will_close:
            conn.close()
        else:
            self._give_back(conn)
        return response


class Streamed:
    """An answer being read as a stream (:meth:`JSONPoster.post_stream`): ``content_type``, then
    :meth:`lines` (or :meth:`read_all`). Its connection goes back to the pool when the body was read
    to its end, else it is closed (:meth:`close`: an abandoned stream)."""

    def __init__(self, poster: JSONPoster, url: str, timeouts: Any, progress: Callable[[bytes], bool]) -> None:
        self.poster, self.url, self.timeouts, self.progress = poster, url, timeouts, progress
        self.conn: Any = None
        self.answer: Any = None
        self.started = time.monotonic()
        self.cap = self.started + timeouts.total if timeouts.total else float("inf")
        self.deadline = min(self.started + timeouts.first_token, self.cap)
        self.waiting_for = "first"  # what the deadline is for: the first token, the next one
        self.done = False

    @property
    def content_type(self) -> str:
        return str(self.answer.headers.get("content-type") or "").split(";")[0].strip().lower()

    def _arm(self) -> None:
        """Set the socket's timeout to what is left before the deadline (raise when none is)."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("deadline passed")
        self.conn.sock.settimeout(left)

    def start(self, body: bytes) -> None:
        before, after = self.poster._head(self.url)
        self._arm()
        self.conn.sock.sendall(b"%b%d%b%b" % (before, len(body), after, body))
        self.answer = _Answer(self.conn.sock, method="POST")
        self.answer.begin()  # the head: within the first-token deadline too

    def lines(self) -> Iterator[bytes]:
        """Each line of the body, its line end stripped, as it arrives (see post_stream's timeouts)."""
        poster = self.poster
        poster._busy.add(self.conn)
        try:
            while True:
                self._arm()
                line = self.answer.readline()
                if not line:
                    stopping.check()  # a stop shut the socket down: the end of the body is not the answer's
                    break
                now = time.monotonic()
                if self.progress(line.strip()):
                    self.waiting_for = "next"
                    self.deadline = min(now + self.timeouts.idle, self.cap)
                elif now >= self.deadline:
                    raise TimeoutError("deadline passed")  # keep-alive pings are not tokens
                yield line.rstrip(b"\r\n")
        except GeneratorExit:  # the reader stopped early: the rest of the body is not read
            self.close()
            raise
        except Exception as exc:
            poster._busy.discard(self.conn)
            self.fail(exc)
        except BaseException:
            self.close()
            raise
        poster._busy.discard(self.conn)
        self._finished()

    def read_all(self) -> bytes:
        """The rest of the body at once (an answer that is not a stream: an error, a plain JSON body)."""
        try:
            self._arm()
            content = self.answer.read()
            stopping.check()
        except Exception as exc:
            self.poster._busy.discard(self.conn)
            self.fail(exc)
        except BaseException:
            self.close()
            raise
        self.poster._busy.discard(self.conn)
        self._finished()
        return content

    def _finished(self) -> None:
        self.done = True
        if self.answer.will_close or self.conn.sock is None:
            self.conn.close()
        else:
            self.conn.sock.settimeout(self.poster.timeout)
            self.poster._give_back(self.conn)

    def close(self) -> None:
        """Abandon the answer (its connection is closed, never reused half read)."""
        self.poster._busy.discard(self.conn)
        if not self.done:
            self.done = True
            self.conn.close()

    def fail(self, exc: Exception):
        """Raise what a failed read is: RunStopped after a stop, a timeout naming the bound it
        exceeded, else as :meth:`JSONPoster._failed` names it."""
        self.done = True
        if stopping.requested():  # cancelled by a stop (cancel_in_flight): no fault of the server
            self.conn.close()
            raise stopping.RunStopped(stopping.reason()) from exc
        if isinstance(exc, TimeoutError):
            self.conn.close()
            poster, t = self.poster, self.timeouts
            where = f"{poster.host}:{poster.port}"
            if self.deadline >= self.cap:
                why = f"the answer from {where} took longer than {t.total} s in all"
            elif self.waiting_for == "first":
                why = f"no first token from {where} within {t.first_token} s"
            else:
                why = f"the stream from {where} stalled: no token for {t.idle} s"
            raise ReadTimeout(why) from exc
        self.poster._failed(self.conn, exc)


class _HeadRecorder(http.client.HTTPConnection):
    """An HTTPConnection that never connects: what it would send is kept in ``sent``."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port)
        self.sent: list[bytes] = []

    def send(self, data: Any) -> None:
        self.sent.append(bytes(data))


_POSTERS: "weakref.WeakSet[JSONPoster]" = weakref.WeakSet()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: [p._forget_connections() for p in list(_POSTERS)])


def cancel_in_flight() -> None:
    """Cancel every request in flight in this process (a graceful stop: convsim.providers.stopping)."""
    for poster in list(_POSTERS):
        poster.cancel_in_flight()


stopping.on_request(cancel_in_flight)
