"""Reference retrievers for course retrieval: they show the scale a metric spans, not a system.

Run them as variants beside a real retriever (``configs/courses_reference.yaml``) to see what
each metric gives a ceiling, a floor and the known ways to game a metric:

* ``oracle`` ranks by the case's **gold labels** (highest first; ties, including every
  unlabelled course, by the base retriever's rank; explicit 0 labels, the traps, last). It is
  the only retriever that reads gold, and it is a ceiling for the gold metrics, never a system
  under test.
* ``random`` returns k courses drawn uniformly from the catalog, seeded by (``random_seed``,
  case id), so a run repeats and every iteration sees the same list: a floor.
* ``top1`` returns only the base retriever's first course (a short-list gamer: the proxy NDCG
  of one course judged relevant is 1).
* ``top1_then_junk`` returns the base retriever's first course, then the first k-1 other
  courses of the catalog in catalog order, regardless of the question (junk padding).
* ``empty`` returns nothing (abstention).

Each function takes a ranking or the catalog's codes, never the gold labels, except
:func:`oracle_ranking`.
"""
from __future__ import annotations

import random

REFERENCES = ("oracle", "random", "top1", "top1_then_junk", "empty")


def _as_ranking(codes: list[str], scores: list[float] | None = None) -> list[dict]:
    return [{"subjectCode": c, "score": None if scores is None else float(scores[i]), "rank": i + 1}
            for i, c in enumerate(codes)]


def oracle_ranking(gold: dict[str, int] | None, base: list[dict], catalog_codes: list[str], k: int) -> list[dict]:
    """The top k of the catalog sorted by ``(-gold label, explicit 0 last, base rank, code)``.

    ``base`` is the base retriever's ranking of the whole catalog (its order breaks ties among
    equal gold labels, so the oracle's unlabelled tail is the base retriever's best guesses).
    A case without gold labels gets the base ranking unchanged (nothing to be an oracle with).
    The ``score`` of each course is its gold label.
    """
    gold = gold or {}
    base_rank = {item["subjectCode"]: item["rank"] for item in base}
    worst = len(catalog_codes) + 1

    def key(code: str):
        label = gold.get(code, 0)
        trap = code in gold and label == 0
        return (-label, trap, base_rank.get(code, worst), code)

    codes = sorted(catalog_codes, key=key)[:k]
    return _as_ranking(codes, [gold.get(c, 0) for c in codes])


def random_ranking(catalog_codes: list[str], k: int, *, seed: int, case_id: str) -> list[dict]:
    """k catalog courses drawn uniformly without replacement, seeded by ``(seed, case_id)``.

    A string seed is hashed with SHA-512 by :class:`random.Random`, so the draw does not
    depend on ``PYTHONHASHSEED``.
    """
    rng = random.Random(f"random-course-retriever:{seed}:{case_id}")
    codes = rng.sample(sorted(catalog_codes), min(k, len(catalog_codes)))
    return _as_ranking(codes)


def top1_ranking(base: list[dict]) -> list[dict]:
    """Only the base retriever's first course."""
    return _as_ranking([item["subjectCode"] for item in base[:1]])


def top1_then_junk_ranking(base: list[dict], catalog_codes: list[str], k: int) -> list[dict]:
    """The base retriever's first course, then the first k-1 other catalog courses in catalog order."""
    first = [item["subjectCode"] for item in base[:1]]
    junk = [c for c in catalog_codes if c not in first][: k - len(first)]
    return _as_ranking(first + junk)


def empty_ranking() -> list[dict]:
    """Nothing: the retriever abstains."""
    return []
