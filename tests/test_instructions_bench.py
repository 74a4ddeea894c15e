"""bench/instructions.py's arms run the very same sessions: the plain loop, LangGraph's bare stream
and the runner's session reach the same final states (else the instruction ratios compare different work)."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import instructions  # noqa: E402


def test_every_arm_streams_the_same_sessions_to_the_same_end(tmp_path):
    arms = instructions.arms(2, 4, str(tmp_path))
    loop, stream = arms["loop"](), arms["bare stream"]()
    assert len(loop) == len(stream) == 2
    records = {name: arms[name]() for name in ("session, trace off", "session + trace", "session + trace file")}
    for name, recs in records.items():
        assert [r["status"] for r in recs] == ["ok", "ok"], name
    for i in range(2):
        for key in ("session_id", "transcript", "turn_metrics", "dialogue_metrics"):
            assert loop[i][key] == stream[i][key], key
            for name, recs in records.items():
                assert recs[i][key] == stream[i][key], (name, key)
    assert len(loop[0]["transcript"]) == 8  # 4 turns, user and system
    traces = list((tmp_path / "ir-True" / "traces").rglob("*.jsonl"))
    assert len(traces) == 2  # only the last arm writes trace files


def test_totals_reads_a_callgrind_dump(tmp_path):
    dump = tmp_path / "cg.out.1"
    dump.write_text("# callgrind format\nversion: 1\ncmd: python\npart: 2\ndesc: Trigger: --dump-after=_operator_call\n"
                    "events: Ir\nsummary: 123456\nfn=x\n1 5\n")
    assert instructions.totals(dump) == (f"--dump-after={instructions.REGION}", 123456)
    (tmp_path / "bad").write_text("events: Ir\n")
    try:
        instructions.totals(tmp_path / "bad")
    except ValueError as exc:
        assert "no summary line" in str(exc)
    else:
        raise AssertionError("a dump without a count must not read as one")


def test_the_whole_run_arms_are_bench_overheads_and_run():
    arms = instructions.run_arms(1, 2)
    assert list(arms) == ["run: loop", "run: bare stream", "run: runner", "run: runner+trace"]
    for run in arms.values():
        run()  # each a whole run of the one session, in its own run directory (an error fails the test)
