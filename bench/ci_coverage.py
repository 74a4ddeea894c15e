"""Coverage of the 95 % confidence intervals at small n: the old percentile bootstrap against the
intervals every output now uses (convsim.results.aggregate.mean_ci and mean_diff_ci).

Prints figures, never passes or fails on them (tests/test_ci_coverage.py holds a smaller, seeded
version that does). For each cell, ``--reps`` simulated experiments (default 2,000): draw n values
from a distribution with a known mean, compute both intervals with the project's own functions, and
count how often each contains the true mean. The simulation's standard error at 2,000 experiments
is about 0.005 near 0.95.

    PYTHONPATH=$PWD python bench/ci_coverage.py            # the table of docs/analysis.md
    PYTHONPATH=$PWD python bench/ci_coverage.py --reps 500

"old": ``bootstrap_ci`` (percentile bootstrap of the mean, 1,000 resamples, seed 0: what summary.json,
stats.json, the report and compare gave before); for differences the old compare's percentile
bootstrap of the paired differences, or of each run on its own (seeds 0 and 1).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from convsim.results.aggregate import bootstrap_ci, bootstrap_means, mean_ci, mean_diff_ci

LOGNORMAL_MEAN = float(np.exp(0.5))  # lognormal(0, 1): mean exp(1/2), skewness 6.2

# (label, draw(rng, n) -> values, n, true mean)
ONE_SAMPLE = [
    ("normal", lambda rng, n: rng.normal(0.0, 1.0, n), 5, 0.0),
    ("normal", lambda rng, n: rng.normal(0.0, 1.0, n), 10, 0.0),
    ("normal", lambda rng, n: rng.normal(0.0, 1.0, n), 20, 0.0),
    ("0/1, p = 0.2", lambda rng, n: (rng.random(n) < 0.2).astype(float), 5, 0.2),
    ("0/1, p = 0.2", lambda rng, n: (rng.random(n) < 0.2).astype(float), 10, 0.2),
    ("lognormal(0, 1)", lambda rng, n: rng.lognormal(0.0, 1.0, n), 10, LOGNORMAL_MEAN),
]


def _old_diff(a: np.ndarray, b: np.ndarray, *, paired: bool) -> tuple[float, float]:
    """The old compare's interval (evaluation/reporting/compare.py before the change)."""
    if paired:
        boots = bootstrap_means(b - a, seed=0)
    else:
        boots = bootstrap_means(b, seed=0) - bootstrap_means(a, seed=1)
    return float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def _bounds(ci: dict) -> tuple[float, float]:
    return ci["ci_low"], ci["ci_high"]


def coverage(label: str, draw, truth: float, old, new, *, reps: int, seed: int) -> tuple:
    """(label, old coverage, new coverage, the new intervals' methods) over ``reps`` samples
    ``draw(rng)``; ``old`` maps a sample to (low, high), ``new`` to a dict with ``ci_method``."""
    rng = np.random.default_rng(seed)
    hits_old = hits_new = 0
    methods = set()
    for _ in range(reps):
        sample = draw(rng)
        lo, hi = old(sample)
        ci = new(sample)
        hits_old += lo <= truth <= hi
        hits_new += ci["ci_low"] <= truth <= ci["ci_high"]
        methods.add(ci["ci_method"])
    return label, hits_old / reps, hits_new / reps, " / ".join(sorted(methods))


def one_sample(reps: int, seed: int) -> list[tuple]:
    return [coverage(f"{label}, n = {n}", lambda rng, draw=draw, n=n: draw(rng, n), mu,
                     lambda x: _bounds(bootstrap_ci(x)), mean_ci, reps=reps, seed=seed)
            for label, draw, n, mu in ONE_SAMPLE]


def _paired_binary(rng, n: int = 10) -> tuple:
    """n sessions scored 0/1 by two variants: a success of A is kept by B, a failure of A turns into a
    success of B with probability 2/7 (P(A) = 0.3, P(B) = 0.5, the pairs correlated)."""
    a = (rng.random(n) < 0.3).astype(float)
    b = np.where(a == 1, 1.0, (rng.random(n) < 2 / 7).astype(float))
    return a, b


def differences(reps: int, seed: int) -> list[tuple]:
    """Mean differences: paired normal (n = 5 pairs), independent normal with unequal sd and n
    (5 vs 8), paired 0/1 (10 correlated pairs), independent 0/1 (p = 0.2 vs 0.5, 10 each)."""
    cells = [
        ("paired normal differences, n = 5", True, lambda rng: (z := rng.normal(0, 1, 5), z + rng.normal(0.5, 1, 5)), 0.5),
        ("independent normal, sd 1 vs 3, n = 5 vs 8", False, lambda rng: (rng.normal(0, 1, 5), rng.normal(0.5, 3, 8)), 0.5),
        ("paired 0/1, p = 0.3 vs 0.5, correlated, n = 10 pairs", True, _paired_binary, 0.2),
        ("independent 0/1, p = 0.2 vs 0.5, n = 10 each", False,
         lambda rng: ((rng.random(10) < 0.2).astype(float), (rng.random(10) < 0.5).astype(float)), 0.3),
    ]
    return [coverage(label, draw, delta, lambda ab, paired=paired: _old_diff(*ab, paired=paired),
                     lambda ab, paired=paired: mean_diff_ci(*ab, paired=paired), reps=reps, seed=seed)
            for label, paired, draw, delta in cells]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2000, help="simulated experiments per cell")
    ap.add_argument("--seed", type=int, default=2024)
    args = ap.parse_args(argv)
    start = time.perf_counter()
    rows = one_sample(args.reps, args.seed) + differences(args.reps, args.seed)
    print(f"coverage of nominal 95 % intervals, {args.reps} simulated experiments per cell (seed {args.seed})\n")
    print("| data | old: percentile bootstrap | new | new method |")
    print("|---|---|---|---|")
    for label, old, new, method in rows:
        print(f"| {label} | {old:.3f} | {new:.3f} | {method} |")
    ones = mean_ci([1.0] * 24)
    old_ones = bootstrap_ci([1.0] * 24)
    print(f"\n24 sessions, every value 1: old [{old_ones['ci_low']:.3f}, {old_ones['ci_high']:.3f}], "
          f"new [{ones['ci_low']:.3f}, {ones['ci_high']:.3f}] ({ones['ci_method']})")
    # paired 0/1 differences took the paired t interval of the differences before Newcombe's
    _, _, t_cover, _ = coverage("paired t", _paired_binary, 0.2, lambda ab: (0.0, 0.0),
                                lambda ab: mean_ci(ab[1] - ab[0], binary=False), reps=args.reps, seed=args.seed)
    agree = mean_diff_ci([1.0] * 10, [1.0] * 10, paired=True)
    print(f"paired 0/1, 10 correlated pairs, through the paired t interval of the differences (before "
          f"Newcombe's): {t_cover:.3f}; 10 pairs that all agree: paired t [0, 0], now "
          f"[{agree['ci_low']:.3f}, {agree['ci_high']:.3f}]")
    print(f"({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
