"""The course-retrieval gaming reference of the fixed-list workflow and its validity check.

``configs/courses_reference.yaml`` runs ``relabelled_lists`` (each given case's gold-0 courses
submitted under the skill's name) beside ``given_lists`` (the cases' own lists).
``write_courses_gaming_check(run_dir)`` is the run's analysis hook (``evaluation/gaming.py``): no
gaming list may beat ``given_lists`` on a headline metric, judged (heuristic or LLM) or gold.
"""
from __future__ import annotations

from pathlib import Path

from convsim.evaluation.gaming import write_gaming_check

GAMING = {"relabelled_lists": "given_lists"}
HEADLINE = {m: ("metrics", True) for m in (
    "ndcgGold@10", "recall@10", "mrr", "precisionGold@10",
    "ndcgFixedIdeal@10", "precision@10", "averageRelevance", "highlyRelevantRate",
    "heuristic_ndcgFixedIdeal@10", "heuristic_precision@10", "heuristic_averageRelevance",
    "heuristic_highlyRelevantRate")}
HEADLINE.update({"irrelevantRate": ("metrics", False), "heuristic_irrelevantRate": ("metrics", False)})


def write_courses_gaming_check(run_dir: str | Path) -> list[dict]:
    return write_gaming_check(Path(run_dir), GAMING, HEADLINE)
