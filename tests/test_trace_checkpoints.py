"""The run's SQLite checkpointer under concurrency: sessions in flight, and two processes on one file."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from convsim import ExperimentConfig, load_graph_module, run

ROOT = Path(__file__).resolve().parents[1]

WRITER = textwrap.dedent("""
    import asyncio, sys
    from contextlib import AsyncExitStack
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from convsim import load_graph_module
    from convsim.running.runner import _checkpointer

    async def main(tag):
        m = load_graph_module("hello_chat")
        params = m.Params(n_turns=6)
        async with AsyncExitStack() as stack:
            saver = await _checkpointer(stack, Path({shared!r}))
            graph = m.build(params).compile(checkpointer=saver)
            async def one(i):
                sid = f"{{tag}}-{{i}}"
                ctx = m.Context(params=params, seed=i, session_id=sid)
                init = {{"session_id": sid, "turn": 0, "transcript": [], "turn_metrics": [],
                        "dialogue_metrics": {{}}, "questions": sorted(m.FACTS)[:6]}}
                await graph.ainvoke(init, {{"configurable": {{"thread_id": sid}}}}, context=ctx)
            await asyncio.gather(*(one(i) for i in range(8)))
    asyncio.run(main(sys.argv[1]))
""")


def test_sessions_in_flight_each_keep_a_full_history(tmp_path):
    cfg = ExperimentConfig(name="c", graph="hello_chat", sessions=6, concurrency=6, checkpoint=True,
                           out_dir=str(tmp_path), run_id="c", analysis=[])
    run_dir = run(cfg, analyze=False)
    from langgraph.checkpoint.sqlite import SqliteSaver
    m = load_graph_module("hello_chat")
    records = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(records) == 6
    with SqliteSaver.from_conn_string(str(run_dir / "checkpoints.sqlite")) as saver:
        graph = m.build(m.Params()).compile(checkpointer=saver)
        for rec in records:
            snap = graph.get_state({"configurable": {"thread_id": f"default/{rec['session_id']}/t0"}})
            assert snap.next == () and snap.values["transcript"] == rec["transcript"]
        mode = saver.conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


@pytest.mark.slow
def test_two_processes_write_one_checkpoint_file(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    script = WRITER.format(root=str(ROOT), shared=str(shared))
    procs = [subprocess.Popen([sys.executable, "-c", script, tag], stderr=subprocess.PIPE, text=True)
             for tag in ("a", "b")]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
    from langgraph.checkpoint.sqlite import SqliteSaver
    m = load_graph_module("hello_chat")
    with SqliteSaver.from_conn_string(str(shared / "checkpoints.sqlite")) as saver:
        graph = m.build(m.Params(n_turns=6)).compile(checkpointer=saver)
        for tag in ("a", "b"):
            for i in range(8):
                snap = graph.get_state({"configurable": {"thread_id": f"{tag}-{i}"}})
                assert snap.next == () and len(snap.values["transcript"]) == 12
                assert snap.values["dialogue_metrics"]["turns"] == 6
