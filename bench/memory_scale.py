"""Peak memory against the number of sessions: it should stay flat (lazy plan, streamed results).

Runs hello_chat with model ``none`` in a fresh subprocess per size and prints the peak resident set
(``ru_maxrss``) of each, side by side, and the ratio of the largest to the smallest. A last column
starts a run of 10,000,000 sessions and measures its peak (``VmHWM``) once the first sessions have
landed, then stops it: an eager plan would have allocated gigabytes before the first session.

    python bench/memory_scale.py [--sizes 2000 10000] [--trace] [--analysis] [--executor async]

By default traces and the post-run analysis are off (the analysis step's memory is measured
separately with --analysis; it reads every record at the end).
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
from convsim.runner import run
n, out, trace, analysis, executor = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1", sys.argv[4] == "1", sys.argv[5]
cfg = config_from_dict({"graph": "hello_chat", "sessions": n, "out_dir": out, "run_id": f"mem{n}",
                        "trace": trace, "executor": executor, "concurrency": 8,
                        **({} if analysis else {"analysis": []})})
import convsim.runner as runner
peak = {}
summarise = runner.summarise_run
def measured_summarise(*a, **k):  # the peak of the sessions themselves, before the end-of-run summary
    peak["sessions"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return summarise(*a, **k)
runner.summarise_run = measured_summarise
t = time.perf_counter()
run(cfg, analyze=analysis)
print(json.dumps({"sessions": n, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "peak_sessions_mb": peak["sessions"], "wall_s": round(time.perf_counter() - t, 1)}))
"""


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def measure(n: int, out: str, *, trace: bool, analysis: bool, executor: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(n), out, str(int(trace)), str(int(analysis)),
                           executor], capture_output=True, text=True, cwd=ROOT, env=_env(), check=True)
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
    ap.add_argument("--trace", action="store_true", help="write state traces (the default of a run)")
    ap.add_argument("--analysis", action="store_true", help="also run the post-run analysis")
    ap.add_argument("--executor", default="async", choices=["async", "process"])
    ap.add_argument("--no-huge", action="store_true", help="skip the 10,000,000-session plan")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as out:
        for n in args.sizes:
            rows.append(measure(n, out, trace=args.trace, analysis=args.analysis, executor=args.executor))
        if not args.no_huge and Path("/proc").is_dir():
            huge = measure_huge_plan(out)
    print(f"hello_chat, model none, executor {args.executor}, trace {'on' if args.trace else 'off'}, "
          f"analysis {'on' if args.analysis else 'off'}")
    print(f"{'sessions':>12} {'peak RSS (MB)':>14} {'of which sessions':>18} {'wall (s)':>9}")
    for r in rows:
        print(f"{r['sessions']:>12,} {r['peak_rss_mb']:>14.1f} {r['peak_sessions_mb']:>18.1f} {r['wall_s']:>9}")
    print(f"ratio peak RSS {rows[-1]['sessions']:,} / {rows[0]['sessions']:,} sessions: "
          f"{rows[-1]['peak_rss_mb'] / rows[0]['peak_rss_mb']:.2f} overall, "
          f"{rows[-1]['peak_sessions_mb'] / rows[0]['peak_sessions_mb']:.2f} while sessions run "
          "(the rest is the end-of-run summary, which reads every record)")
    if not args.no_huge and Path("/proc").is_dir():
        print(f"{huge['sessions']:>12,} {huge['peak_rss_mb']:>14.1f}   (planned; peak after the first "
              f"{huge['after_first']} sessions, then stopped)")


if __name__ == "__main__":
    main()
