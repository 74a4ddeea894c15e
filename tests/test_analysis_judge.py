"""The structured judge machinery and the PEPPER-style judge."""

from dataclasses import dataclass

import pytest

from convsim.agents.crs import pepper_judge as pj
from convsim.agents.judge import prompt_version, render
from convsim import ChatModel, ConvsimError, parse_model_spec


@dataclass
class ScriptedModel(ChatModel):
    """A chat model whose answers are scripted (no server): exercises ChatModel.structured for real."""
    answers: tuple = ()

    def invoke(self, messages, *, purpose="generate", **kwargs):
        self.calls.append({"purpose": purpose})
        return self.answers[min(len(self.calls) - 1, len(self.answers) - 1)]


def scripted(*answers):
    return ScriptedModel(spec=parse_model_spec({"spec": "ollama:llama3:instruct", "temperature": 0.0, "seed": 7}),
                         role="judge", answers=answers)


TRANSCRIPT = [
    {"turn": 1, "speaker": "user", "text": "I'm in the mood for a drama movie.",
     "meta": {"user_meta": {"turn": 1, "focus_field": "genre", "focus_value": "Drama",
                            "constraints": {"genre": "Drama"}, "shift_event": False}}},
    {"turn": 1, "speaker": "system", "text": 'Try "Rachel Getting Married", a Drama. Want more?', "meta": {}},
    {"turn": 2, "speaker": "user", "text": "How about films starring Tom Hanks?",
     "meta": {"user_meta": {"turn": 2, "focus_field": "actor", "focus_value": "Tom Hanks",
                            "constraints": {"genre": "Drama", "actor": "Tom Hanks"}, "shift_event": True}}},
    {"turn": 2, "speaker": "system", "text": "Sure, here is a comedy.", "meta": {}},
]


def test_garbage_answer_is_a_recorded_failure_with_raw_text():
    model = scripted("**Proactiveness**: 4\n**Coherence**: five")
    verdict = pj.judge_conversation(model, TRANSCRIPT, retries=2)
    assert verdict["ok"] is False and verdict["method"] == "llm"
    assert verdict["raw"] == "**Proactiveness**: 4\n**Coherence**: five"
    assert verdict["attempts"] == 3 and verdict["error"]
    assert verdict["model"]["spec"] == "ollama:llama3:instruct" and verdict["model"]["seed"] == 7
    assert verdict["prompt_version"].startswith("sha256:")
    metrics = pj.pepper_metrics(verdict)
    # a failure is counted, and never becomes a 0 score
    assert metrics == {"judge_proactiveness": None, "judge_coherence": None, "judge_personalization": None,
                       "judge_failed": 1, "judge_heuristic": 0}


def test_out_of_range_then_valid_answer_is_retried():
    model = scripted('{"proactiveness": 9, "coherence": 3, "personalization": 2}',
                     'Sure! ```json\n{"proactiveness": 4, "coherence": 3, "personalization": 2}\n```')
    verdict = pj.judge_conversation(model, TRANSCRIPT)
    assert verdict["ok"] is True and verdict["attempts"] == 2
    assert verdict["scores"] == {"proactiveness": 4, "coherence": 3, "personalization": 2}
    assert pj.pepper_metrics(verdict)["judge_failed"] == 0


def test_prompt_gets_the_real_preference_path_and_fixed_rubric():
    model = scripted('{"proactiveness": 4, "coherence": 3, "personalization": 2}')
    sent = []
    original = model.invoke

    def spy(messages, **kw):
        sent.append(messages)
        return original(messages, **kw)
    model.invoke = spy
    pj.judge_conversation(model, TRANSCRIPT)
    prompt = "\n".join(str(m.content) for m in sent[0])
    assert "From turn 2 (changed their mind): wants genre: Drama, actor: Tom Hanks" in prompt
    assert "User: How about films starring Tom Hanks?" in prompt
    personalization = prompt.split("Personalization:")[1]
    assert "fluency, politeness and style do not count" in personalization
    assert "fulfil" in personalization


def test_heuristic_judge_is_labelled_and_hand_checked():
    verdict = pj.judge_conversation(ChatModel(spec=parse_model_spec("none"), role="judge"), TRANSCRIPT)
    assert verdict["method"] == "heuristic" and verdict["ok"] is True
    assert verdict["prompt_version"] == "heuristic:pepper"
    # turn 1 reply recommends and asks; turn 2 reply neither -> 1 + 4 * 1/2
    # coherence: "drama" shared in turn 1 only -> 3 ; personalization: "Drama" mentioned, "Tom Hanks" not -> 3
    assert verdict["scores"] == {"proactiveness": 3.0, "coherence": 3.0, "personalization": 3.0}
    assert pj.pepper_metrics(verdict)["judge_heuristic"] == 1


def test_heuristic_proactiveness_moves_only_for_a_system_that_neither_recommends_nor_asks():
    # the defect it measures, and its limit (documented in docs/crs_shift.md): every shipped reference
    # agent names films or asks, so it saturates at 5 for all of them; only a passive system drops it
    def transcript(replies):
        out = []
        for i, reply in enumerate(replies, 1):
            out += [{"turn": i, "speaker": "user", "text": "I want a drama", "meta": {}},
                    {"turn": i, "speaker": "system", "text": reply, "meta": {}}]
        return out
    active = pj.heuristic_scores(transcript=transcript(['Try "Heat".', "Which era do you like?"]))
    passive = pj.heuristic_scores(transcript=transcript(["Okay.", "I see."]))
    half = pj.heuristic_scores(transcript=transcript(["Okay.", "Which era do you like?"]))
    assert active["proactiveness"] == 5.0 and passive["proactiveness"] == 1.0 and half["proactiveness"] == 3.0


def test_prompt_version_is_a_content_hash_and_render_checks_variables():
    assert prompt_version("a") != prompt_version("b") and prompt_version("a") == prompt_version("a")
    with pytest.raises(ConvsimError):
        render("$missing", {}, name="x")
    assert render('{"a": 1} $x', {"x": "y"}) == '{"a": 1} y'


@pytest.mark.slow
def test_garbage_judge_in_the_crs_graph_is_recorded_and_the_session_goes_on():
    from convsim import load_graph_module
    crs = load_graph_module("crs_shift")
    transcript = [dict(t, meta=dict(t["meta"]["user_meta"], anchor="x")) if t["speaker"] == "user" else t
                  for t in TRANSCRIPT]
    judge = scripted("I think it was quite good overall!")
    ctx = crs.Context(params=crs.Params(topic_mode="keyword"), models={"judge": judge}, session_id="s1")
    out = crs.evaluate_transcript(transcript, ctx)
    dm = out["dialogue_metrics"]
    assert dm["judge_failed"] == 1 and dm["judge_coherence"] is None
    assert out["judge_verdict"]["raw"] == "I think it was quite good overall!"
    assert dm["tas_grounded"] is not None and "tas_cas" in dm  # the other metrics still computed


def test_llm_topics_validate_and_fall_back_on_garbage():
    from convsim.evaluation.crs.topics import KeywordTopics, LlmTopics
    fallback = KeywordTopics(["war", "love"])
    good = LlmTopics(scripted('{"topics": ["War", " soldiers "]}'), fallback)
    assert good.topics("a war film") == {"war", "soldiers"} and good.failures == []
    bad = LlmTopics(scripted("war, love"), fallback)
    assert bad.topics("a war and love film") == {"war", "love"}  # the keyword fallback
    assert bad.failures[0]["raw"] == "war, love"


def test_heuristic_judge_is_labelled_and_left_out_unless_asked():
    from convsim.agents.crs.pepper_judge import labelled_judge_metrics
    heuristic = {"method": "heuristic", "ok": True,
                 "scores": {"proactiveness": 5, "coherence": 4, "personalization": 2}}
    default = labelled_judge_metrics(heuristic)
    assert not any(k in default for k in ("judge_proactiveness", "judge_personalization"))
    assert not any(k.startswith("judge_heuristic_") for k in default)
    assert default["judge_heuristic"] == 1
    asked = labelled_judge_metrics(heuristic, report_heuristic=True)
    assert asked["judge_heuristic_personalization"] == 2
    assert "judge_personalization" not in asked
    llm = {"method": "llm", "ok": True, "scores": {"proactiveness": 5, "coherence": 4,
                                                    "personalization": 2}}
    assert labelled_judge_metrics(llm)["judge_personalization"] == 2
