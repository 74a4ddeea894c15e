"""What the runner costs over LangGraph's bare stream and over a plain loop, in executed instructions.

Wall and CPU time on a shared 2-core virtual machine move by 10-20% within minutes (the neighbours'
load, the caches), so the time ratios of bench/overhead.py land on either side of a goal from one
run to the next. Instructions do not: valgrind's callgrind counts every machine instruction a piece
of code executes (``Ir``), and the same code on the same input counts the same, whatever else the
machine does. They are not time (a cache miss costs more than an instruction), so this bench
complements bench/overhead.py rather than replacing it.

The same rule-based crs_shift sessions (model ``none``) run six ways, one after another in one
thread, each arm once to warm up (the catalog, the LDA topic model) and once counted:

1. ``loop``: the graph's node functions in a plain loop, merging updates by hand (bench/overhead.py's);
2. ``bare stream``: LangGraph's ``stream`` (values) of the compiled graph, the runner's session input
   and context;
3. ``stream, the trace's modes``: the same asking for ``values``, ``updates`` and ``tasks``, the
   chunks dropped (LangGraph's own part of the trace's cost);
4. ``session, trace off``: the runner's session (``convsim.session.run_session_blocking``: the
   stream, the checks of the final state, the encoded record);
5. ``session + trace``: the same with the trace recorder on;
6. ``session + trace file``: what the runner runs in a session's thread
   (``convsim.runner._session_in_thread``): the above and the trace file written.

Per-run work (planning, compiling, results.jsonl, the summary) is left out: these are per-session
figures. The counted region is a call through ``operator.call`` (callgrind toggles collection on
entering and leaving its C function ``_operator_call``, which nothing else calls, and dumps the
counts when it returns). Needs valgrind (Debian: ``apt install valgrind``); takes a few minutes.

Usage:
    python bench/instructions.py [--sessions 3] [--turns 20]
"""
from __future__ import annotations

import argparse
import itertools
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

TOGGLE = "_operator_call"  # the C function behind operator.call


def arms(n_sessions: int, n_turns: int, out: str) -> dict:
    """``{name: run() -> final states}``: the six arms over the same crs_shift sessions."""
    import overhead
    from convsim import runner, session
    from convsim.config import config_from_dict
    from convsim.plan import plan_run

    def planned(trace: bool):
        cfg = config_from_dict({"name": "ir", "graph": "crs_shift", "sessions": n_sessions, "seed": 0,
                                "params": {"n_turns": n_turns, "n_sessions": n_sessions}, "concurrency": 1,
                                "trace": trace, "analysis": [], "out_dir": out, "run_id": f"ir-{trace}"})
        plan = plan_run(cfg)
        vp = next(iter(plan.variants.values()))
        vp.compiled = plan.module.build(vp.params).compile()  # (no checkpointer: as the runner's for this graph)
        return plan, vp.compiled, list(itertools.islice(plan.iter_units(), n_sessions))
    traced, compiled, units = planned(True)
    untraced, _, untraced_units = planned(False)
    mod, params = traced.module, next(iter(traced.variants.values())).params

    def loop():
        finals = []
        for unit in units:
            s = session._Session(traced, unit, lambda event: None)  # the runner's input and context
            finals.append(overhead.loop_session(mod, params, dict(s.input), s.ctx))
        return finals

    def stream(modes):
        def run():
            finals = []
            for unit in units:
                s = session._Session(traced, unit, lambda event: None)
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
            "session, trace off": sessions(untraced, untraced_units, session.run_session_blocking),
            "session + trace": sessions(traced, units, session.run_session_blocking),
            "session + trace file": sessions(traced, units, runner._session_in_thread)}


def child(args) -> None:
    """Under callgrind: each arm once uncounted, then once inside ``operator.call`` (counted)."""
    with tempfile.TemporaryDirectory() as out:
        for name, run in arms(args.sessions, args.turns, out).items():
            run()
            print(json.dumps({"arm": name}), flush=True)
            operator.call(run)


def totals(dump: Path) -> int:
    """The instruction count of a callgrind dump (its ``summary:`` or ``totals:`` line)."""
    for line in dump.read_text(errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise ValueError(f"{dump}: no summary line")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        sys.exit("bench/instructions.py needs valgrind (Debian: apt install valgrind): not found on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [valgrind, "--tool=callgrind", "--collect-atstart=no", f"--toggle-collect={TOGGLE}",
               f"--dump-after={TOGGLE}", f"--callgrind-out-file={tmp}/cg.out", sys.executable,
               str(Path(__file__).resolve()), "--child", "--sessions", str(args.sessions), "--turns", str(args.turns)]
        # one hash seed: set iteration orders (and so the counts) the same from run to run
        env = {**os.environ, "PYTHONHASHSEED": "0",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        names = [json.loads(line)["arm"] for line in done.stdout.splitlines() if line.startswith('{"arm"')]
        if done.returncode != 0 or not names:
            sys.exit(f"the run under valgrind failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        dumps = sorted(Path(tmp).glob("cg.out.*"), key=lambda p: int(re.sub(r"\D", "", p.suffix) or 0))
        counts = dict(zip(names, (totals(d) for d in dumps[-len(names):])))
    turns = args.sessions * args.turns
    print(f"crs_shift, model none, {args.sessions} sessions x {args.turns} turns, one thread; executed "
          "instructions (valgrind callgrind, Ir), per-session work only")
    print(f"{'arm':28s}{'Ir (M)':>10s}{'Ir/turn (k)':>13s}{'/ loop':>8s}{'/ bare stream':>15s}")
    for name, ir in counts.items():
        print(f"{name:28s}{ir / 1e6:10.1f}{ir / turns / 1e3:13.1f}{ir / counts['loop']:8.3f}"
              f"{ir / counts['bare stream']:15.3f}")
    full = counts["session + trace file"]
    print(f"session + trace file / bare stream = {full / counts['bare stream']:.3f} (goal <= 1.20 for the "
          f"runner with its trace, per-run work aside); / loop = {full / counts['loop']:.3f} (goal <= 1.50); "
          f"bare stream / loop = {counts['bare stream'] / counts['loop']:.3f}")


if __name__ == "__main__":
    main()
