"""An OpenAI-compatible /v1/chat/completions endpoint that IS the agent (``--agent ROLE=openai:
<model>@<base_url>``), through the command line on real runs: it answers through the run's
provider client (calls recorded, retried), a garbage answer is the agent's failure with its raw
text, and an endpoint killed mid-run is infrastructure: logged, never scored, re-run on resume."""
import json
import textwrap
import threading

from cli_helpers import cli
from fault_server import serve

FACTS = {"capital of france": "Paris", "boiling point of water": "100 degrees Celsius",
         "author of hamlet": "William Shakespeare", "largest planet": "Jupiter",
         "speed of light": "299,792 kilometres per second", "chemical symbol for gold": "Au"}
FAST = {"attempts": 2, "initial_wait": 0.01, "max_wait": 0.05, "timeout": 5.0}


def answer(request: dict) -> str:
    """The endpoint's agent: answers the last user question (it sees the whole conversation)."""
    question = [m["content"] for m in request["messages"] if m["role"] == "user"][-1].lower()
    topic = next((t for t in FACTS if t in question), None)
    return f"The {topic} is {FACTS[topic]}." if topic else "I do not know."


def _records(run_dir):
    return [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]


def _config(tmp_path, url, sessions=3):
    path = tmp_path / "endpoint.yaml"
    path.write_text(textwrap.dedent(f"""
        name: endpoint
        graph: hello_chat
        sessions: {sessions}
        concurrency: 1
        trace: false
        retry: {json.dumps(FAST)}
        agents: {{agent: "openai:my-agent@{url}"}}
    """))
    return path


def test_an_openai_compatible_endpoint_is_the_agent(tmp_path):
    with serve(answer=answer) as server:
        code, out, exc = cli("run", _config(tmp_path, server.url), "--out", tmp_path / "runs", "--run-id", "ep",
                             "-q", "--no-analysis")
        assert code == 0, (out, exc)
        served = server.served["ok"]
    recs = _records(tmp_path / "runs" / "ep")
    assert {r["status"] for r in recs} == {"ok"} and len(recs) == 3
    assert all(r["dialogue_metrics"]["accuracy"] == 1.0 for r in recs)
    assert recs[0]["agents"] == {"agent": f"openai:my-agent@{server.url}"}
    calls = [c for r in recs for c in r["llm_calls"]]
    assert len(calls) == served == 9 and {c["role"] for c in calls} == {"agent:agent"}
    assert all(c["ok"] and c["total_tokens"] == 10 and c["node"] == "agent" for c in calls)


def test_a_garbage_answer_from_the_endpoint_is_an_agent_failure_with_its_raw_text(tmp_path):
    with serve(answer=lambda request: "\x07\x07 beep") as server:
        code, out, exc = cli("run", _config(tmp_path, server.url), "--out", tmp_path / "runs", "--run-id", "bad",
                             "-q", "--no-analysis")
    recs = _records(tmp_path / "runs" / "bad")
    assert {r["status"] for r in recs} == {"agent_failure"}
    assert all("control characters" in r["error"] and "\\u0007\\u0007 beep" in r["error"] for r in recs)
    assert not (tmp_path / "runs" / "bad" / "errors.jsonl").exists()


def test_the_endpoint_killed_mid_run_then_resumed_runs_every_session_once(tmp_path):
    config, sessions = None, 6
    answered = []

    with serve(answer=answer) as server:
        port = server.httpd.server_address[1]
        config = _config(tmp_path, server.url, sessions=sessions)

        def killing_answer(request):
            answered.append(1)
            if len(answered) == 7:  # the third session's first turn: the endpoint goes down after it
                threading.Thread(target=lambda: (server.httpd.shutdown(), server.httpd.server_close())).start()
            return answer(request)
        server.answer = killing_answer
        code, out, exc = cli("run", config, "--out", tmp_path / "runs", "--run-id", "killed", "-q", "--no-analysis")
    assert code == 3, (out, exc)  # sessions ended in infra_error
    run_dir = tmp_path / "runs" / "killed"
    first = _records(run_dir)
    status = {r["session_id"]: r["status"] for r in first}
    assert list(status.values()).count("ok") == 2 and set(status.values()) == {"ok", "infra_error"}, status
    errors = [json.loads(x) for x in (run_dir / "errors.jsonl").read_text().splitlines()]
    down = {s for s, st in status.items() if st == "infra_error"}
    assert {e["session_id"] for e in errors} == down and {e["kind"] for e in errors} == {"infrastructure"}
    assert all("ModelUnavailable" in e["error"] and "unreachable" in e["error"] for e in errors)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["variants"]["default"]["metrics"]["accuracy"]["n"] == 2  # never scored
    with serve(port=port, answer=answer):  # the endpoint is back on the same address: resume
        code, out, exc = cli("run", config, "--out", tmp_path / "runs", "--run-id", "killed", "-q",
                             "--no-analysis")
    assert code == 0, (out, exc)
    second = _records(run_dir)
    ids = [r["session_id"] for r in second]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == sessions  # every session once
    assert {r["status"] for r in second} == {"ok"}
    kept = {r["session_id"]: r for r in first if r["status"] == "ok"}
    assert all(r == kept[r["session_id"]] for r in second if r["session_id"] in kept)  # finished ones kept
