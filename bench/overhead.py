"""What LangGraph and tracing cost: the same rule-based CRS sessions run five ways, side by side.

1. ``loop``: a plain Python loop calling the graph's node functions, merging updates by hand;
2. ``graph``: the compiled LangGraph graph (``invoke``, no checkpointer);
3. ``stream``: the compiled graph's bare ``stream`` (values), what the runner consumes;
4. ``runner``: the convsim runner (async, streams values; metrics reach it directly), trace off;
5. ``runner+trace``: the same with the state-transition trace on (the default);
6. ``stream 1/turn``: for scale, the bare stream of the same node functions folded into one node per
   turn (a third of the supersteps): how much of the graph's cost is LangGraph's per-step work.

Every arm's nodes get a run directory, as the runner's do (crs_shift saves the run's LDA topic
model there once per run), so the node work is the same in all five. The runner arms include
everything a run does: planning, compiling, writing results.jsonl and the traces, and the
end-of-run summary (its share is printed on its own line).

Each arm prints its median wall time and its median process CPU time (all threads): on a machine
shared with other jobs the CPU ratios are the steadier ones.

``--parts`` adds the trace's own cost step by step (stream, updates stream, recorder, rendering).
``--workers`` adds model-none sessions/s of ``--executor process`` and ``ray`` at 1 vs 2 workers.

Usage:
    python bench/overhead.py [--sessions 20] [--turns 20] [--repeat 3] [--parts] [--workers]
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import operator
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from timing import interleaved_medians, median_times  # noqa: E402
from convsim import load_graph_module, session_seed  # noqa: E402
from convsim.config import config_from_dict  # noqa: E402
from convsim.running.runner import execute, plan_run  # noqa: E402
from convsim.running.store import RunStore  # noqa: E402
from convsim.results.summary import summarise_run  # noqa: E402

LIST_KEYS = ("transcript", "turn_metrics", "turn_details", "shift_events")


def merge(state: dict, update: dict) -> None:
    for k, v in update.items():
        state[k] = operator.add(state.get(k, []), v) if k in LIST_KEYS else v


def context(mod, params, sid, run_dir=None):
    return mod.Context(params=params, seed=session_seed(0, sid, 0), session_id=sid, run_dir=run_dir)


def in_run_dir(arm):
    """Call ``arm(..., run_dir=<a fresh directory>)``: per-run work of the nodes happens in every arm."""
    def call(*args):
        with tempfile.TemporaryDirectory() as tmp:
            arm(*args, run_dir=tmp)
    return call


@in_run_dir
def run_loop(mod, params, inits, run_dir=None) -> None:
    """The same node functions, called in the graph's order, no LangGraph."""
    for init in inits:
        loop_session(mod, params, {"transcript": [], "turn_metrics": [], "dialogue_metrics": {}, **init},
                     context(mod, params, init["session_id"], run_dir))


def loop_session(mod, params, state: dict, ctx) -> dict:
    """One crs_shift session from ``state``: its node functions called in the graph's order, no LangGraph."""
    rt = SimpleNamespace(context=ctx, stream_writer=lambda e: None)
    while True:
        for node in (mod.user, mod.crs, mod.evaluate_turn):
            merge(state, node(state, rt))
        if state["turn"] >= params.n_turns:
            break
    for _, node in mod.DIALOGUE_STAGE_NODES:
        merge(state, node(state, rt))
    merge(state, mod.evaluate_dialogue(state, rt))
    return state


@in_run_dir
def run_graph(mod, params, inits, run_dir=None) -> None:
    compiled = mod.build(params).compile()
    for init in inits:
        compiled.invoke(dict(init), context=context(mod, params, init["session_id"], run_dir))


@in_run_dir
def run_stream(mod, params, inits, run_dir=None) -> None:
    """Bare LangGraph ``stream`` (values), what the runner consumes, without the runner."""
    compiled = mod.build(params).compile()
    for init in inits:
        for _ in compiled.stream(dict(init), context=context(mod, params, init["session_id"], run_dir),
                                 stream_mode="values"):
            pass


def one_node_per_turn(mod):
    """crs_shift's graph with user, crs and evaluate_turn folded into one ``turn`` node (the same
    functions, merged as the loop merges them): what a third of the supersteps would cost. Not a
    graph convsim ships: its trace would show one step per turn instead of three."""
    from langgraph.graph import END, START, StateGraph

    def turn(state, runtime):
        state, out = dict(state), {}
        for node in (mod.user, mod.crs, mod.evaluate_turn):
            update = node(state, runtime)
            merge(state, update)
            for k, v in update.items():
                out[k] = out.get(k, []) + v if k in LIST_KEYS else v
        return out

    def route(state, runtime):
        return "turn" if mod.route(state, runtime) == "user" else mod.route(state, runtime)
    g = StateGraph(mod.State, context_schema=mod.Context)
    g.add_node("turn", turn)
    g.add_node("evaluate_dialogue", mod.evaluate_dialogue)
    g.add_edge(START, "turn")
    stage = [name for name, _ in mod.DIALOGUE_STAGE_NODES]
    g.add_conditional_edges("turn", route, ["turn", (stage or ["evaluate_dialogue"])[0]])
    for (name, fn), nxt in zip(mod.DIALOGUE_STAGE_NODES, stage[1:] + ["evaluate_dialogue"]):
        g.add_node(name, fn)
        g.add_edge(name, nxt)
    g.add_edge("evaluate_dialogue", END)
    return g


@in_run_dir
def run_stream_folded(mod, params, inits, run_dir=None) -> None:
    """Bare ``stream`` (values) of :func:`one_node_per_turn`."""
    compiled = one_node_per_turn(mod).compile()
    for init in inits:
        for _ in compiled.stream(dict(init), context=context(mod, params, init["session_id"], run_dir),
                                 stream_mode="values"):
            pass


def run_runner(params_dict, n_sessions, trace: bool, summary_s: list | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config_from_dict({"name": "bench", "graph": "crs_shift", "params": params_dict,
                                "sessions": n_sessions, "seed": 0, "concurrency": 1, "trace": trace,
                                "analysis": [], "out_dir": tmp, "run_id": "b"})
        plan = plan_run(cfg)
        asyncio.run(execute(plan, show_progress=False))
        if summary_s is not None:  # what the end-of-run summary alone costs, on the finished run
            # the runner's store hands the summary its index (no line read back): so does this
            store = RunStore(plan.run_dir).open()
            store.close()
            summary_s.append(median_times(
                lambda: summarise_run(plan.run_dir, plan.module, records=store.record_set()), 1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", action="store_true", help="also: process/Ray executors at 1 vs 2 workers")
    ap.add_argument("--scaling-sessions", type=int, default=40)
    ap.add_argument("--parts", action="store_true", help="also: the trace's own cost, step by step")
    args = ap.parse_args()
    mod = load_graph_module("crs_shift")
    # the judge and TAS/CAS stage are the same work in every arm; keep them on
    params_dict = {"n_turns": args.turns, "n_sessions": args.sessions}
    params = mod.Params(**params_dict)
    inits = list(mod.sessions(params, mod.Context(params=params)))
    run_loop(mod, params, inits[:1])  # warm caches (catalog, extractor, LDA) outside the timing
    turns = args.sessions * args.turns
    arms = {
        "loop": lambda: run_loop(mod, params, inits),
        "graph": lambda: run_graph(mod, params, inits),
        "stream": lambda: run_stream(mod, params, inits),
        "runner": lambda: run_runner(params_dict, args.sessions, trace=False),
        "runner+trace": lambda: run_runner(params_dict, args.sessions, trace=True),
        "stream 1/turn": lambda: run_stream_folded(mod, params, inits),
    }
    results = interleaved_medians(arms, args.repeat)
    summary: list = []
    run_runner(params_dict, args.sessions, trace=True, summary_s=summary)
    print(f"{args.sessions} sessions x {args.turns} turns, median of {args.repeat} (arms interleaved), "
          "checkpointing off")
    print(f"{'arm':<14}{'wall s':>8}{'ms/turn':>8}{'ratio':>6}{'cpu s':>8}{'ms/turn':>8}{'ratio':>6}"
          f"{'min cpu':>8}{'ms/turn':>8}{'ratio':>6}")
    for name, times in results.items():
        print(f"{name:<14}" + "".join(f"{t:>8.3f}{1000 * t / turns:>8.3f}{t / results['loop'][i]:>6.2f}"
                                      for i, t in enumerate(times)))
    wall_s, cpu_s = summary[0]
    print(f"{'  of which the end-of-run summary':<30}{1000 * wall_s / turns:>9.3f} ms/turn wall, "
          f"{1000 * cpu_s / turns:.3f} ms/turn cpu")
    for i, clock in enumerate(("wall", "cpu", "min cpu")):
        r = {name: t[i] for name, t in results.items()}
        print(f"{clock}: graph/loop = {r['graph'] / r['loop']:.2f}; stream/loop = {r['stream'] / r['loop']:.2f}; "
              f"trace cost = {r['runner+trace'] / r['runner']:.2f}x the untraced runner; "
              f"runner+trace / bare stream = {r['runner+trace'] / r['stream']:.2f} (goal <= 1.20); "
              f"runner+trace / loop = {r['runner+trace'] / r['loop']:.2f} (goal <= 1.50)")
        sessions_only = r["runner+trace"] - summary[0][min(i, 1)]
        print(f"  {clock}, without the end-of-run summary: runner+trace / bare stream = "
              f"{sessions_only / r['stream']:.2f}; runner+trace / loop = {sessions_only / r['loop']:.2f}; "
              f"stream 1/turn / loop = {r['stream 1/turn'] / r['loop']:.2f}")
    if args.parts:
        trace_parts(mod, params, inits, max(3, args.repeat))
    if args.workers:
        scaling(params_dict, args.scaling_sessions, args.repeat)


def trace_parts(mod, params, inits, repeat) -> None:
    """The trace's own cost, in this thread's CPU time (least of ``repeat``, arms interleaved):
    the bare stream, plus LangGraph's ``updates`` stream the recorder needs, plus the recorder
    (encoding every written value once), plus rendering the file."""
    from convsim.traces import tracing
    compiled = mod.build(params).compile()
    # (the same arms run on older versions of the recorder too, for a before/after comparison)
    keys = ({"append_keys": tracing.append_channels(compiled.channels)}
            if hasattr(tracing, "append_channels") else {})
    out = Path(tempfile.mkdtemp()) / "trace.jsonl"

    def arm(modes, record=False, write=False):
        def run():
            for init in inits:
                ctx = context(mod, params, init["session_id"])
                rec = tracing.TraceRecorder(init, [], **keys) if record else None
                if rec:
                    ctx.event_sink = rec.on_custom
                for mode, chunk in compiled.stream(dict(init), context=ctx, stream_mode=modes):
                    if rec:
                        (rec.on_values if mode == "values" else rec.on_updates)(chunk)
                if write:
                    (rec.close() if hasattr(rec, "close") else rec).write(out)
        return run
    arms = {"stream (values)": arm(["values"]), "+ updates stream": arm(["values", "updates"]),
            "+ recorder": arm(["values", "updates"], True), "+ file written": arm(["values", "updates"], True, True)}
    least = {name: float("inf") for name in arms}
    for _ in range(repeat):
        for name, fn in arms.items():
            t0 = time.thread_time()
            fn()
            least[name] = min(least[name], time.thread_time() - t0)
    turns = len(inits) * params.n_turns
    base = least["stream (values)"]
    print(f"trace parts, thread CPU, least of {repeat} (ms/turn, ratio to the bare stream):")
    for name, t in least.items():
        print(f"  {name:<18}{1000 * t / turns:>8.3f}{t / base:>7.2f}")


def scaling(params_dict, n_sessions, repeat) -> None:
    """Model-none sessions/s of the process and Ray executors at 1 and 2 workers.

    ``overall`` includes the pool's start-up (each worker imports the graph's libraries, plans the
    run, loads the catalogs and the CRS topic model once: seconds, of the same order as the whole
    run at these sizes); ``steady`` is the rate once every worker runs, from the landing of the
    session at the first quarter of the run to the last one, which is what a long run sees. The
    driver's CPU per landed session (steady part) is what it takes from the workers' cores. The
    start-up is the time from planning the run to its first landed session.
    """
    import convsim.running.runner as runner
    landed: list[tuple[float, float]] = []  # (wall, driver process CPU) at each landing
    real_land = runner.land

    def timed_land(*a, **k):
        real_land(*a, **k)
        landed.append((time.perf_counter(), time.process_time()))
    runner.land = timed_land

    def run_with(executor, workers):
        landed.clear()
        with tempfile.TemporaryDirectory() as tmp:
            cfg = config_from_dict({"name": "bench", "graph": "crs_shift", "params": params_dict,
                                    "sessions": n_sessions, "seed": 0, "trace": True, "analysis": [],
                                    "out_dir": tmp, "run_id": "s", "executor": executor, "workers": workers,
                                    "concurrency": workers})  # CPU-bound: one session per worker
            t0 = time.perf_counter()  # planning (the graph's import in this driver) included
            asyncio.run(execute(plan_run(cfg), show_progress=False))
            total = time.perf_counter() - t0
        k, n = n_sessions // 4, len(landed) - 1
        return (n_sessions / total, (n - k) / (landed[n][0] - landed[k][0]),
                1000 * (landed[n][1] - landed[k][1]) / (n - k), landed[0][0] - t0)
    executors = ["process"]
    try:
        import ray
        ray.init(num_cpus=2, object_store_memory=100_000_000, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
        executors.append("ray")
    except ImportError:
        print("ray not installed: process executor only")
    print(f"{n_sessions} sessions x {params_dict['n_turns']} turns, model none, median of {repeat} "
          "(sessions/s; ideal ratio 2.00 on 2 free cores, and the driver shares them)")
    for executor in executors:
        rates = {}
        for w in (1, 2):
            runs = [run_with(executor, w) for _ in range(repeat)]
            rates[w] = tuple(statistics.median(r[i] for r in runs) for i in (0, 1, 2, 3))
        print(f"{executor:<8} overall: 1 worker {rates[1][0]:7.2f}, 2 workers {rates[2][0]:7.2f}, "
              f"ratio {rates[2][0] / rates[1][0]:.2f};  steady: 1 worker {rates[1][1]:7.2f}, "
              f"2 workers {rates[2][1]:7.2f}, ratio {rates[2][1] / rates[1][1]:.2f};  driver CPU per "
              f"landed session {rates[1][2]:.2f} / {rates[2][2]:.2f} ms;  first session landed after "
              f"{rates[1][3]:.2f} / {rates[2][3]:.2f} s (start-up)")
    runner.land = real_land


if __name__ == "__main__":
    importlib.invalidate_caches()
    main()
