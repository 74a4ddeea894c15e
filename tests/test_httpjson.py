"""convsim.providers.httpjson's own request head and answer reading: the bytes http.client would send, the
header fields http.client would read (without its email parser), and every kind of answer a server
may give (chunked, read to close, 100 Continue, folded headers, a malformed or cut answer)."""
import http.client
import io
import socket
import threading

import pytest

from convsim.providers import httpjson


def _fields_as_http_client_reads_them(block: bytes, names):
    lines = http.client._read_headers(io.BytesIO(block))
    ours = httpjson._fields(lines)
    theirs = http.client.parse_headers(io.BytesIO(block))
    return [ours.get(n) for n in names], [theirs.get(n) for n in names]


@pytest.mark.parametrize("block", [
    b"Content-Length: 12\r\nContent-Type: application/json\r\n\r\n",
    b"content-length:12  \r\nTRANSFER-ENCODING:\tchunked \r\nConnection: Close\r\n\r\n",  # spacing kept as email keeps it
    b"Content-Length: 1\r\nContent-Length: 2\r\n\r\n",  # the first one counts
    b"Connection: keep-alive\nKeep-Alive: timeout=5\n\n",  # bare LF line ends
    b"X-Folded: a\r\n  b\r\nContent-Length: 3\r\n\r\n",  # a folded line: http.client's parser
    b"Content-Length: 3\r\nno colon here\r\nConnection: close\r\n\r\n",  # a line that ends the headers for email
    b": no name\r\nContent-Length: 3\r\n\r\n",
    b"From nobody\r\nContent-Length: 3\r\n\r\n",
    b"X-Odd: a\rb\r\nContent-Length: 3\r\n\r\n",  # a lone CR splits the line for email
    b"X-Latin: caf\xe9\r\nRetry-After: 7\r\n\r\n",
    b"Content-Length: 3\r\n",  # the connection closed before the blank line
])
def test_header_fields_are_read_as_http_client_reads_them(block):
    names = ["content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection",
             "retry-after", "x-latin", "x-folded", "x-odd"]
    ours, theirs = _fields_as_http_client_reads_them(block, names)
    assert ours == theirs


class ScriptedServer:
    """A raw TCP server: reads each request (head and Content-Length body) and answers the next
    scripted bytes; ``None`` in the script closes the connection instead of answering, and an
    answer ending the script's entry with ``CLOSE`` closes it after answering."""

    CLOSE = object()

    def __init__(self, script):
        self.script, self.requests, self.connections = list(script), [], 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while self.script:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn):
        with conn:
            data = b""
            while self.script:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, rest = data.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                while len(rest) < length:
                    rest += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + rest[:length])
                data = rest[length:]
                answer = self.script.pop(0)
                if answer is None:
                    return
                close = isinstance(answer, tuple)
                conn.sendall(answer[0] if close else answer)
                if close:
                    return

    def close(self):
        self.sock.close()


def _ok(body=b'{"ok": true}', head=b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"):
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


def _post(server, timeout=5.0, body=b'{"x": 1}'):
    poster = httpjson.JSONPoster(server.url, timeout, {"Authorization": "Bearer none", "User-Agent": "convsim"})
    return poster, poster.post("/chat/completions", body)


def test_the_request_is_the_one_http_client_sends():
    server = ScriptedServer([_ok(), _ok()])
    try:
        poster, response = _post(server, body="{\"q\": \"Ünïcode ✓\"}".encode())
        assert response.status_code == 200 and response.content == b'{"ok": true}'
        conn = http.client.HTTPConnection("127.0.0.1", server.sock.getsockname()[1], timeout=5)
        conn.request("POST", "/v1/chat/completions", body="{\"q\": \"Ünïcode ✓\"}".encode(), headers=poster.headers)
        conn.getresponse().read()
        conn.close()
    finally:
        server.close()
    assert server.requests[0] == server.requests[1]


def test_a_chunked_answer_is_read_and_the_connection_kept():
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5;ext=1\r\n{\"ok\"\r\n7\r\n: true}\r\n0\r\nX-Trailer: t\r\n\r\n")
    server = ScriptedServer([chunked, _ok(b"[2]")])
    try:
        poster, response = _post(server)
        assert response.content == b'{"ok": true}'
        assert poster.post("/chat/completions", b"{}").content == b"[2]"
    finally:
        server.close()
    assert server.connections == 1


def test_an_answer_without_a_length_is_read_to_the_close():
    server = ScriptedServer([(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"ok\": 1}",), _ok()])
    try:
        poster, response = _post(server)
        assert response.content == b'{"ok": 1}' and poster._idle == []
        assert poster.post("/chat/completions", b"{}").status_code == 200
    finally:
        server.close()
    assert server.connections == 2


def test_connection_close_and_100_continue():
    server = ScriptedServer([b"HTTP/1.1 100 Continue\r\nX-A: 1\r\n\r\n" + _ok(head=b"HTTP/1.1 200 OK\r\nConnection: close\r\n")])
    try:
        poster, response = _post(server)
    finally:
        server.close()
    assert response.content == b'{"ok": true}' and poster._idle == []


def test_a_folded_header_is_parsed_by_http_client():
    server = ScriptedServer([_ok(head=b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\n")])
    try:
        _, response = _post(server)
    finally:
        server.close()
    assert response.content == b'{"ok": true}' and response.headers.get("x-folded") == "a\r\n b"


def test_a_status_error_carries_its_headers():
    server = ScriptedServer([_ok(b'{"error": "slow down"}', head=b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\n")])
    try:
        with pytest.raises(httpjson.HTTPStatusError) as err:
            _post(server)
    finally:
        server.close()
    assert err.value.status_code == 429 and err.value.response.headers.get("retry-after") == "7"
    assert isinstance(err.value.response.headers, http.client.HTTPMessage)


@pytest.mark.parametrize("answer", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"cut",),  # the body cut short
    (b"garbage\r\n\r\n",),  # no status line
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",),  # a bad chunk size
    None,  # closed without an answer (a fresh connection: not sent again)
])
def test_a_malformed_or_missing_answer_is_a_protocol_error(answer):
    server = ScriptedServer([answer])
    try:
        with pytest.raises(httpjson.RemoteProtocolError):
            _post(server)
    finally:
        server.close()


def test_no_answer_in_time_is_a_read_timeout():
    server = ScriptedServer([b"HTTP/1.1 200 OK\r\n", None])  # a head that never ends
    try:
        with pytest.raises(httpjson.ReadTimeout):
            _post(server, timeout=0.5)
    finally:
        server.close()


def test_the_poster_sets_the_length_itself():
    with pytest.raises(ValueError):
        httpjson.JSONPoster("http://127.0.0.1:9/v1", 1.0, {"Content-Length": "3"})
