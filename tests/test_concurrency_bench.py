"""bench/concurrency.py's one-process ceiling streams the very sessions the bench runs through the runner."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import concurrency  # noqa: E402
from latency_server import LatencyServer  # noqa: E402


def test_the_ceiling_streams_the_runners_sessions_with_its_model_calls(tmp_path):
    with LatencyServer(0.0) as server:
        spec = f"openai:fake@{server.base_url}"
        run, units = concurrency.bare_sessions(spec, 3, str(tmp_path / "bare"), 4)
        finals = run(units)
        assert server.requests == 4 * 3  # the agent's calls reached the server, one per turn
        server.reset()
        concurrency.convsim_rate(spec, 3, 2, 4, str(tmp_path / "runner"))
        assert server.requests == 4 * 3
    from convsim.running.store import RunStore
    runs = [d for d in (tmp_path / "runner").iterdir() if d.is_dir()]
    records = {r["session_id"]: r for r in RunStore(runs[0]).records()}
    assert [f["session_id"] for f in finals] == sorted(records)
    for final in finals:
        record = records[final["session_id"]]
        for key in ("transcript", "turn_metrics", "dialogue_metrics", "questions"):
            assert final[key] == record[key], key
    # and the CPU it reports is this thread's, per session
    user, system = concurrency.one_process_ceiling("none", 2, str(tmp_path / "none"), sessions=5)
    assert 0 < user < 1 and 0 <= system < 1


def test_the_bare_stream_in_threads_runs_every_session_once_per_thread_share(tmp_path):
    with LatencyServer(0.0) as server:
        spec = f"openai:fake@{server.base_url}"
        rate, cpu_per_call, user_per_session = concurrency.bare_stream_rate(spec, 3, 2, 6, str(tmp_path))
        assert server.requests == 6 * 3  # every session's calls, none twice
    assert rate > 0 and cpu_per_call > 0 and 0 < user_per_session < 1000
