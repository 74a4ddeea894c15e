"""A CRS model that echoes its prompt (a weak model's habit: gemma3-270m answered with its
instructions and the candidate list) failed, like one that answers nothing: the answer is recorded
with its raw text, the template says the turn instead, and the session is an agent failure
(``crs_model_failed``). Before, only an empty answer was flagged: the echo was the system's turn,
``ok``, and it scored tas_grounded above the template recommender (it restates every candidate's
genres, director and cast)."""
import json

import pytest
from langchain_core.messages import AIMessage

import convsim.providers.models as models
from convsim.agents.crs.recommender import CRSParams, crs_turn, new_crs_state
from conftest import ROOT
from test_crs_recommender import catalog, extractor  # noqa: F401 - the same module fixtures
from convsim import run
from convsim.config import config_from_dict


class EchoModel:
    """A CRS model double (the ``ChatModel`` interface the recommender calls) that answers with its
    own prompt, or with one part of it."""
    is_none = False

    def __init__(self, part=lambda prompt: prompt):
        self.part, self.prompts = part, []

    def invoke(self, messages, purpose="generate"):
        self.prompts.append(messages[0][1])
        return self.part(messages[0][1])




@pytest.fixture(scope="module")
def prompt():
    return (ROOT / "prompts" / "crs_respond.txt").read_text(encoding="utf-8")


def run_turn(catalog, extractor, text, **kw):
    concepts = extractor.extract(text)
    return crs_turn(new_crs_state(), user_text=text, user_concepts=concepts, history_concepts=set(concepts),
                    turn=1, seed=1, catalog=catalog, extractor=extractor, params=CRSParams(), **kw)


def _candidate_lines(prompt_text):
    return [line for line in prompt_text.splitlines() if line[:2] in {f"{i}." for i in range(1, 10)}]


@pytest.mark.parametrize("part", [
    lambda p: p,                                                        # the whole prompt
    lambda p: "Sure! " + _candidate_lines(p)[0] + "\n" + _candidate_lines(p)[1],  # the candidate list
    lambda p: p.splitlines()[0],                                        # the first instruction line
    lambda p: "Cast Away: " + _candidate_lines(p)[0].split(". ", 2)[2].split(". Plot:")[0],  # a fact list
])
def test_an_answer_repeating_its_prompt_is_a_failed_answer_and_the_template_speaks(
        catalog, extractor, prompt, part):
    user = "Any drama films starring Tom Hanks?"
    model = EchoModel(part)
    text, _, meta = run_turn(catalog, extractor, user, model=model, prompt_template=prompt,
                             history=[("user", user)])
    raw = part(model.prompts[0])
    gen = meta["generation"]
    assert gen["ok"] is False and gen["raw"] == raw and "repeats its prompt" in gen["reason"]
    assert gen["fallback"] == "template"
    # the turn is the template's (what model none says on the same turn), not the echo
    template_text, _, template_meta = run_turn(catalog, extractor, user)
    assert text == template_text and text != raw.strip()
    assert meta["mentioned_ids"] == template_meta["mentioned_ids"]


def test_a_reply_quoting_the_user_or_a_title_is_not_an_echo(catalog, extractor, prompt):
    """The user's words are not looked for (a good reply may quote them), nor short phrases."""
    user = "I am really in the mood for drama films starring Tom Hanks tonight."
    answer = "You said you are really in the mood for drama films starring Tom Hanks tonight: try Cast Away."
    text, _, meta = run_turn(catalog, extractor, user, model=EchoModel(lambda p: answer),
                             prompt_template=prompt, history=[("user", user)])
    assert meta["generation"] == {"ok": True, "raw": answer, "reason": None} and text == answer


class EchoBackend:
    """The crs role's backend at the engine level: answers with the prompt it was sent."""

    def invoke(self, messages, **kwargs):
        return AIMessage(messages[-1].content)


def test_an_echoing_crs_model_makes_an_agent_failure_scored_as_failed_turns(tmp_path, monkeypatch):
    """The template keeps the dialogue going (the user hears what model none would say), but each
    failed turn is scored as a failed reply (nothing recommended, no concept): the LLM variant's
    scores are no copy of the template baseline's (before: 57 of 58 dialogue metrics equal)."""
    real = models._make_backend
    monkeypatch.setattr(models, "_make_backend",
                        lambda spec, *a: EchoBackend() if spec.model == "echo-crs" else real(spec, *a))
    monkeypatch.setattr(models, "_BACKENDS", {})

    def records(crs, run_id):
        cfg = config_from_dict({
            "graph": "crs_shift", "sessions": 2, "seed": 7, "out_dir": str(tmp_path), "run_id": run_id,
            "trace": False, "analysis": [],
            "params": {"n_turns": 3, "judge": False, "topic_mode": "keyword", "accept_title_prob": 0.0},
            "models": {"crs": crs, "user": "none", "judge": "none"}})
        lines = (run(cfg, analyze=False) / "results.jsonl").read_text().splitlines()
        return {r["session_id"]: r for r in map(json.loads, lines)}

    echo, template = records("ollama:echo-crs", "echo"), records("none", "template")
    assert echo.keys() == template.keys()
    for sid, r in echo.items():
        assert r["status"] == "agent_failure"
        assert {f["check"] for f in r["agent_flags"]} == {"crs_model_failed"}
        assert "repeats its prompt" in r["agent_flags"][0]["detail"]
        system = [e for e in r["transcript"] if e["speaker"] == "system"]
        assert all(e["meta"]["generation"]["ok"] is False and "Candidate films" in e["meta"]["generation"]["raw"]
                   for e in system)
        assert r["dialogue_metrics"]["crs_generation_failures"] == 3
        # what was said is the template's turn (the dialogue goes on as with model none) ...
        assert [e["text"] for e in system] == [e["text"] for e in template[sid]["transcript"]
                                               if e["speaker"] == "system"]
        # ... but every turn is scored as failed: nothing grounded, nothing recommended
        assert all(m["cc"] == 0 and m["cr"] == 0 and m["n_recommended"] == 0 for m in r["turn_metrics"])
        assert any(m["cc"] > 0 for m in template[sid]["turn_metrics"])
        dm, base = r["dialogue_metrics"], template[sid]["dialogue_metrics"]
        assert dm["tas_grounded"] < base["tas_grounded"] and dm["cc_mean"] == 0 < base["cc_mean"]
        assert dm["recommended_titles_total"] == 0 < base["recommended_titles_total"]
