"""The 0-3 relevance judge: heuristic labels, schema checks, recorded failures and the disk cache."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from convsim.agents.courses.relevance_judge import (
    DEFAULT_HEURISTIC, JudgeCache, answer_schema, batch_key, check_answer, heuristic_score, judge_courses,
    load_prompts, tfidf_evidence, tfidf_heuristic_score,
)
from convsim.catalog.courses import load_courses
from convsim import ChatModel, parse_model_spec

COURSES = {c["subjectCode"]: c for c in load_courses()}


def _course(name: str) -> dict:
    return next(c for c in COURSES.values() if c["subjectName"] == name)


PICKS = [_course("Programming with Python"), _course("Herpetology"), _course("Contract Law")]


def _codes_in_prompt(messages) -> list[str]:
    text = next(m.content for m in messages if "Retrieved courses" in m.content)
    return [c["code"] for c in json.loads(text.split("judge every one):\n", 1)[1])]


@dataclass
class ScriptedJudge(ChatModel):
    """A chat model whose answer is computed from the prompt; counts every call."""

    answer: Callable[[list[str]], str] = lambda codes: ""
    prompts: list = field(default_factory=list)
    answers: list = field(default_factory=list)

    def invoke(self, messages, *, purpose: str = "generate", **kwargs) -> str:
        self.prompts.append(messages)
        self.calls.append({"role": self.role, "purpose": purpose})
        self.answers.append(self.answer(_codes_in_prompt(messages)))
        return self.answers[-1]


def scripted(answer) -> ScriptedJudge:
    return ScriptedJudge(spec=parse_model_spec({"spec": "openai:judge-x@http://127.0.0.1:9", "temperature": 0.0}),
                         role="judge", answer=answer)


def good_answer(codes: list[str]) -> str:
    return json.dumps({"evaluations": [{"code": c, "score": 3 if c.startswith("CS") else 0, "reason": "r"}
                                       for c in codes]})


def test_heuristic_judge_scores_by_overlap():
    assert heuristic_score("How do I learn Python?", "Python programming", PICKS[0])[0] == 3
    assert heuristic_score("How do I learn Python?", "Python programming", PICKS[2]) == \
        (0, "heuristic: no overlap with the skill")
    # the lexical heuristic cannot see homonyms: the snake course shares the word "python"
    assert heuristic_score("How do I learn Python?", "Python programming", PICKS[1])[0] == 1


# A catalog small enough to compute the TF-IDF judge by hand. tokenize: "programming" -> "programm",
# "pythons" -> "python", "and" is a stop word. n = 4 courses; smooth idf = ln((1 + n) / (1 + df)) + 1:
# df 1 -> ln(5/2) + 1 = 1.9163, df 2 -> ln(5/3) + 1 = 1.5108 (python: A1, B1; programm: A1, D1).
TINY = [{"subjectCode": "A1", "subjectName": "Python Programming", "cleanedLearningOutcomes": ["Write Python scripts"]},
        {"subjectCode": "B1", "subjectName": "Herpetology", "cleanedLearningOutcomes": ["Study pythons and boas"]},
        {"subjectCode": "C1", "subjectName": "Contract Law", "cleanedLearningOutcomes": ["Explain contracts"]},
        {"subjectCode": "D1", "subjectName": "Web Programming", "cleanedLearningOutcomes": ["Build websites"]}]


@pytest.fixture
def tiny_catalog(tmp_path) -> str:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({"courses": TINY}), encoding="utf-8")
    return str(path)


def test_tfidf_judge_by_hand_on_a_tiny_catalog(tiny_catalog):
    """Skill "Python programming": python and programm have the same idf, so each is half the skill.
    The query "Python programming. Python programming. How do I learn Python?" has python x3
    (sublinear tf 1 + ln 3 = 2.0986, x idf 1.5108 = 3.1706), programm x2 (1.6931 x 1.5108 = 2.5580) and
    the bigram "python programm" x2 (1.6931 x 1.9163 = 3.2445; "programm python" is not in the
    catalog's vocabulary): |q| = sqrt(3.1706² + 2.5580² + 3.2445²) = 5.2080.
    B1 (Herpetology) has python + 6 terms of df 1 (3 words, 3 bigrams): |B1| = sqrt(1.5108² + 6 x 1.9163²)
    = 4.9312, cosine = 3.1706 x 1.5108 / (5.2080 x 4.9312) = 0.18653, evidence 0.5 + 2 x 0.18653 = 0.8731
    >= 0.85: a 1 (the snake course: the judge cannot see homonyms). D1 (Web Programming): programm in the
    name, cosine = 2.5580 x 1.5108 / 25.682 = 0.15049, evidence 0.5 + 0.5 x 0.5 + 2 x 0.15049 = 1.0510: a 1.
    A1: the whole skill in the name, 1 + 0.5 = 1.5 before the cosine (0.6288): a 3. C1 shares nothing: 0."""
    q, skill = "How do I learn Python?", "Python programming"
    got = {c["subjectCode"]: tfidf_evidence(q, skill, c, tiny_catalog) for c in TINY}
    assert got["B1"] == pytest.approx({"sentence": 0.5, "name": 0.0, "cosine": 0.18653, "evidence": 0.87306}, abs=1e-4)
    assert got["D1"] == pytest.approx({"sentence": 0.5, "name": 0.5, "cosine": 0.15049, "evidence": 1.05098}, abs=1e-4)
    assert got["A1"]["sentence"] == got["A1"]["name"] == 1.0 and got["A1"]["cosine"] == pytest.approx(0.6288, abs=1e-4)
    assert got["C1"] == {"sentence": 0.0, "name": 0.0, "cosine": 0.0, "evidence": 0.0}
    scores = {c["subjectCode"]: tfidf_heuristic_score(q, skill, c, tiny_catalog) for c in TINY}
    assert {code: s for code, (s, _) in scores.items()} == {"A1": 3, "B1": 1, "C1": 0, "D1": 1}
    assert scores["B1"][1].startswith("heuristic-tfidf-2: evidence 0.873 = sentence 0.500")
    # a skill with no content word falls back to the question; neither: 0, said so
    assert tfidf_heuristic_score("Python?", "the basics", TINY[0], tiny_catalog)[0] == 3
    assert tfidf_heuristic_score("how do I?", "the basics", TINY[0], tiny_catalog) == (
        0, "heuristic-tfidf-2: no content words in the skill or question")


def test_tfidf_judge_reads_the_description_sentence_by_sentence(tiny_catalog):
    """A course with the skill in one description sentence gets the full sentence share; split over
    two sentences, half each (the best one counts); without a description only name and outcomes count."""
    base = {"subjectCode": "Z1", "subjectName": "Herpetology", "cleanedLearningOutcomes": []}
    whole = tfidf_evidence("q", "Python programming", {**base, "description": "Python programming for biologists."},
                           tiny_catalog)
    split = tfidf_evidence("q", "Python programming", {**base, "description": "Pythons. Programming."}, tiny_catalog)
    assert whole["sentence"] == 1.0 and split["sentence"] == 0.5 and whole["name"] == split["name"] == 0.0
    assert tfidf_evidence("q", "Python programming", base, tiny_catalog)["sentence"] == 0.0


def test_tfidf_judge_on_the_shipped_catalog():
    q, skill = "How do I learn Python?", "Python programming"
    assert tfidf_heuristic_score(q, skill, PICKS[0])[0] == 3                 # Programming with Python
    assert tfidf_heuristic_score(q, skill, PICKS[1])[0] == 0                 # Herpetology (lexical-1: 1)
    assert tfidf_heuristic_score(q, skill, PICKS[2])[0] == 0                 # Contract Law


def test_none_model_uses_the_labelled_heuristic_judge():
    result = judge_courses(question="How do I learn Python?", skill="Python programming", courses=PICKS,
                           model=ChatModel(spec=parse_model_spec("none")))
    assert result.complete and result.model_calls == 0
    assert [s["judge"] for s in result.scores] == ["heuristic"] * 3
    assert DEFAULT_HEURISTIC == "heuristic-tfidf-2"
    assert [s["promptVersion"] for s in result.scores] == ["heuristic-tfidf-2"] * 3
    assert [s["score"] for s in result.scores] == [3, 0, 0]


def test_the_older_heuristic_stays_selectable_under_its_own_version():
    none = ChatModel(spec=parse_model_spec("none"))
    result = judge_courses(question="How do I learn Python?", skill="Python programming", courses=PICKS,
                           model=none, heuristic="heuristic-lexical-1")
    assert [s["promptVersion"] for s in result.scores] == ["heuristic-lexical-1"] * 3
    assert [(s["score"], s["reason"]) for s in result.scores] == [
        heuristic_score("How do I learn Python?", "Python programming", c) for c in PICKS]
    with pytest.raises(ValueError, match="unknown heuristic judge"):
        judge_courses(question="q", skill="s", courses=PICKS, model=none, heuristic="heuristic-bogus-9")


def test_model_judge_records_scores_with_prompt_version_and_settings():
    model = scripted(good_answer)
    result = judge_courses(question="q", skill="Python programming", courses=PICKS, model=model)
    assert result.complete and len(model.calls) == 1
    assert [s["score"] for s in result.scores] == [3, 0, 0]
    assert [s["code"] for s in result.scores] == [c["subjectCode"] for c in PICKS]   # retrieved order kept
    version = load_prompts()[2]
    for s in result.scores:
        assert s["judge"] == "llm" and s["promptVersion"] == version
        assert s["model"]["spec"] == "openai:judge-x@http://127.0.0.1:9" and s["model"]["temperature"] == 0.0
        assert s["label"] in ("Highly Relevant", "Irrelevant")


@pytest.mark.parametrize("bad", [
    lambda codes: json.dumps({"evaluations": [{"code": c, "score": 2} for c in codes[:-1]]}),    # one short
    lambda codes: json.dumps({"evaluations": [{"code": c, "score": 4} for c in codes]}),         # out of range
    lambda codes: "I think they are all quite relevant!",                                        # no JSON
    lambda codes: json.dumps({"evaluations": [{"code": codes[0], "score": 2}] * len(codes)}),    # one course thrice
])
def test_bad_answers_are_recorded_failures_not_zeros(bad):
    model = scripted(bad)
    result = judge_courses(question="q", skill="s", courses=PICKS, model=model, retries=1)
    assert not result.complete
    assert len(model.calls) == 2                       # the first try and one retry
    [failure] = result.failures
    assert failure["raw"] == model.answers[-1] and failure["raw"]
    assert failure["error"] and failure["attempts"] == 2
    assert all(s["score"] is None for s in result.scores)  # never scored 0


def test_check_answer_rejects_count_range_and_unknown_codes():
    codes = ["A1", "B2"]
    assert check_answer([{"code": "A1", "score": 1}, {"code": "B2", "score": 3}], codes)[0] == {
        "A1": {"score": 1, "reason": ""}, "B2": {"score": 3, "reason": ""}}
    assert "expected 2 scores" in check_answer([{"code": "A1", "score": 1}], codes)[1]
    assert "not an integer 0-3" in check_answer([{"code": "A1", "score": 4}, {"code": "B2", "score": 0}], codes)[1]
    assert "not an integer 0-3" in check_answer([{"code": "A1", "score": 1.5}, {"code": "B2", "score": 0}], codes)[1]
    assert "unknown course" in check_answer([{"code": "Z9", "score": 1}, {"code": "B2", "score": 0}], codes)[1]


def test_schema_demands_exactly_one_score_per_course():
    schema = answer_schema(["A", "B"])
    with pytest.raises(ValueError):
        schema.model_validate({"evaluations": [{"code": "A", "score": 1}]})
    with pytest.raises(ValueError):
        schema.model_validate({"evaluations": [{"code": "A", "score": 1}, {"code": "A", "score": 1}]})
    with pytest.raises(ValueError):
        schema.model_validate({"evaluations": [{"code": "A", "score": 1}, {"code": "B", "score": 4}]})
    assert len(schema.model_validate({"evaluations": [{"code": "A", "score": 1},
                                                      {"code": "B", "score": 0}]}).evaluations) == 2


def test_second_identical_run_calls_no_model(tmp_path):
    cache = JudgeCache(tmp_path / "judge.sqlite")
    first = scripted(good_answer)
    r1 = judge_courses(question="q", skill="Python programming", courses=PICKS, model=first, cache=cache)
    assert len(first.calls) == 1 and not any(s["cached"] for s in r1.scores)
    second = scripted(good_answer)
    r2 = judge_courses(question="q", skill="Python programming", courses=PICKS, model=second,
                       cache=JudgeCache(tmp_path / "judge.sqlite"))
    assert second.calls == []
    assert [s["score"] for s in r2.scores] == [s["score"] for s in r1.scores]
    assert all(s["cached"] for s in r2.scores)
    # a list with one more course is a new prompt: all of it is judged together (cached per course,
    # the new one was judged alone, so its score depended on which sessions had run before)
    third = scripted(good_answer)
    judge_courses(question="q", skill="Python programming", courses=PICKS + [_course("Deep Learning")],
                  model=third, cache=cache)
    assert len(third.calls) == 1 and len(_codes_in_prompt(third.prompts[0])) == len(PICKS) + 1
    fourth = scripted(good_answer)
    judge_courses(question="q", skill="Python programming", courses=PICKS, model=fourth, cache=cache, iteration=1)
    assert len(fourth.calls) == 1


def test_failures_are_not_cached(tmp_path):
    cache = JudgeCache(tmp_path / "judge.sqlite")
    judge_courses(question="q", skill="s", courses=PICKS, model=scripted(lambda codes: "nope"), cache=cache,
                  retries=0)
    again = scripted(good_answer)
    assert judge_courses(question="q", skill="s", courses=PICKS, model=again, cache=cache).complete
    assert len(again.calls) == 1


def test_cache_key_depends_on_prompt_model_and_iteration():
    base = dict(question="q", skill="s", courses=PICKS, prompt_version="p1",
                model_settings={"spec": "m", "temperature": 0.0}, iteration=0)
    key = batch_key(**base)
    assert key == batch_key(**base)
    assert key != batch_key(**{**base, "prompt_version": "p2"})
    assert key != batch_key(**{**base, "model_settings": {"spec": "m", "temperature": 0.7}})
    assert key != batch_key(**{**base, "iteration": 1})
    assert key != batch_key(**{**base, "skill": "S"})          # case-sensitive, like the original
    assert key != batch_key(**{**base, "courses": PICKS[::-1]})  # the order shown is part of the prompt
    assert key != batch_key(**{**base, "courses": PICKS[:-1]})


def test_a_sessions_scores_do_not_depend_on_what_other_sessions_judged_first(tmp_path):
    # the judge's score of a course depends on the batch it sees; a cache per course made a session
    # whose courses were partly judged by an earlier session send only the rest
    def by_batch_size(codes):
        return json.dumps({"evaluations": [{"code": c, "score": min(3, len(codes) // 2), "reason": "r"}
                                           for c in codes]})
    alone = judge_courses(question="q", skill="s", courses=PICKS, model=scripted(by_batch_size))
    cache = JudgeCache(tmp_path / "judge.sqlite")
    judge_courses(question="q", skill="s", courses=PICKS[:2], model=scripted(by_batch_size), cache=cache)
    after = judge_courses(question="q", skill="s", courses=PICKS, model=scripted(by_batch_size), cache=cache)
    assert [x["score"] for x in after.scores] == [x["score"] for x in alone.scores]


def test_iterations_shuffle_the_presentation_order():
    orders = set()
    for iteration in range(6):
        model = scripted(good_answer)
        judge_courses(question="q", skill="s", courses=PICKS, model=model, iteration=iteration, seed=3)
        orders.add(tuple(_codes_in_prompt(model.prompts[0])))
    assert len(orders) > 1
