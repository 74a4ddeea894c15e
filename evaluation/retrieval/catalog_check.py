"""Fixed course lists checked against the catalog: a course is judged on the catalog's text.

In the fixed-list workflow (a test case brings its own ``retrievedCourses``) the submitted course
text was judged as it was, with no check against the catalog entry of its code: relabelling
courses whose gold label is 0 with the skill name ("Python programming") gave judged NDCG and P@10
1.000 and averageRelevance 3.0 while gold NDCG was 0.

``checked_against_catalog(courses, catalog)`` returns the list the judge reads and the mismatches:

* a course whose ``subjectCode`` is in the catalog is shown with the **catalog's** text fields
  (``TEXT_FIELDS``: name, description, learning outcomes), whatever was submitted;
* it is a *mismatch* when a submitted text field differs from the catalog's (case and whitespace
  ignored; a field not submitted is no mismatch), listed with the fields that differ;
* a code the catalog does not know is judged as submitted and counted apart (``not_in_catalog``).

The graph reports ``catalogMismatches`` (courses), ``catalogMismatchRate`` (of the submitted
courses) and ``catalogUnknownCodes`` per case, and the mismatches themselves in the transcript.
"""
from __future__ import annotations

import re

TEXT_FIELDS = ("subjectName", "description", "cleanedLearningOutcomes")


def _norm(value) -> str:
    if isinstance(value, (list, tuple)):
        value = " | ".join(map(str, value))
    return re.sub(r"\s+", " ", str(value or "")).strip().lower()


def checked_against_catalog(courses: list[dict], catalog: list[dict]) -> tuple[list[dict], dict]:
    """``(shown, report)`` with ``report = {"mismatches": [{code, rank, fields}], "not_in_catalog":
    [codes], "checked": n}`` (rules in the module docstring)."""
    by_code = {c["subjectCode"]: c for c in catalog}
    shown, mismatches, unknown = [], [], []
    for i, course in enumerate(courses, start=1):
        entry = by_code.get(course.get("subjectCode"))
        if entry is None:
            unknown.append(course.get("subjectCode"))
            shown.append(course)
            continue
        differ = [f for f in TEXT_FIELDS if f in course and f in entry and _norm(course[f]) != _norm(entry[f])]
        if differ:
            mismatches.append({"code": course["subjectCode"], "rank": course.get("rank", i), "fields": differ})
        shown.append({**course, **{f: entry[f] for f in TEXT_FIELDS if f in entry}})
    return shown, {"mismatches": mismatches, "not_in_catalog": unknown, "checked": len(courses)}


def relabelled_list(gold: dict[str, int] | None, catalog: list[dict], *, skill: str, question: str,
                    k: int = 10) -> list[dict]:
    """The gaming reference of the fixed-list workflow: the case's gold-0 courses (then other
    unlabelled catalog courses) submitted under the skill's name, with the question as their
    outcome. Judged on the submitted text it looked perfect; judged on the catalog's it is junk."""
    gold = gold or {}
    zero = [c for c in catalog if gold.get(c["subjectCode"]) == 0]
    rest = [c for c in catalog if c["subjectCode"] not in gold]
    return [{"subjectCode": c["subjectCode"], "subjectName": skill, "description": question,
             "cleanedLearningOutcomes": [f"{skill}: {question}"]} for c in (zero + rest)[:k]]
