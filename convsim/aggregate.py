"""Dataset-level aggregation that every figure goes through: mean, n and a bootstrap CI."""
from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np


def _finite(values: Iterable[object]) -> list[float]:
    out = []
    for v in values:
        if v is None or isinstance(v, bool):
            continue
        if isinstance(v, (int, float, np.integer, np.floating)) and math.isfinite(float(v)):
            out.append(float(v))
    return out


def bootstrap_ci(values: Iterable[object], *, seed: int = 0, n_boot: int = 1000,
                 alpha: float = 0.05) -> dict:
    """Mean with a percentile bootstrap ``1 - alpha`` confidence interval.

    ``None`` and non-finite values are not applicable and are left out; ``n`` counts
    what was used. Returns ``{"mean", "n", "ci_low", "ci_high"}``; the mean is ``None``
    when ``n == 0`` and the interval is ``None`` when ``n < 2``.
    """
    xs = np.asarray(_finite(values), dtype=float)
    n = int(xs.size)
    if n == 0:
        return {"mean": None, "n": 0, "ci_low": None, "ci_high": None}
    mean = float(xs.mean())
    if n < 2:
        return {"mean": mean, "n": n, "ci_low": None, "ci_high": None}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    means = xs[idx].mean(axis=1)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return {"mean": mean, "n": n, "ci_low": float(lo), "ci_high": float(hi)}
