"""What the runner costs over LangGraph's bare stream and over a plain loop, in executed instructions.

Wall and CPU time on a shared 2-core virtual machine move by 10-20% within minutes (the neighbours'
load, the caches), so the time ratios of bench/overhead.py land on either side of a goal from one
run to the next. Instructions do not: valgrind's callgrind counts every machine instruction a piece
of code executes (``Ir``), and the same code on the same input counts the same, whatever else the
machine does. They are not time (a cache miss costs more than an instruction), so this bench
complements bench/overhead.py rather than replacing it.

The same rule-based crs_shift sessions (model ``none``) run six ways, one after another in one
thread, each arm once to warm up (the catalog, the LDA topic model) and once counted, after a full
garbage collection (so which collections fall in a region depends on its own allocations only):

1. ``loop``: the graph's node functions in a plain loop, merging updates by hand (bench/overhead.py's);
2. ``bare stream``: LangGraph's ``stream`` (values) of the compiled graph, the runner's session input
   and context;
3. ``stream, the trace's modes``: the same asking for ``values``, ``updates`` and ``tasks``, the
   chunks dropped (LangGraph's own part of the trace's cost);
4. ``session, trace off``: the runner's session (``convsim.running.session.run_session_blocking``: the
   stream, the checks of the final state, the encoded record);
5. ``session + trace``: the same with the trace recorder on;
6. ``session + trace file``: what the runner runs in a session's thread
   (``convsim.running.runner._session_in_thread``): the above and the trace file written.

These are per-session figures: per-run work (planning, compiling, results.jsonl, the summary) is
left out. Then bench/overhead.py's own arms, whole runs of the same sessions, are counted too: its
``loop``, ``stream`` (compiled per run, as there), ``runner`` and ``runner+trace`` (everything a run
does, its threads included: the session threads, the fsync thread, the summary), which is the
comparison of that bench's goals (runner+trace <= 1.20x the bare stream, <= 1.5x the loop).

Each counted region is a call through ``operator.call``: callgrind dumps its counts just before the
call and just after it (``--dump-before`` / ``--dump-after`` of its C function ``_operator_call``,
which nothing else calls), so the dump written on return holds the region alone, all threads
summed. Needs valgrind (Debian: ``apt install valgrind``); takes ~10 minutes with the defaults,
~20 with ``--run-sessions 30`` (bench/overhead.py's default size).

Usage:
    python bench/instructions.py [--sessions 3] [--turns 20] [--run-sessions 10]
"""
from __future__ import annotations

import argparse
import gc
import json
import operator
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

REGION = "_operator_call"  # the C function behind operator.call


def arms(n_sessions: int, n_turns: int, out: str) -> dict:
    """``{name: run()}``: the six per-session arms over the same crs_shift sessions. Each returns the
    sessions' final states (the runner's arms: their records; the stream with the trace's modes:
    ``None`` each), which tests/test_instructions_bench.py compares."""
    import overhead
    from convsim.running import runner
    from convsim.running import session
    from planned import compiled_plan

    def planned(trace: bool):
        return compiled_plan({"name": "ir", "graph": "crs_shift", "sessions": n_sessions, "seed": 0,
                              "params": {"n_turns": n_turns, "n_sessions": n_sessions}, "concurrency": 1,
                              "trace": trace, "analysis": [], "out_dir": out, "run_id": f"ir-{trace}"}, n_sessions)
    traced, _, traced_units = planned(True)
    # the loop and the streams take their input and context from the untraced plan's sessions (a
    # traced one would also build a trace recorder for each): the same units, seeds and inits
    untraced, compiled, units = planned(False)
    mod, params = untraced.module, next(iter(untraced.variants.values())).params

    def loop():
        finals = []
        for unit in units:
            s = session._Session(untraced, unit, lambda event: None)  # the runner's input and context
            finals.append(overhead.loop_session(mod, params, dict(s.input), s.ctx))
        return finals

    def stream(modes):
        def run():
            finals = []
            for unit in units:
                s = session._Session(untraced, unit, lambda event: None)
                for chunk in compiled.stream(s.input, s.config, context=s.ctx, stream_mode=modes):
                    pass
                finals.append(chunk if modes == "values" else None)
            return finals
        return run

    def sessions(plan, todo, fn):
        return lambda: [fn(plan, unit, lambda event: None).record for unit in todo]
    return {"loop": loop,
            "bare stream": stream("values"),
            "stream, the trace's modes": stream(["values", "updates", "tasks"]),
            "session, trace off": sessions(untraced, units, session.run_session_blocking),
            "session + trace": sessions(traced, traced_units, session.run_session_blocking),
            "session + trace file": sessions(traced, traced_units, runner._session_in_thread)}


def run_arms(n_sessions: int, n_turns: int) -> dict:
    """bench/overhead.py's arms, whole runs of the same crs_shift sessions (each in a fresh run
    directory, as there)."""
    import overhead
    from convsim import load_graph_module
    mod = load_graph_module("crs_shift")
    params_dict = {"n_turns": n_turns, "n_sessions": n_sessions}
    params = mod.Params(**params_dict)
    inits = list(mod.sessions(params, mod.Context(params=params)))
    return {"run: loop": lambda: overhead.run_loop(mod, params, inits),
            "run: bare stream": lambda: overhead.run_stream(mod, params, inits),
            "run: runner": lambda: overhead.run_runner(params_dict, n_sessions, trace=False),
            "run: runner+trace": lambda: overhead.run_runner(params_dict, n_sessions, trace=True)}


def child(args) -> None:
    """Under callgrind: each arm once to warm up, then once inside ``operator.call`` (counted)."""
    with tempfile.TemporaryDirectory() as out:
        for name, run in {**arms(args.sessions, args.turns, out), **run_arms(args.run_sessions, args.turns)}.items():
            run()
            print(json.dumps({"arm": name}), flush=True)
            # A full collection first: each region starts with the collector's counts at zero, so
            # which collections fall inside it depends on its own allocations only (one run's arm
            # counted +88 M instructions, +14%, more than the same arm in runs whose earlier
            # allocations differed: an oldest-generation collection of the catalogs had landed in it).
            gc.collect()
            operator.call(run)


def totals(dump: Path) -> tuple[str, int]:
    """What triggered a callgrind dump (its ``desc: Trigger:`` line) and its instruction count (its
    ``summary:`` or ``totals:`` line)."""
    trigger = ""
    for line in dump.read_text(errors="replace").splitlines():
        if line.startswith("desc: Trigger:"):
            trigger = line.split(":", 2)[2].strip()
        elif line.startswith(("summary:", "totals:")):
            return trigger, int(line.split()[1])
    raise ValueError(f"{dump}: no summary line")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--run-sessions", type=int, default=10,
                    help="sessions of the whole-run arms (bench/overhead.py's default is 30)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        sys.exit("bench/instructions.py needs valgrind (Debian: apt install valgrind): not found on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [valgrind, "--tool=callgrind", f"--dump-before={REGION}", f"--dump-after={REGION}",
               f"--callgrind-out-file={tmp}/cg.out", sys.executable,
               str(Path(__file__).resolve()), "--child", "--sessions", str(args.sessions), "--turns", str(args.turns),
               "--run-sessions", str(args.run_sessions)]
        # one hash seed: set iteration orders (and so the counts) the same from run to run
        env = {**os.environ, "PYTHONHASHSEED": "0",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        names = [json.loads(line)["arm"] for line in done.stdout.splitlines() if line.startswith('{"arm"')]
        if done.returncode != 0 or not names:
            sys.exit(f"the run under valgrind failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        dumps = sorted(Path(tmp).glob("cg.out.*"), key=lambda p: int(re.sub(r"\D", "", p.suffix) or 0))
        regions = [ir for trigger, ir in map(totals, dumps) if trigger == f"--dump-after={REGION}"]
        if len(regions) != len(names):
            sys.exit(f"{len(names)} arms ran but {len(regions)} regions were counted: is operator.call used "
                     "elsewhere in the arms?")
        counts = dict(zip(names, regions))
    turns = args.sessions * args.turns
    print(f"crs_shift, model none, {args.turns} turns a session; executed instructions (valgrind callgrind, "
          "Ir, all threads)")
    table(f"per session, {args.sessions} sessions (one thread; per-run work aside)", {k: v for k, v in counts.items() if not k.startswith("run: ")},
          turns)
    full = counts["session + trace file"]
    print(f"session + trace file / bare stream = {full / counts['bare stream']:.3f}; / loop = "
          f"{full / counts['loop']:.3f}; bare stream / loop = {counts['bare stream'] / counts['loop']:.3f}")
    runs = {k[5:]: v for k, v in counts.items() if k.startswith("run: ")}
    table(f"whole runs of {args.run_sessions} sessions, bench/overhead.py's arms (each in a fresh run directory)",
          runs, args.run_sessions * args.turns)
    print(f"runner+trace / bare stream = {runs['runner+trace'] / runs['bare stream']:.3f} (goal <= 1.20); "
          f"runner+trace / loop = {runs['runner+trace'] / runs['loop']:.3f} (goal <= 1.50); "
          f"bare stream / loop = {runs['bare stream'] / runs['loop']:.3f}; the trace = "
          f"{runs['runner+trace'] / runs['runner']:.3f}x the untraced runner")


def table(title: str, counts: dict, turns: int) -> None:
    """``counts`` per turn and as ratios to its ``loop`` and ``bare stream`` arms."""
    print(title)
    print(f"  {'arm':28s}{'Ir (M)':>10s}{'Ir/turn (k)':>13s}{'/ loop':>8s}{'/ bare stream':>15s}")
    for name, ir in counts.items():
        print(f"  {name:28s}{ir / 1e6:10.1f}{ir / turns / 1e3:13.1f}{ir / counts['loop']:8.3f}"
              f"{ir / counts['bare stream']:15.3f}")


if __name__ == "__main__":
    main()
