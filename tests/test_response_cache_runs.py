"""The response cache in runs: a session reads only what an earlier run of the same session stored.

Keyed by the request alone, hello_chat's sessions (which ask the same questions) shared answers
within one run: which session was the cache hit depended on the executor's scheduling (an audit
found every session's ``cache_hit`` list different between concurrency 1 and 8)."""
import json

from convsim.config import config_from_dict
from convsim.running.runner import run
from fault_server import serve


def _records(run_dir):
    recs = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    return {r["session_id"]: r for r in recs}


def _cfg(tmp_path, url, run_id, concurrency, cache):
    return config_from_dict({"graph": "hello_chat", "sessions": 6, "out_dir": str(tmp_path), "run_id": run_id,
                             "models": {"agent": f"openai:fake@{url}"}, "concurrency": concurrency,
                             "cache": str(cache), "trace": False, "analysis": []})


def test_sessions_never_share_cached_answers_and_a_rerun_replays_each_session(tmp_path):
    with serve(answer=lambda request: "Paris. 100 degrees Celsius. William Shakespeare.") as server:
        one = _records(run(_cfg(tmp_path, server.url, "c1", 1, tmp_path / "a.sqlite"), analyze=False))
        many = _records(run(_cfg(tmp_path, server.url, "c4", 4, tmp_path / "b.sqlite"), analyze=False))
        sent = sum(server.served.values())
        again = _records(run(_cfg(tmp_path, server.url, "again", 4, tmp_path / "a.sqlite"), analyze=False))
        assert sum(server.served.values()) == sent  # the re-run called no model
    hits = {sid: [c["cache_hit"] for c in r["llm_calls"]] for sid, r in one.items()}
    assert all(h and not any(h) for h in hits.values())  # a fresh run: no session read another's answer
    assert {sid: [c["cache_hit"] for c in r["llm_calls"]] for sid, r in many.items()} == hits
    assert all(all(c["cache_hit"] for c in r["llm_calls"]) for r in again.values())
    assert {sid: r["transcript"] for sid, r in again.items()} == {sid: r["transcript"] for sid, r in one.items()}
