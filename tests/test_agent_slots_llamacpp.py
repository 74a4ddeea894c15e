"""Issue 33's test (2) against a real server: llama-cpp-python's OpenAI-compatible server with the
shipped gemma3-270m (``python -m llama_cpp.server ... --chat_format gemma``, the ``llamacpp_server``
fixture of tests/conftest.py) is the agent of a scenario, named on the command line with
``--agent ROLE=openai:gemma3-270m@<url>#...``. Skipped, with the reason, where the local extra is
not installed.

A 270M model answers badly, so nothing here is about quality: every session is written with a final
status; the agent's turns are the server's answers (its token counts in the calls, one call per
agent turn, the first answer replayed against the server word for word); an answer that is garbage
is an ``agent_failure`` with the raw text kept; with the customer-service tools offered (the
``gemma`` chat format leaves them out of the prompt, so the model answers in text) the run's
bookkeeping holds. With ``#tool_choice=lookup_entity`` the server makes real, grammar-constrained
calls of the tool, which convsim runs against the session's tools and records per turn (cut
arguments as tool errors). The server refuses the request after a call as ChatOpenAI writes it
(``content: null`` beside ``tool_calls``: HTTP 500), shown here; convsim sends ``""`` there.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.cli_helpers import cli

pytestmark = [pytest.mark.local, pytest.mark.slow]

SETTINGS = "max_tokens=16&temperature=0&seed=1"


def _run(tmp_path, run_id, config):
    code, out, exc = cli("run", config, "--out", tmp_path, "--run-id", run_id, "--no-analysis", "-q")
    records = [json.loads(x) for x in (tmp_path / run_id / "results.jsonl").read_text().splitlines()]
    return code, out, records


def _config(tmp_path, graph, role, spec, sessions, params):
    path = tmp_path / f"{graph}.yaml"
    path.write_text(json.dumps({"name": graph, "graph": graph, "sessions": sessions, "seed": 2, "concurrency": 1,
                                "params": params, "agents": {role: spec},
                                # a busy 2-core machine: one 16-token answer can take a while
                                "retry": {"attempts": 2, "timeout": 300.0}}))
    return path


def _check_mechanics(records, spec, role, code, out):
    assert records and {r["status"] for r in records} <= {"ok", "agent_failure"}, (out, records)
    print(f"{role}: statuses {[r['status'] for r in records]}, agent texts "
          f"{[e['text'][:60] for r in records for e in r['transcript'] if e['speaker'] in ('agent', 'system')]}")
    assert code == 0, out  # ok and agent_failure sessions: no infrastructure error against a healthy server
    for r in records:
        assert r["agents"] == {role: spec}
        calls = r["llm_calls"]
        assert calls and all(c["role"] == f"agent:{role}" and c["model"] in spec for c in calls)
        assert all(c["ok"] and c["prompt_tokens"] and c["completion_tokens"] for c in calls), calls
        if r["status"] == "agent_failure":  # a garbage answer: the raw text is kept in the record
            assert "answered garbage" in r["error"] and "raw:" in r["error"], r["error"]


def test_llamacpp_server_is_the_agent_of_hello_chat(llamacpp_server, tmp_path):
    base_url, model = llamacpp_server
    spec = f"openai:{model}@{base_url}#{SETTINGS}"
    code, out, records = _run(tmp_path, "hello", _config(tmp_path, "hello_chat", "agent", spec, 2, {"n_turns": 2}))
    assert len(records) == 2
    _check_mechanics(records, spec, "agent", code, out)
    for r in records:
        agent_turns = [e for e in r["transcript"] if e["speaker"] == "agent"]
        if r["status"] == "ok":  # one server answer per agent turn
            assert len(agent_turns) == len(r["llm_calls"]) == 2
    ok = next((r for r in records if r["status"] == "ok"), None)
    if ok is not None:  # the agent's first turn is what the server answers to the same request
        question = ok["transcript"][0]["text"]
        first = next(e for e in ok["transcript"] if e["speaker"] == "agent")
        body = {"model": model, "stream": False, "temperature": 0.0, "seed": 1, "max_completion_tokens": 16,
                "max_tokens": 16, "messages": [{"content": f'Context: {{"turn": {first["turn"]}}}', "role": "system"},
                                               {"content": question, "role": "user"}]}
        request = urllib.request.Request(f"{base_url}/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=300) as resp:
            again = json.loads(resp.read())["choices"][0]["message"]["content"]
        assert first["text"] == again


def test_llamacpp_server_offered_the_customer_service_tools(llamacpp_server, tmp_path):
    base_url, model = llamacpp_server
    spec = f"openai:{model}@{base_url}#tool_rounds=2&{SETTINGS}"
    code, out, records = _run(tmp_path, "svc", _config(tmp_path, "customer_service", "service", spec, 1,
                                                       {"max_turns": 2}))
    assert len(records) == 1
    _check_mechanics(records, spec, "service", code, out)
    r = records[0]
    system = [e for e in r["transcript"] if e["speaker"] == "system"]
    if r["status"] == "ok":
        assert system and all(e["meta"]["agent_spec"] == spec for e in system)
        # whatever the model did with the tools is recorded, and state grading read the same bookings
        booked = [c for e in system for c in e["meta"]["tool_calls"] if c["name"] == "book" and c["result"].get("ok")]
        assert len(r["agent_bookings"]) == len(booked) == r["dialogue_metrics"]["bookings_made"]


class _RecordingProxy:
    """A pass-through HTTP proxy in front of the llama.cpp server: it keeps every request and every
    answer (with its HTTP status)."""

    def __init__(self, upstream: str) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        self.requests: list[dict] = []
        self.answers: list[dict] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _relay(self, method: str, body: bytes | None) -> None:
                status, data = _exchange(upstream + self.path.removeprefix("/v1"), body, method)
                if method == "POST":
                    proxy.answers.append({"status": status, **json.loads(data)})
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._relay("GET", None)

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                proxy.requests.append(json.loads(body))
                self._relay("POST", body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _exchange(url: str, body: bytes | None, method: str = "POST") -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


FORCED = "tool_choice=lookup_entity&tool_rounds=2&temperature=0&seed=1"


def test_llamacpp_server_refuses_a_null_content_beside_tool_calls_which_convsim_does_not_send(llamacpp_server):
    """The request after a tool call, with the assistant's call as ChatOpenAI writes it (``"content":
    null`` beside ``tool_calls``, which OpenAI's API allows): llama-cpp-python 0.3.36's server refuses
    it (HTTP 500, a request validation error: its type says ``content: NotRequired[str]``). With
    ``"content": ""``, what convsim sends (convsim.providers.openai_client), it answers."""
    base_url, model = llamacpp_server
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup_entity",
                                                             "arguments": '{"domain": "hotel", "name": "Acorn"}'}}

    def follow_up(content):
        return json.dumps({"model": model, "max_tokens": 8, "temperature": 0, "seed": 1, "messages": [
            {"role": "user", "content": "Is the Acorn guest house free?"},
            {"role": "assistant", "content": content, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"ok": false, "error": "not_found"}'}]}).encode()
    status, data = _exchange(f"{base_url}/chat/completions", follow_up(None))
    refusal = json.loads(data)["error"]["message"]
    assert status == 500 and "'ChatCompletionRequestAssistantMessage', 'content')" in refusal, refusal
    assert "'msg': 'Input should be a valid string', 'input': None" in refusal, refusal
    status, data = _exchange(f"{base_url}/chat/completions", follow_up(""))
    assert status == 200 and json.loads(data)["choices"][0]["message"]["role"] == "assistant", data


@pytest.mark.parametrize("max_tokens, cut", [(32, False), (8, True)])
def test_llamacpp_server_calls_a_forced_tool_that_convsim_runs_and_records(llamacpp_server, tmp_path, max_tokens, cut):
    """``#tool_choice=lookup_entity``: llama-cpp-python answers each turn's first request with a call of
    that tool whose arguments its grammar (made from the tool's JSON schema) constrains, gemma3-270m
    filling them in; convsim runs it against the session's booking system, sends the result back as a
    ``tool`` message (the turn's second request, ``tool_choice: auto``, which the ``gemma`` format
    answers in text), and records the call in the turn's ``meta.tool_calls`` when it ran, in
    ``meta.tool_errors`` when its arguments are no JSON object: with ``max_tokens=8`` the server cuts
    every call's arguments, and the session goes on. Through a proxy that records what passes."""
    base_url, model = llamacpp_server
    proxy = _RecordingProxy(base_url)
    try:
        spec = f"openai:{model}@{proxy.url}#{FORCED}&max_tokens={max_tokens}"
        code, out, records = _run(tmp_path, "svc_tools", _config(tmp_path, "customer_service", "service", spec, 1,
                                                                 {"max_turns": 2}))
    finally:
        proxy.close()
    assert len(records) == 1
    _check_mechanics(records, spec, "service", code, out)
    r = records[0]
    assert r["status"] == "ok", r["error"]
    system = [e for e in r["transcript"] if e["speaker"] == "system"]
    forced = [a for a in proxy.answers if a["choices"][0]["message"].get("tool_calls")]
    print("server tool calls:", [c["function"] for a in forced for c in a["choices"][0]["message"]["tool_calls"]])
    print("recorded:", [(e["meta"].get("tool_calls"), e["meta"].get("tool_errors")) for e in system])
    assert all(a["status"] == 200 for a in proxy.answers)
    # per agent turn: the forced request, answered with one call of the tool; then the reply (auto)
    assert system and len(proxy.requests) == len(r["llm_calls"]) == 2 * len(system)
    assert [q["tool_choice"] for q in proxy.requests] == \
        [{"type": "function", "function": {"name": "lookup_entity"}}, "auto"] * len(system)
    assert len(forced) == len(system)
    for e, answer, follow_up in zip(system, forced, proxy.requests[1::2]):
        (call,) = answer["choices"][0]["message"]["tool_calls"]
        assert call["function"]["name"] == "lookup_entity" and answer["choices"][0]["finish_reason"] == "tool_calls"
        ran, refused = e["meta"].get("tool_calls") or [], e["meta"].get("tool_errors") or []
        assert len(ran) + len(refused) == 1, e["meta"]  # the server's call, recorded once
        # the result went back to the server as a tool message answering the server's own call id
        told = [m for m in follow_up["messages"] if m["role"] == "tool"][-1]
        assert told["tool_call_id"] == call["id"]
        asked = [m for m in follow_up["messages"] if m["role"] == "assistant" and m.get("tool_calls")][-1]
        assert asked["content"] == "" and asked["tool_calls"][0]["id"] == call["id"]  # not null: refused
        assert bool(refused) == cut, (max_tokens, e["meta"])
        if ran:  # it ran against the session's booking system: found, or not found, by the name given
            args = json.loads(call["function"]["arguments"], strict=False)
            assert ran[0]["name"] == "lookup_entity" and ran[0]["args"]["name"] == args["name"]
            assert "ok" in ran[0]["result"] and json.loads(told["content"]) == ran[0]["result"]
        else:  # cut: no JSON object, an error told to the agent, the raw arguments kept
            assert refused[0]["error"] is True and refused[0]["args"] == call["function"]["arguments"]
            assert told["content"] == refused[0]["result"] and "are not valid JSON" in told["content"]
    assert r["agent_bookings"] == []  # a look-up books nothing
