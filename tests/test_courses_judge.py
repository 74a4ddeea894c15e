"""The 0-3 relevance judge: heuristic labels, schema checks, recorded failures and the disk cache."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from agents.courses.relevance_judge import (
    JudgeCache, answer_schema, batch_key, check_answer, heuristic_score, judge_courses, load_prompts,
)
from catalog.courses import load_courses
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


def test_none_model_uses_the_labelled_heuristic_judge():
    result = judge_courses(question="How do I learn Python?", skill="Python programming", courses=PICKS,
                           model=ChatModel(spec=parse_model_spec("none")))
    assert result.complete and result.model_calls == 0
    assert [s["judge"] for s in result.scores] == ["heuristic"] * 3
    assert all(s["promptVersion"].startswith("heuristic") for s in result.scores)


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
