"""What an ``openai:`` model sends to an OpenAI-compatible server (checked at a real local HTTP server)."""
import sys
from pathlib import Path

from convsim.providers.models import ChatModel, parse_model_spec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from latency_server import LatencyServer  # noqa: E402


def test_max_tokens_reaches_servers_that_only_know_the_classic_field():
    # llama.cpp's server ignores max_completion_tokens (all langchain-openai sends) and then generates
    # until its context is full: the request must carry max_tokens too
    with LatencyServer(latency_s=0.0) as server:
        spec = parse_model_spec({"spec": f"openai:m@{server.base_url}", "max_tokens": 7, "temperature": 0.0})
        model = ChatModel(spec=spec, role="agent")
        assert model.invoke("hi") == "The answer is Paris."
        assert server.last_request["max_tokens"] == 7
        assert model.calls[0]["prompt_tokens"] == 10 and model.calls[0]["completion_tokens"] == 5


def test_a_json_answer_cut_at_max_tokens_is_a_failed_answer_not_a_crash():
    # langchain-openai raises openai.LengthFinishReasonError for a JSON-mode answer that hit max_tokens;
    # a weak model does that all the time: it must be retried and kept raw like any invalid answer
    from pydantic import BaseModel

    class Verdict(BaseModel):
        score: int

    with LatencyServer(latency_s=0.0, answer='{"score": ') as server:
        server.finish_reason = "length"
        spec = parse_model_spec({"spec": f"openai:m@{server.base_url}", "max_tokens": 3})
        model = ChatModel(spec=spec, role="judge")
        result = model.structured("judge this", Verdict, retries=1)
        assert not result.ok and result.raw == '{"score": ' and "max_tokens" in result.error
        assert server.requests == 2  # tried again once
        # both calls were served: recorded, with the server's token counts
        assert [(c["ok"], c["prompt_tokens"], c["completion_tokens"]) for c in model.calls] == [(False, 10, 5)] * 2
