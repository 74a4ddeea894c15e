"""What LangGraph and tracing cost: the same rule-based CRS sessions run four ways, side by side.

1. ``loop``: a plain Python loop calling the graph's node functions, merging updates by hand;
2. ``graph``: the compiled LangGraph graph (``invoke``, no checkpointer);
3. ``stream``: the compiled graph's bare ``stream`` (values), what the runner consumes;
4. ``runner``: the convsim runner (async, streams values; metrics reach it directly), trace off;
5. ``runner+trace``: the same with the state-transition trace on (the default).

``--workers`` adds model-none sessions/s of ``--executor process`` and ``ray`` at 1 vs 2 workers.

Prints per-turn times and the ratios to the loop. Usage:
    python bench/overhead.py [--sessions 20] [--turns 20] [--repeat 3] [--workers]
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import operator
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from timing import median_time  # noqa: E402
from convsim import load_graph_module, session_seed  # noqa: E402
from convsim.config import config_from_dict  # noqa: E402
from convsim.runner import execute, plan_run  # noqa: E402

LIST_KEYS = ("transcript", "turn_metrics", "turn_details", "shift_events")


def merge(state: dict, update: dict) -> None:
    for k, v in update.items():
        state[k] = operator.add(state.get(k, []), v) if k in LIST_KEYS else v


def context(mod, params, sid):
    return mod.Context(params=params, seed=session_seed(0, sid, 0), session_id=sid)


def run_loop(mod, params, inits) -> None:
    """The same node functions, called in the graph's order, no LangGraph."""
    for init in inits:
        ctx = context(mod, params, init["session_id"])
        rt = SimpleNamespace(context=ctx, stream_writer=lambda e: None)
        state = {"transcript": [], "turn_metrics": [], "dialogue_metrics": {}, **init}
        while True:
            for node in (mod.user, mod.crs, mod.evaluate_turn):
                merge(state, node(state, rt))
            if state["turn"] >= params.n_turns:
                break
        for _, node in mod.DIALOGUE_STAGE_NODES:
            merge(state, node(state, rt))
        merge(state, mod.evaluate_dialogue(state, rt))


def run_graph(mod, params, inits) -> None:
    compiled = mod.build(params).compile()
    for init in inits:
        compiled.invoke(dict(init), context=context(mod, params, init["session_id"]))


def run_stream(mod, params, inits) -> None:
    """Bare LangGraph ``stream`` (values), what the runner consumes, without the runner."""
    compiled = mod.build(params).compile()
    for init in inits:
        for _ in compiled.stream(dict(init), context=context(mod, params, init["session_id"]),
                                 stream_mode="values"):
            pass


def run_runner(params_dict, n_sessions, trace: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config_from_dict({"name": "bench", "graph": "crs_shift", "params": params_dict,
                                "sessions": n_sessions, "seed": 0, "concurrency": 1, "trace": trace,
                                "analysis": [], "out_dir": tmp, "run_id": "b"})
        asyncio.run(execute(plan_run(cfg), show_progress=False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", action="store_true", help="also: process/Ray executors at 1 vs 2 workers")
    ap.add_argument("--scaling-sessions", type=int, default=40)
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
    }
    results = {name: median_time(fn, args.repeat) for name, fn in arms.items()}
    base = results["loop"]
    print(f"{args.sessions} sessions x {args.turns} turns, median of {args.repeat}, checkpointing off")
    print(f"{'arm':<14}{'total s':>10}{'ms/turn':>10}{'ratio':>8}")
    for name, t in results.items():
        print(f"{name:<14}{t:>10.3f}{1000 * t / turns:>10.3f}{t / base:>8.2f}")
    print(f"graph/loop = {results['graph'] / base:.2f}; "
          f"trace cost = {results['runner+trace'] / results['runner']:.2f}x the untraced runner")
    print(f"runner+trace / bare stream = {results['runner+trace'] / results['stream']:.2f} (goal <= 1.20); "
          f"runner+trace / loop = {results['runner+trace'] / base:.2f} (goal <= 1.50)")
    if args.workers:
        scaling(params_dict, args.scaling_sessions, args.repeat)


def scaling(params_dict, n_sessions, repeat) -> None:
    """Model-none sessions/s of the process and Ray executors at 1 and 2 workers (pool start-up
    included: each worker plans the run and loads the catalogs once)."""
    def run_with(executor, workers):
        with tempfile.TemporaryDirectory() as tmp:
            cfg = config_from_dict({"name": "bench", "graph": "crs_shift", "params": params_dict,
                                    "sessions": n_sessions, "seed": 0, "trace": True, "analysis": [],
                                    "out_dir": tmp, "run_id": "s", "executor": executor, "workers": workers})
            asyncio.run(execute(plan_run(cfg), show_progress=False))
    executors = ["process"]
    try:
        import ray
        ray.init(num_cpus=2, object_store_memory=100_000_000, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
        executors.append("ray")
    except ImportError:
        print("ray not installed: process executor only")
    print(f"{n_sessions} sessions x {params_dict['n_turns']} turns, model none, median of {repeat}")
    for executor in executors:
        rates = {w: n_sessions / median_time(lambda: run_with(executor, w), repeat) for w in (1, 2)}
        print(f"{executor:<8} 1 worker {rates[1]:7.2f} sessions/s, 2 workers {rates[2]:7.2f} sessions/s, "
              f"ratio {rates[2] / rates[1]:.2f} (ideal 2.00 on 2 free cores)")


if __name__ == "__main__":
    importlib.invalidate_caches()
    main()
