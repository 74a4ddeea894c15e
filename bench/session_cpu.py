"""Where one session's CPU goes in the asyncio runner: the same hello_chat sessions (2 turns; the agent
slot filled by an OpenAI-compatible endpoint, bench/latency_server.py answering at once) run layer
by layer, one at a time on this thread, the layers interleaved session by session, CPU per
session (``time.thread_time``; the fastest of ``--repeats``):

1. ``stream(values)``: the compiled graph's bare ``stream`` (LangGraph, the nodes, the agent's HTTP calls);
2. ``+ updates, tasks``: with the stream modes a traced session asks for;
3. ``+ trace recorder``: the session's handling of each chunk (convsim.running.session._Session.handle);
4. ``+ record``: ``run_session_blocking`` (the outcome: record, checks, the trace rendered);
5. ``+ trace file``: and the trace written (one file per session);
6. ``runner``: ``convsim.api.run`` of those sessions (planning, preflight, landing, results.jsonl,
   summary), with its worker-thread hop made inline so that its CPU is this thread's too.

The differences are what each layer costs. On a machine shared with other jobs the figures move
with its load: read the rows against each other, and the load average printed beside them.

Usage: python bench/session_cpu.py [--sessions 100] [--repeats 3]
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from latency_server import LatencyServerProcess  # noqa: E402


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "-"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    from convsim import api
    from convsim.config import config_from_dict
    from convsim.running import runner
    from convsim.running.plan import plan_run
    from convsim.running.session import _Session, all_sync, run_session_blocking
    n = args.sessions
    with LatencyServerProcess(0.0, idle_s=120) as url, tempfile.TemporaryDirectory() as tmp:
        base = {"graph": "hello_chat", "out_dir": tmp, "params": {"n_turns": 2}, "analysis": [],
                "agents": {"agent": f"openai:fake@{url}"}, "sessions": n, "concurrency": 1}
        plan = plan_run(config_from_dict({**base, "run_id": "layers"}), source="bench")
        for vp in plan.variants.values():
            vp.compiled = plan.module.build(vp.params).compile()
            vp.sync_nodes = all_sync(vp.compiled)
        units = list(plan.iter_units())

        def bare(modes):
            def go(unit):
                s = _Session(plan, unit, lambda event: None)
                for _ in s.vp.compiled.stream(s.input, s.config, context=s.ctx, stream_mode=modes):
                    pass
            return go

        def recorded(unit):
            s = _Session(plan, unit, lambda event: None)
            for mode, chunk in s.vp.compiled.stream(s.input, s.config, context=s.ctx, stream_mode=s.modes):
                s.handle(mode, chunk)

        def session(unit):
            run_session_blocking(plan, unit, lambda event: None)

        def with_file(unit):
            runner.write_trace(run_session_blocking(plan, unit, lambda event: None), plan.run_dir)

        layers = {"stream(values)": bare(["values"]), "+ updates, tasks": bare(["values", "updates", "tasks"]),
                  "+ trace recorder": recorded, "+ record": session, "+ trace file": with_file}
        best: dict[str, float] = {}
        for fn in layers.values():  # warm
            fn(units[0])

        async def inline(fn, *a, **kw):  # the runner's hop to a worker thread, made on this thread
            return fn(*a, **kw)
        for r in range(args.repeats):
            spent = dict.fromkeys(layers, 0.0)
            gc.collect()
            for unit in units:  # the layers interleaved session by session: load and garbage weigh alike
                for name, fn in layers.items():
                    start = time.thread_time()
                    fn(unit)
                    spent[name] += time.thread_time() - start
            for name, total in spent.items():
                best[name] = min(best.get(name, float("inf")), total / n)
            real, asyncio.to_thread = asyncio.to_thread, inline
            try:
                start = time.thread_time()
                api.run({**base, "run_id": f"runner-{r}"}, analyze=False)
                best["runner"] = min(best.get("runner", float("inf")), (time.thread_time() - start) / n)
            finally:
                asyncio.to_thread = real
    print(f"CPU per session, hello_chat 2 turns, agent = an endpoint answering at once; {n} sessions, "
          f"fastest of {args.repeats}; load average {loadavg()}")
    prev = None
    for name, value in best.items():
        step = "" if prev is None else f"  ({(value - prev) * 1e3:+.2f})"
        print(f"  {name:<20}{value * 1e3:8.2f} ms{step}")
        prev = value


if __name__ == "__main__":
    main()
