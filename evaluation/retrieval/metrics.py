"""Retrieval metrics over graded relevance labels.

Pure functions over plain lists: ``ranked`` is the list of relevance labels (0-3) of the
retrieved items in rank order (rank 1 first). Cut-offs are 1-based. A function returns
``None`` when its value is undefined (no items, no relevant item to normalise by), never
a silent 0 or NaN.

Conventions match trec_eval / pytrec_eval / ir-measures (checked in
tests/test_courses_metrics.py): discount ``1/log2(rank+1)``, linear gain by default,
Precision@K divides by K.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

GAINS = ("linear", "exponential")


def _check_k(k: int | None) -> None:
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
        raise ValueError(f"cut-off k must be a positive integer or None (all), got {k!r}")


def _check_labels(labels: Sequence[int], name: str) -> None:
    for x in labels:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or x < 0 or math.isnan(x):
            raise ValueError(f"{name} must hold non-negative relevance labels, got {x!r}")


def dcg(ranked: Sequence[int], k: int | None = None, *, gain: str = "linear") -> float:
    """Discounted cumulative gain: ``DCG@k = Σ_{i=1..min(k,n)} g(rel_i) / log2(i + 1)``.

    ``g(r) = r`` (linear, trec_eval and the spec) or ``2^r - 1`` (exponential, Burges).
    An empty list has DCG 0.
    """
    _check_k(k)
    _check_labels(ranked, "ranked")
    if gain not in GAINS:
        raise ValueError(f"gain must be one of {GAINS}, got {gain!r}")
    top = ranked[:k] if k is not None else ranked
    g = (lambda r: r) if gain == "linear" else (lambda r: 2.0 ** r - 1.0)
    return float(sum(g(r) / math.log2(i + 2) for i, r in enumerate(top)))


def ndcg_at_k(ranked: Sequence[int], k: int | None = None, *, ideal: Sequence[int] | None = None,
              gain: str = "linear") -> float | None:
    """Normalised DCG: ``NDCG@k = DCG@k(ranked) / DCG@k(sorted(ideal, descending))``.

    ``ideal`` is the pool the ideal ranking is built from:

    * ``None`` — the retrieved items' own labels (the spec's *proxy* NDCG: how close the
      order is to the best order of what was retrieved, as judged);
    * all known labels of the query (gold qrels, or every judged item) — standard
      trec_eval ``ndcg_cut.k``.

    Returns ``None`` when the ideal DCG is 0 (no relevant item to normalise by); the
    original evaluator returned 0 there, which counts "nothing to rank" as a failure.
    """
    pool = list(ranked) if ideal is None else list(ideal)
    _check_labels(pool, "ideal")
    idcg = dcg(sorted(pool, reverse=True), k, gain=gain)
    if idcg == 0:
        return None
    return dcg(ranked, k, gain=gain) / idcg


def ndcg_fixed_ideal_at_k(ranked: Sequence[int], k: int, *, max_label: int = 3,
                          gain: str = "linear") -> float:
    """NDCG@k against a **fixed** ideal: ``DCG@k(ranked) / DCG@k([max_label] * k)``.

    The ideal is k items all labelled ``max_label`` (3 on the 0-3 scale), whatever was
    retrieved: ``IDCG@k = Σ_{i=1..k} g(max_label) / log2(i + 1)``. It needs no gold labels
    (the judge's scores suffice) and, unlike the proxy, it cannot be raised by returning
    fewer courses: a missing item adds 0 to the DCG and nothing is taken from the ideal.
    An empty list scores 0. It is a *lower bound* of the NDCG@k a full judging of the
    catalog would give (that ideal has at most k items of ``max_label``), equal to it when
    the catalog holds at least k courses that deserve ``max_label``; the proxy is an
    upper bound of the same quantity. ``k`` is required: "@all" would let the ideal
    shrink with the list again.
    """
    _check_k(k)
    if k is None:
        raise ValueError("the fixed-ideal NDCG needs a cut-off k (an ideal as long as the list is the proxy again)")
    _check_labels(ranked, "ranked")
    if max(ranked, default=0) > max_label:
        raise ValueError(f"a label above max_label={max_label} in {list(ranked)}")
    return dcg(ranked, k, gain=gain) / dcg([max_label] * k, k, gain=gain)


def precision_at_k(ranked: Sequence[int], k: int | None = None, *, threshold: int = 2,
                   denominator: str = "k") -> float | None:
    """Precision@K with binary relevance ``rel >= threshold`` (spec: score >= 2 is relevant).

    * ``denominator="k"`` (standard; trec_eval ``P.k``, ranx, ir-measures):
      ``|{i <= k : rel_i >= t}| / k`` — a short list is penalised for its missing items.
    * ``denominator="returned"`` (the original evaluator's defect, kept as a labelled
      option): divides by ``min(k, n)``, so 3 relevant out of 5 returned scores 0.6 at
      K=10 instead of 0.3.

    ``k=None`` means "all returned" (both denominators are then ``n``).

    An empty list scores 0 at a cut-off K (``0 / K``: nothing relevant in the top K, as
    trec_eval scores a query the run returned nothing for); ``None`` only where the
    denominator is the returned count (``k=None``, or ``denominator="returned"``), since
    ``0 / 0`` is undefined. (Before, an empty list returned ``None`` at every K, so a
    retriever that returned nothing dropped out of the mean instead of scoring 0.)
    """
    _check_k(k)
    _check_labels(ranked, "ranked")
    if denominator not in ("k", "returned"):
        raise ValueError(f"denominator must be 'k' or 'returned', got {denominator!r}")
    if not ranked:
        return None if (k is None or denominator == "returned") else 0.0
    top = ranked[:k] if k is not None else ranked
    hits = sum(1 for r in top if r >= threshold)
    divisor = len(top) if (denominator == "returned" or k is None) else k
    return hits / divisor


def recall_at_k(ranked: Sequence[int], n_relevant: int, k: int | None = None, *,
                threshold: int = 2) -> float | None:
    """Recall@K = ``|{i <= k : rel_i >= t}| / n_relevant`` where ``n_relevant`` counts the
    query's relevant items in the gold labels (retrieved or not).

    Needs gold labels: returns ``None`` when ``n_relevant`` is 0 (recall is undefined).
    """
    _check_k(k)
    _check_labels(ranked, "ranked")
    if n_relevant < 0:
        raise ValueError("n_relevant must be >= 0")
    if n_relevant == 0:
        return None
    top = ranked[:k] if k is not None else ranked
    return sum(1 for r in top if r >= threshold) / n_relevant


def reciprocal_rank(ranked: Sequence[int], *, threshold: int = 2) -> float:
    """RR = ``1 / rank`` of the first item with ``rel >= threshold``; 0 when none is retrieved.

    The mean over queries is MRR. Only meaningful when the query has a relevant item in
    its gold labels; the caller skips (``None``) queries without one.
    """
    _check_labels(ranked, "ranked")
    for i, r in enumerate(ranked, start=1):
        if r >= threshold:
            return 1.0 / i
    return 0.0


def average_relevance(scores: Sequence[int]) -> float | None:
    """Mean judged score on the 0-3 scale: ``Σ s_i / n``; ``None`` for no scores."""
    _check_labels(scores, "scores")
    return sum(scores) / len(scores) if scores else None


def highly_relevant_rate(scores: Sequence[int]) -> float | None:
    """Percentage (0-100, as in the spec) of scores equal to 3: ``count(3) / n × 100``."""
    _check_labels(scores, "scores")
    return 100.0 * sum(1 for s in scores if s == 3) / len(scores) if scores else None


def irrelevant_rate(scores: Sequence[int]) -> float | None:
    """Percentage (0-100, as in the spec) of scores equal to 0: ``count(0) / n × 100``."""
    _check_labels(scores, "scores")
    return 100.0 * sum(1 for s in scores if s == 0) / len(scores) if scores else None


def score_distribution(scores: Sequence[int]) -> dict[int, int]:
    """Counts of each label 0..3 (always four bins, as in the original)."""
    _check_labels(scores, "scores")
    return {label: sum(1 for s in scores if s == label) for label in (0, 1, 2, 3)}


# The spec's interpretation tables: (lower bound, level, presentation line), best first.
NDCG_BANDS = ((0.9, "Excellent", "Near-perfect ranking"),
              (0.7, "Good", "Strong ranking quality"),
              (0.5, "Fair", "Acceptable, room for improvement"),
              (float("-inf"), "Poor", "Needs significant work"))
PRECISION_BANDS = ((0.8, "Excellent", "80% of top 10 are relevant"),
                   (0.6, "Good", "Most top results are relevant"),
                   (0.4, "Fair", "Mixed relevance in top results"),
                   (float("-inf"), "Poor", "Few top results are relevant"))


def interpretation_band(value: float | None, bands=NDCG_BANDS) -> tuple[str, str] | None:
    """The spec's quality level and presentation line for a value (``None`` for ``None``).

    The spec gives NDCG@10 bands (>=0.9 Excellent, 0.7-0.9 Good, 0.5-0.7 Fair, <0.5 Poor)
    and Precision@10 bands (>=0.8, 0.6-0.8, 0.4-0.6, <0.4); lower bounds are inclusive.
    """
    if value is None:
        return None
    for lower, level, line in bands:
        if value >= lower:
            return level, line
    raise AssertionError("the last band has no lower bound")


def case_metrics(judged: Sequence[int], *, gold_ranked: Sequence[int] | None = None,
                 gold_all: Sequence[int] | None = None, cutoffs: Sequence[int] = (5, 10),
                 threshold: int = 2, gain: str = "linear",
                 precision_over_returned: bool = False) -> dict[str, float | int | None]:
    """Every per-case figure of the course evaluator.

    ``judged``: the judge's scores of the retrieved courses in rank order (empty when the
    retriever returned nothing). ``gold_ranked``: the gold labels of the same courses (0 when
    unlabelled) and ``gold_all``: all gold labels of the case, when the case has gold labels.
    Keys ``@all`` use the whole list.

    * ``ndcgProxy@K`` is the spec's NDCG (ideal = the retrieved list's own scores): it cannot
      see relevant courses that were not retrieved, so a short list of good courses scores 1.
    * ``ndcgFixedIdeal@K`` (judged, numeric K only) divides by the DCG of K courses scored 3.
    * ``ndcgGold``, ``precisionGold``, ``recall`` and ``mrr`` use the gold labels (ideal from
      all of them, trec_eval style).

    An empty list is scored, not dropped: ``retrievalEmpty`` is 1, every metric with a
    cut-off K is 0 (nothing relevant in the top K), and only the figures that divide by the
    number returned or normalise by the returned scores are ``None`` (0/0): the averages
    and rates over the list, ``ndcgProxy@K``, ``precision@all``, ``precisionGold@all``.
    """
    out: dict[str, float | int | None] = {
        "totalCourses": len(judged),
        "retrievalEmpty": int(not judged),
        "averageRelevance": average_relevance(judged),
        "highlyRelevantRate": highly_relevant_rate(judged),
        "irrelevantRate": irrelevant_rate(judged),
    }
    cuts: list[tuple[str, int | None]] = [(str(k), k) for k in cutoffs] + [("all", None)]
    for name, k in cuts:
        out[f"ndcgProxy@{name}"] = ndcg_at_k(judged, k, gain=gain)
        if k is not None:
            out[f"ndcgFixedIdeal@{name}"] = ndcg_fixed_ideal_at_k(judged, k, gain=gain)
        out[f"precision@{name}"] = precision_at_k(judged, k, threshold=threshold)
        if precision_over_returned:
            out[f"precisionOverReturned@{name}"] = precision_at_k(judged, k, threshold=threshold,
                                                                  denominator="returned")
    if gold_ranked is not None and gold_all is not None:
        n_relevant = sum(1 for g in gold_all if g >= threshold)
        for name, k in cuts:
            out[f"ndcgGold@{name}"] = ndcg_at_k(gold_ranked, k, ideal=gold_all, gain=gain)
            out[f"precisionGold@{name}"] = precision_at_k(gold_ranked, k, threshold=threshold)
            out[f"recall@{name}"] = recall_at_k(gold_ranked, n_relevant, k, threshold=threshold)
        out["mrr"] = reciprocal_rank(gold_ranked, threshold=threshold) if n_relevant else None
    return out
