"""Model specs, the structured-output loop, failure recording, infrastructure errors."""
import json

import pytest
from langchain_core.messages import AIMessage
from pydantic import BaseModel, Field

import convsim.providers.models as models
from convsim import ConvsimError, extract_json, parse_model_spec
from convsim.providers.models import ChatModel, ModelUnavailable


@pytest.mark.parametrize("spec,provider,model,url", [
    ("none", "none", "", None),
    ("ollama:llama3:instruct", "ollama", "llama3:instruct", None),
    ("openai:qwen2.5@http://localhost:8000/v1", "openai", "qwen2.5", "http://localhost:8000/v1"),
    ("llamacpp:gemma3-270m", "llamacpp", "gemma3-270m", None),
    ("llamacpp:/models/x.gguf", "llamacpp", "/models/x.gguf", None),
    # an Ollama server of its own (before: "qwen:7b@http://gpu2:11434" was taken as the model name,
    # and the run sent it to OLLAMA_HOST, an infra_error naming no URL)
    ("ollama:qwen:7b@http://gpu2:11434", "ollama", "qwen:7b", "http://gpu2:11434"),
])
def test_parse_specs(spec, provider, model, url):
    s = parse_model_spec(spec)
    assert (s.provider, s.model, s.base_url) == (provider, model, url)


@pytest.mark.parametrize("bad", ["", "gpt4", "ollama:", "openai:gpt@notaurl", "llamacpp:foo", "hf:x",
                                 "ollama:x@notaurl", "ollama:@http://h:1", "ollama: x", "ollama:a b"])
def test_bad_specs(bad):
    with pytest.raises(ConvsimError):
        parse_model_spec(bad)


def test_an_ollama_spec_with_a_server_reaches_that_server(monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "http://elsewhere:11434")
    models._BACKENDS.clear()
    try:
        own = models._make_backend(parse_model_spec("ollama:qwen:7b@http://gpu2:11434"))
        default = models._make_backend(parse_model_spec("ollama:qwen:7b"))
    finally:
        models._BACKENDS.clear()
    assert (own.model, own.base_url) == ("qwen:7b", "http://gpu2:11434")
    assert default.base_url == "http://elsewhere:11434"
    from convsim.providers.limits import server_key  # provider limits are per server
    assert server_key(parse_model_spec("ollama:qwen:7b@http://gpu2:11434")) == "http://gpu2:11434"


@pytest.mark.parametrize("given,shown", [("openai:", "'openai:'"), ("ollama:", "'ollama:'"), ("none:", "'none:'"),
                                         ("ollama:x@notaurl", "'ollama:x@notaurl'")])
def test_a_bad_model_on_the_command_line_is_named_as_given(given, shown):
    # before: --model values were read as YAML, so "openai:" became {openai: null} and the error said
    # "model spec must be a non-empty string, got None"
    from convsim.config import apply_overrides, config_from_dict
    cfg = config_from_dict({"name": "x", "graph": "hello_chat"})
    with pytest.raises(ConvsimError, match=f"bad model spec {shown}"):
        apply_overrides(cfg, models=[f"agent={given}"])
    ok = apply_overrides(cfg, models=["agent=openai:m@http://127.0.0.1:1/v1", "judge=none"])
    assert ok.models["agent"] == "openai:m@http://127.0.0.1:1/v1" and ok.models["judge"] == "none"


def test_settings_are_recorded():
    s = parse_model_spec({"spec": "ollama:qwen:7b", "temperature": 0.7, "seed": 3, "num_ctx": 4096,
                          "max_tokens": 200})
    assert s.settings == {"spec": "ollama:qwen:7b", "temperature": 0.7, "seed": 3, "num_ctx": 4096,
                          "max_tokens": 200}
    with pytest.raises(ConvsimError):
        parse_model_spec({"spec": "none", "temprature": 1})


class Scores(BaseModel):
    coherence: int = Field(ge=1, le=5)


class FakeBackend:
    def __init__(self, answers):
        self.answers = list(answers)
        self.calls = 0

    def invoke(self, messages, **kwargs):
        self.calls += 1
        a = self.answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return AIMessage(a, usage_metadata={"input_tokens": 10, "output_tokens": 3, "total_tokens": 13})


@pytest.fixture
def fake(monkeypatch):
    def install(answers):
        backend = FakeBackend(answers)
        monkeypatch.setattr(models, "_backend", lambda spec, *timeout: backend)
        return backend
    return install


def handle():
    return ChatModel(spec=parse_model_spec("ollama:fake"), role="judge", retries_on_connection=1)


def test_structured_retries_then_succeeds(fake):
    backend = fake(["I think **coherence: 4**", '```json\n{"coherence": 4}\n```'])
    m = handle()
    r = m.structured([("user", "rate")], Scores)
    assert r.ok and r.value.coherence == 4 and r.attempts == 2 and backend.calls == 2
    assert [c["prompt_tokens"] for c in m.calls] == [10, 10]


def test_structured_garbage_is_a_recorded_failure(fake):
    fake(["no idea", '{"coherence": 9}', "still nothing"])
    r = handle().structured([("user", "rate")], Scores, retries=2)
    assert not r.ok and r.raw == "still nothing" and r.attempts == 3 and r.error
    assert r.as_record()["raw"] == "still nothing"


def test_connection_errors_are_infrastructure(fake, monkeypatch):
    monkeypatch.setattr(models.time, "sleep", lambda s: None)
    fake([ConnectionError("refused"), ConnectionError("refused")])
    m = handle()
    with pytest.raises(ModelUnavailable):
        m.invoke([("user", "hi")])
    assert [c["ok"] for c in m.calls] == [False, False]


def test_none_model_refuses_calls():
    m = ChatModel(spec=parse_model_spec("none"))
    assert m.is_none
    with pytest.raises(RuntimeError):
        m.invoke("hi")


@pytest.mark.parametrize("text,value", [
    ('{"a": 1}', {"a": 1}),
    ('Sure! {"a": {"b": "}"}} done', {"a": {"b": "}"}}),
    ("```json\n[1, 2]\n```", [1, 2]),
])
def test_extract_json(text, value):
    assert extract_json(text) == value


def test_extract_json_fails_cleanly():
    with pytest.raises(ValueError):
        extract_json("no json here {")


@pytest.mark.parametrize("garbage", ["[" * 100_000, "[" * 5_000 + "]" * 5_000, '{"a": ' * 50_000])
@pytest.mark.parametrize("recursion_limit", [None, 100_000])
def test_extract_json_on_nesting_too_deep_is_garbage_not_a_crash(garbage, recursion_limit):
    # a small model stuck in a loop: before, RecursionError escaped structured() as a code_error;
    # and with the recursion limit a library had raised (grandalf does), 5,000 levels parsed
    import sys
    before = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(recursion_limit or before)
        with pytest.raises(ValueError):
            extract_json("verdict: " + garbage)
    finally:
        sys.setrecursionlimit(before)


def test_extract_json_keeps_answers_nested_within_the_bound():
    from convsim.providers.models import MAX_ANSWER_DEPTH
    ok = "[" * MAX_ANSWER_DEPTH + "]" * MAX_ANSWER_DEPTH
    assert extract_json("here: " + ok + " done") is not None
    assert extract_json(json.dumps({"a": "[" * 80})) == {"a": "[" * 80}  # in a string: text, not nesting


def test_extract_json_bounds_its_work_on_unclosed_brackets(monkeypatch):
    # before, each of n opening braces rescanned the rest of the text: 20,000 braces took ~10 s
    from convsim.providers import models
    starts = []

    class Counting(json.JSONDecoder):
        def raw_decode(self, s, idx=0):
            starts.append(idx)
            return super().raw_decode(s, idx)
    monkeypatch.setattr(models, "_DECODER", Counting())
    with pytest.raises(ValueError):
        extract_json("{" * 20_000 + "[" * 20_000)
    # cut before the first bracket deeper than MAX_ANSWER_DEPTH: what is left is decoded, boundedly
    assert len(starts) <= models.MAX_JSON_STARTS
    starts.clear()
    with pytest.raises(ValueError):
        extract_json("{x} " * 20_000 + "[x] " * 20_000)  # shallow, and every start fails
    assert len(starts) == 2 * models.MAX_JSON_STARTS
    assert extract_json("{" * 10 + ' {"ok": true} ') == {"ok": True}  # found past the unclosed ones


def test_response_cache_replays_without_calling_the_model(fake, tmp_path):
    from convsim.providers.cache import ResponseCache
    backend = fake(["first answer"])
    cache = ResponseCache(tmp_path / "cache.sqlite")
    m1 = ChatModel(spec=parse_model_spec("ollama:fake"), role="crs", cache=cache)
    assert m1.invoke([("user", "hi")]) == "first answer"
    m2 = ChatModel(spec=parse_model_spec("ollama:fake"), role="crs", cache=cache)
    assert m2.invoke([("user", "hi")]) == "first answer"
    assert backend.calls == 1 and m2.calls[0]["cache_hit"] is True and len(cache) == 1


def test_a_schema_built_per_case_is_not_kept_after_it():
    import gc
    import weakref

    from pydantic import create_model

    from convsim.providers.models import schema_json
    schema = create_model("PerCase", score=(int, ...))
    assert '"score"' in schema_json(schema) and schema_json(schema) is schema_json(schema)  # built once
    gone = weakref.ref(schema)
    del schema
    gc.collect()
    assert gone() is None


@pytest.mark.parametrize("tail", ["[" * 70, "{" * 100, "[" * 5_000 + "]" * 5_000])
def test_an_answer_followed_by_a_looping_models_brackets_is_kept(tail):
    assert extract_json('{"score": 2, "reason": "ok"} then ' + tail) == {"score": 2, "reason": "ok"}


def test_stray_closing_brackets_do_not_hide_deep_nesting():
    import sys
    before = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(100_000)
        with pytest.raises(ValueError):
            extract_json("oops " + "]" * 5_000 + " " + "[" * 5_000 + "]" * 5_000)
    finally:
        sys.setrecursionlimit(before)


def test_a_call_that_failed_otherwise_is_still_a_recorded_call(fake):
    # a request the server refused (an HTTP 400: not a fault to retry) was made, and the run budget
    # counted it, but it never reached llm_calls: the budget's stop line showed fewer calls than it counted
    backend = fake([ValueError("400 Bad Request: the prompt is longer than the context")])
    m = handle()
    with pytest.raises(ValueError):
        m.invoke([("user", "hello")])
    assert backend.calls == 1 and len(m.calls) == 1
    assert m.calls[0]["ok"] is False and "400 Bad Request" in m.calls[0]["error"]
