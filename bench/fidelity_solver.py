"""The fidelity discriminator's solver: liblinear (shipped) against lbfgs (before), side by side.

Fits the turn-level discriminator (evaluation/fidelity/discriminator.py) of WOZ 2.0's human turns
against a held-out half of themselves and against a run's simulated turns, once with each solver,
and prints the AUC [CI] and the CPU seconds of each, so that the solver is seen to change the cost,
not the figure. Usage::

    python bench/fidelity_solver.py RUN_DIR [--human ../shared/data/woz2/dialogues.json]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sklearn.linear_model import LogisticRegression

from convsim.evaluation.fidelity import corpus, discriminator, features

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--human", type=Path, default=ROOT.parent / "shared" / "data" / "woz2" / "dialogues.json")
    args = ap.parse_args()
    if not args.human.exists():
        print(f"error: no human corpus at {args.human}", file=sys.stderr)
        return 2
    human = corpus.load_human(args.human)
    sim = next(iter(corpus.load_run(args.run_dir).values()))
    a, b = features.split_reference(human, 101)
    shipped = discriminator._pipeline

    def with_solver(solver):
        def pipe(numeric, seed):
            p = shipped(numeric, seed)
            p.steps[-1] = ("clf", LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000,
                                                     random_state=seed, solver=solver))
            return p
        return pipe

    print(f"{'solver':10} {'pair':14} {'AUC [95% CI]':24} CPU s")
    try:
        for solver in ("lbfgs", "liblinear"):
            discriminator._pipeline = with_solver(solver)
            for name, (x, y) in {"human_split": (b, a), "simulated": (human, sim)}.items():
                t0 = time.process_time()
                r = discriminator.discriminate(x, y, level="turn", seed=0)
                print(f"{solver:10} {name:14} {r['auc']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
                      f"{'':5} {time.process_time() - t0:.1f}", flush=True)
    finally:
        discriminator._pipeline = shipped
    return 0


if __name__ == "__main__":
    sys.exit(main())
