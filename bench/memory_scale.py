"""Peak memory against the number of sessions: it should stay flat (lazy plan, streamed results).

Runs a graph (hello_chat by default; ``--graphs all`` for every shipped graph) with model ``none``
in a fresh subprocess per size and prints the peak resident set (``ru_maxrss``) while the sessions
run, after the end-of-run summary, and for the whole run (with ``--analysis``: stats.json, figures
and report.html too), side by side, and the ratio of each larger size to the smallest, with the
goals beside them (at most 10% growth from 2,000 to 10,000 sessions; under 1 GB at 50,000). A last line
starts a run of 10,000,000 hello_chat sessions and measures its peak (``VmHWM``) once the first
sessions have landed, then stops it: an eager plan would have allocated gigabytes first.

    python bench/memory_scale.py [--sizes 2000 10000] [--graphs all] [--analysis] [--trace]

course_retrieval has a fixed test set of 50 cases, so its N sessions are N / 50 trials of each.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, resource, sys, time
from convsim.config import config_from_dict
from convsim.running.runner import run
n, out, trace, analysis, executor, graph, trials = (int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1",
                                                   sys.argv[4] == "1", sys.argv[5], sys.argv[6], int(sys.argv[7]))
cfg = config_from_dict({"graph": graph, "sessions": n // trials, "trials": trials, "out_dir": out,
                        "run_id": f"mem-{graph}-{n}", "trace": trace, "executor": executor, "concurrency": 8,
                        **({} if analysis else {"analysis": []})})
import convsim.running.runner as runner
peak = {}
def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
summarise = runner.summarise_run
def measured_summarise(*a, **k):  # the peak of the sessions themselves, before the end-of-run summary
    peak["sessions"] = rss()
    try:
        return summarise(*a, **k)
    finally:
        peak["summary"] = rss()
runner.summarise_run = measured_summarise
t = time.perf_counter()
run(cfg, analyze=analysis)
import convsim
recs = sum(1 for _ in open(f"{out}/mem-{graph}-{n}/results.jsonl", "rb"))
size = (convsim.running.store.Path(out) / f"mem-{graph}-{n}" / "results.jsonl").stat().st_size
print(json.dumps({"graph": graph, "sessions": n, "records": recs, "results_mb": size / 2**20,
                  "peak_rss_mb": rss(), "peak_sessions_mb": peak["sessions"], "peak_summary_mb": peak["summary"],
                  "wall_s": round(time.perf_counter() - t, 1)}))
"""


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


# course_retrieval has a fixed test set of 50 cases: its sessions are trials of those cases
TRIALS = {"course_retrieval": 50}
GRAPHS = ("hello_chat", "crs_shift", "group_planning", "customer_service", "course_retrieval")


def measure(n: int, out: str, *, trace: bool, analysis: bool, executor: str, graph: str = "hello_chat") -> dict:
    """Run ``n`` sessions of ``graph`` (model none) in a fresh process; its peaks in MB."""
    trials = max(1, n // TRIALS[graph]) if graph in TRIALS else 1
    proc = subprocess.run([sys.executable, "-c", CHILD, str(n), out, str(int(trace)), str(int(analysis)),
                           executor, graph, str(trials)], capture_output=True, text=True, cwd=ROOT, env=_env())
    if proc.returncode != 0:
        raise SystemExit(f"{graph} x {n}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_huge_plan(out: str, *, first: int = 500) -> dict:
    """Start a 10,000,000-session run, wait for ``first`` results, read the peak, stop it."""
    n = 10_000_000
    proc = subprocess.Popen([sys.executable, "-m", "convsim", "run", "hello_chat", "--sessions", str(n),
                             "--out", out, "--run-id", "huge", "-q", "--no-trace", "--no-analysis"],
                            cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    results = Path(out) / "huge" / "results.jsonl"
    try:
        while proc.poll() is None:
            if results.exists() and sum(1 for _ in open(results, "rb")) >= first:
                break
            time.sleep(0.5)
        status = Path(f"/proc/{proc.pid}/status").read_text()
        hwm_kb = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return {"sessions": n, "peak_rss_mb": hwm_kb / 1024, "after_first": first}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000])
    ap.add_argument("--graphs", nargs="+", default=["hello_chat"],
                    help=f"graphs to run, or 'all' ({', '.join(GRAPHS)})")
    ap.add_argument("--trace", action="store_true", help="write state traces (the default of a run)")
    ap.add_argument("--analysis", action="store_true", help="also run the post-run analysis (stats, figures, "
                    "report), as a run does by default")
    ap.add_argument("--executor", default="async", choices=["async", "process"])
    ap.add_argument("--no-huge", action="store_true", help="skip the 10,000,000-session plan")
    args = ap.parse_args()
    graphs = list(GRAPHS) if args.graphs == ["all"] else args.graphs
    rows = []
    with tempfile.TemporaryDirectory() as out:
        for graph in graphs:
            for n in args.sizes:
                rows.append(measure(n, out, trace=args.trace, analysis=args.analysis, executor=args.executor,
                                    graph=graph))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        if not args.no_huge and Path("/proc").is_dir():
            huge = measure_huge_plan(out)
    print(f"model none, executor {args.executor}, trace {'on' if args.trace else 'off'}, "
          f"analysis {'on' if args.analysis else 'off'}; peak RSS in MB")
    print(f"{'graph':<17} {'sessions':>9} {'results MB':>10} {'sessions run':>12} {'+ summary':>10} "
          f"{'whole run':>10} {'wall (s)':>9}")
    for r in rows:
        print(f"{r['graph']:<17} {r['sessions']:>9,} {r['results_mb']:>10.1f} {r['peak_sessions_mb']:>12.1f} "
              f"{r['peak_summary_mb']:>10.1f} {r['peak_rss_mb']:>10.1f} {r['wall_s']:>9}")
    for graph in graphs:
        mine = [r for r in rows if r["graph"] == graph]
        a = mine[0]
        for b in mine[1:]:
            print(f"{graph}: peak RSS {b['sessions']:,} / {a['sessions']:,} sessions = "
                  f"{b['peak_rss_mb'] / a['peak_rss_mb']:.2f} whole run, "
                  f"{b['peak_summary_mb'] / a['peak_summary_mb']:.2f} up to the summary, "
                  f"{b['peak_sessions_mb'] / a['peak_sessions_mb']:.2f} while sessions run"
                  + (" (goal <= 1.10 from 2,000 to 10,000)" if (a["sessions"], b["sessions"]) == (2000, 10000) else ""))
        for r in mine:
            if r["sessions"] >= 50_000:
                print(f"{graph}: {r['sessions']:,} sessions, whole run {r['peak_rss_mb']:.0f} MB "
                      f"= {r['peak_rss_mb'] / 1024:.2f} GB (goal < 1 GB)")
    if not args.no_huge and Path("/proc").is_dir():
        print(f"hello_chat {huge['sessions']:>13,} planned: peak {huge['peak_rss_mb']:.1f} MB after the first "
              f"{huge['after_first']} sessions (then stopped)")


if __name__ == "__main__":
    main()
