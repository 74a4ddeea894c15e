"""The 0-3 course relevance judge (UMBRELA-style graded labels).

With a chat model, all courses of a case are judged in one schema-checked call (as the
original evaluator did): the answer must hold exactly one integer score 0-3 per course,
by course code. The schema is built per case (``min_length == max_length == n``) so the
model's own retries see a count error; the answer is then checked again here. A garbage
answer is a recorded failure with its raw text, never a crash and never a 0.

A case's scores are cached on disk (:class:`JudgeCache`) under a hash of everything its prompt
holds (question, skill, the courses in the order shown) plus prompt version, model settings and
iteration, so a second identical run calls no model. The cache is per prompt, not per course:
with per-course entries a session whose courses were partly judged before (by another variant or
session of the run) sent only the rest, so its scores depended on which sessions ran first.

With model ``none`` a lexical heuristic judge scores instead, labelled ``heuristic`` in every
score it writes, with its version as the ``promptVersion``: ``heuristic-tfidf-2`` (the default,
:func:`tfidf_heuristic_score`) or the older ``heuristic-lexical-1`` (:func:`heuristic_score`).
Heuristic scores are never cached (they cost nothing), so the two versions cannot mix there either.
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field, model_validator

from convsim.agents.courses.retrievers import get_retriever
from convsim.catalog.courses import RELEVANCE_LABELS, course_text, tokenize
from convsim import ChatModel, rng_for
from convsim.running.sqlitewal import connect, switch_to_wal

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts"
SYSTEM_PROMPT_FILE = PROMPTS_DIR / "relevance_judge_system.txt"
USER_PROMPT_FILE = PROMPTS_DIR / "relevance_judge_user.txt"
LEXICAL_HEURISTIC = "heuristic-lexical-1"
TFIDF_HEURISTIC = "heuristic-tfidf-2"
HEURISTIC_JUDGES = (TFIDF_HEURISTIC, LEXICAL_HEURISTIC)
DEFAULT_HEURISTIC = TFIDF_HEURISTIC


def load_prompts() -> tuple[str, str, str]:
    """(system prompt, user template, prompt version = content hash of both files)."""
    system = SYSTEM_PROMPT_FILE.read_text(encoding="utf-8")
    user = USER_PROMPT_FILE.read_text(encoding="utf-8")
    version = hashlib.sha256((system + "\0" + user).encode("utf-8")).hexdigest()[:12]
    return system, user, version


class CourseEvaluation(BaseModel):
    code: str
    # strict: pydantic's lax mode read true as 1, "3" as 3 and 2.0 as 2, which check_answer then
    # took for valid integers (it saw the converted values)
    score: int = Field(strict=True, ge=0, le=3, description="0 irrelevant, 1 marginal, 2 fair, 3 highly relevant")
    reason: str = ""


def answer_schema(codes: list[str]) -> type[BaseModel]:
    """The answer schema for one case: exactly one evaluation per course code.

    Built per case (the original's zod schema had ``min == max == n``) so that the model
    handle's own retries already see a count, range or coverage error.
    """
    expected = sorted(codes)

    class RelevanceJudgement(BaseModel):
        evaluations: list[CourseEvaluation] = Field(min_length=len(codes), max_length=len(codes))

        @model_validator(mode="after")
        def _one_per_course(self):
            if sorted(e.code for e in self.evaluations) != expected:
                raise ValueError(f"give exactly one evaluation for each course code {expected}")
            return self

    return RelevanceJudgement


def check_answer(evaluations: list, codes: list[str]) -> tuple[dict[str, dict] | None, str | None]:
    """Map a parsed answer to ``{code: {"score", "reason"}}``, or give the reason it is unusable.

    Checked here as well as by the schema, so an answer that slipped past a lenient parse
    (a score of 4, a missing or repeated course) is still a failure.
    """
    if not isinstance(evaluations, list):
        return None, "evaluations is not a list"
    if len(evaluations) != len(codes):
        return None, f"expected {len(codes)} scores, got {len(evaluations)}"
    by_code: dict[str, dict] = {}
    for item in evaluations:
        item = item.model_dump() if isinstance(item, BaseModel) else item
        if not isinstance(item, dict):
            return None, f"evaluation {item!r} is not an object"
        code, score = item.get("code"), item.get("score")
        if code not in codes:
            return None, f"unknown course code {code!r}"
        if code in by_code:
            return None, f"course {code!r} scored twice"
        if isinstance(score, bool) or not isinstance(score, int) or not 0 <= score <= 3:
            return None, f"score {score!r} for {code!r} is not an integer 0-3"
        by_code[code] = {"score": score, "reason": str(item.get("reason", ""))}
    return by_code, None


def heuristic_score(question: str, skill: str, course: dict) -> tuple[int, str]:
    """Lexical overlap of the skill (and question) with the course name and outcomes, mapped to 0-3.

    3: the name holds the whole skill, or two outcomes do; 2: one outcome holds it, or half
    of it is in the name and an outcome; 1: some skill word or two question words appear
    anywhere; 0 otherwise. It cannot tell homonyms apart: that is what a model judge is for.
    """
    skill_words = set(tokenize(skill)) or set(tokenize(question))
    question_words = set(tokenize(question)) - skill_words
    name = set(tokenize(course.get("subjectName", "")))
    outcomes = [set(tokenize(o)) for o in course.get("cleanedLearningOutcomes", [])]
    everything = name.union(*outcomes) if outcomes else name
    if not skill_words:
        return 0, "heuristic: no content words in the skill"

    def cover(words: set[str]) -> float:
        return len(skill_words & words) / len(skill_words)

    name_cover = cover(name)
    outcome_covers = [cover(o) for o in outcomes]
    full_outcomes = sum(1 for c in outcome_covers if c == 1.0)
    best_outcome = max(outcome_covers, default=0.0)
    if name_cover == 1.0 or full_outcomes >= 2:
        return 3, "heuristic: the whole skill is in the name or in two outcomes"
    if full_outcomes == 1 or (name_cover >= 0.5 and best_outcome >= 0.5):
        return 2, "heuristic: the skill appears in one outcome or partly in name and outcomes"
    if skill_words & everything or len(question_words & everything) >= 2:
        return 1, "heuristic: some skill or question words appear"
    return 0, "heuristic: no overlap with the skill"


# heuristic-tfidf-2. Its form and numbers were chosen on test-set-v1 only (test-set-v2 held out);
# see docs/course_retrieval.md, "The heuristic judge".
TFIDF_NAME_WEIGHT = 0.5
TFIDF_COSINE_WEIGHT = 2.0
TFIDF_THRESHOLDS = (0.85, 1.25, 1.5)  # evidence >= each one adds a point: 1, 2, 3
_SENTENCE_END = re.compile(r"(?<=\.)\s+")


def _course_units(course: dict) -> list[str]:
    """The pieces of a course a skill can sit in: its name, each sentence of its description, each outcome."""
    description = [s for s in _SENTENCE_END.split(course.get("description", "")) if s.strip()]
    return [course.get("subjectName", ""), *description, *course.get("cleanedLearningOutcomes", [])]


def tfidf_evidence(question: str, skill: str, course: dict, catalog: str | None = None) -> dict[str, float] | None:
    """The three signals of ``heuristic-tfidf-2`` and their sum, or ``None`` without a content word.

    ``sentence``: the largest idf-weighted share of the skill's words found in one unit (the name,
    a description sentence or an outcome); ``name``: that share in the name alone; ``cosine``: the
    TF-IDF cosine of ``"<skill>. <skill>. <question>"`` with the course's name, description and
    outcomes. Words and idf are those of the TF-IDF retriever over the run's catalog.
    """
    model = get_retriever("tfidf", catalog)
    words = list(dict.fromkeys(tokenize(skill) or tokenize(question)))
    if not words:
        return None
    total = sum(model.idf(w) for w in words)
    shares = [sum(model.idf(w) for w in words if w in unit) / total
              for unit in (set(tokenize(u)) for u in _course_units(course))]
    signals = {"sentence": max(shares), "name": shares[0],
               "cosine": model.cosine(f"{skill}. {skill}. {question}", course_text(course))}
    signals["evidence"] = (signals["sentence"] + TFIDF_NAME_WEIGHT * signals["name"]
                           + TFIDF_COSINE_WEIGHT * signals["cosine"])
    return signals


def tfidf_heuristic_score(question: str, skill: str, course: dict, catalog: str | None = None) -> tuple[int, str]:
    """``heuristic-tfidf-2``: evidence = sentence + 0.5 x name + 2 x cosine (:func:`tfidf_evidence`),
    scored 0-3 by how many of the thresholds 0.85, 1.25, 1.5 it reaches.

    The whole skill in the name is 1 + 0.5 = 1.5, a 3 by itself; the whole skill in one outcome
    needs a cosine of 0.125 more for a 2; half of it in a sentence needs a cosine of 0.175 for a 1.
    Like the lexical rules, it cannot tell homonyms apart, nor see a related topic that shares no word.
    """
    signals = tfidf_evidence(question, skill, course, catalog)
    if signals is None:
        return 0, f"{TFIDF_HEURISTIC}: no content words in the skill or question"
    score = sum(signals["evidence"] >= t for t in TFIDF_THRESHOLDS)
    return score, (f"{TFIDF_HEURISTIC}: evidence {signals['evidence']:.3f} = sentence {signals['sentence']:.3f}"
                   f" + {TFIDF_NAME_WEIGHT} x name {signals['name']:.3f}"
                   f" + {TFIDF_COSINE_WEIGHT} x cosine {signals['cosine']:.3f}"
                   f" (thresholds {', '.join(map(str, TFIDF_THRESHOLDS))})")


def heuristic_judge_score(version: str, question: str, skill: str, course: dict,
                          catalog: str | None = None) -> tuple[int, str]:
    """Score one course with the heuristic judge ``version`` (one of :data:`HEURISTIC_JUDGES`)."""
    if version == TFIDF_HEURISTIC:
        return tfidf_heuristic_score(question, skill, course, catalog)
    if version == LEXICAL_HEURISTIC:
        return heuristic_score(question, skill, course)
    raise ValueError(f"unknown heuristic judge {version!r}: expected one of {HEURISTIC_JUDGES}")


class JudgeCache:
    """Scores on disk in SQLite, one row per prompt (:func:`batch_key`): a case's scores by course code.

    Open it with :meth:`at`: one instance per file and process, so concurrent sessions share it
    instead of each opening (and switching to WAL) the file again. A connection per operation,
    closed after it, keeps it safe across the runner's threads and processes (SQLite serialises
    writers; WAL lets readers go on).
    """

    _open: dict[Path, "JudgeCache"] = {}
    _open_lock = threading.Lock()

    @classmethod
    def at(cls, path: str | Path) -> "JudgeCache":
        """The process's cache for ``path`` (opened on first use, and again if the file was removed)."""
        key = Path(path).resolve()
        with cls._open_lock:
            if key not in cls._open or not key.exists():
                cls._open[key] = cls(key)
            return cls._open[key]

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with closing(connect(self.path)) as con:
            # worker processes and other runs beside this one may be opening it too
            switch_to_wal(con, self.path, what="relevance judge cache")
            with con:
                con.execute("CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def get(self, key: str) -> dict | None:
        with self._lock, closing(connect(self.path)) as con:
            row = con.execute("SELECT value FROM scores WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, value: dict) -> None:
        with self._lock, closing(connect(self.path)) as con, con:
            con.execute("INSERT OR REPLACE INTO scores (key, value) VALUES (?, ?)", (key, json.dumps(value)))


def batch_key(*, question: str, skill: str, courses: list[dict], prompt_version: str, model_settings: dict,
              iteration: int) -> str:
    """SHA-256 over everything that decides a case's scores: the prompt's content (question, skill, the
    courses in the order shown), prompt version, model settings and iteration. (The original keyed
    question|skill|course only, so a new prompt or judge read stale scores.)"""
    payload = json.dumps([question, skill, [[c.get("subjectCode"), c.get("subjectName"),
                                              c.get("cleanedLearningOutcomes", [])] for c in courses],
                          prompt_version, model_settings, iteration], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass
class Judgement:
    """A case's scores (one dict per course, in the retrieved order) and its failures."""

    scores: list[dict] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    model_calls: int = 0

    @property
    def complete(self) -> bool:
        return not self.failures and all(s.get("score") is not None for s in self.scores)


def _course_for_prompt(course: dict) -> dict:
    return {"code": course["subjectCode"], "name": course["subjectName"],
            "learningOutcomes": course.get("cleanedLearningOutcomes", [])}


def judge_courses(*, question: str, skill: str, courses: list[dict], model: ChatModel,
                  cache: JudgeCache | None = None, iteration: int = 0, seed: int = 0,
                  retries: int = 2, heuristic: str = DEFAULT_HEURISTIC, catalog: str | None = None) -> Judgement:
    """Score every course 0-3 for the case; see the module docstring for the contract.

    With model ``none``, ``heuristic`` names the heuristic judge and ``catalog`` the catalog whose
    TF-IDF statistics ``heuristic-tfidf-2`` uses (the shipped one by default). The heuristic reads a
    course's ``description`` when the course carries one; it never sees gold labels.
    """
    if model.is_none:
        scores = []
        for course in courses:
            score, reason = heuristic_judge_score(heuristic, question, skill, course, catalog)
            scores.append({"code": course["subjectCode"], "score": score, "label": RELEVANCE_LABELS[score],
                           "reason": reason, "judge": "heuristic", "promptVersion": heuristic,
                           "model": {"spec": "none"}, "iteration": iteration, "cached": False})
        return Judgement(scores=scores)

    system, user_template, prompt_version = load_prompts()
    settings = dict(model.settings)
    # Shuffled per iteration so repeated iterations expose position bias (reference §3c).
    order = list(courses)
    rng_for(seed, "judge-order", iteration).shuffle(order)
    codes = [c["subjectCode"] for c in order]
    key = batch_key(question=question, skill=skill, courses=order, prompt_version=prompt_version,
                    model_settings=settings, iteration=iteration)
    found: dict[str, dict] = {}
    hit = cache.get(key) if cache is not None else None
    if isinstance(hit, dict) and sorted(hit) == sorted(codes):
        found = {code: {**score, "cached": True} for code, score in hit.items()}
    result = Judgement()
    if not found and order:
        user = user_template.format(question=question, skill=skill, n_courses=len(order),
                                    courses=json.dumps([_course_for_prompt(c) for c in order],
                                                       indent=1, ensure_ascii=False))
        answer = model.structured([("system", system), ("user", user)], answer_schema(codes),
                                  purpose="relevance_judge", retries=retries)
        result.model_calls = answer.attempts
        by_code, problem = (None, answer.error or "no valid answer")
        if answer.ok:
            by_code, problem = check_answer(answer.value.evaluations, codes)
        if by_code is None:
            result.failures.append({"codes": codes, "raw": answer.raw, "error": problem,
                                    "attempts": answer.attempts, "promptVersion": prompt_version,
                                    "model": settings, "iteration": iteration})
        else:
            scores = {code: {"code": code, "score": item["score"], "label": RELEVANCE_LABELS[item["score"]],
                             "reason": item["reason"], "judge": "llm", "promptVersion": prompt_version,
                             "model": settings, "iteration": iteration}
                      for code, item in by_code.items()}
            found = {code: {**score, "cached": False} for code, score in scores.items()}
            if cache is not None:
                cache.put(key, scores)
    for course in courses:
        code = course["subjectCode"]
        result.scores.append(found.get(code) or {"code": code, "score": None, "label": None, "judge": "llm",
                                                 "promptVersion": prompt_version, "model": settings,
                                                 "iteration": iteration, "cached": False,
                                                 "reason": "judge failed (see judge_failures)"})
    return result
