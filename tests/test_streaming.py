"""Streamed answers (issue 39, item 4): with ``retry.stream`` (``--stream``) the answers of
OpenAI-compatible servers (server-sent events) and Ollama (NDJSON) are streamed, and timed by a
first-token timeout (the server's queue and prompt processing), an idle timeout between two tokens
(the server's work) and a cap on the whole answer, instead of one timeout on the whole request.

The assembled answer is the unstreamed one, and a run's results are the same with streaming on and
off. A server that streams nothing within the first-token timeout, one that stalls mid-stream and
one whose answer outlasts the cap are infrastructure errors; a stream cut before its end is never a
shorter answer. A stop cancels a streamed call in flight (the server sees the client leave). Against
the stdlib fakes tests/fault_server.py (SSE) and tests/ollama_server.py (NDJSON)."""
from __future__ import annotations

import json
import threading

import pytest
from pydantic import BaseModel

from cli_helpers import cli
from fault_server import serve
from ollama_server import serve_ollama
from convsim.providers import httpjson, stopping
from convsim.providers.models import ChatModel, ModelUnavailable, _make_backend, parse_model_spec
from convsim.providers.openai_client import assemble_sse
from convsim.providers.retry import RetryPolicy

ANSWERS = ["Paris.", "", "  leading spaces, trailing too  ", "Ünïcödé — 🙂 and\nnew lines\n\n",
           json.dumps({"correct": True, "reason": "a JSON answer"})]


class Verdict(BaseModel):
    correct: bool
    reason: str


def _model(url, stream, role="agent", **retry):
    policy = RetryPolicy(stream=stream, attempts=1, **retry)
    return ChatModel(spec=parse_model_spec(url), role=role, retry=policy)


@pytest.fixture(autouse=True)
def no_stop():
    stopping.reset()
    yield
    stopping.reset()


@pytest.mark.parametrize("content", ANSWERS)
def test_a_streamed_openai_answer_is_the_unstreamed_answer(content):
    with serve(answer=lambda request: content) as server:
        plain, streamed = _model(f"openai:m@{server.url}", False), _model(f"openai:m@{server.url}", True)
        assert streamed.invoke("q?") == plain.invoke("q?") == content
        assert server.streamed == 1  # the second answer was streamed (the first not)
        keep = ("prompt_tokens", "completion_tokens", "total_tokens", "ok", "error")
        assert [{k: c[k] for k in keep} for c in streamed.calls] == [{k: c[k] for k in keep} for c in plain.calls]


def test_a_streamed_json_answer_is_validated_as_the_unstreamed_one():
    with serve() as server:
        plain, streamed = _model(f"openai:m@{server.url}", False), _model(f"openai:m@{server.url}", True)
        a, b = plain.structured("judge", Verdict), streamed.structured("judge", Verdict)
        assert a.ok and b.ok and a.value == b.value
        assert server.streamed == 1


@pytest.mark.parametrize("content", ANSWERS)
def test_a_streamed_ollama_answer_and_request_are_chatollamas(content):
    """Without streaming an ``ollama:`` model is ChatOllama (whose client streams too); with it,
    convsim's client sends the same request body and reads the same answer and token counts."""
    with serve_ollama(answer=lambda request: content) as server:
        spec = {"spec": f"ollama:m@{server.url}", "seed": 3, "max_tokens": 20, "num_ctx": 512}
        plain, streamed = _model(spec, False), _model(spec, True)
        messages = [("system", "be brief"), ("user", "hi"), ("assistant", "yo"), ("user", "q?")]
        assert streamed.invoke(messages) == plain.invoke(messages) == content
        assert streamed.calls[0]["prompt_tokens"] == plain.calls[0]["prompt_tokens"] == 7
        assert streamed.calls[0]["completion_tokens"] == plain.calls[0]["completion_tokens"] == 3
        # what went over the wire: request 0 by ChatOllama, 1 by convsim's client
        assert server.requests[1] == server.requests[0]
        a = plain.structured("judge", Verdict)
        n = len(server.requests)
        b = streamed.structured("judge", Verdict)
        assert (a.ok, a.raw, a.attempts) == (b.ok, b.raw, b.attempts)
        assert server.requests[n:] == server.requests[2:n]  # each retry's body as ChatOllama's
        assert "format" in server.requests[-1]  # the JSON schema (Ollama's JSON mode) went too
    spec = parse_model_spec(spec)
    assert type(_make_backend(spec, 5.0, RetryPolicy(stream=True).stream_timeouts())).__name__ == "OllamaChat"


def _records(path):
    out = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        record.pop("elapsed_s"), record.pop("run_id")
        for call in record["llm_calls"]:
            call.pop("latency_s")
        out.append(record)
    return sorted(out, key=lambda r: r["session_id"])


def test_a_runs_results_are_the_same_with_streaming_on_and_off(tmp_path):
    def answer(request):  # an answer per question, cut into many pieces when streamed
        question = request["messages"][-1]["content"]
        return f"  Ünïcödé 🙂 about {question!r}:\nParis. Jupiter. Au.  "

    with serve(answer=answer) as server:
        runs = {}
        for name, flag in (("plain", "--no-stream"), ("streamed", "--stream")):
            code, out, exc = cli("run", "hello_chat", "--sessions", "4", "--seed", "3", "--model",
                                 f"agent=openai:m@{server.url}", "--out", tmp_path, "--run-id", name,
                                 "--no-analysis", "-q", flag)
            assert code == 0, (out, exc)
            runs[name] = _records(tmp_path / name / "results.jsonl")
        assert server.streamed == 12  # 4 sessions of 3 turns, streamed in the second run
    assert len(runs["plain"]) == 4 and {r["status"] for r in runs["plain"]} == {"ok"}
    assert runs["streamed"] == runs["plain"]
    saved = (tmp_path / "streamed" / "config.yaml").read_text()
    assert "stream: true" in saved


def _events(content: str) -> list[bytes]:
    chunk = {"id": "c1", "created": 1, "model": "m"}
    lines = [b"data: " + json.dumps({**chunk, "choices": [{"index": 0, "delta": {"role": "assistant"}}]}).encode(), b""]
    for piece in content.split(" "):
        delta = {"content": piece + " "}
        lines += [b": ping", b"", b"data: " + json.dumps({**chunk, "choices": [{"index": 0, "delta": delta}]}).encode(), b""]
    lines += [b"data: " + json.dumps({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}).encode(),
              b"", b"data: [DONE]", b""]
    return lines


def test_assembling_events_and_a_stream_cut_short():
    whole = assemble_sse(_events("a b c"))
    assert whole["choices"][0]["message"]["content"] == "a b c "
    assert whole["choices"][0]["finish_reason"] == "stop" and whole["usage"] is None
    # the defect: a stream cut before its end (no finish_reason, no [DONE]) is no shorter answer
    with pytest.raises(httpjson.RemoteProtocolError, match="ended before"):
        assemble_sse(_events("a b c")[:7])
    # llama-cpp-python's server cuts a stream when another request arrives: a bare [DONE], no finish_reason
    cut = _events("a b c")[:6] + [b"data: [DONE]", b""]
    with pytest.raises(httpjson.RemoteProtocolError, match="no finish_reason"):
        assemble_sse(cut)
    with pytest.raises(Exception, match="streamed an error"):
        assemble_sse([b'data: {"error": {"message": "out of memory"}}', b""])


def _timed_out(model, match):
    with pytest.raises(ModelUnavailable, match=match) as info:
        model.invoke("q?")
    assert "timeout" in str(info.value)
    return info.value


def test_no_first_token_in_time_is_an_infra_error():
    with serve(delay=lambda n, r: 2.0) as server:
        _timed_out(_model(f"openai:m@{server.url}", True, first_token_timeout=0.5), "no first token")
    # a server that sends its head at once and pings while it waits: pings are not tokens
    with serve(delay=lambda n, r: 2.0, ping_s=0.1) as server:
        _timed_out(_model(f"openai:m@{server.url}", True, first_token_timeout=0.5), "no first token")
    with serve_ollama(delay_s=2.0) as server:
        _timed_out(_model(f"ollama:m@{server.url}", True, first_token_timeout=0.5), "no first token")


def test_a_stream_that_stalls_is_an_infra_error():
    with serve(script=["stall"], hang_s=2.0) as server:
        _timed_out(_model(f"openai:m@{server.url}", True, idle_timeout=0.4), "stalled")
        assert server.stream_started == 1  # it had begun: a stall mid-stream, not a slow first token
    with serve_ollama(answer=lambda r: "one two three", stall_s=2.0) as server:
        _timed_out(_model(f"ollama:m@{server.url}", True, idle_timeout=0.4), "stalled")


def test_the_cap_on_a_whole_answer():
    long = " ".join(["word"] * 12)
    with serve(answer=lambda r: long, token_s=0.1) as server:
        _timed_out(_model(f"openai:m@{server.url}", True, idle_timeout=5, total_timeout=0.5), "in all")


def test_the_timeouts_measure_the_servers_work_not_its_queue():
    """A queue of 1.5 s and a steady answer of 12 pieces 0.1 s apart: one request timeout of 1 s
    fails it; streamed, with a first-token timeout of 5 s and an idle timeout of 1 s, it is served."""
    long = " ".join(["word"] * 12)
    with serve(answer=lambda r: long, token_s=0.1, delay=lambda n, r: 1.5) as server:
        with pytest.raises(ModelUnavailable, match="timeout"):
            _model(f"openai:m@{server.url}", False, timeout=1.0).invoke("q?")
        streamed = _model(f"openai:m@{server.url}", True, timeout=1.0, first_token_timeout=5, idle_timeout=1.0)
        assert streamed.invoke("q?") == long


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_a_stop_cancels_a_streamed_call_in_flight(provider):
    long = " ".join(["word"] * 200)
    context = serve(answer=lambda r: long, token_s=0.5) if provider == "openai" else \
        serve_ollama(answer=lambda r: long, token_s=0.5)
    with context as server:
        url = f"openai:m@{server.url}" if provider == "openai" else f"ollama:m@{server.url}"
        model = _model(url, True, idle_timeout=60)
        outcome = []

        def call():
            try:
                outcome.append(model.invoke("q?"))
            except BaseException as exc:  # noqa: BLE001
                outcome.append(exc)

        thread = threading.Thread(target=call)
        thread.start()
        started = (lambda: server.stream_started) if provider == "openai" else (lambda: len(server.requests))
        _wait(lambda: started() >= 1)
        stopping.request("test")
        thread.join(60)
        assert not thread.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], stopping.RunStopped), outcome
        cut = (lambda: server.stream_cut) if provider == "openai" else (lambda: server.cut)
        _wait(lambda: cut() == 1)  # the server saw the client leave mid-answer
        assert model.calls == []  # an abandoned call is no recorded failure of the server


def _wait(cond, limit=60.0):
    import time
    end = time.monotonic() + limit  # a guard against a hang, not a measurement
    while not cond():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.02)


def test_streaming_settings_on_the_command_line(tmp_path):
    from cli_helpers import one_line
    one_line(["run", "hello_chat", "--sessions", "1", "--out", tmp_path, "--idle-timeout", "0"],
             "idle_timeout", code=2)
    assert not any(tmp_path.iterdir())


def test_a_streamed_tool_call_is_the_unstreamed_one():
    """A tool-calling answer (the ``openai:`` agent adapter reads ``tool_calls``): streamed, its
    calls arrive as deltas (id and name, then the arguments in pieces) and are joined into the
    message the unstreamed answer has."""
    from convsim.providers.openai_client import OpenAIChat
    message = {"content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "search_films",
                                                          "arguments": json.dumps({"query": "space opera, 1980s ✓"})}},
        {"id": "call_2", "type": "function", "function": {"name": "rate", "arguments": "{}"}}]}
    with serve(answer=lambda request: message) as server:
        spec = parse_model_spec(f"openai:m@{server.url}")
        plain = OpenAIChat(spec, 5.0).invoke([{"role": "user", "content": "films?"}])
        streamed = OpenAIChat(spec, 5.0, stream=RetryPolicy(stream=True).stream_timeouts()).invoke(
            [{"role": "user", "content": "films?"}])
        assert server.streamed == 1
    assert plain.tool_calls == message["tool_calls"] and plain.finish_reason == "tool_calls"
    assert (streamed.content, streamed.tool_calls, streamed.finish_reason) == \
        (plain.content, plain.tool_calls, plain.finish_reason)


def test_a_tool_calling_agent_streamed_books_as_unstreamed(tmp_path):
    """The customer-service agent behind an OpenAI-compatible endpoint, calling the scenario's tools:
    with ``--stream`` the same replies, tool calls and bookings as without."""
    import sys
    pytest.importorskip("langchain.agents", reason="the scripted policy needs langchain>=1.0 (convsim[examples])")
    from conftest import ROOT
    from openai_agent import as_endpoint
    sys.path.insert(0, str(ROOT / "examples"))
    from scripted_models import service_policy
    runs = {}
    for name, flag in (("plain", "--no-stream"), ("streamed", "--stream")):
        with serve(answer=as_endpoint(service_policy, [])) as server:
            code, out, exc = cli("run", "customer_service", "--sessions", "3", "--agent",
                                 f"service=openai:clerk@{server.url}", "--out", tmp_path, "--run-id", name,
                                 "--no-analysis", "-q", flag)
            assert code == 0, (out, exc)
            assert server.streamed == (0 if name == "plain" else len(server.arrivals))
        runs[name] = sorted((json.loads(x) for x in (tmp_path / name / "results.jsonl").read_text().splitlines()),
                            key=lambda r: r["session_id"])
    assert {r["status"] for r in runs["plain"]} == {"ok"}
    for a, b in zip(runs["plain"], runs["streamed"], strict=True):
        assert [e["text"] for e in a["transcript"]] == [e["text"] for e in b["transcript"]]
        assert [e.get("meta", {}).get("tool_calls") for e in a["transcript"]] == \
            [e.get("meta", {}).get("tool_calls") for e in b["transcript"]]
        assert a["agent_bookings"] == b["agent_bookings"] and a["dialogue_metrics"] == b["dialogue_metrics"]
    assert any(e.get("meta", {}).get("tool_calls") for r in runs["streamed"] for e in r["transcript"])


def test_the_stop_check_between_llamacpp_tokens():
    """The wrapper of llama.cpp's token generator (convsim.providers.llamacpp, no model needed): it
    counts the tokens, passes what the caller sends in, and on a stop closes llama.cpp's generator
    and raises RunStopped before the next token."""
    from convsim.providers.llamacpp import _stoppable
    closed, received = [], []

    def generate(n):
        try:
            for token in range(n):
                received.append((yield token))
        finally:
            closed.append(True)

    tokens = [0]
    assert list(_stoppable(generate, tokens)(5)) == [0, 1, 2, 3, 4] and tokens == [5] and closed == [True]
    gen = _stoppable(generate, tokens)(100)
    assert [next(gen), gen.send("x"), next(gen)] == [0, 1, 2] and received[-2:] == ["x", None]
    stopping.request("test")
    with pytest.raises(stopping.RunStopped):
        next(gen)
    assert tokens == [3] and closed == [True, True]


def test_a_call_waiting_for_the_in_process_model_gives_up_on_a_stop():
    from convsim.providers.llamacpp import ChatLlamaCpp
    release, entered = threading.Event(), []

    class Busy:  # a loaded model whose call in progress runs until released
        def create_chat_completion(self, **kwargs):
            entered.append(kwargs["messages"][-1]["content"])
            release.wait(60)
            return {"choices": [{"message": {"content": "done"}}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}

    model = ChatLlamaCpp(model_path="unused.gguf")
    model._llama = Busy()
    outcomes = {}

    def call(text):
        try:
            outcomes[text] = model.invoke(text).content
        except BaseException as exc:  # noqa: BLE001
            outcomes[text] = exc

    first = threading.Thread(target=call, args=("first",))
    first.start()
    _wait(lambda: entered == ["first"])
    second = threading.Thread(target=call, args=("second",))
    second.start()
    stopping.request("test")
    second.join(60)
    assert isinstance(outcomes["second"], stopping.RunStopped) and entered == ["first"]  # never reached the model
    release.set()
    first.join(60)
    assert outcomes["first"] == "done"
