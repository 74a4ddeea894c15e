"""A heuristic relevance judge's agreement with a test set's gold labels, over every labelled course.

    python -m convsim.agents.courses.judge_gold test-set-v1                 # both heuristic judges
    python -m convsim.agents.courses.judge_gold test-set-v2 --judge heuristic-tfidf-2

A run's ``dataset.judgeGold*`` figures cover only the labelled courses a retriever happened to return.
This scores two fixed item sets per case, the same for every judge:

* ``labelled``: every course with a gold label;
* ``pool``: those plus the top ``k`` of each pool retriever (bm25, tfidf), an unlabelled course counting
  as gold 0 (the qrels convention). A judge that calls everything relevant is caught here; the
  labelled set alone rewards it, since its only 0s are the homonym traps.

The judge sees a course as the graph shows it (a catalog course with its description, a case's fixed
``retrievedCourses`` as they are) and never the gold labels: they are read after it has scored.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence

from convsim.agents.courses.relevance_judge import HEURISTIC_JUDGES, heuristic_judge_score
from convsim.agents.courses.retrievers import get_retriever, retrieval_query
from convsim.catalog.courses import TestSet, load_courses, load_test_set
from convsim.evaluation.retrieval.compare import judge_agreement

POOL_RETRIEVERS = ("bm25", "tfidf")


def judged_items(test_set: str | TestSet, *, heuristic: str, catalog: str | None = None,
                 pool: Sequence[str] = POOL_RETRIEVERS, k: int = 10) -> list[dict]:
    """One ``{case, code, judged, gold, labelled}`` per (case, course) of the pool, in case order."""
    cases = (test_set if isinstance(test_set, TestSet) else load_test_set(test_set)).cases
    by_code = {c["subjectCode"]: c for c in load_courses(catalog)}
    items = []
    for case in cases:
        gold = case.gold_relevance or {}
        if not gold:
            continue
        own = {c["subjectCode"]: c for c in case.retrieved_courses or []}
        codes = [*gold, *own]
        if not own:  # a fixed list is all a retriever-free case ever shows the judge
            query = retrieval_query(case.question, case.skill)
            codes += [r["subjectCode"] for kind in pool for r in get_retriever(kind, catalog).search(query, k)]
        for code in dict.fromkeys(codes):
            score, _ = heuristic_judge_score(heuristic, case.question, case.skill, own.get(code) or by_code[code],
                                             catalog)
            items.append({"case": case.id, "code": code, "judged": score, "gold": gold.get(code, 0),
                          "labelled": code in gold})
    return items


def agreement(items: list[dict]) -> dict[str, dict]:
    """:func:`judge_agreement` (judge first, gold second) over the labelled items and over the pool."""
    labelled = [i for i in items if i["labelled"]]
    return {name: judge_agreement([i["judged"] for i in chosen], [i["gold"] for i in chosen])
            for name, chosen in (("labelled", labelled), ("pool", items))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("test_set", help="a test-set JSON path or a shipped name (test-set-v1, test-set-v2)")
    parser.add_argument("--judge", action="append", choices=HEURISTIC_JUDGES,
                        help="heuristic judge(s) to score (default: all)")
    parser.add_argument("--catalog", default=None, help="course catalog JSON (default: the shipped one)")
    args = parser.parse_args(argv)
    print(f"{'judge':20s} {'items':9s} {'n':>4s} {'kappa':>6s} {'kappaQ':>6s} {'relAgree':>8s}  confusion (rows judge 0-3)")
    def num(x: float | None, width: int) -> str:  # kappa is None for no items or constant raters
        return f"{'-':>{width}s}" if x is None else f"{x:{width}.3f}"
    for judge in args.judge or HEURISTIC_JUDGES:
        for name, a in agreement(judged_items(args.test_set, heuristic=judge, catalog=args.catalog)).items():
            print(f"{judge:20s} {name:9s} {a['n']:4d} {num(a['kappa'], 6)} {num(a['kappaQuadratic'], 6)} "
                  f"{num(a['relevantAgreement'], 8)}  {a['confusion']}")


if __name__ == "__main__":
    main()
