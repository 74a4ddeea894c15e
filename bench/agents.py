"""What an agent slot's adapter costs (convsim.slots), printed side by side in one run:

* **cost per turn**: the researcher's agent called through its adapter (``make_agent(spec, slot)
  .invoke(...)``: messages handed, the session's state kept, the answer checked and made an
  ``AgentTurn``) against calling the same agent directly, for a LangGraph graph agent (a
  two-node ``MessagesState`` graph; direct: ``graph.invoke({"messages": conversation})`` each turn)
  and for a plain callable in openevals' ``app`` convention (direct: ``app(inputs)``). The direct
  graph keeps its state by hand (each turn its last output's messages plus the new question), as
  the adapter does. Per turn, the fastest of ``--repeats`` runs of ``--sessions`` sessions of
  ``--turns`` turns, the two arms interleaved; the ratio adapter / direct (goal for the graph
  agent: <= 1.1x);
* **sessions/s against a slow endpoint that is the agent**: hello_chat runs (trace on, as by
  default) whose agent is ``openai:<model>@<url>``, a stdlib OpenAI-compatible server in its own
  process (bench/latency_server.py) answering every call after ``--latency`` seconds (0.5), at 32,
  128 and 256 sessions in flight, ``--waves`` x that many sessions of ``--run-turns`` turns each.
  Ideal: ``in_flight / (run_turns * latency)`` sessions/s. Two shares of it: over the whole run
  (planning, the first wave's start, all sessions starting at once, and the tail included), and in
  steady state, the sessions landed between the first and the last ``n`` landings ("steady", as
  bench/concurrency.py: without start-up, the first wave and the tail; ``--waves`` 3 or more): the
  rate a long run keeps, which is what the goal (>= 90% at 128) is read on. Beside the endpoint arm
  on the asyncio executor, the same calls made by hello_chat's built-in agent through the same
  server as its chat model (``models:``): the runner's own rate, without the adapter; and the
  endpoint arm on ``executor: process`` (``--workers``, default the executor's own:
  convsim.running.process_executor.default_workers). Each row also prints how many sessions were ok
  (a session that failed is not throughput), the CPU each session cost
  the driver process and the worker processes (the workers are the children of the executor's fork
  server: its reaped children's CPU; worker start-up included), the cores that CPU would take at
  the ideal rate, when the first session landed, and the 1-minute load average before and after
  the row (the machine may be shared: a share is only as good as the cores the run got). The first
  process run of the bench (a warm-up, not a row) starts the fork server; its time is printed.

Usage: python bench/agents.py [--turns 6] [--sessions 50] [--repeats 5] [--latency 0.5]
       [--in-flight 32 128 256] [--waves 10] [--run-turns 2] [--workers N] [--skip-runs]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from latency_server import LatencyServerProcess  # noqa: E402

AGENT = textwrap.dedent('''
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    def think(state):
        return {"messages": [AIMessage("(looking it up)")]}

    def reply(state):
        asked = sum(1 for m in state["messages"] if m.type == "human")
        return {"messages": [AIMessage(f"Answer {asked}: Paris.")]}

    builder = StateGraph(MessagesState)
    builder.add_node("think", think)
    builder.add_node("reply", reply)
    builder.add_edge(START, "think")
    builder.add_edge("think", "reply")
    builder.add_edge("reply", END)
    graph = builder.compile()

    def app(inputs):
        return f"Answer {sum(1 for m in inputs['messages'] if m['role'] == 'user')}: Paris."
''')


def per_turn(fns, sessions: int, turns: int, repeats: int) -> list[float]:
    """Seconds per turn of each ``fn(session, turn)`` in ``fns``: the fastest of ``repeats`` runs,
    the arms interleaved run by run (a machine whose load changes meanwhile weighs on both alike)."""
    out: list[list[float]] = [[] for _ in fns]
    for r in range(repeats):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            for s in range(sessions):
                for t in range(turns):
                    fn(f"r{r}s{s}", t)
            out[i].append((time.perf_counter() - start) / (sessions * turns))
    return [min(x) for x in out]


def cost_per_turn(args, agent_file: Path) -> list[tuple[str, float, float]]:
    from langchain_core.messages import AIMessage, HumanMessage
    from convsim.slots import Slot, make_agent
    from convsim.slots.spec import load_target
    slot = Slot(role="agent", handed="the conversation", returns="reply")
    rows = []
    for attr in ("graph", "app"):
        target = f"{agent_file}:{attr}"
        obj = load_target(target)
        adapter = make_agent(target, slot)
        convs: dict = {}
        direct_convs: dict = {}

        def via_adapter(session, turn):
            msgs = convs.setdefault(session, [])
            msgs.append(HumanMessage(f"question {turn} of {session}"))
            answer = adapter.invoke(msgs, session_id=session, context={"turn": turn})
            msgs.append(AIMessage(answer.text))

        if attr == "graph":
            def direct(session, turn):  # as one would keep a graph's state across turns by hand
                msgs = direct_convs.get(session, []) + [HumanMessage(f"question {turn} of {session}")]
                out = obj.invoke({"messages": msgs})
                direct_convs[session] = out["messages"]
        else:
            def direct(session, turn):
                msgs = direct_convs.setdefault(session, [])
                msgs.append({"role": "user", "content": f"question {turn} of {session}"})
                msgs.append({"role": "assistant", "content": obj({"messages": msgs, "context": {"turn": turn}})})
        per_turn([direct, via_adapter], 2, args.turns, 1)  # warm both
        convs.clear()
        direct_convs.clear()
        d, a = per_turn([direct, via_adapter], args.sessions, args.turns, args.repeats)
        rows.append((attr, d, a))
    return rows


def loadavg() -> str:
    """The 1-minute load average (``-`` where /proc/loadavg is not)."""
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "-"


def cpu_seconds() -> tuple[float, float]:
    """CPU seconds of this process (all threads) and of the worker processes that ended: its own
    reaped children, and the children the process executor's fork server reaped (the workers are
    its children: /proc/<pid>/stat's cutime and cstime)."""
    import os
    import resource
    from multiprocessing import forkserver
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    forked = 0.0
    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    if pid is not None:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            forked = (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime + forked


def throughput(args) -> list[dict]:
    """Per in-flight count: the endpoint as the agent (``agents:``), and the same calls made by the
    built-in agent through the same server as its chat model (``models:``), the runner's own rate,
    on the asyncio executor; and the endpoint arm again on ``executor: process``."""
    from unittest import mock

    from convsim import api
    from convsim.running import runner
    from convsim.running.process_executor import default_workers
    rows = []
    warm: dict[str, float] = {}

    def workers(executor: str) -> dict:
        return {"workers": args.workers} if executor == "process" and args.workers else {}

    def workers_used(executor: str, in_flight: int) -> int | None:
        return (args.workers or default_workers(in_flight)) if executor == "process" else None
    with LatencyServerProcess(args.latency, idle_s=120) as base_url, tempfile.TemporaryDirectory() as tmp:
        # warm: the first run of a process imports and builds what all share; the first process run
        # starts the process executor's fork server (its start-up is printed, not in the rows)
        for arm, executor in (("agents", "async"), ("models", "async"), ("agents", "process")):
            start = time.perf_counter()
            api.run({"graph": "hello_chat", "sessions": 4, "concurrency": 4, "out_dir": tmp, "executor": executor,
                     "run_id": f"warm-{arm}-{executor}", "params": {"n_turns": 1}, "analysis": [],
                     arm: {"agent": f"openai:fake@{base_url}"}, **workers(executor)}, analyze=False)
            warm[executor] = time.perf_counter() - start
        for n in args.in_flight:
            for arm, executor in (("agents", "async"), ("models", "async"), ("agents", "process")):
                sessions = args.waves * n
                cfg = {"graph": "hello_chat", "sessions": sessions, "concurrency": n, "out_dir": tmp,
                       "run_id": f"{arm}-{executor}-{n}", "params": {"n_turns": args.run_turns}, "analysis": [],
                       arm: {"agent": f"openai:fake@{base_url}"}, "executor": executor, **workers(executor)}
                load_before, (me0, kids0) = loadavg(), cpu_seconds()
                landed: list[float] = []

                def land(*a, **kw):
                    real_land(*a, **kw)
                    landed.append(time.perf_counter())
                real_land = runner.land
                start = time.perf_counter()
                with mock.patch.object(runner, "land", land):
                    run_dir = api.run(cfg, analyze=False)
                elapsed = time.perf_counter() - start
                # a session that failed fast would count as throughput: the rows say how many were ok
                ok = sum(json.loads(line)["status"] == "ok" for line in (run_dir / "results.jsonl").open())
                me1, kids1 = cpu_seconds()
                rows.append({"in_flight": n, "arm": arm, "executor": executor, "sessions": sessions,
                             "workers": workers_used(executor, n), "ok": ok,
                             "rate": sessions / elapsed, "ideal": n / (args.run_turns * args.latency),
                             "elapsed": elapsed, "first_landed": landed[0] - start,
                             # as bench/concurrency.py: the sessions landed between the first and the last
                             # n landings (no start-up, first wave or tail); needs more than two waves
                             "steady": ((sessions - 2 * n) / (landed[-n - 1] - landed[n - 1])
                                        if sessions > 2 * n and len(landed) == sessions else None),
                             "driver_ms": (me1 - me0) / sessions * 1e3,
                             "workers_ms": (kids1 - kids0) / sessions * 1e3,
                             "load": f"{load_before}->{loadavg()}"})
    return rows, warm


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=6)
    p.add_argument("--sessions", type=int, default=50)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--latency", type=float, default=0.5)
    p.add_argument("--in-flight", type=int, nargs="+", default=[32, 128, 256])
    p.add_argument("--waves", type=int, default=10)
    p.add_argument("--run-turns", type=int, default=2)
    p.add_argument("--workers", type=int, default=None,
                   help="worker processes of the process runs (default: the executor's own)")
    p.add_argument("--skip-runs", action="store_true", help="only the cost per turn")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        agent_file = Path(tmp) / "bench_agent.py"
        agent_file.write_text(AGENT)
        rows = cost_per_turn(args, agent_file)
    print(f"cost per turn ({args.sessions} sessions x {args.turns} turns, fastest of {args.repeats}, interleaved)")
    print(f"{'agent':<10}{'direct us':>12}{'adapter us':>12}{'ratio':>8}{'overhead us':>13}")
    for attr, d, a in rows:
        kind = "graph" if attr == "graph" else "callable"
        print(f"{kind:<10}{d * 1e6:>12.1f}{a * 1e6:>12.1f}{a / d:>7.2f}x{(a - d) * 1e6:>13.1f}"
              + ("   (goal <= 1.10x)" if kind == "graph" else ""))
    if args.skip_runs:
        return
    rows, warm = throughput(args)
    print(f"\nsessions/s, agent = an OpenAI-compatible endpoint answering in {args.latency} s "
          f"(hello_chat, {args.run_turns} turns, {args.waves} waves, trace on)")
    print("  agents: the endpoint fills the agent slot (the adapter); models: the built-in agent calls the same "
          "server as its chat model (the runner without the adapter)")
    print("  process: the endpoint arm on executor: process (workers: the processes it ran); driver / workers ms: "
          "CPU per session of this process / of the worker processes; cores: that CPU at the ideal rate; load: "
          "1-minute load average before->after")
    print(f"  warm-up (not in the rows): 4 sessions of 1 turn took {warm['async']:.2f} s on the async executor and "
          f"{warm['process']:.2f} s on the first process run of this bench (the fork server starts, importing once)")
    print("  ok: the sessions whose status is ok (the others are not throughput); share: of the ideal over the whole run; first s: when the first session landed; steady: the share in "
          "the sessions landed between the first and the last n landings (no start-up, first wave or tail; - with "
          "fewer than 3 waves): the goal at 128 is read on it")
    print(f"{'in flight':>10}{'arm':>8}{'executor':>9}{'workers':>8}{'sessions':>9}{'ok':>6}{'elapsed s':>10}{'sessions/s':>11}"
          f"{'ideal':>7}{'share':>7}{'first s':>8}{'steady':>7}{'driver ms':>10}{'workers ms':>11}{'cores':>6}  load")
    for r in rows:
        cores = (r["driver_ms"] + r["workers_ms"]) / 1e3 * r["ideal"]
        print(f"{r['in_flight']:>10}{r['arm']:>8}{r['executor']:>9}{r['workers'] or '-':>8}{r['sessions']:>9}{r['ok']:>6}"
              f"{r['elapsed']:>10.2f}{r['rate']:>11.1f}{r['ideal']:>7.1f}{r['rate'] / r['ideal']:>6.0%}"
              f"{r['first_landed']:>8.2f}"
              + (f"{r['steady'] / r['ideal']:>7.0%}" if r["steady"] else f"{'-':>7}") + f"{r['driver_ms']:>10.2f}"
              f"{r['workers_ms']:>11.2f}{cores:>6.2f}  {r['load']}"
              + ("   (goal: steady >= 90%)" if r["in_flight"] == 128 and r["arm"] == "agents" else ""))


if __name__ == "__main__":
    main()
