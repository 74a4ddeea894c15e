"""Provider limits (calls in flight, requests per minute) and the run budget, against a real HTTP server."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import convsim
from convsim.providers.limits import BudgetReached, Limits
from convsim.running.store import RunStore
from convsim.providers.usage import usage_table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from latency_server import LatencyServer  # noqa: E402


def config(tmp_path, server, **over):
    cfg = {"name": "lim", "graph": "hello_chat", "sessions": 4, "seed": 1, "analysis": [],
           "out_dir": str(tmp_path / "runs"), "params": {"n_turns": 3}, "concurrency": 8,
           "models": {"agent": f"openai:fake@{server.base_url}"}}
    cfg.update(over)
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture
def server():
    with LatencyServer(latency_s=0.05) as srv:
        yield srv


def test_max_in_flight_caps_calls_at_the_server(tmp_path, server):
    convsim.run(config(tmp_path, server), run_id="free", analyze=False)
    free = server.max_in_flight
    server.reset()
    convsim.run(config(tmp_path, server, limits={"max_in_flight": 2}), run_id="capped", analyze=False)
    assert server.requests == 12
    assert server.max_in_flight <= 2 < free  # 8 sessions in flight reach the server unless capped


def test_rpm_spaces_call_starts(tmp_path, server, monkeypatch):
    import threading
    from convsim.providers import limits
    # the schedule, not wall time: with the clock frozen at 0, each of 6 threads asking at once is
    # told to wait one more interval (600/min = 100 ms) than the one before it
    waits = []
    pacer = limits._Pacer(600, clock=lambda: 0.0, sleep=waits.append)
    threads = [threading.Thread(target=pacer.wait_turn) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(waits) == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])  # the first starts at once
    # and through a run: every call of it goes through the run's pacer
    turns = []
    real = limits._Pacer.wait_turn
    monkeypatch.setattr(limits._Pacer, "wait_turn", lambda self: (turns.append(self.interval), real(self)))
    convsim.run(config(tmp_path, server, sessions=2, limits={"rpm": 600}), run_id="paced", analyze=False)
    assert server.requests == 6 and turns == [0.1] * 6


def test_call_budget_stops_cleanly_and_resumes(tmp_path, server):
    cfg = config(tmp_path, server, concurrency=1)
    # 3 calls per session: session 1 spends 3, session 2 gets 2 and is cut at its 3rd call
    with pytest.raises(BudgetReached, match="max_calls=5"):
        _run_with(cfg, max_calls=5)
    run_dir = tmp_path / "runs" / "b"
    recs = RunStore(run_dir).records()  # the cut session is kept as infra_error (never scored, re-run)
    assert sorted(r["status"] for r in recs) == ["infra_error", "ok"]
    errors = [json.loads(line) for line in (run_dir / "errors.jsonl").read_text().splitlines()]
    assert len(errors) == 1 and "run budget" in errors[0]["error"]
    assert server.requests == 5  # the refused call never reached the server
    full = convsim.run(cfg, run_id="b", analyze=False)  # resume without a budget: the 3 others run
    assert len(RunStore(full).records()) == 4
    ref = convsim.run(cfg, run_id="ref", analyze=False)
    strip = lambda r: {k: v for k, v in r.items() if k not in ("run_id", "elapsed_s", "llm_calls")}  # noqa: E731
    key = lambda r: r["session_id"]  # noqa: E731
    assert [strip(r) for r in sorted(RunStore(full).records(), key=key)] == \
        [strip(r) for r in sorted(RunStore(ref).records(), key=key)]


def _run_with(cfg_path, **limits):
    from convsim.config import load_config
    from convsim.providers.limits import with_limits
    return convsim.run(with_limits(load_config(cfg_path), **limits), run_id="b", analyze=False)


def test_token_budget(tmp_path, server):
    # the server reports 10 + 5 tokens a call: after 3 calls (45 >= 40) the next call is refused
    cfg = config(tmp_path, server, concurrency=1, limits={"max_tokens": 40})
    with pytest.raises(BudgetReached, match=r"max_tokens=40 reached; this attempt: 3 calls, 45 tokens"):
        convsim.run(cfg, run_id="t", analyze=False)
    statuses = sorted(r["status"] for r in RunStore(tmp_path / "runs" / "t").records())
    assert statuses == ["infra_error", "ok"] and server.requests == 3


def test_cli_exit_code_3_and_usage_table(tmp_path, server):
    cfg = config(tmp_path, server, concurrency=1)
    cmd = [sys.executable, "-m", "convsim", "run", str(cfg), "--run-id", "c", "--no-analysis", "--max-calls", "4"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 3, done.stderr
    assert "run budget reached" in done.stderr and "1 sessions kept" in done.stderr
    done = subprocess.run(cmd[:-2], cwd=ROOT, capture_output=True, text=True)  # resume, no budget
    assert done.returncode == 0, done.stderr
    assert "model usage" in done.stdout
    usage = json.loads((tmp_path / "runs" / "c" / "summary.json").read_text())["usage"]["default"]
    assert usage["sessions"] == 4 and usage["calls"] == 12
    assert usage["prompt_tokens"] == 120 and usage["completion_tokens"] == 60


def test_usage_table_hand_computed():
    def call(lat, pt, ct, hit=False, ok=True):
        return {"latency_s": lat, "prompt_tokens": pt, "completion_tokens": ct, "cache_hit": hit, "ok": ok}
    recs = [{"llm_calls": [call(1.0, 10, 2), call(3.0, 20, 4)]},
            {"llm_calls": [call(2.0, 5, 1), call(0.001, 7, 3, hit=True), call(5.0, None, None, ok=False)]}]
    u = usage_table(recs)
    assert u["calls"] == 5 and u["cache_hits"] == 1 and u["failed_calls"] == 1
    assert u["prompt_tokens"] == 42 and u["completion_tokens"] == 10
    # served latencies sorted: 1, 2, 3, 5 -> mean 2.75, median 2.5, p95 = 3 + 0.85 * 2 = 4.7
    assert u["latency_s_mean"] == 2.75 and u["latency_s_p50"] == 2.5 and u["latency_s_p95"] == pytest.approx(4.7)
    assert u["tokens_per_session"] == 26.0 and u["calls_per_session"] == 2.5 and u["tokens"] == 52
    # a server that reports a total alone: counted in tokens (not in prompt/completion), not "without usage"
    u = usage_table([{"llm_calls": [{**call(1.0, None, None), "total_tokens": 8}, call(1.0, None, None)]}])
    assert u["tokens"] == 8 and u["prompt_tokens"] == 0 and u["calls_without_usage"] == 1


@pytest.mark.slow
def test_worker_processes_share_the_runs_limits_not_a_part_of_them(tmp_path):
    """Two worker processes ask the run's one RunLimits (served by a manager process): max_in_flight 3
    holds across them (a share each, rounded up, allowed 4), rpm paces the run's calls one after
    another (each worker's own pacer let both start at once), and the call budget is used to its
    last call whichever worker makes it (a share each stopped the run when one share was spent)."""
    common = dict(executor="process", workers=2, concurrency=8, sessions=8)
    with LatencyServer(latency_s=0.1) as server:
        convsim.run(config(tmp_path, server, **common, limits={"max_in_flight": 3}), run_id="cap", analyze=False)
        assert server.requests == 24 and server.max_in_flight == 3
    with LatencyServer(latency_s=0.01) as server:
        convsim.run(config(tmp_path, server, **common | {"sessions": 2}, limits={"rpm": 300}), run_id="rpm",
                    analyze=False)
        gaps = [b - a for a, b in zip(server.starts, server.starts[1:])]
        assert len(server.starts) == 6 and min(gaps) > 0.1  # 300 a minute: one start every 0.2 s
    with LatencyServer(latency_s=0.02) as server:
        with pytest.raises(BudgetReached, match=r"run budget reached \(max_calls=11 reached; this attempt: 11 calls"):
            convsim.run(config(tmp_path, server, **common, limits={"max_calls": 11}), run_id="b", analyze=False)
        assert server.requests == 11  # every call of the budget, none over
        summary = json.loads((tmp_path / "runs" / "b" / "summary.json").read_text())["budget"]
        assert summary["calls"] == 11 and summary["stopped"] == "max_calls=11 reached"


def test_a_client_asks_the_runs_limits_and_an_unreachable_broker_is_an_infra_fault():
    from types import SimpleNamespace
    from convsim.providers import limits
    from convsim.providers.models import ModelUnavailable
    spec = SimpleNamespace(base_url="http://h/v1", provider="openai", model="m", completion_limit=20)
    run = limits.RunLimits(Limits(max_calls=2, max_tokens=1000, max_in_flight=1))
    client = limits.LimitsClient(run.limits, run)  # the broker answered in this process
    answer = SimpleNamespace(usage_metadata={"input_tokens": 7, "output_tokens": 3})
    with client.call(spec, [("user", "hi")]) as charge:
        assert run.in_flight == 1 and run._slots["http://h/v1"]._value == 0 and run.reserved > 0
        charge(answer)
    assert (run.calls, run.tokens, run.reserved, run.in_flight) == (1, 10, 0, 0)
    assert run._slots["http://h/v1"]._value == 1  # the slot came back
    with client.call(spec):
        pass
    with pytest.raises(limits.BudgetExhausted, match="run budget: max_calls=2 reached"):
        with client.call(spec):
            pass

    class Gone:
        def enter(self, *args):
            raise ConnectionRefusedError("no manager")
    with pytest.raises(ModelUnavailable, match="limits are unreachable .*no manager"):
        with limits.LimitsClient(run.limits, Gone()).call(spec):
            pass


FALLBACK = str(ROOT / "tests" / "data" / "graphs" / "fallback_chat.py")


@pytest.mark.parametrize("executor", ["async", "process"])
def test_a_budget_cut_caught_by_graph_code_is_never_scored(tmp_path, server, executor):
    # before, the refused call's exception was not noted: a graph that caught it and answered from
    # rules ended "ok", scored with the fallback's answers; with process workers the driver never
    # heard of the spent budget and the run exited 0
    cfg = config(tmp_path, server, graph=FALLBACK, sessions=3, concurrency=1, executor=executor, workers=1)
    with pytest.raises(BudgetReached, match="max_calls=4"):
        _run_with(cfg, max_calls=4)
    recs = sorted(RunStore(tmp_path / "runs" / "b").records(), key=lambda r: r["session_id"])
    assert [r["status"] for r in recs][:2] == ["ok", "infra_error"]
    assert all(r["status"] == "infra_error" for r in recs[1:])
    assert "caught by graph code" in recs[1]["error"] and "run budget: max_calls=4" in recs[1]["error"]
    assert server.requests == 4


def test_a_checkpointed_session_cut_by_the_budget_starts_over_on_resume(tmp_path, server):
    # before, the re-run continued the cut attempt's checkpointer thread: its transcript held the cut
    # attempt's turns, then the new ones, and the session was scored on that
    cfg = config(tmp_path, server, concurrency=1, checkpoint=True)
    with pytest.raises(BudgetReached):
        _run_with(cfg, max_calls=5)
    full = convsim.run(cfg, run_id="b", analyze=False)
    ref = convsim.run(cfg, run_id="ref", analyze=False)
    strip = lambda r: {k: v for k, v in r.items() if k not in ("run_id", "elapsed_s", "llm_calls")}  # noqa: E731
    key = lambda r: r["session_id"]  # noqa: E731
    resumed, clean = sorted(RunStore(full).records(), key=key), sorted(RunStore(ref).records(), key=key)
    assert [len(r["transcript"]) for r in resumed] == [6] * 4
    assert [strip(r) for r in resumed] == [strip(r) for r in clean]


def test_tokens_of_answers_cut_at_max_tokens_count_against_the_budget(tmp_path, server):
    # the judge's JSON answers stop at the model's max_tokens (finish_reason "length"): served,
    # 15 tokens each, but they were never charged and the run went past its token budget
    server.finish_reason = "length"
    cfg = config(tmp_path, server, concurrency=1, sessions=2, limits={"max_tokens": 40},
                 models={"agent": "none", "judge": f"openai:fake@{server.base_url}"})
    with pytest.raises(BudgetReached, match="max_tokens=40 reached; this attempt: 3 calls, 45 tokens"):
        convsim.run(cfg, run_id="cut", analyze=False)
    assert server.requests == 3


def test_a_token_budget_stops_when_the_server_reports_no_usage(tmp_path, server):
    # before, missing usage counted as 0 tokens: the budget was silently never reached
    server.usage = None
    cfg = config(tmp_path, server, concurrency=1, limits={"max_tokens": 40})
    with pytest.raises(BudgetReached, match="max_tokens=40 cannot be kept: .* answered without token usage"):
        convsim.run(cfg, run_id="nu", analyze=False)
    assert server.requests == 1
    usage = json.loads((tmp_path / "runs" / "nu" / "summary.json").read_text())["usage"]["default"]
    assert usage["calls"] == 1 and usage["calls_without_usage"] == 1 and usage["prompt_tokens"] == 0


def test_the_report_has_the_usage_table(tmp_path, server):
    from convsim.evaluation.reporting.report import build_report
    run_dir = convsim.run(config(tmp_path, server, sessions=2, variants=[{"name": "<i>v&w"}]),
                          run_id="rep", analyze=False)
    html = build_report(run_dir).read_text()
    table = html[html.index('<table id="usage-table">'):]
    table = table[:table.index("</table>")]
    cells = [c.rsplit("<td", 1)[1].split(">", 1)[1] for c in table.split("</td>")[:-1]]
    assert cells[:9] == ["&lt;i&gt;v&amp;w", "2", "6", "0", "0", "60", "30", "90", "0"]  # calls, tokens by hand
    assert "<i>v&w" not in html


def test_rpm_must_be_finite():
    from pydantic import ValidationError
    with pytest.raises(ValidationError):
        Limits(rpm=float("inf"))


@pytest.mark.parametrize("usage, stop", [({"total_tokens": 500}, "max_tokens=100 reached; this attempt: 1 calls, 500 tokens"),
                                         ({}, "max_tokens=100 cannot be kept")])
def test_a_partial_or_empty_usage_is_never_taken_for_zero_tokens(tmp_path, server, usage, stop):
    # before, missing counts became 0: a server reporting only total_tokens, or an empty usage,
    # spent nothing of the budget and the run never stopped
    server.usage = usage
    cfg = config(tmp_path, server, concurrency=1, limits={"max_tokens": 100})
    with pytest.raises(BudgetReached, match=stop):
        convsim.run(cfg, run_id="p", analyze=False)
    assert server.requests == 1


def test_a_total_only_usage_is_counted_in_the_record_and_the_usage_table(tmp_path, server):
    # before, a call record kept prompt and completion tokens only: a server reporting a total alone
    # showed 0 tokens in the stop line and the usage table (and counted as "without usage")
    from convsim.providers.usage import printed_columns, usage_rows
    server.usage = {"total_tokens": 9}
    run_dir = convsim.run(config(tmp_path, server, sessions=2), run_id="tot", analyze=False)
    records = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    calls = [c for r in records for c in r["llm_calls"]]
    assert calls and all(c["total_tokens"] == 9 and c["prompt_tokens"] is None for c in calls)
    usage = json.loads((run_dir / "summary.json").read_text())["usage"]
    u = usage["default"]
    assert u["tokens"] == 9 * u["calls"] and u["prompt_tokens"] == 0 and u["calls_without_usage"] == 0
    assert u["tokens_per_session"] == 9 * u["calls"] / 2
    columns = printed_columns(usage)
    assert [k for k, _ in columns].count("tokens") == 1 and "calls_without_usage" not in dict(columns)
    row = usage_rows(usage, columns)[0]
    assert row[1 + [k for k, _ in columns].index("tokens")] == str(9 * u["calls"])
    server.usage = {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}  # the usual case
    run_dir = convsim.run(config(tmp_path, server, sessions=2), run_id="both", analyze=False)
    usage = json.loads((run_dir / "summary.json").read_text())["usage"]
    assert usage["default"]["tokens"] == 9 * usage["default"]["calls"]
    assert "tokens" not in dict(printed_columns(usage))  # prompt + completion already say it


def test_unknown_counts_stay_unknown():
    from convsim.providers.openai_client import _usage
    assert _usage({}) is None and _usage(None) is None
    assert _usage({"total_tokens": 7}) == {"input_tokens": None, "output_tokens": None, "total_tokens": 7}
    assert _usage({"prompt_tokens": 3, "completion_tokens": 0}) == \
        {"input_tokens": 3, "output_tokens": 0, "total_tokens": 3}


def _spent_tokens(run_dir) -> int:
    from convsim.providers.usage import call_tokens
    return sum(call_tokens(c) for r in RunStore(run_dir).records() for c in r["llm_calls"] if not c.get("cache_hit"))


@pytest.mark.parametrize("executor", ["async", "process"])
def test_a_token_budget_is_a_hard_bound_with_many_calls_in_flight(tmp_path, monkeypatch, executor):
    # before, max_tokens was checked against the answers already in: the 16 calls in flight when it
    # was reached all went through, and the run spent up to 16 answers more than its budget
    from doubles import SlowBackend
    from convsim.providers import models
    backend = SlowBackend(max_tokens=30)
    monkeypatch.setattr(models, "_backend", lambda spec, timeout=120.0: backend)
    cfg = {"name": "hard", "graph": "hello_chat", "sessions": 80, "seed": 3, "analysis": [],
           "out_dir": str(tmp_path / "runs"), "params": {"n_turns": 3}, "concurrency": 16,
           "models": {"agent": {"spec": "openai:fake@http://127.0.0.1:9/v1", "max_tokens": 30}}}
    if executor == "process":  # workers cannot see the patched backend: 2 shares of a real server's budget
        return _hard_bound_across_workers(tmp_path, cfg)
    with pytest.raises(BudgetReached, match="max_tokens=5000 reached"):
        convsim.run(cfg | {"limits": {"max_tokens": 5000}}, run_id="b", analyze=False)
    run_dir = tmp_path / "runs" / "b"
    assert backend.most_in_flight >= 8  # the budget was met with many calls in flight
    spent = _spent_tokens(run_dir)
    budget = json.loads((run_dir / "summary.json").read_text())["budget"]
    # a hard bound, and the budget was used: the run stops when the next call's bound (its prompt's
    # bytes + 80 + 30 tokens, ~170) does not fit with nothing in flight
    assert 5000 - 200 < spent <= 5000
    assert budget["tokens"] == spent and budget["over_tokens"] == 0 and budget["max_tokens"] == 5000
    assert budget["stopped"].startswith("max_tokens=5000 reached")
    cut = [r for r in RunStore(run_dir).records() if r["status"] != "ok"]
    assert cut and all(r["status"] == "infra_error" and "run budget: max_tokens=5000" in r["error"] for r in cut)
    done = convsim.run(cfg, run_id="b", analyze=False)  # resume without a budget: the run finishes
    recs = RunStore(done).records()
    assert len(recs) == 80 and all(r["status"] == "ok" for r in recs)
    assert "budget" not in json.loads((done / "summary.json").read_text())


def _hard_bound_across_workers(tmp_path, cfg):
    with LatencyServer(latency_s=0.02) as server:  # 10 + 5 tokens a call, answers bound at 5
        cfg = cfg | {"executor": "process", "workers": 2, "sessions": 24,
                     "models": {"agent": {"spec": f"openai:fake@{server.base_url}", "max_tokens": 5}}}
        with pytest.raises(BudgetReached, match=r"max_tokens=601 reached"):
            convsim.run(cfg | {"limits": {"max_tokens": 601}}, run_id="w", analyze=False)
        # one budget for both workers, used to its end: spent + the next call's bound (~100) > 601
        budget = json.loads((tmp_path / "runs" / "w" / "summary.json").read_text())["budget"]
        assert 601 - 150 < server.requests * 15 <= 601 == budget["max_tokens"]
        assert budget["tokens"] == server.requests * 15 and budget["over_tokens"] == 0
        done = convsim.run(cfg, run_id="w", analyze=False)
        assert len(RunStore(done).records()) == 24 and all(r["status"] == "ok" for r in RunStore(done).records())


def test_an_unbounded_call_can_go_over_and_summary_json_says_by_how_much(tmp_path, monkeypatch):
    # a call with no max_tokens is admitted while spent + reserved is below the budget: its answer can
    # go past it, and the attempt's overshoot is reported (summary.json and a run warning)
    from doubles import SlowBackend
    from convsim.providers import models
    backend = SlowBackend(max_tokens=30)
    monkeypatch.setattr(models, "_backend", lambda spec, timeout=120.0: backend)
    cfg = {"name": "over", "graph": "hello_chat", "sessions": 4, "seed": 3, "analysis": [],
           "out_dir": str(tmp_path / "runs"), "params": {"n_turns": 3}, "concurrency": 1,
           "models": {"agent": "openai:fake@http://127.0.0.1:9/v1"}, "limits": {"max_tokens": 100}}
    with pytest.raises(BudgetReached, match=r"max_tokens=100 reached; this attempt"):
        convsim.run(cfg, run_id="o", analyze=False)
    summary = json.loads((tmp_path / "runs" / "o" / "summary.json").read_text())
    spent = _spent_tokens(tmp_path / "runs" / "o")
    assert spent > 100 and summary["budget"]["over_tokens"] == spent - 100
    assert any(f"went {spent - 100} tokens over max_tokens=100" in w for w in summary["run_warnings"])
    from convsim.api import report
    report(tmp_path / "runs" / "o")  # a rebuilt summary keeps what the run wrote of its budget
    assert json.loads((tmp_path / "runs" / "o" / "summary.json").read_text())["budget"] == summary["budget"]


def test_a_call_that_does_not_fit_waits_for_the_calls_in_flight():
    # a call whose bound fits only once a call in flight has returned its unspent reservation waits
    # for it instead of stopping the run early; with nothing in flight, a call that does not fit is refused
    import threading
    from types import SimpleNamespace
    from convsim.providers.limits import BudgetExhausted, RunLimits, prompt_bound
    spec = SimpleNamespace(base_url="http://x", provider="openai", model="m", completion_limit=10)
    bound = prompt_bound([]) + 10
    run = RunLimits(Limits(max_tokens=2 * bound + 2))
    first, second = run.call(spec), run.call(spec)
    first.__enter__()
    second.__enter__()  # two reservations fill the budget
    third = []
    waiting = threading.Thread(target=lambda: third.append(run.call(spec)) or third[0].__enter__())
    waiting.start()
    waiting.join(0.2)
    assert waiting.is_alive() and run.in_flight == 2  # waiting for room, not refused
    run.charge(SimpleNamespace(usage_metadata={"input_tokens": 1, "output_tokens": 1}))
    first.__exit__(None, None, None)  # spent 2 of its bound: the rest is returned, and the third fits
    waiting.join(5)
    assert not waiting.is_alive() and run.in_flight == 2 and run.exhausted is None
    second.__exit__(None, None, None)
    third[0].__exit__(None, None, None)
    assert run.reserved == 0 and run.calls == 3
    with pytest.raises(BudgetExhausted, match=r"max_tokens=\d+ reached: \d+ tokens left, a call may take up to"):
        with run.call(SimpleNamespace(**{**vars(spec), "completion_limit": 2 * bound})):
            pass
    assert run.exhausted is not None and run.in_flight == 0
