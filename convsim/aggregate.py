"""Dataset-level aggregation that every figure goes through: mean, n and a bootstrap CI.

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

from .textio import is_int

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
    mean = float(np.sort(xs).mean())  # summed in sorted order: the same bits whatever the input order
    if n < 2:
        return {"mean": mean, "n": n, "ci_low": None, "ci_high": None}
    means = bootstrap_means(xs, n_boot=n_boot, seed=seed)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return {"mean": mean, "n": n, "ci_low": float(lo), "ci_high": float(hi)}
