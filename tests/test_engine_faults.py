"""Provider faults are infrastructure (retried, errors.jsonl, never scored, re-run on resume);
a model answering garbage is not; graph bugs are code errors that a resumed run re-runs."""
import json
from collections import Counter

import pytest

from convsim.config import config_from_dict
from convsim.providers.models import ChatModel, ModelUnavailable, parse_model_spec
from convsim.providers.retry import RetryPolicy, backoff_wait, infra_fault
from convsim.running.runner import run
from convsim.running.store import RunStore
from fault_server import GARBAGE, serve

# a timeout well above a loaded CI machine's answer time (the faulty-server test counts every timeout
# in its second, fault-free run as a failure), well below the hanging fault's HANG_S
FAST = {"attempts": 2, "initial_wait": 0.01, "max_wait": 0.05, "timeout": 1.0,
        "stop_after_infra_errors": None}  # every session attempted, whatever the faults (no circuit breaker)
HANG_S = 2.5


def _model(url, **policy):
    return ChatModel(spec=parse_model_spec(f"openai:fake@{url}"), role="agent",
                     retry=RetryPolicy(**{**FAST, "attempts": 1, **policy}))


@pytest.mark.parametrize("fault,kind", [("500", "HTTP 500"), ("429", "HTTP 429"), ("hang", "timeout"),
                                        ("nonjson", "unreadable body"), ("nonutf8", "unreadable body")])
def test_each_provider_fault_is_infrastructure(fault, kind):
    with serve(script=[fault], retry_after="0", hang_s=HANG_S) as server:
        m = _model(server.url)
        with pytest.raises(ModelUnavailable) as err:
            m.invoke("hi")
    assert kind in str(err.value)
    assert infra_fault(err.value.__cause__) == kind
    assert [c["ok"] for c in m.calls] == [False]


def test_unreachable_server_is_infrastructure():
    with serve() as server:
        url = server.url
    with pytest.raises(ModelUnavailable, match="unreachable"):
        _model(url).invoke("hi")  # the server is gone: connection refused


def test_a_fault_is_retried_then_the_answer_is_used():
    with serve(script=["500", "nonutf8", "ok"]) as server:
        m = _model(server.url, attempts=3)
        assert "Paris" in m.invoke("hi")
    assert [c["ok"] for c in m.calls] == [False, False, True]
    assert server.served == Counter({"500": 1, "nonutf8": 1, "ok": 1})


def test_retry_after_is_honoured(monkeypatch):
    import convsim.providers.retry as retry_mod
    waits = []
    monkeypatch.setattr(retry_mod.time, "sleep", waits.append)
    with serve(script=["429", "429", "ok"], retry_after="2") as server:
        _model(server.url, attempts=3, initial_wait=0.01, max_retry_after=60).invoke("hi")
    assert waits == [2.0, 2.0]  # the server's Retry-After, not the 0.01 s / 0.02 s backoff


def test_backoff_is_exponential_and_capped():
    class State:
        def __init__(self, n):
            self.attempt_number, self.outcome = n, None
    wait = backoff_wait(RetryPolicy(initial_wait=1, max_wait=5))
    assert [wait(State(n)) for n in (1, 2, 3, 4)] == [1, 2, 4, 5]


def test_garbage_is_not_infrastructure():
    with serve(script=["garbage", "garbage"]) as server:
        m = _model(server.url)
        assert m.invoke("hi") == GARBAGE
        from pydantic import BaseModel

        class Verdict(BaseModel):
            correct: bool
        r = m.structured("judge it", Verdict, retries=0)
    assert not r.ok and r.raw == GARBAGE and r.error


def _records(run_dir):
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def _cfg(tmp_path, spec, **extra):
    return config_from_dict({"graph": "hello_chat", "sessions": 30, "out_dir": str(tmp_path), "run_id": "faulty",
                             "models": {"agent": spec, "judge": spec}, "params": {"judge_retries": 0},
                             "trace": False, "analysis": [], "concurrency": 4, "retry": FAST, **extra})


def test_thirty_sessions_against_a_faulty_server_then_one_restart(tmp_path):
    faults = {"500": 0.08, "429": 0.05, "hang": 0.03, "nonjson": 0.05, "nonutf8": 0.05, "garbage": 0.1}
    with serve(seed=1, faults=faults, retry_after="0", hang_s=HANG_S) as server:
        spec = f"openai:fake@{server.url}"
        port = server.httpd.server_address[1]
        run_dir = run(_cfg(tmp_path, spec), analyze=False)
        first = _records(run_dir)
    assert sum(server.served[f] for f in ("500", "429", "hang", "nonjson", "nonutf8")) > 0
    keys = [(r["variant"], r["session_id"], r["trial"]) for r in first]
    assert len(keys) == len(set(keys)) == 30
    status = Counter(r["status"] for r in first)
    assert status["infra_error"] > 0 and status["code_error"] == 0, status
    infra = {r["session_id"] for r in first if r["status"] == "infra_error"}
    errors = [json.loads(line) for line in (run_dir / "errors.jsonl").read_text().splitlines()]
    assert {e["session_id"] for e in errors} == infra and {e["kind"] for e in errors} == {"infrastructure"}
    summary = json.loads((run_dir / "summary.json").read_text())
    counts = summary["status_counts"]
    assert counts["infra_error"] == status["infra_error"] and counts["errors"] == len(infra)
    assert summary["first_error"]["status"] == "infra_error"
    # never scored: the metric's n counts the scored sessions only
    assert summary["variants"]["default"]["metrics"]["accuracy"]["n"] == status["ok"] + status["agent_failure"]
    # garbage verdicts are kept with their raw text and flag the session (the judge failed, not the agent)
    flagged = [r for r in first if r["status"] == "simulator_failure"]
    assert flagged and all(any(not j["ok"] and j["raw"] == GARBAGE for j in r["judgements"]) for r in flagged)
    # the outage is over (garbage stays: it is the model, not the server): one restart finishes the run
    with serve(port=port, seed=2, faults={"garbage": 0.1}):  # the same address: the same config
        run(_cfg(tmp_path, spec), analyze=False)
    second = _records(run_dir)
    assert sorted((r["variant"], r["session_id"], r["trial"]) for r in second) == sorted(keys)
    assert {r["status"] for r in second} <= {"ok", "agent_failure", "simulator_failure"}
    by_id = {r["session_id"]: r for r in second}
    for r in first:  # finished sessions were kept as they were, failed ones ran again
        if r["status"] != "infra_error":
            assert by_id[r["session_id"]] == r
    assert json.loads((run_dir / "summary.json").read_text())["status_counts"]["errors"] == 0


def test_code_errors_are_re_run_on_resume(tmp_path, monkeypatch):
    from convsim.contract.graphfile import load_graph_module
    module = load_graph_module("hello_chat")
    original, bug, calls = module.agent, {"on": True}, {"n": 0}

    def agent(state, runtime):
        calls["n"] += 1
        if bug["on"] and state["session_id"] in ("s001", "s003"):
            raise KeyError("a bug in graph code")
        return original(state, runtime)
    monkeypatch.setattr(module, "agent", agent)  # build() picks the node function up by name
    cfg = config_from_dict({"graph": "hello_chat", "sessions": 6, "out_dir": str(tmp_path), "run_id": "bug",
                            "trace": False, "analysis": []})
    run_dir = run(cfg, analyze=False)
    first = {r["session_id"]: r["status"] for r in _records(run_dir)}
    assert first == {"s000": "ok", "s001": "code_error", "s002": "ok", "s003": "code_error", "s004": "ok",
                     "s005": "ok"}
    assert RunStore(run_dir).done_keys() == {("default", s, 0) for s in ("s000", "s002", "s004", "s005")}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status_counts"]["code_error"] == 2
    assert "KeyError" in summary["first_error"]["error"]
    bug["on"] = False  # the graph is fixed: resuming re-runs exactly the two failed sessions
    n_before = calls["n"]
    run(cfg, analyze=False)
    assert calls["n"] - n_before == 2 * 3  # two sessions, three agent turns each
    second = _records(run_dir)
    assert sorted(r["session_id"] for r in second) == [f"s00{i}" for i in range(6)]
    assert {r["status"] for r in second} == {"ok"}
    errors = [json.loads(line) for line in (run_dir / "errors.jsonl").read_text().splitlines()]
    assert sorted(e["session_id"] for e in errors) == ["s001", "s003"] and errors[0]["kind"] == "code"


def test_readers_take_the_last_record_per_session(tmp_path):
    store = RunStore(tmp_path)
    lines = [{"variant": "v", "session_id": "a", "status": "code_error"},
             {"variant": "v", "session_id": "b", "status": "ok", "x": 1},
             {"variant": "v", "session_id": "a", "status": "ok", "x": 2},
             {"variant": "v", "session_id": "b", "status": "infra_error"}]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert [(r["session_id"], r["status"]) for r in store.records()] == [("a", "ok"), ("b", "infra_error")]
    assert store.done_keys() == {("v", "a", 0)}
    assert store.compact() == 3  # keeps the last final record of each session only
    assert [json.loads(x)["x"] for x in (tmp_path / "results.jsonl").read_text().splitlines()] == [2]


def test_an_outage_that_graph_code_catches_is_still_infrastructure(tmp_path, monkeypatch):
    # customer_service's agents and group_planning's synthesis caught every exception and fell back
    # to rules: an unreachable server became an agent_failure, or an "ok" session with the rule
    # fallback's perfect scores, and was never re-run
    from convsim.contract.graphfile import load_graph_module
    module = load_graph_module("hello_chat")
    original = module.agent

    def agent(state, runtime):
        try:
            return original(state, runtime)
        except Exception:  # noqa: BLE001 — a graph that swallows everything and answers from rules
            return {"transcript": [{"turn": state["turn"], "speaker": "agent", "text": "Paris.", "meta": {}}]}
    monkeypatch.setattr(module, "agent", agent)
    with serve() as server:
        url = server.url
    cfg = config_from_dict({"graph": "hello_chat", "sessions": 3, "out_dir": str(tmp_path), "run_id": "caught",
                            "models": {"agent": f"openai:fake@{url}"}, "trace": False, "analysis": [],
                            "retry": FAST,  # the server is gone: every call is refused
                            "preflight_models": False})  # (a run of a dead server, not refused up front)
    run_dir = run(cfg, analyze=False)
    first = _records(run_dir)
    assert {r["status"] for r in first} == {"infra_error"}
    assert all("caught by graph code" in r["error"] and "unreachable" in r["error"] for r in first)
    errors = [json.loads(line) for line in (run_dir / "errors.jsonl").read_text().splitlines()]
    assert len(errors) == 3 and {e["kind"] for e in errors} == {"infrastructure"}
    assert "accuracy" not in json.loads((run_dir / "summary.json").read_text())["variants"]["default"]["metrics"]
    with serve(port=int(url.split(":")[-1].split("/")[0])):  # the server is back: resuming re-runs all three
        run(cfg, analyze=False)
    assert {r["status"] for r in _records(run_dir)} == {"ok"}


def test_the_trace_of_a_failed_session_ends_with_what_failed(tmp_path):
    # before, `convsim trace` of an infra_error showed the finished steps only: not the node that
    # failed, its error or its failed calls (those were only in results.jsonl)
    from typer.testing import CliRunner

    from convsim.cli import app
    from convsim.running.session import trace_path
    from convsim.traces.tracing import read_trace
    from convsim.evaluation.reporting.trace_html import trace_timeline_html
    with serve() as server:
        url = server.url
    cfg = config_from_dict({"graph": "hello_chat", "sessions": 1, "out_dir": str(tmp_path), "run_id": "tr",
                            "models": {"agent": f"openai:fake@{url}<b>"}, "analysis": [], "retry": FAST})
    run_dir = run(cfg, analyze=False)
    (record,) = _records(run_dir)
    assert record["status"] == "infra_error"
    trace = read_trace(trace_path(run_dir, "default", "s000", 0))
    failure = trace["failure"]
    assert [s["node"] for s in trace["steps"]] == ["user"] and failure["node"] == "agent"
    assert failure["step"] == 1 and "ModelUnavailable" in failure["error"] and "unreachable" in failure["error"]
    assert len(failure["llm_calls"]) == FAST["attempts"] and not any(c["ok"] for c in failure["llm_calls"])
    out = CliRunner().invoke(app, ["trace", str(run_dir), "s000"], terminal_width=200).output
    assert "failed after step 0 in node agent (2 of 2 model calls failed): ModelUnavailable" in " ".join(out.split())
    page = trace_timeline_html(trace)
    assert 'class="cs-failure"' in page and "<b>" not in page and "&lt;b&gt;" in page  # escaped
