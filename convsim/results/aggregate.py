"""Dataset-level aggregation that every figure goes through: mean, n and a 95% CI of the mean.

The interval of a mean (:func:`mean_ci`) is Wilson's score interval when every value is 0 or 1 (a
proportion) and the Student t interval otherwise; the interval of a difference of means
(:func:`mean_diff_ci`) is the t interval of the paired differences, Newcombe's hybrid score interval
of two proportions, or Welch's t interval. These cover close to their nominal 95 % at small n where
the percentile bootstrap did not (about 0.84 at n = 5 for normal data; docs/analysis.md has the table), and
cost one pass over the values. The percentile bootstrap (:func:`bootstrap_ci`) is kept for callers
that ask for it and for Spearman's rho (evaluation/reporting/stats.py).

Two promises hold for every bootstrap here and in the analysis layer:

* **Order independence.** The sample is sorted before it is resampled, so the interval depends on
  the values only, never on the order the records were written in (an executor or concurrency
  level that finishes sessions in another order gives the same bytes). Paired and two-variable
  samples are sorted as tuples.
* **Bounded memory.** Resample indices are drawn in chunks of at most ``CHUNK_INDICES`` integers
  (8 MB), never as one ``n_boot x n`` matrix; the chunks come from one generator in sequence, so the
  draws are exactly those of the unchunked matrix.
"""
from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping

import numpy as np

from convsim.results.metric_ranges import Range, clip_to, difference_range, outside
from convsim.textio import is_int

CHUNK_INDICES = 1 << 20  # resample indices held at once (int64: 8 MB)


def record_sort_key(record: Mapping) -> tuple[str, str, int]:
    """(variant, session id, trial): the order every aggregation sees, whatever order sessions finished in."""
    trial = record.get("trial", 0)
    return (str(record.get("variant", "default")), str(record.get("session_id")),
            trial if is_int(trial) else 0)


def session_means(triples: Iterable[tuple[object, object, object]]) -> dict[str, tuple[float, int]]:
    """``(session, trial, value)`` triples -> ``{session: (mean over its trials, trials)}``, sessions
    (as str) in sorted order, each session's trials summed in trial order.

    The session is the unit of every interval and test: with ``--trials K`` a session's trials replay
    the same customer (the same seeds but the trial) and are not independent observations, so a
    session is averaged over its trials before anything is resampled or tested. Non-finite and
    ``None`` values are left out; a session with none left is dropped. With one trial per session
    the means are the values themselves (the same bits)."""
    index: dict[str, int] = {}
    sessions, trials, values = array("q"), array("q"), array("d")
    for session, trial, value in triples:
        kept = _finite([value])
        if kept:
            sessions.append(index.setdefault(str(session), len(index)))
            trials.append(trial if is_int(trial) else 0)
            values.append(kept[0])
    means, counts, at = session_means_by_index(np.frombuffer(sessions, dtype=np.int64),
                                               np.frombuffer(trials, dtype=np.int64), np.frombuffer(values))
    names = list(index)
    by_name = {names[i]: (float(m), int(k)) for i, m, k in zip(at.tolist(), means, counts)}
    return {name: by_name[name] for name in sorted(by_name)}


def session_means_of_columns(sessions: np.ndarray, trials: np.ndarray, values: np.ndarray
                             ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`session_means` over three parallel columns (session index, trial, value; NaN: no value)
    held as arrays, not tuples (the summary of 50,000 sessions keeps ~24 bytes per value, not ~100):
    ``(means, trials per session)``, sessions in index order, the same bits as ``session_means``."""
    means, counts, _ = session_means_by_index(sessions, trials, values)
    return means, counts


def session_means_by_index(sessions: np.ndarray, trials: np.ndarray, values: np.ndarray
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`session_means_of_columns` and the session index of each mean: ``(means, trials per
    session, session indices)``, in index order."""
    keep = ~np.isnan(values)
    sessions, trials, values = sessions[keep], trials[keep], values[keep]
    if values.size == 0:
        return np.empty(0), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    order = np.lexsort((trials, sessions))  # by session, each session's trials in trial order
    sessions, values = sessions[order], values[order]
    starts = np.flatnonzero(np.r_[True, sessions[1:] != sessions[:-1]])
    counts = np.diff(np.r_[starts, sessions.size])
    means = values[starts].copy()  # one trial: the value itself
    for i in np.flatnonzero(counts > 1):
        means[i] = float(np.mean(values[starts[i]:starts[i] + counts[i]]))
    return means, counts, sessions[starts]


def trials_info(counts: Iterable[int]) -> dict:
    """``{"n_values", "trials_per_session"}`` beside a session-level n: the trial values averaged
    and the trials per session (an int when every session has the same number, else their mean)."""
    counts = list(counts)
    total = int(sum(counts))
    if not counts:
        per = None
    elif min(counts) == max(counts):
        per = int(counts[0])
    else:
        per = round(total / len(counts), 2)
    return {"n_values": total, "trials_per_session": per}


def _finite(values: Iterable[object]) -> list[float]:
    out = []
    for v in values:
        if v is None or isinstance(v, bool):
            continue
        if isinstance(v, (int, float, np.integer, np.floating)) and math.isfinite(float(v)):
            out.append(float(v))
    return out


def resample_chunks(n: int, n_boot: int, seed: int) -> Iterator[np.ndarray]:
    """Bootstrap index matrices ``(rows, n)`` whose rows add up to ``n_boot`` resamples of ``range(n)``."""
    rng = np.random.default_rng(seed)
    rows = max(1, CHUNK_INDICES // max(n, 1))
    for start in range(0, n_boot, rows):
        yield rng.integers(0, n, size=(min(rows, n_boot - start), n))


def bootstrap_statistic(n: int, statistic: Callable[[np.ndarray], np.ndarray], *, n_boot: int = 1000,
                        seed: int = 0) -> np.ndarray:
    """``statistic(idx)`` (one value per row of an index chunk) over ``n_boot`` resamples of n items."""
    parts = [np.asarray(statistic(idx), dtype=float) for idx in resample_chunks(n, n_boot, seed)]
    return np.concatenate(parts) if parts else np.empty(0)


def bootstrap_means(xs: np.ndarray, *, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """Means of ``n_boot`` resamples of ``xs`` (sorted first: the result ignores the input order)."""
    xs = np.sort(np.asarray(xs, dtype=float))
    return bootstrap_statistic(len(xs), lambda idx: xs[idx].mean(axis=1), n_boot=n_boot, seed=seed)


def _sample(values: Iterable[object]) -> tuple[np.ndarray, dict]:
    """The finite values, sorted, and ``{"mean", "n", "ci_low", "ci_high", "ci_method"}`` without an
    interval yet (mean summed in sorted order: the same bits whatever the input order)."""
    xs = np.sort(np.asarray(_finite(values), dtype=float))
    return xs, {"mean": float(xs.mean()) if xs.size else None, "n": int(xs.size),
                "ci_low": None, "ci_high": None, "ci_method": None}


def is_binary(xs: np.ndarray) -> bool:
    """True when every value is 0 or 1: the metric is a proportion (a success flag, a boolean)."""
    return bool(xs.size) and bool(np.all((xs == 0) | (xs == 1)))


def _t_interval(estimate: float, se: float, df: float, alpha: float) -> tuple[float, float]:
    """estimate -/+ t_{1-alpha/2, df} * se, the quantile from scipy.special.stdtrit (what
    scipy.stats.t.ppf computes, without its ~0.3 ms of overhead); [estimate, estimate] when se is 0."""
    if se == 0:
        return estimate, estimate
    from scipy.special import stdtrit  # imported on first use: scipy costs a worker ~1 s and ~60 MB at start
    half = float(stdtrit(df, 1 - alpha / 2)) * se
    return estimate - half, estimate + half


def wilson_ci(count: int, n: int, *, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson's score interval of count / n: what scipy.stats.binomtest(...).proportion_ci(method="wilson")
    computes, step for step and float for float (tests compare them), without importing scipy.stats
    (~0.3–0.9 s at a run's end, for a summary that needs only this); the same as statsmodels'
    ``proportion_confint(method="wilson")``. 24 of 24: [0.862, 1]."""
    from scipy.special import ndtri  # imported on first use (see _t_interval)
    k, n = int(count), int(n)
    p = k / n
    z = ndtri(0.5 + 0.5 * (1 - alpha))
    denom = 2 * (n + z**2)
    center = (2 * n * p + z**2) / denom
    delta = z / denom * math.sqrt(4 * n * p * (1 - p) + z**2)
    low = 0.0 if k == 0 else center - delta
    high = 1.0 if k == n else center + delta
    return max(0.0, float(low)), min(1.0, float(high))


def mean_ci(values: Iterable[object], *, alpha: float = 0.05, binary: bool | None = None,
            bounds: Range | None = None) -> dict:
    """Mean with a ``1 - alpha`` confidence interval, and the interval's method.

    * every value 0 or 1 (``binary=None`` detects it; ``False`` never takes it, as for differences,
      which can be -1): Wilson's score interval (Wilson 1927; Agresti & Coull 1998, Brown, Cai &
      DasGupta 2001), ``ci_method`` "Wilson score";
    * otherwise the Student t interval mean -/+ t_{1-alpha/2, n-1} sd / sqrt(n), exact for normal data
      (``ci_method`` "Student t"); values that are all equal get [mean, mean].

    ``None`` and non-finite values are not applicable and are left out; ``n`` counts what was used.
    Returns ``{"mean", "n", "ci_low", "ci_high", "ci_method"}``; the mean is ``None`` when ``n == 0``
    and the interval (and its method) ``None`` when ``n < 2``. One pass over the values, no resampling.

    ``bounds``: the metric's declared range ``(low, high)`` (None: unbounded side; convsim.results.metric_ranges).
    The interval is clipped to it and ``ci_clipped`` says whether an end moved; when a value lies
    outside the range it is not clipped (the range does not hold; the caller warns).
    """
    xs, out = _sample(values)
    n = out["n"]
    if n < 2:
        return clip_to(out, bounds)  # no interval: ci_clipped False when bounds are given
    if binary is None:
        binary = is_binary(xs)
    if binary:
        out["ci_low"], out["ci_high"] = wilson_ci(int(xs.sum()), n, alpha=alpha)
        out["ci_method"] = "Wilson score"
    else:
        sd = float(xs.std(ddof=1))
        out["ci_low"], out["ci_high"] = _t_interval(out["mean"], sd / math.sqrt(n), n - 1, alpha)
        out["ci_method"] = "Student t"
    return _clip_if_held(out, xs, bounds)


def _clip_if_held(ci: dict, values: np.ndarray, bounds: Range | None, clip: Range | None = None) -> dict:
    """``ci`` clipped to ``clip`` (default ``bounds``; :func:`convsim.results.metric_ranges.clip_to`) when
    every value lies in ``bounds``; with a value outside, the range does not hold and ``ci`` keeps
    its ends (``ci_clipped`` False)."""
    if bounds is not None and outside(values, bounds).any():
        ci["ci_clipped"] = False
        return ci
    return clip_to(ci, bounds if clip is None else clip)


def mean_diff_ci(a: Iterable[object], b: Iterable[object], *, paired: bool, alpha: float = 0.05,
                 bounds: Range | None = None) -> dict:
    """mean(b) - mean(a) with a ``1 - alpha`` confidence interval: ``{"diff", "ci_low", "ci_high",
    "ci_method"}``, the interval None when a side (or the pairs) has fewer than 2 values.

    * ``paired`` (``a[i]`` and ``b[i]`` are one session), both sides all 0/1: Newcombe's paired
      square-and-add score interval (Newcombe 1998, Statist. Med. 17:2635, method 10: the Wilson
      intervals of the two proportions combined with their correlation), "Newcombe paired score".
      Unlike a t interval it is never [0, 0] when every pair agrees (10 agreeing pairs:
      [-0.278, 0.278]);
    * ``paired`` otherwise: the Student t interval of the differences b - a (:func:`mean_ci` with
      ``binary=False``), "paired t";
    * independent, both sides all 0/1: Newcombe's hybrid score interval (Newcombe 1998, method 10;
      statsmodels' ``confint_proportions_2indep(method="newcomb")``), "Newcombe hybrid score";
    * independent otherwise: Welch's t interval (Welch-Satterthwaite df), "Welch t".

    ``bounds``: the metric's declared range on both sides (convsim.results.metric_ranges). When both ends
    are bounded the difference lies in [low - high, high - low], and the interval is clipped to that
    (``ci_clipped`` says whether an end moved), unless a value of either side lies outside ``bounds``.
    """
    a = a if isinstance(a, np.ndarray) else list(a)
    b = b if isinstance(b, np.ndarray) else list(b)
    out = _mean_diff_ci(a, b, paired=paired, alpha=alpha)
    differences = difference_range(bounds)
    if differences is None:
        return out
    values = np.concatenate([np.asarray(_finite(a), dtype=float), np.asarray(_finite(b), dtype=float)])
    return _clip_if_held(out, values, bounds, differences)


def _mean_diff_ci(a, b, *, paired: bool, alpha: float) -> dict:
    """:func:`mean_diff_ci` without a range."""
    if paired:
        xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        if xa.shape != xb.shape:
            raise ValueError(f"paired samples differ in length: {xa.size} and {xb.size}")
        both = np.isfinite(xa) & np.isfinite(xb)  # a pair missing a side (None, NaN) is left out
        if both.sum() >= 2 and is_binary(xa[both]) and is_binary(xb[both]):
            return _newcombe_paired(xa[both], xb[both], alpha)
        ci = mean_ci(xb - xa, alpha=alpha, binary=False)
        return {"diff": ci["mean"], "ci_low": ci["ci_low"], "ci_high": ci["ci_high"],
                "ci_method": "paired t" if ci["ci_method"] else None}
    (xa, sa), (xb, sb) = _sample(a), _sample(b)
    out = {"diff": sb["mean"] - sa["mean"] if xa.size and xb.size else None,
           "ci_low": None, "ci_high": None, "ci_method": None}
    if min(xa.size, xb.size) < 2:
        return out
    if is_binary(xa) and is_binary(xb):
        la, ua = wilson_ci(int(xa.sum()), xa.size, alpha=alpha)
        lb, ub = wilson_ci(int(xb.sum()), xb.size, alpha=alpha)
        pa, pb, d = sa["mean"], sb["mean"], out["diff"]
        out.update(ci_low=d - math.sqrt((pb - lb) ** 2 + (ua - pa) ** 2),
                   ci_high=d + math.sqrt((ub - pb) ** 2 + (pa - la) ** 2), ci_method="Newcombe hybrid score")
        return out
    va, vb = float(xa.var(ddof=1)) / xa.size, float(xb.var(ddof=1)) / xb.size
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (xa.size - 1) + vb ** 2 / (xb.size - 1)) if se else math.inf
    out["ci_low"], out["ci_high"] = _t_interval(out["diff"], se, df, alpha)
    out["ci_method"] = "Welch t"
    return out


def _newcombe_paired(xa: np.ndarray, xb: np.ndarray, alpha: float) -> dict:
    """mean(xb) - mean(xa) of paired 0/1 values with Newcombe's method 10 interval: the Wilson
    intervals (l, u) of p_b and p_a, combined with the phi correlation of the 2x2 table (numerator
    ``n11 n22 - n12 n21``, shrunk by n/2 toward 0 when positive; 0 when a margin is empty):
    ``d - sqrt((p_b - l_b)^2 + (u_a - p_a)^2 - 2 phi (p_b - l_b)(u_a - p_a))`` and the mirror image
    for the upper end (as R's contingencytables ``Newcombe_square_and_add_CI_paired_2x2``)."""
    n = xa.size
    n11 = int(np.sum((xb == 1) & (xa == 1)))
    n12 = int(np.sum((xb == 1) & (xa == 0)))
    n21 = int(np.sum((xb == 0) & (xa == 1)))
    n22 = n - n11 - n12 - n21
    pb, pa = (n11 + n12) / n, (n11 + n21) / n
    lb, ub = wilson_ci(n11 + n12, n, alpha=alpha)
    la, ua = wilson_ci(n11 + n21, n, alpha=alpha)
    margins = (n11 + n12) * (n21 + n22) * (n11 + n21) * (n12 + n22)
    phi = 0.0
    if margins:
        cross = n11 * n22 - n12 * n21
        phi = (cross - n / 2 if cross > n / 2 else min(cross, 0)) / math.sqrt(margins)
    d = pb - pa
    low = d - math.sqrt(max(0.0, (pb - lb) ** 2 + (ua - pa) ** 2 - 2 * phi * (pb - lb) * (ua - pa)))
    high = d + math.sqrt(max(0.0, (pa - la) ** 2 + (ub - pb) ** 2 - 2 * phi * (pa - la) * (ub - pb)))
    return {"diff": d, "ci_low": low, "ci_high": high, "ci_method": "Newcombe paired score"}


def bootstrap_ci(values: Iterable[object], *, seed: int = 0, n_boot: int = 1000,
                 alpha: float = 0.05) -> dict:
    """Mean with a percentile bootstrap ``1 - alpha`` confidence interval (``ci_method`` "percentile
    bootstrap"). No output of convsim uses it any more: at small n it covers less than it says (about
    0.84 at n = 5 for normal data); :func:`mean_ci` is the interval of summary.json, stats.json, the report
    and compare. Kept for callers that want it, with the same contract as :func:`mean_ci`.
    """
    xs, out = _sample(values)
    if out["n"] < 2:
        return out
    means = bootstrap_means(xs, n_boot=n_boot, seed=seed)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    out.update(ci_low=float(lo), ci_high=float(hi), ci_method="percentile bootstrap")
    return out
