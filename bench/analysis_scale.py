"""Analysis at the seed experiment's scale, and its memory as the number of sessions grows.

Prints figures, never passes or fails on them:

(a) wall time of the full end-of-run analysis (summary.json + metrics.csv, stats.json, figures,
    report.html) of 6 variants x 1,000 synthetic sessions;
(b) peak RSS (VmHWM of a fresh subprocess) of summarise + statistics (summary.json and the
    stats.json content) at 2,000, 10,000 and 50,000 synthetic sessions, with the ratios.

    python bench/analysis_scale.py                # both parts
    python bench/analysis_scale.py --part b --sizes 2000 10000

Synthetic sessions: records shaped like a run's (a short transcript, 20 numeric dialogue metrics
of which three are judge scores on 1..5, paired session ids across variants, per-variant effects),
so every test and figure of the analysis has work to do. Set PYTHONPATH to the tree to measure.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # after PYTHONPATH: the tree to measure comes first

N_AUTO = 17
JUDGE = ("judge_coherence", "judge_personalization", "judge_proactiveness")


def write_results(run_dir: Path, *, variants: int, sessions: int, seed: int = 0) -> Path:
    """results.jsonl (+ config.yaml) with ``variants x sessions`` synthetic ok records."""
    run_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    base = rng.normal(0.5, 0.15, (sessions, N_AUTO))  # a session's difficulty, shared across variants
    with open(run_dir / "results.jsonl", "w", encoding="utf-8") as fh:
        for v in range(variants):
            noise = rng.normal(0, 0.1, (sessions, N_AUTO)) + 0.02 * v
            judge = np.clip(np.rint(2.5 + 4 * base[:, :3] + rng.normal(0, 0.7, (sessions, 3)) + 0.1 * v), 1, 5)
            for i in range(sessions):
                metrics = {f"metric_{k:02d}": round(float(base[i, k] + noise[i, k]), 6) for k in range(N_AUTO)}
                metrics.update({j: float(judge[i, n]) for n, j in enumerate(JUDGE)})
                metrics.update(judge_failed=0, judge_heuristic=1)
                transcript = [{"turn": t, "speaker": s, "text": f"{s} says something about topic {t} ({i})",
                               "meta": {}} for t in (1, 2, 3) for s in ("user", "system")]
                fh.write(json.dumps({"variant": f"model_{v}", "session_id": f"u{i:05d}", "trial": 0, "seed": i,
                                     "status": "ok", "error": None, "transcript": transcript,
                                     "turn_metrics": [{"turn": t, "tas": metrics["metric_00"]} for t in (1, 2, 3)],
                                     "dialogue_metrics": metrics}) + "\n")
    (run_dir / "config.yaml").write_text("name: synthetic\ngraph: hello_chat\n", encoding="utf-8")
    return run_dir


def summarise_and_stats(run_dir: Path) -> float:
    """What (b) measures, in this process: summary.json and the statistics of stats.json."""
    from convsim.results.summary import summarise_run
    from convsim.evaluation.reporting.records import load_run
    from convsim.evaluation.reporting.run_stats import run_statistics
    t0 = time.perf_counter()
    summarise_run(run_dir, SimpleNamespace(dataset_metrics=lambda ok: {"n": len(ok)}))
    run = load_run(run_dir)
    stats = run_statistics(run.ok_records, table=run.table)
    (run_dir / "stats.json").write_text(json.dumps(stats, default=str), encoding="utf-8")
    return time.perf_counter() - t0


def part_a(tmp: Path, variants: int, sessions: int) -> None:
    from convsim.results.summary import summarise_run
    from convsim.evaluation.reporting.analysis import analyze_run
    run_dir = write_results(tmp / "a", variants=variants, sessions=sessions)
    t0 = time.perf_counter()
    summarise_run(run_dir, SimpleNamespace(dataset_metrics=lambda ok: {"n": len(ok)}))
    t1 = time.perf_counter()
    analyze_run(run_dir)
    t2 = time.perf_counter()
    stats = json.loads((run_dir / "stats.json").read_text(encoding="utf-8"))
    print(f"(a) {variants} variants x {sessions} sessions: full analysis {t2 - t0:.1f} s "
          f"(summary {t1 - t0:.1f} s, stats + figures + report {t2 - t1:.1f} s); "
          f"{len(stats['metrics'])} metrics tested, {len(stats['correlations'])} pooled and "
          f"{len(stats['correlations_by_variant'])} per-variant correlations")


def part_b(tmp: Path, sizes: list[int], variants: int) -> None:
    peaks = {}
    for n in sizes:
        run_dir = write_results(tmp / f"b{n}", variants=variants, sessions=n // variants)
        out = subprocess.run([sys.executable, __file__, "--peak-of", str(run_dir)], capture_output=True,
                             text=True, check=True)
        peak_mb, seconds = json.loads(out.stdout.strip().splitlines()[-1])
        peaks[n] = peak_mb
        print(f"(b) {n:>6} sessions ({variants} variants): peak RSS {peak_mb:7.1f} MB, {seconds:6.1f} s")
    first = sizes[0]
    print("(b) ratios: " + ", ".join(f"{n}/{first}: {peaks[n] / peaks[first]:.2f}" for n in sizes[1:]))


def peak_rss_mb() -> float:
    """This process's peak RSS. VmHWM belongs to the process image, so it is not inflated by the
    parent's memory the way ru_maxrss is across fork + exec; ru_maxrss where /proc is missing."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("a", "b", "both"), default="both")
    ap.add_argument("--variants", type=int, default=6)
    ap.add_argument("--sessions", type=int, default=1000, help="sessions per variant for (a)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000, 50000], help="total sessions for (b)")
    ap.add_argument("--peak-of", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.peak_of:
        seconds = summarise_and_stats(Path(args.peak_of))
        print(json.dumps([peak_rss_mb(), seconds]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        if args.part in ("a", "both"):
            part_a(Path(tmp), args.variants, args.sessions)
        if args.part in ("b", "both"):
            part_b(Path(tmp), args.sizes, 2)


if __name__ == "__main__":
    main()
