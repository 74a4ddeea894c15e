"""The ``openai:`` client: the request ChatOpenAI would send, byte for byte; pooled keep-alive
connections that survive a server closing them; the same failure classes through either transport;
and the retry loop's attempts and waits."""
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pydantic import BaseModel

import convsim.providers.httpjson as httpjson
import convsim.providers.models as models
import convsim.providers.openai_client as openai_client
from convsim.providers.models import ChatModel, ModelUnavailable, parse_model_spec
from convsim.providers.retry import RetryPolicy, call_with_retry, infra_fault
from fault_server import serve

COMPLETION = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
              "choices": [{"index": 0, "finish_reason": "stop",
                           "message": {"role": "assistant", "content": '{"ok": true}'}}],
              "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}}


class CaptureServer:
    """Records every request body and the connection it came on; answers ``reply`` (a dict)."""

    def __init__(self, reply=COMPLETION, close_after_reply=False):
        self.bodies, self.peers, self.reply = [], [], reply
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                outer.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
                outer.peers.append(self.client_address)
                out = json.dumps(outer.reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)
                self.wfile.flush()
                if close_after_reply:  # an idle keep-alive connection the server drops (no "Connection: close")
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class Verdict(BaseModel):
    ok: bool


def _chat_openai(spec, timeout=120.0):
    """How an openai: model was built with langchain-openai (the reference for the request)."""
    return openai_client.langchain_equivalent(spec, timeout, api_key="none")


def _exchange(url, settings):
    m = ChatModel(spec=parse_model_spec({"spec": f"openai:m@{url}", **settings}))
    answers = [m.invoke([("system", "Be brief. Ünïcode ✓"), ("user", "hi"), ("assistant", "yo"), ("user", "again")]),
               m.structured("judge", Verdict, retries=0).ok]
    return answers, [(c["prompt_tokens"], c["completion_tokens"], c["ok"]) for c in m.calls]


@pytest.mark.parametrize("settings", [{}, {"max_tokens": 7, "seed": 3, "temperature": 0.5}])
@pytest.mark.parametrize("transport", ["http", "sdk"])
def test_the_request_is_the_one_chatopenai_sends(monkeypatch, settings, transport):
    monkeypatch.setattr(openai_client, "TRANSPORT", transport)
    monkeypatch.setattr(models, "_BACKENDS", {})
    with CaptureServer() as server:
        ours = _exchange(server.url, settings)
        sent = list(server.bodies)
        server.bodies.clear()
        real = models._make_backend
        monkeypatch.setattr(models, "_make_backend", lambda spec, *a: _chat_openai(spec, *a))
        monkeypatch.setattr(models, "_BACKENDS", {})
        theirs = _exchange(server.url, settings)
        monkeypatch.setattr(models, "_make_backend", real)
    assert sent == server.bodies and len(sent) == 2  # the same bytes: a fault injector hashing them agrees
    assert ours == theirs == (['{"ok": true}', True], [(4, 2, True)] * 2)


def test_a_connection_the_server_closed_while_idle_is_not_reused():
    with CaptureServer(close_after_reply=True) as server:
        m = ChatModel(spec=parse_model_spec(f"openai:m@{server.url}"))
        for _ in range(3):
            assert m.invoke("hi") == '{"ok": true}'
    assert [c["ok"] for c in m.calls] == [True] * 3  # no failed attempt recorded
    assert len(set(server.peers)) == 3  # a fresh connection each time


def test_a_connection_closed_just_as_it_is_reused_is_sent_again_once(monkeypatch):
    # the idle check misses the close (the race it cannot see): the request goes out on a dead
    # connection, fails before any answer, and is sent once more on a fresh connection
    monkeypatch.setattr(httpjson, "_readable", lambda sock: False)
    with CaptureServer(close_after_reply=True) as server:
        m = ChatModel(spec=parse_model_spec(f"openai:m@{server.url}"))
        assert m.invoke("hi") == m.invoke("again") == '{"ok": true}'
    assert [c["ok"] for c in m.calls] == [True, True]
    assert len(server.bodies) == 2 and len(set(server.peers)) == 2


def test_connections_are_kept_alive_and_shared():
    with CaptureServer() as server:
        a = ChatModel(spec=parse_model_spec(f"openai:m@{server.url}"), role="agent")
        b = ChatModel(spec=parse_model_spec({"spec": f"openai:m@{server.url}", "temperature": 0.7}), role="judge")
        for _ in range(3):
            a.invoke("hi")
            b.invoke("hi")
    assert len(server.bodies) == 6 and len(set(server.peers)) == 1


@pytest.mark.parametrize("reply", [{"error": {"message": "model not loaded"}},
                                   {"id": "x", "object": "chat.completion"}, {"id": "x", "choices": None},
                                   {"id": "x", "choices": []}, {"id": "x", "choices": ["text"]}, [1, 2], 42])
def test_a_malformed_completion_is_the_servers_fault(reply):
    # a 200 that is JSON but not a completion: retried, then ModelUnavailable (infra_error, re-run on
    # resume). ChatOpenAI raised ValueError / KeyError / TypeError / IndexError here, which the
    # runner took for a bug in graph code (code_error) and never retried.
    with CaptureServer(reply=reply) as server:
        m = ChatModel(spec=parse_model_spec(f"openai:m@{server.url}"), role="judge",
                      retry=RetryPolicy(attempts=3, initial_wait=0))
        with pytest.raises(ModelUnavailable) as err:
            m.invoke("hi")
    assert "malformed completion after 3 attempt(s)" in str(err.value) and len(server.bodies) == 3
    assert [c["ok"] for c in m.calls] == [False] * 3 and "MalformedCompletion" in m.calls[0]["error"]


@pytest.mark.parametrize("fault,kind", [("500", "HTTP 500"), ("429", "HTTP 429"), ("hang", "timeout"),
                                        ("nonjson", "unreadable body"), ("nonutf8", "unreadable body")])
def test_the_sdk_transport_classifies_faults_the_same(monkeypatch, fault, kind):
    monkeypatch.setattr(openai_client, "TRANSPORT", "sdk")
    monkeypatch.setattr(models, "_BACKENDS", {})
    with serve(script=[fault], retry_after="0", hang_s=2.5) as server:
        m = ChatModel(spec=parse_model_spec(f"openai:fake@{server.url}"), role="agent",
                      retry=RetryPolicy(attempts=1, timeout=1.0))
        with pytest.raises(ModelUnavailable) as err:
            m.invoke("hi")
    assert kind in str(err.value) and infra_fault(err.value.__cause__) == kind


def test_a_proxied_url_goes_through_the_sdk(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    chat = openai_client.OpenAIChat(parse_model_spec("openai:m@http://models.example:8000/v1"))
    assert chat.poster is None and chat.client is not None
    monkeypatch.setenv("NO_PROXY", "models.example")
    chat = openai_client.OpenAIChat(parse_model_spec("openai:m@http://models.example:8000/v1"))
    assert chat.poster is not None


def test_the_retry_loop_retries_faults_only_with_exponential_waits():
    waits, tries = [], []

    def refused():
        tries.append(1)
        raise ConnectionRefusedError("refused")
    policy = RetryPolicy(attempts=4, initial_wait=1, max_wait=3)
    with pytest.raises(ConnectionRefusedError):
        call_with_retry(refused, policy, sleep=waits.append)
    assert len(tries) == 4 and waits == [1, 2, 3]  # doubling, capped at max_wait, none after the last
    faults = []

    def bug():
        tries.append(1)
        raise KeyError("a bug, not the server")
    tries.clear()
    with pytest.raises(KeyError):
        call_with_retry(bug, policy, sleep=waits.append, on_fault=lambda e, k: faults.append(k))
    assert len(tries) == 1 and faults == []
    answers = iter([TimeoutError("slow"), "ok"])

    def flaky():
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return a
    assert call_with_retry(flaky, policy, sleep=waits.append, on_fault=lambda e, k: faults.append(k)) == "ok"
    assert faults == ["timeout"]


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_share_the_parents_connections():
    import os
    with CaptureServer() as server:
        m = ChatModel(spec=parse_model_spec(f"openai:m@{server.url}"))
        m.invoke("hi")
        poster = models._backend(m.spec, m.retry_policy.timeout).poster
        assert len(poster._idle) == 1
        pid = os.fork()
        if pid == 0:  # the child: no pooled connection inherited, its own call works
            os._exit(0 if not poster._idle and m.invoke("again") == '{"ok": true}' and len(poster._idle) == 1 else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert m.invoke("parent") == '{"ok": true}'
    assert len(set(server.peers)) == 2  # the parent kept its connection; the child opened its own


@pytest.mark.skipif(__import__("shutil").which("openssl") is None, reason="needs the openssl command")
def test_https_with_a_trusted_and_an_untrusted_certificate(tmp_path, monkeypatch):
    import ssl
    import subprocess
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    with CaptureServer() as server:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(str(cert), str(key))
        server.httpd.socket = tls.wrap_socket(server.httpd.socket, server_side=True)
        url = server.url.replace("http://", "https://")
        untrusted = ChatModel(spec=parse_model_spec(f"openai:m@{url}"), retry=RetryPolicy(attempts=1))
        with pytest.raises(ModelUnavailable, match="unreachable.*CERTIFICATE_VERIFY_FAILED"):
            untrusted.invoke("hi")  # verified like the SDK's client: an unknown certificate is refused
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # trusted (read when a connection is opened)
        trusted = ChatModel(spec=parse_model_spec({"spec": f"openai:m@{url}", "seed": 1}))
        assert trusted.invoke("hi") == trusted.invoke("again") == '{"ok": true}'
    assert len(server.bodies) == 2 and len(set(server.peers)) == 1  # one kept-alive TLS connection


def test_plain_messages_stand_for_the_langchain_messages_they_replace():
    # the openai path builds chat-completions dicts, not LangChain messages: the body, the response
    # cache's key and the run budget's prompt bound must not change
    from convsim.providers.cache import ResponseCache
    from convsim.providers.limits import prompt_bound
    chat = openai_client.OpenAIChat(parse_model_spec("openai:m@http://127.0.0.1:9/v1"))
    for messages in ["hi", [("system", "Be brief. Ünïcode ✓"), ("user", "hi"), ("assistant", "yo"), ("human", "x"),
                            ("ai", "y")], [{"role": "user", "content": "q", "name": "ignored"}]]:
        plain, langchain = models._to_chat_messages(messages), models._to_messages(messages)
        assert all(isinstance(m, models.PlainMessage) for m in plain)
        assert chat.body(plain) == chat.body(langchain)
        assert openai_client.dumps(chat.body(plain)) == openai_client.dumps(chat.body(langchain))
        assert ResponseCache.key({"s": 1}, plain, {}) == ResponseCache.key({"s": 1}, langchain, {})
        assert prompt_bound(plain) == prompt_bound(langchain)
    with pytest.raises(models.ConvsimError):
        models._to_chat_messages([("robot", "hi")])


TOOL_REPLY = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
              "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                  "role": "assistant", "content": None, "tool_calls": [
                      {"id": "c9", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]}}],
              "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}}


@pytest.mark.parametrize("settings", [{}, {"max_tokens": 7, "seed": 3}])
def test_a_tool_calling_request_is_the_one_chatopenai_sends(monkeypatch, settings):
    """The openai: agent's tool rounds (convsim.slots.adapters.OpenAIAgent): the tools' schemas, an
    assistant message with valid and invalid tool calls, the tool messages answering them; the same
    bytes as ChatOpenAI.bind_tools(...) sends but one: an assistant message with tool calls and no
    text has ``"content": ""`` where ChatOpenAI sends null (llama-cpp-python's server refuses null:
    tests/test_agent_slots_llamacpp.py), and the server's tool calls read back."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    history = [SystemMessage("Context: {}"), HumanMessage("1+2? Ünïcode ✓"),
               AIMessage("", tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": "c1"}],
                         invalid_tool_calls=[{"name": "add", "args": '{"a": ', "id": "c2", "error": "bad json",
                                              "type": "invalid_tool_call"}]),
               ToolMessage("3", tool_call_id="c1", name="add"),
               ToolMessage("Error: bad json\n Please fix your mistakes.", tool_call_id="c2", name="add", status="error")]
    with CaptureServer(reply=TOOL_REPLY) as server:
        spec = parse_model_spec({"spec": f"openai:m@{server.url}", **settings})
        monkeypatch.setattr(models, "_BACKENDS", {})
        ours = openai_client.OpenAIChat(spec).invoke(history, tools=[convert_to_openai_tool(add)])
        theirs = _chat_openai(spec).bind_tools([add]).invoke(history)
    body, theirs_body = json.loads(server.bodies[0]), json.loads(server.bodies[1])
    assert body["messages"][2]["content"] == "" and theirs_body["messages"][2]["content"] is None
    theirs_body["messages"][2]["content"] = ""
    assert server.bodies[0] == openai_client.dumps(theirs_body)  # the rest byte for byte
    assert [c["id"] for c in body["messages"][2]["tool_calls"]] == ["c1", "c2"]
    assert body["messages"][4] == {"content": "Error: bad json\n Please fix your mistakes.", "role": "tool",
                                   "tool_call_id": "c2"}
    assert ours.tool_calls == TOOL_REPLY["choices"][0]["message"]["tool_calls"]
    assert theirs.tool_calls[0]["args"] == {"a": 1, "b": 2} and ours.content == ""
