"""Generate the project's course catalog and its shipped test set from hand-written blocks.

    python catalog/data/courses/generate.py      # rewrites courses.json and testsets/test-set-v1.json

The blocks (faculties, topics, cases) are in ``course_topics.py`` and ``course_cases.py`` next to this
file; this script only assembles them into course records (subject code, name,
description, cleaned learning outcomes) and expands the cases' topic-level gold labels
into subject codes. A fixed seed picks code numbers and outcome phrasings, so the output
is the same on every run.
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from course_cases import CASES, FIXED_CASES  # noqa: E402
from course_topics import FACULTIES  # noqa: E402

SEED = 2024
LEVEL_NAMES = {1: "introductory", 2: "intermediate", 3: "advanced"}

# Outcome phrasings per level, from "describe" (introductory) to "evaluate/design" (advanced).
OUTCOME_TEMPLATES = {
    1: ["Describe the basic principles of {c}",
        "Explain {c} using simple examples",
        "Identify the main features of {c} in {ctx}",
        "Use the terminology of {c} correctly",
        "Recognise common problems involving {c}"],
    2: ["Apply knowledge of {c} to problems in {ctx}",
        "Analyse {c} in realistic case studies",
        "Explain the role of {c} in {ctx}",
        "Compare different perspectives on {c}",
        "Investigate {c} through practical work"],
    3: ["Critically evaluate current approaches to {c}",
        "Apply advanced knowledge of {c} to complex problems in {ctx}",
        "Synthesise research literature on {c}",
        "Carry out an independent project involving {c}",
        "Communicate findings on {c} to specialist and non-specialist audiences"],
}


def parse_topics() -> list[dict]:
    topics = []
    for faculty, block in FACULTIES.items():
        for line in block.strip().splitlines():
            topic_id, prefix, titles, concepts, context, blurb = (p.strip() for p in line.split("|"))
            topics.append({
                "id": topic_id, "faculty": faculty, "prefix": prefix,
                "titles": [t.strip() for t in titles.split(";")],
                "concepts": [c.strip() for c in concepts.split(";")],
                "context": context, "blurb": blurb,
            })
    return topics


def _join(items: list[str]) -> str:
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else items[0]


def build_courses(topics: list[dict], rng: random.Random) -> tuple[list[dict], dict]:
    """Three courses per topic; level L covers concepts L-1 .. L+2 (overlapping windows)."""
    courses, code_of = [], {}
    per_prefix: dict[str, int] = {}
    for topic in topics:
        slot = per_prefix.get(topic["prefix"], 0)
        per_prefix[topic["prefix"]] = slot + 1
        previous = None
        for level in (1, 2, 3):
            code = f"{topic['prefix']}{level * 100 + 8 * slot + rng.randint(1, 7)}"
            title = topic["titles"][level - 1]
            concepts = topic["concepts"][level - 1: level + 3]
            templates = rng.sample(OUTCOME_TEMPLATES[level], k=len(concepts))
            outcomes = [t.format(c=c, ctx=topic["context"]) for t, c in zip(templates, concepts)]
            if level == 3:
                outcomes.append(f"Integrate {concepts[0]} and {concepts[-1]} in a substantial project")
            # An advanced course is named after its most specialised concepts: list those first.
            featured = concepts[:3] if level == 1 else concepts[1:] if level == 2 else concepts[::-1][:3]
            if level == 1:
                level_note = "No prior knowledge of the subject is assumed."
            elif level == 2:
                level_note = f"Builds on {previous['subjectCode']} {previous['subjectName']}."
            else:
                level_note = (f"Prerequisite: {previous['subjectCode']} {previous['subjectName']}. "
                              "Students complete an extended project.")
            description = f"{title} {topic['blurb']}. Topics include {_join(featured)}. {level_note}"
            course = {
                "subjectCode": code, "subjectName": title, "faculty": topic["faculty"],
                "level": LEVEL_NAMES[level], "credits": rng.choice([3, 3, 4, 6]),
                "description": description,
                "cleanedLearningOutcomes": outcomes,
            }
            courses.append(course)
            code_of[(topic["id"], level)] = code
            previous = course
    return courses, code_of


def expand_gold(gold: dict, code_of: dict, where: str) -> dict[str, int]:
    labels = {}
    for topic_id, grade in gold.items():
        grades = grade if isinstance(grade, tuple) else (grade, grade, grade)
        for level, g in zip((1, 2, 3), grades):
            if (topic_id, level) not in code_of:
                raise SystemExit(f"{where}: unknown topic {topic_id!r}")
            if g > 0 or not isinstance(grade, tuple):
                labels[code_of[(topic_id, level)]] = g
    return labels


def build_test_set(courses: list[dict], code_of: dict) -> dict:
    by_code = {c["subjectCode"]: c for c in courses}
    cases = []
    for i, (question, skill, gold) in enumerate(CASES, start=1):
        case_id = f"v1-{i:03d}"
        cases.append({"id": case_id, "question": question, "skill": skill,
                      "goldRelevance": expand_gold(gold, code_of, case_id)})
    for j, (question, skill, retrieved, gold) in enumerate(FIXED_CASES, start=len(CASES) + 1):
        case_id = f"v1-{j:03d}"
        fixed = [by_code[code_of[ref]] for ref in retrieved]
        cases.append({
            "id": case_id, "question": question, "skill": skill,
            "retrievedCourses": [{k: c[k] for k in ("subjectCode", "subjectName", "cleanedLearningOutcomes")}
                                 for c in fixed],
            "goldRelevance": expand_gold(gold, code_of, case_id),
        })
    return {
        "version": 1, "name": "test-set-v1",
        "description": ("Skill questions over the project's course catalog with graded gold labels "
                        "(0-3) written from the catalog's topics; the last cases carry a fixed "
                        "retrieved list that is judged as it is."),
        "cases": cases,
    }


def build_catalog_and_test_set() -> tuple[dict, dict]:
    rng = random.Random(SEED)
    topics = parse_topics()
    courses, code_of = build_courses(topics, rng)
    codes = [c["subjectCode"] for c in courses]
    assert len(codes) == len(set(codes)), "duplicate subject codes"
    catalog = {"version": 1, "name": "convsim course catalog", "seed": SEED,
               "faculties": sorted({t["faculty"] for t in topics}), "courses": courses}
    return catalog, build_test_set(courses, code_of)


def dump(obj: dict) -> str:
    return json.dumps(obj, indent=1, ensure_ascii=False) + "\n"


def main(out_dir: Path = HERE) -> None:
    catalog, test_set = build_catalog_and_test_set()
    (out_dir / "testsets").mkdir(parents=True, exist_ok=True)
    (out_dir / "courses.json").write_text(dump(catalog), encoding="utf-8")
    (out_dir / "testsets" / "test-set-v1.json").write_text(dump(test_set), encoding="utf-8")
    print(f"{len(catalog['courses'])} courses in {len(catalog['faculties'])} faculties; "
          f"{len(test_set['cases'])} test cases")


if __name__ == "__main__":
    main()
