"""The course catalog and versioned course-retrieval test sets.

A course is ``{"subjectCode", "subjectName", "description", "cleanedLearningOutcomes", ...}``
(the original evaluator's field names). A test set is versioned JSON::

    {"version": 1, "name": "test-set-v1", "description": "...",
     "cases": [{"id": "v1-001", "question": "...", "skill": "...",
                "retrievedCourses": [course, ...],          # optional: judged as it is
                "goldRelevance": {"CS104": 3, "BIO127": 0},  # optional: graded labels 0-3
                "expectedMetrics": {"recall@10": {"min": 0.5}, "mrr": 1.0}}]}  # optional checks

Bad files raise :class:`convsim.ConvsimError` naming the file, the case id and the field.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from convsim import ConvsimError
from convsim.config import path_component
from convsim.textio import load_json
from convsim.lazy import cached_once

COURSES_DIR = Path(__file__).resolve().parent / "data" / "courses"
DEFAULT_CATALOG = COURSES_DIR / "courses.json"
DEFAULT_TEST_SET = COURSES_DIR / "testsets" / "test-set-v1.json"

RELEVANCE_LABELS = {3: "Highly Relevant", 2: "Fairly Relevant", 1: "Marginally Relevant", 0: "Irrelevant"}

# A small English stop list: enough to keep "how do I learn" out of lexical matching.
STOP_WORDS = frozenset("""
a about an and are as at be by can course courses do does for from get how i in into is it its
learn me my of on or our should so that the their them then this to use used using want
what when where which who why will with you your basic basics good introduction
""".split())
_WORD = re.compile(r"[a-z0-9][a-z0-9+#-]*")


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens without stop words, with a light plural/-ing strip.

    The strip makes "networks"/"network" and "programming"/"program" meet without a
    stemmer dependency; it is shared by BM25 and the heuristic judge so both see the
    same vocabulary.
    """
    out = []
    for word in _WORD.findall(text.lower()):
        if word in STOP_WORDS:
            continue
        if len(word) > 5 and word.endswith("ing"):
            word = word[:-3]
        elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


def course_text(course: dict) -> str:
    """The text a retriever indexes: name, description and learning outcomes."""
    return " ".join([course.get("subjectName", ""), course.get("description", ""),
                     *course.get("cleanedLearningOutcomes", [])])


def _require_str(value: object, *, file, record, field_name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConvsimError(f"expected a non-empty string, got {value!r}", file=file, record=record,
                           field=field_name)
    return value


def validate_course(raw: object, *, file, record, field_prefix: str = "") -> dict:
    """Check one course record; return it with ``cleanedLearningOutcomes`` as a list of strings."""
    if not isinstance(raw, dict):
        raise ConvsimError("a course must be an object", file=file, record=record, field=field_prefix or None)
    for key in ("subjectCode", "subjectName"):
        _require_str(raw.get(key), file=file, record=record, field_name=field_prefix + key)
    outcomes = raw.get("cleanedLearningOutcomes", [])
    if not isinstance(outcomes, list) or not all(isinstance(o, str) for o in outcomes):
        raise ConvsimError("cleanedLearningOutcomes must be a list of strings", file=file, record=record,
                           field=field_prefix + "cleanedLearningOutcomes")
    for key in ("description", "faculty", "level"):
        if key in raw and not isinstance(raw[key], str):
            raise ConvsimError(f"{key} must be a string, got {raw[key]!r}", file=file, record=record,
                               field=field_prefix + key)
    credits = raw.get("credits")
    if "credits" in raw and (not _is_number(credits) or not math.isfinite(credits) or credits <= 0):
        raise ConvsimError(f"credits must be a positive number, got {credits!r}", file=file, record=record,
                           field=field_prefix + "credits")
    return raw


def _read_json(file: Path, what: str) -> object:
    return load_json(file, what=what)  # UTF-8, bounded nesting, one-line errors


@cached_once(maxsize=4)
def _load_courses_cached(path: str) -> tuple[dict, ...]:
    file = Path(path)
    data = _read_json(file, "course catalog")
    raw_courses = data.get("courses") if isinstance(data, dict) else data
    if not isinstance(raw_courses, list) or not raw_courses:
        raise ConvsimError("expected a non-empty list of courses", file=file, field="courses")
    seen: set[str] = set()
    courses = []
    for i, raw in enumerate(raw_courses):
        course = validate_course(raw, file=file, record=raw.get("subjectCode", i) if isinstance(raw, dict) else i)
        if course["subjectCode"] in seen:
            raise ConvsimError("duplicate subject code", file=file, record=course["subjectCode"],
                               field="subjectCode")
        seen.add(course["subjectCode"])
        courses.append(course)
    return tuple(courses)


def load_courses(path: str | Path | None = None) -> list[dict]:
    """The course catalog (the shipped one by default); cached per path, so sessions share it."""
    return list(_load_courses_cached(str(Path(path or DEFAULT_CATALOG).resolve())))


@dataclass(frozen=True)
class TestCase:
    id: str
    question: str
    skill: str
    retrieved_courses: list[dict] | None = None
    gold_relevance: dict[str, int] | None = None
    expected_metrics: dict[str, float | dict] | None = None

    def as_state(self) -> dict:
        """The JSON-ready form used in a session's initial state."""
        return {"case_id": self.id, "question": self.question, "skill": self.skill,
                "given_courses": self.retrieved_courses, "gold_relevance": self.gold_relevance,
                "expected_metrics": self.expected_metrics}


@dataclass(frozen=True)
class TestSet:
    version: int
    name: str
    description: str
    cases: list[TestCase] = field(default_factory=list)
    path: str | None = None


def _parse_gold(raw: object, *, file, record) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise ConvsimError("goldRelevance must map subject codes to labels 0-3", file=file, record=record,
                           field="goldRelevance")
    if not raw:
        raise ConvsimError("goldRelevance is empty: list at least one subject code, or leave the key out",
                           file=file, record=record, field="goldRelevance")
    gold = {}
    for code, label in raw.items():
        if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label <= 3:
            raise ConvsimError(f"label {label!r} for {code!r} is not an integer 0-3", file=file, record=record,
                               field=f"goldRelevance.{code}")
        gold[str(code)] = label
    return gold


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _parse_expected(raw: object, *, file, record) -> dict[str, float | dict]:
    """``expectedMetrics``: metric name -> a number, or ``{"min": a, "max": b}`` (either optional)."""
    if not isinstance(raw, dict) or not raw:
        raise ConvsimError("expectedMetrics must map metric names to a number or {min, max}", file=file,
                           record=record, field="expectedMetrics")
    out: dict[str, float | dict] = {}
    for name, want in raw.items():
        where = f"expectedMetrics.{name}"
        if _is_number(want):
            out[str(name)] = float(want)
            continue
        if not isinstance(want, dict) or not want or set(want) - {"min", "max"} or not all(
                _is_number(v) for v in want.values()):
            raise ConvsimError(f"expected a number or {{\"min\": x, \"max\": y}}, got {want!r}", file=file,
                               record=record, field=where)
        if "min" in want and "max" in want and want["min"] > want["max"]:
            raise ConvsimError("min is above max", file=file, record=record, field=where)
        out[str(name)] = {k: float(v) for k, v in want.items()}
    return out


def parse_test_set(data: object, *, file: str | Path | None = None) -> TestSet:
    """Validate a test set already read from JSON (see the module docstring for the format)."""
    if not isinstance(data, dict):
        raise ConvsimError("a test set must be a JSON object", file=file)
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise ConvsimError(f"version must be an integer, got {version!r}", file=file, field="version")
    name = _require_str(data.get("name"), file=file, record=None, field_name="name")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ConvsimError("description must be a string", file=file, field="description")
    raw_cases = data.get("cases")
    if not isinstance(raw_cases, list) or not raw_cases:
        raise ConvsimError("cases must be a non-empty list", file=file, field="cases")
    cases, seen = [], set()
    for i, raw in enumerate(raw_cases):
        if not isinstance(raw, dict):
            raise ConvsimError("a case must be an object", file=file, record=f"#{i}")
        case_id = raw.get("id")
        record = case_id if isinstance(case_id, str) and case_id.strip() else f"#{i}"
        _require_str(case_id, file=file, record=record, field_name="id")
        try:  # the id is the session id, which names the session's trace file
            path_component(case_id, "case id")
        except ValueError as exc:
            raise ConvsimError(f"{exc}; it becomes the session id", file=file, record=f"{case_id!r} (#{i})",
                               field="id") from None
        if case_id in seen:
            raise ConvsimError("duplicate case id", file=file, record=case_id, field="id")
        seen.add(case_id)
        question = _require_str(raw.get("question"), file=file, record=case_id, field_name="question")
        skill = _require_str(raw.get("skill"), file=file, record=case_id, field_name="skill")
        retrieved = raw.get("retrievedCourses")
        if retrieved is not None:
            if not isinstance(retrieved, list) or not retrieved:
                raise ConvsimError("retrievedCourses must be a non-empty list", file=file, record=case_id,
                                   field="retrievedCourses")
            retrieved = [validate_course(c, file=file, record=case_id, field_prefix=f"retrievedCourses[{j}].")
                         for j, c in enumerate(retrieved)]
            codes = [c["subjectCode"] for c in retrieved]
            if len(set(codes)) != len(codes):
                raise ConvsimError("a course appears twice in retrievedCourses", file=file, record=case_id,
                                   field="retrievedCourses")
        gold = raw.get("goldRelevance")
        if gold is not None:
            gold = _parse_gold(gold, file=file, record=case_id)
        expected = raw.get("expectedMetrics")
        if expected is not None:
            expected = _parse_expected(expected, file=file, record=case_id)
        cases.append(TestCase(case_id, question, skill, retrieved, gold, expected))
    return TestSet(version, name, description, cases, None if file is None else str(file))


def check_gold_codes(test_set: TestSet, courses: list[dict], *, catalog: str | Path | None = None) -> None:
    """Every ``goldRelevance`` code names a course of the catalog or of the case's own
    ``retrievedCourses``; a label for a course no retriever can return would be scored as a missed
    relevant course (recall and ndcgGold lowered with no warning), so it is bad input."""
    known = {c["subjectCode"] for c in courses}
    for case in test_set.cases:
        own = {c["subjectCode"] for c in case.retrieved_courses or []}
        for code in case.gold_relevance or {}:
            if code not in known and code not in own:
                cat = catalog or DEFAULT_CATALOG
                msg = (f"subject code {code!r} is in neither the case's retrievedCourses nor the catalog ({cat})"
                       if case.retrieved_courses else
                       f"subject code {code!r} is not in the catalog ({cat}): no retriever can return it")
                raise ConvsimError(msg, file=test_set.path or "test set", record=case.id,
                                   field=f"goldRelevance.{code}")


def load_test_set(path: str | Path | None = None) -> TestSet:
    """Read and validate a versioned test set: a path, or the name of a shipped one
    (``test-set-v1``, the default, or ``test-set-v2``)."""
    file = Path(path or DEFAULT_TEST_SET)
    shipped = DEFAULT_TEST_SET.parent / f"{file.name}.json"
    if not file.suffix and not file.exists() and shipped.exists():
        file = shipped
    return parse_test_set(_read_json(file, "test set"), file=file)
